// The block scheduler of a text stream: vocodes the sentence being spoken
// block by block. For each block it picks the processor and tier expected
// to finish before the block's deadline (processor_chooser.h), waits until a
// cut-off that leaves time for a fallback, and if the first choice has not
// finished by then (or its device failed) gives the same block, from the
// same starting state, to another processor; a late result is discarded.
//
// Processors: the stream's two CPU processors (primary and fallback) and,
// for the spectral vocoder, a GPU processor shared by every stream on that
// device (engine_workers.h).
//
// Threads: the stream's producer thread, except stop() (any thread) and the
// const readers used by stats() (any thread).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dsp/mlsa_vocoder.h"
#include "dsp/resampler.h"
#include "engine/engine.h"
#include "engine/scheduling/block_processor.h"
#include "engine/scheduling/block_records.h"
#include "engine/scheduling/block_sink.h"
#include "engine/scheduling/fault_plan.h"
#include "engine/scheduling/latency_estimator.h"
#include "engine/scheduling/processor_chooser.h"
#include "engine/streams/playback_ring.h"
#include "engine/streams/work_items.h"

namespace etude::engine {

class EngineWorkers;

class BlockScheduler {
  public:
    BlockScheduler(EngineWorkers& workers, const StreamOptions& options, const FaultSpec& faults,
                   const FliteVoice& voice, const PlaybackRing& ring, BlockSink& sink,
                   BlockRecorder& records);
    ~BlockScheduler();
    BlockScheduler(const BlockScheduler&) = delete;
    BlockScheduler& operator=(const BlockScheduler&) = delete;

    // Spectral streams with StreamOptions::wait_for_device: waits (up to
    // 60 s) until the processors have built their device state.
    void wait_for_device();
    // Vocodes `s` block by block into the sink. False if it was cancelled,
    // the stream shut down, or no processor could make a block.
    bool schedule(const AnalysedSentence& s);
    // Writes audio a render worker made ahead of time, recording it as
    // blocks made by the "ahead" processor.
    bool copy_ahead(const AnalysedSentence& s);
    // Wakes a schedule() waiting on a processor, to return at shutdown.
    void stop();

    bool spectral() const { return spectral_; }
    // Processor time of the last schedule() call, in ns.
    std::int64_t compute_ns() const { return compute_ns_; }
    std::uint64_t frames_vocoded() const { return frames_vocoded_.get(); }
    void fill_stats(StreamStats& stats) const;
    // Per-kernel device timings of the backends this stream's blocks used
    // (spectral streams; MLSA blocks run no kernels).
    std::vector<std::pair<std::string, std::vector<gpu::KernelTiming>>> kernel_timings() const;

  private:
    struct Choice {
        Processor processor;  // CpuPrimary, CpuFallback or Gpu
        Quality quality;      // Full or Reduced
    };
    struct Abandoned {
        BlockJob* job;
        Choice choice;
    };

    void open_gpu(EngineWorkers& workers, const FaultSpec& faults);
    void prepare_voice(const FliteVoice& v);
    // Blocks until no processor holds or still signals about the job.
    void wait_until_off_processor(const BlockJob& job);
    LatencyEstimator& estimator(const Choice& c);
    BlockJob* free_job();
    const std::vector<Choice>& candidates();
    bool has_job_on(Processor p) const;
    BlockProcessor& processor(Processor p) {
        return p == Processor::CpuPrimary    ? primary_
               : p == Processor::CpuFallback ? fallback_
                                             : *gpu_;
    }
    void measure_abandoned();
    BlockJob* dispatch(const Choice& choice, const dsp::MlsaVocoder& state,
                       const NoiseSource& noise, const AcousticFrames& f, std::size_t first,
                       std::size_t count, bool last);
    bool wait_done(BlockJob& job, std::int64_t until_ns, std::uint64_t gen);
    bool emit(std::span<const float> block, bool last, const AnalysedSentence& s);
    bool stopping() const { return stopping_.load(std::memory_order_acquire); }

    const StreamOptions& options_;
    const double rate_;
    const PlaybackRing& ring_;
    BlockSink& sink_;
    BlockRecorder& records_;
    const std::size_t frames_per_block_;
    BlockProcessor primary_, fallback_;
    std::array<LatencyEstimator, 6> estimators_;  // (primary, fallback, gpu) x (full, reduced)
    std::vector<Choice> choices_;
    const bool spectral_;                  // this stream uses the spectral vocoder
    std::shared_ptr<BlockProcessor> gpu_;  // spectral only, when a GPU backend opened
    std::string gpu_note_;                 // why there is no GPU processor, if there is none
    std::string gpu_name_;
    bool gpu_forced_ = false;  // named by --backend/ETUDE_BACKEND, not chosen by calibration
    std::optional<gpu::SpectralStreamState> spectral_state_;
    std::array<std::unique_ptr<BlockJob>, 4> jobs_;
    std::vector<Abandoned> abandoned_;
    std::mutex done_mu_;
    std::condition_variable done_cv_;
    std::atomic<bool> stopping_{false};
    const FliteVoice* prepared_voice_ = nullptr;
    std::optional<dsp::MlsaVocoder> state_;
    std::optional<dsp::StreamingResampler> resampler_;
    std::vector<float> resampled_;
    std::int64_t compute_ns_ = 0;
    rt::Counter frames_vocoded_;
};

}  // namespace etude::engine
