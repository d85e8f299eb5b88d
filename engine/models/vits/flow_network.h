// A Piper voice's residual-coupling flow, run in reverse on a gpu::Backend
// (CPU, OpenCL, CUDA): the largest part of the work before the decoder.
//
// Each coupling is a WaveNet (gated dilated convolutions, residual and skip
// paths) of one half of the latent, subtracted from the other half. Piper
// flips the latent's channels between couplings; here the flips never move
// data: the latent is kept as two half buffers, and a coupling that Piper
// runs on the flipped latent is uploaded mirrored (input channels of its
// first conv and output channels of its last reversed) and applied with the
// halves' roles swapped. Speaker conditioning (a 1x1 conv of the speaker
// embedding, the same for every frame) folds into the WaveNet biases, so a
// flow is made for one speaker; the flows of a voice's other speakers share
// its weights and hold only their biases.
//
// The network holds the weights only (read-only once built, so any number
// of VitsFlowStreams on its backend may run it at once, each on its own
// queue); a VitsFlowStream (flow_stream.h) holds one sentence's state. On
// a GPU the streams' pushes meet in batches (joiner(), as a decoder's
// chunks do: models/stream_joiner.h).
// Not real-time safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/models/batch_major.h"
#include "engine/models/recorded_step.h"
#include "engine/models/scratch_lender.h"
#include "engine/models/shared_batching.h"
#include "engine/models/stream_joiner.h"
#include "engine/models/stream_layers.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/backend.h"

namespace etude::engine {

struct VitsFlowConv {
    gpu::DeviceBuffer w, b;
    int in = 0, out = 0, k = 1;
    // Its shape over `batch` signals of `length` frames, "same" padded.
    gpu::Conv1dShape shape(int length, int batch = 1) const {
        gpu::Conv1dShape s;
        s.batch = batch;
        s.in_channels = in;
        s.out_channels = out;
        s.in_length = length;
        s.kernel = k;
        s.padding = (k - 1) / 2;
        return s;
    }
};

struct VitsFlowCoupling {
    bool mirrored = false;  // runs on the flipped latent: halves swapped
    VitsFlowConv pre, post;
    std::vector<VitsFlowConv> in_layers, res, skip;  // res is empty for the last layer
};

class VitsFlowStream;

// One stream's block in a batch of flow pushes (VitsFlowStream::push_together):
// `frames` frames of prior in the stream's host input; the frames of output
// it made are set in `made` (the output in the stream's host output).
struct VitsFlowPush {
    VitsFlowStream* stream = nullptr;
    int frames = 0;
    bool flush = false;
    int* made = nullptr;
};

class VitsFlowNetwork {
  public:
    VitsFlowNetwork(const VitsWeights& weights, int speaker, std::shared_ptr<gpu::Backend> backend);
    // Each WaveNet layer's input bias with a speaker's conditioning folded
    // in, [coupling, in the order they run][layer]: all that differs
    // between two speakers' flows of one voice (24 KB for a medium voice,
    // against 28 MB of weights).
    using SpeakerBiases = std::vector<std::vector<std::vector<float>>>;
    // `speaker`'s, from the voice's weights (the originals, kept for a voice
    // of several speakers). Throws etude::Error for a speaker outside the
    // voice's.
    static SpeakerBiases speaker_biases(const VitsWeights& weights, int speaker);
    // Whether speaker_biases(weights, ...) reads the weight `role` (a
    // WaveNet layer's input bias, a conditioning layer): what a voice of
    // several speakers keeps of the flow's originals.
    static bool folds_a_speaker(const std::string& role);
    // This flow's, read back from its backend.
    SpeakerBiases speaker_biases() const;
    // The flow of another speaker of `base`'s voice, on `base`'s backend:
    // `base`'s weights, shared (not copied: the flow holds `base`), and
    // `biases` (speaker_biases()) as its WaveNet layers' input biases, its
    // own. Its streams batch among themselves, not with `base`'s. Throws
    // std::invalid_argument for biases of another shape, gpu::DeviceError
    // as uploads do.
    VitsFlowNetwork(std::shared_ptr<const VitsFlowNetwork> base, const SpeakerBiases& biases);
    // The same flow (same speaker, same folded and mirrored weights) on
    // another backend, copied from `source`'s: a single-speaker voice keeps
    // its flow's weights on the CPU backend alone (VitsVoice), so a device's
    // copy is made from there. Throws gpu::DeviceError as uploads do.
    VitsFlowNetwork(const VitsFlowNetwork& source, std::shared_ptr<gpu::Backend> backend);
    ~VitsFlowNetwork();

