// The scheduler of a mel stream (Stream::push_mel): decides, per chunk of
// mel frames, which tier makes its audio so that it is ready before it is
// due, and makes it.
//
// Tiers, best first:
//   0. the neural model on the GPU (CUDA or OpenCL), when one is open;
//   1. the same model on the CPU, or a cheaper one of the same family
//      (MelSchedulerOptions::cpu_model_path, e.g. HiFi-GAN V3 under V1);
//   2. phase reconstruction from the mel magnitude (no weights; RTPGHI),
//      which always keeps up and runs in the shadow of the others so that it
//      can take over any chunk without a warm-up.
// The tiers are candidates of the scheduling policy's chooser
// (processor_chooser.h), priced by their estimated cost for the chunk (a high
// percentile of their recent cost per frame, with margin) against the time
// left before the audio is due (deadline.h); the first that fits is chosen,
// else the quickest (a drill's ETUDE_FAULT=cpu-busy pins tier 0 while it may
// be tried, as does a stream read offline on a GPU: deadline.h's
// device_first()). A GPU error makes the CPU redo the chunk; the GPU's
// DeviceHealthBreaker (device_health.h) retries it, backs off after a second error and turns
// it off after repeated errors in a row, as for text streams. Switching between tiers 0 and 1 is
// seamless with one model (the stream state does not depend on where the network runs); with two
// models each keeps its own context, so every chunk is exactly what its model makes (Vocos reruns
// the few skipped frames whose windows overlap the chunk). Tier 2's chunks are its own audio, and
// counted; the model's output is exact again from its first chunk after them.
//
// Threads: one owner (the stream's producer thread). Not real-time safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dsp/phase_reconstruction.h"
#include "dsp/resampler.h"
#include "engine/models/mel_vocoder_stream.h"
#include "engine/scheduling/device_health.h"
#include "engine/scheduling/latency_estimator.h"
#include "engine/scheduling/processor_chooser.h"
#include "gpu/backend.h"

namespace etude::engine {

struct MelSchedulerOptions {
    std::string model_path;  // the model (on the GPU tier, and the CPU tier by default)
    // Instead of model_path: makes the model on a backend (a Piper voice's
    // decoder, which is no file of its own); `label` names it in stats().
    std::function<std::shared_ptr<NeuralModel>(std::shared_ptr<gpu::Backend>)> load_model;
    std::string label;
    std::string cpu_model_path;    // optional: a cheaper model of the same family for the CPU tier
    std::string backend = "auto";  // where tier 0 runs: auto (a GPU if any), cpu, cuda, opencl
    int device = -1;
    double output_rate = 0;  // 0: the model's own rate
    gpu::GpuFault gpu_fault;
    // ETUDE_FAULT's cpu-busy: the CPU tier is offered no chunk the GPU tier
    // may take (a drill that keeps the work on the device at any load).
    bool cpu_busy = false;
    bool allow_phase_fallback = true;
};

struct MelChunkReport {
    int tier = 1;  // 0 GPU model, 1 CPU model, 2 phase reconstruction (as processor, quality:)
    Processor processor = Processor::CpuPrimary;  // Gpu, or CpuPrimary (this thread)
    Quality quality = Quality::Full;              // Full, or PhaseReconstruction
    bool fell_back = false;  // the tier first tried failed, another remade the chunk
    std::int64_t started_ns = 0, finished_ns = 0;
};

struct MelSchedulerStats {
    std::string model;       // architecture and file
    std::string gpu_device;  // where tier 0 runs, if anywhere
    std::string gpu_note;    // why there is no tier 0
    std::uint64_t chunks[3] = {0, 0, 0};
    std::uint64_t frames = 0;
    std::uint64_t gpu_failures = 0;  // (from the breaker, at stats())
    bool gpu_disabled = false;
    bool gpu_ready = false;  // a GPU tier, not disabled, not in a backoff
    std::string gpu_last_error;
    double latency_ms = 0;  // the model's added streaming latency
};

class MelScheduler {
  public:
    // Loads the model (on the CPU, and on the GPU if one is chosen); throws
    // etude::Error for a bad model file, std::invalid_argument for a bad
    // backend request. A GPU that cannot be opened is a note, not an error.
    explicit MelScheduler(MelSchedulerOptions options);
    ~MelScheduler();

