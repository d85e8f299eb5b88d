// Neural vocoders from LEF files: HiFi-GAN (V1, V2, V3 and any config of the
// same family, models/hifigan.h) and Vocos (mel model with the ISTFT head,
// models/vocos.h). The networks run on any gpu::Backend (CPU, OpenCL, CUDA)
// through the operations of backend.h, so there is one implementation of
// each network and three places to run it.
//
// Ownership: a NeuralModel holds the model's description and its weights,
// uploaded once to one backend; it is immutable after load and may be shared
// by many MelVocoderStreams (models/mel_vocoder_stream.h), but runs one
// network at a time (an internal mutex guards its device workspace).
//
// Errors: load() throws etude::Error naming the file and the field or tensor
// at fault; device failures surface as gpu::DeviceError from run calls.
// None of this is real-time safe: it runs on compute workers.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/models/lef_file.h"
#include "engine/models/model_metadata.h"
#include "engine/models/vocoder_network.h"
#include "gpu/backend.h"

namespace etude::engine {

class NeuralModel {
  public:
    // Validates metadata and every tensor shape, then uploads the weights to
    // `backend`. Throws etude::Error (file/field named) or gpu::DeviceError.
    static std::shared_ptr<NeuralModel> load(const std::string& path,
                                             std::shared_ptr<gpu::Backend> backend);
    static std::shared_ptr<NeuralModel> load(const LefFile& file, const std::string& label,
                                             std::shared_ptr<gpu::Backend> backend);
    // `base` on its backend with its first convolution's bias replaced by
    // `input_bias`, every other weight shared with `base` (held, not
    // copied): another speaker of a Piper voice, whose decoders differ only
    // there. Its streams batch among themselves. Null where `base`'s
    // network cannot share its weights (Vocos); throws
    // std::invalid_argument for a bias of another size, gpu::DeviceError as
    // uploads do.
    static std::shared_ptr<NeuralModel> sharing_weights(std::shared_ptr<const NeuralModel> base,
                                                        std::span<const float> input_bias);
    // Whether its weights are another model's (sharing_weights).
    bool shares_weights() const { return weights_owner_ != nullptr; }
    // What its streams' lone recordings may hold together on its device
    // (models/recorded_step.h: RecordingBudget, shared with the models that
    // share its weights); null where none are made.
    RecordingBudget* lone_recordings() const { return network_->lone_recordings(); }

    const ModelAudioParams& audio() const { return audio_; }
    const std::string& label() const { return label_; }
    gpu::Backend& backend() const { return *backend_; }
    // Mel frames of context the network needs on each side of the frames it
    // produces (its receptive field, rounded up to whole frames).
    int left_context() const { return left_context_; }
    int right_context() const { return right_context_; }
    // Samples between the arrival of a mel frame and the moment the audio
    // centred on it can be produced, at the model's rate.
    int streaming_latency_samples() const;
    // Whole utterance, offline: mel is [n_mels][frames]; returns the audio
    // (HiFi-GAN: frames * hop samples; Vocos: (frames - 1) * hop, as
    // torch.istft with center=True).
    std::vector<float> vocode(std::span<const float> mel, int frames) const;
    // Network evaluation (used by MelVocoderStream); serialised internally.
    void run(const float* mel, int frames, int first, int count, float* out) const;
    int values_per_frame() const { return network_->values_per_frame(); }
    // See NetworkStream; null when the model cannot run that way.
    std::unique_ptr<NetworkStream> open_stream() const {
        return network_->open_stream(right_context_);
    }
    const std::vector<float>& synthesis_window() const { return window_; }  // Vocos' ISTFT window
    // Whether the pushes of this model's streams (MelVocoderStreams on their
    // own threads) meet in batches (models/stream_joiner.h): on by default
    // on a GPU, where one call for many streams pays, off on the CPU, where
    // it does not. HiFi-GAN only; the others ignore it. joiner() is null
    // while off; live streams and offline readers have one each (Batching).
    void set_join_streams(bool on) { network_->set_join_streams(on); }
    StreamJoiner* joiner(Batching kind = Batching::Join) const { return network_->joiner(kind); }
    // Backend calls that ran two or more streams' layers at once.
    std::uint64_t batched_layer_calls() const { return network_->batched_layer_calls(); }
    // Batches of streams replayed from recordings (VocoderNetwork).
    ReplayStats batch_replay_stats() const { return network_->batch_replay_stats(); }

  private:
    NeuralModel() = default;
    ModelAudioParams audio_;
    std::string label_;
    std::shared_ptr<gpu::Backend> backend_;
    // The model whose weights network_ borrows (sharing_weights; else null).
    std::shared_ptr<const NeuralModel> weights_owner_;
    std::unique_ptr<VocoderNetwork> network_;
    std::vector<float> window_;
    int left_context_ = 0, right_context_ = 0;
    mutable std::mutex run_mu_;
};

// Frames [first, first + count) of a mel laid out [n_mels][frames] (as
// PyTorch holds it), written to `out` in the same layout: a chunk as an
// upstream acoustic model would emit it.
void copy_mel_frames(std::span<const float> mel, int n_mels, int frames, int first, int count,
                     std::vector<float>& out);

}  // namespace etude::engine