    // z is [inter_channels][frames], the sampled prior; replaced by the
    // decoder's input. The whole sentence at once (a VitsFlowStream pushed
    // the whole prior and flushed).
    void run(std::vector<float>& z, int frames) const;

    gpu::Backend& backend() const { return *backend_; }
    int channels() const { return channels_; }
    int hidden() const { return hidden_; }
    int kernel() const { return kernel_; }
    // Frames the output lags the input when run incrementally: each WaveNet
    // layer's half kernel, over every layer of every coupling.
    int context() const;
    const std::vector<VitsFlowCoupling>& couplings() const { return couplings_; }
    // Whether the output's channels come out in reverse order (an odd
    // number of Piper's flips).
    bool ends_flipped() const { return ends_flipped_; }
    // Lends the streams their chunk-sized buffers, a push at a time.
    ScratchLender& lender() const { return batching_->lender; }

    // Whether the streams' pushes, made on their own threads, meet in
    // batches (models/stream_joiner.h): on by default on a GPU, off on the
    // CPU (stream_joiner.h says why). A setting of how the streams run, not
    // of the weights, so the shared (const) network takes it. joiner() is
    // null while off; live streams and offline readers have one each
    // (Batching; Alone: none).
    void set_join_streams(bool on) const { join_ = on; }
    PushJoiner<VitsFlowPush>* joiner(Batching kind = Batching::Join) const {
        return join_ && kind != Batching::Alone ? &batching_->lanes.of(kind).joiner : nullptr;
    }
    // Backend calls that ran two or more streams' layers, as issued op by
    // op or recorded (a replay issues none of its own). Flows sharing
    // their weights (a voice's speakers) share their batches
    // (shared_batching.h): each counts them all, as below.
    std::uint64_t batched_layer_calls() const { return batching_->lanes.batched_calls(); }
    // Batches side by side (a lone push of a stream with a slot too)
    // recorded, replayed, and run op by op (recorded_step.h), over both
    // lanes.
    ReplayStats batch_replay_stats() const;
    // Whether its WaveNet input biases, where a speaker is folded in, are
    // `other`'s (the same memory): a batch of both then adds none of its
    // own (BatchMajor).
    bool same_speaker_biases(const VitsFlowNetwork& other) const;
    // What its streams' lone recordings may hold together (recorded_step.h):
    // an eighth of the device's memory, shared with the flows that share
    // its weights.
    RecordingBudget& lone_recordings() const { return batching_->lone_recordings; }

  private:
    friend class VitsFlowStream;
    // The flow whose weights this one's borrow (null where they are its own).
    std::shared_ptr<const VitsFlowNetwork> weights_owner_;
    std::shared_ptr<gpu::Backend> backend_;
    mutable std::atomic<bool> join_{false};
    // Which flow this is, in the keys of batch recordings (shared_batching.h).
    const std::uint64_t id_ = next_network_id();
    int channels_ = 0, hidden_ = 0, kernel_ = 0;
    std::vector<VitsFlowCoupling> couplings_;  // in the order they run (Piper's last first)
    bool ends_flipped_ = false;
    // Where its streams batch, with those of every flow sharing these
    // weights (shared_batching.h): the owner's. Declared last: its
    // recordings name the weights above.
    std::shared_ptr<SharedBatching<VitsFlowPush>> batching_;
};

}  // namespace etude::engine