    const ModelAudioParams& audio() const { return cpu_model_->audio(); }
    double output_rate() const { return out_rate_; }
    // Vocodes one chunk ([n_mels][frames], as PyTorch holds a mel); `last`
    // ends the utterance (flushes the context). `budget_ns` is the time left
    // before this audio is due. Returns the audio at the output rate (valid
    // until the next call).
    // `may_reduce_quality` (deadline.h): phase reconstruction may be chosen.
    // `to_device`, if given, is called once the chunk is given to the GPU
    // tier, before the device runs it: a caller holding one of the engine's
    // turns (deadline_gate.h) gives it back there. A turn is a share of the
    // CPU; a chunk on the device waits for the device (and for the other
    // streams' chunks its batch takes, models/stream_joiner.h), and holding
    // a turn meanwhile would bound a device's batches by the CPU's turns.
    std::span<const float> process(std::span<const float> mel, int frames, bool last,
                                   std::int64_t budget_ns, MelChunkReport& report,
                                   bool may_reduce_quality = true,
                                   const std::function<void()>& to_device = {});
    // Frames the model must receive beyond a frame before it can make that
    // frame's audio (the larger of the two models' look-ahead).
    int right_context_frames() const { return right_context_; }
    // Whether later chunks' network runs may join other streams' in one
    // batched backend call (Batching, models/vocoder_network.h).
    // `may_wait`: whether a chunk on the device may wait for other streams'
    // pushes to join its batch (deadline.h's may_wait_to_join()), within its
    // slack.
    void set_batching(Batching batching, bool may_wait = false);
    // Whether the stream is read offline (read()): then, on a GPU, its
    // chunks go to the device whenever the breaker lets them (deadline.h's
    // device_first()).
    void set_read_offline(bool offline) { read_offline_ = offline; }
    // Whether the calibration timed the GPU tier's chunk alone at most the
    // CPU's: offline readers keep their chunks only on such a GPU.
    bool gpu_calibrated_quicker() const { return gpu_calibrated_quicker_; }
    void reset();                     // drop the utterance in progress (cancel)
    MelSchedulerStats stats() const;  // any thread
    // The device the GPU tier runs on (null without one, or once its
    // calibration failed): a Piper stream runs its flow there too.
    const std::shared_ptr<gpu::Backend>& gpu_backend() const { return gpu_backend_; }
    // The GPU tier's breaker, shared with work of the same stream on the same
    // device (a Piper stream's flow): one device, one health record.
    DeviceHealthBreaker& gpu_health() { return gpu_health_; }
    // Whether the last chunk was given to the GPU tier first: what the
    // deadline chose, which a Piper stream's flow follows sentence by
    // sentence (a device too slow for the chunks, such as lavapipe for a
    // full-size voice, is too slow for the flow too). Before the first
    // chunk: whether the calibration found the device faster than real
    // time (or ETUDE_FAULT's cpu-busy pins it).
    bool last_chunk_chose_gpu() const { return last_chose_gpu_; }
    // What the GPU tier is expected to take per frame the network runs (its
    // chunks so far, with a margin; 0 before any): what a Piper stream's
    // flow leaves the chunk's decoder when it waits for other streams'
    // pushes (deadline.h's join_wait_until_ns()). The producer thread only.
    std::int64_t gpu_frame_estimate_ns() const { return per_frame_[0].estimate_ns(); }

  private:
    std::vector<float> run_model(int tier, bool last);
    int choose(std::int64_t budget_ns, bool may_reduce_quality);
    long frames_to_run(int tier) const;  // the network's frames for this chunk
    std::uint64_t frames_run() const;    // by both streams
    long ready_end() const;

    MelSchedulerOptions options_;
    std::shared_ptr<NeuralModel> cpu_model_, gpu_model_;
    std::shared_ptr<gpu::Backend> gpu_backend_;     // gpu_model_'s
    std::unique_ptr<MelVocoderStream> stream_;      // the CPU tier's (both, unless separate_)
    std::unique_ptr<MelVocoderStream> gpu_stream_;  // the GPU tier's, when its model differs
    bool separate_ = false;
    int right_context_ = 0;  // the larger of the two models' (they move in step)
    std::unique_ptr<dsp::MelPhaseVocoder> phase_;
    LatencyEstimator per_frame_[3];
    bool join_may_wait_ = false;
    bool read_offline_ = false;
    // The calibration timed the GPU tier's chunk at most the CPU's
    // (device_first()).
    bool gpu_calibrated_quicker_ = false;
    std::uint64_t stamp_ = 0;
    double out_rate_ = 0;
    std::optional<dsp::StreamingResampler> resampler_;
    std::vector<float> out_;
    // Phase reconstruction runs in the shadow: its audio, aligned with the
    // model's timeline, from sample phase_start_.
    std::vector<float> phase_audio_;
    long phase_start_ = 0;
    long timeline_ = 0;            // model-rate samples handed out this utterance
    mutable std::mutex stats_mu_;  // stats() may be called from any thread
    MelSchedulerStats stats_;
    DeviceHealthBreaker gpu_health_;
    bool last_chose_gpu_ = false;
};

}  // namespace etude::engine
