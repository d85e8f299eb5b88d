// MelVocoderStream: mel frames that arrive in chunks of any size turned into
// audio by one NeuralModel, keeping exactly the left and right context the
// network's receptive field needs, so that chunked output equals the
// whole-utterance output to float rounding. Each frame runs through the
// network once when the network can run incrementally (NetworkStream);
// otherwise every window recomputes its context.
//
// Errors: bad chunks throw etude::Error; device failures surface as
// gpu::DeviceError and leave the stream as it was, so the caller can redo
// the frames on another backend. Not real-time safe: compute workers only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "engine/models/neural_model.h"

namespace etude::engine {

// Streams mel chunks to audio with one model. Not thread-safe: one producer.
class MelVocoderStream {
  public:
    explicit MelVocoderStream(std::shared_ptr<const NeuralModel> model);
    ~MelVocoderStream();
    // Appends `frames` mel frames given as [n_mels][frames] (a chunk as an
    // acoustic model emits it) and returns the audio that became final.
    std::vector<float> push(std::span<const float> mel, int frames);
    // No more frames for this utterance: returns the rest of the audio and
    // resets for the next utterance.
    std::vector<float> finish();
    // push() in two steps, so that a failed network run can be retried on
    // another backend: append() takes the frames, drain() runs the network
    // on what is ready (everything, if `final`; then the stream resets).
    void append(std::span<const float> mel, int frames);
    std::vector<float> drain(bool final);
    void reset();
    const NeuralModel& model() const { return *model_; }
    // Runs the next chunks on another copy of the same model (e.g. the CPU
    // copy after a GPU failure): the stream's state does not depend on where
    // the network runs, so the output stays exact.
    void set_model(std::shared_ptr<const NeuralModel> model);
    // Runs the network on frames [produced, end_frame), which must have their
    // right context (end_frame <= ready_frames()); an explicit end keeps two
    // models with different right contexts in step.
    std::vector<float> drain_to(long end_frame);
    // Lets another tier make the audio of frames [produced, end_frame): moves
    // on as drain_to() would have, without running the network, and returns
    // the number of samples the caller must supply instead (each frame's
    // context stays available, so the network takes over again exactly; for
    // Vocos it first reruns the skipped frames whose windows overlap its next
    // ones, so that the overlap-add is whole).
    std::size_t skip_to(long end_frame);
    long ready_frames() const;  // frames whose right context has arrived
    long received_frames() const { return received_; }
    long emitted_samples() const { return emitted_; }
    // Mel frames the network has been run on so far, context included: the
    // cost of streaming. Incremental runs (NetworkStream) take each frame
    // once, plus both contexts once after a switch of model or tier.
    std::uint64_t frames_run() const { return frames_run_; }
    // Opens the current model's incremental runner now (device memory for
    // every layer's state), so that the first chunk does not pay for it.
    // Throws gpu::DeviceError if the device cannot hold it.
    void prepare();
    // Frees the runner kept for `model` (not the current model), e.g. a GPU
    // copy that failed: the stream holds each model it has run otherwise.
    void release(const NeuralModel& model);
    // Frames the network would run if the next drain used `model`: what it
    // has not taken yet when its runner is active, else everything from the
    // left context of the next frame on (priming, or a recomputed window).
    long frames_to_run(const NeuralModel& model) const;
    // Whether the network runs of later calls may join other streams' in
    // one batched backend call (Batching, models/vocoder_network.h): Join
    // until the owner says otherwise.
    void set_batching(Batching batching) { batching_ = batching; }
    // How long the next chunk's joined pushes may wait for the other streams
    // of their lane (NetworkStream::set_join_wait_until).
    void set_join_wait_until(std::int64_t ns) { join_wait_until_ns_ = ns; }
    // Its device runners' replays (NetworkStream::replay_stats), summed.
    ReplayStats replay_stats() const;
    // Off: every window recomputes its context (what models whose layers
    // cannot run incrementally always do); for tests and benchmarks.
    void set_incremental(bool on) {
        incremental_ = on;
        if (!on) drop_incremental();
    }

  private:
    void produce(long end_frame, bool final, std::vector<float>& out);
    void produce_pieces(long end_frame, bool final, std::vector<float>& out);
    void assemble(const float* values, int count, bool final, std::vector<float>& out);
    void run_window(long a, long b);  // network values of frames [a, b) into values_
    void gather_mel(long a, long b);  // history frames [a, b) into window_mel_, by channel
    void trim_history();
    void discard_overlap_before(long limit);  // Vocos: samples before `limit` are emitted
    // Vocos: adds frames [first, first + count) to the overlap-add, from
    // ola_start_ on (what lies before it was emitted already).
    void overlap_add(const float* values, long first, int count);
    void rebuild_overlap();
    bool use_incremental(bool final);
    void produce_incremental(long end_frame, bool final, std::vector<float>& out);
    void drop_incremental();
    // Vocos: frames before a position p * hop whose windows reach past it.
    int overlap_frames() const;
    long history_needed_from() const;

    std::shared_ptr<const NeuralModel> model_;
    int n_mels_ = 0;
    std::vector<float> history_;  // frame-major [frame][mel], from frame history_start_
    long history_start_ = 0;
    long received_ = 0;  // frames pushed so far
    long produced_ = 0;  // frames whose network output has been assembled
    std::vector<float> window_mel_, values_;
    // Vocos: overlap-add state (samples from ola_start_, in centred STFT time).
    std::vector<float> ola_, envelope_;
    long ola_start_ = 0;
    // Vocos after skip_to(): frames [rebuild_from_, produced_) were not run,
    // but their windows overlap what comes next; the network runs them
    // before its next frames so that the overlap-add is whole again (-1: none).
    long rebuild_from_ = -1;
    // An incremental runner per model this stream has run (at most the GPU
    // and CPU copies; null: the model recomputes context per window), kept
    // so that switching back and forth does not reallocate. The one for
    // model_, while active, has taken frames [.., inc_fed_) and its values
    // from frame pending_first_ on wait in pending_.
    NetworkStream* runner();
    // (The model is held too: a runner refers to its weights.)
    std::vector<std::pair<std::shared_ptr<const NeuralModel>, std::unique_ptr<NetworkStream>>>
        runners_;
    bool incremental_ = true, inc_active_ = false;
    Batching batching_ = Batching::Join;
    std::int64_t join_wait_until_ns_ = 0;
    long inc_fed_ = 0, pending_first_ = 0;
    std::vector<float> pending_;
    std::uint64_t frames_run_ = 0;
    long emitted_ = 0;  // output samples handed out
};

}  // namespace etude::engine
