// Processors: the places a block of vocoder frames can be computed: worker
// threads, each computing on one gpu::Backend (the CPU backend, or a GPU).
//
// A BlockJob carries everything a block needs: the frames, the tier, and a
// snapshot of the synthesis state (vocoder + noise generator) at the block's
// start, so any processor can compute it and the scheduler can give the same
// job to a second processor if the first is late.
//
// Threads: the scheduler (one per stream) fills a job and submit()s it; the
// processor's own thread runs it and signals the job's condition variable.
// None of this is on the audio callback's path.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dsp/mlsa_vocoder.h"
#include "engine/models/spectral_vocoder.h"
#include "engine/scheduling/device_health.h"
#include "engine/scheduling/fault_plan.h"
#include "engine/voices/flite_voice.h"
#include "engine/voices/utterance_renderer.h"
#include "gpu/backend.h"
#include "gpu/memory_pool.h"
#include "rt/counters.h"
#include "rt/realtime_thread.h"

namespace etude::engine {

// SCHED_FIFO priority of the block processors' threads and of a text
// stream's producer thread, which waits on them (rt::kWorkerPriority says
// why 4).
inline constexpr int kProcessorPriority = rt::kWorkerPriority;

enum class VocoderKind { Mlsa, Spectral };

// The spectral vocoder's settings for a voice.
gpu::SpectralVocoderConfig spectral_config(const dsp::MlsaConfig& voice);
bool same_config(const gpu::SpectralVocoderConfig& a, const gpu::SpectralVocoderConfig& b);

struct BlockJob {
    explicit BlockJob(const dsp::MlsaConfig& config)
        : vocoder(config), spectral(spectral_config(config)) {}

    // Inputs.
    VocoderKind kind = VocoderKind::Mlsa;
    // The block's own frames, copied at dispatch: a job may outlive the
    // sentence it came from (abandoned at its cut-off, or running when its
    // stream was cancelled, whose sentence the producer then frees), so it
    // must not point into it. A block is a few frames; the copy reuses the
    // job's capacity.
    AcousticFrames frames;
    bool last_block = false;  // the utterance ends with this block (spectral: flush)
    dsp::MlsaTier tier = dsp::MlsaTier::Full;
    dsp::MlsaVocoder vocoder;  // state at the block start; advanced by the processor
    NoiseSource noise;
    gpu::SpectralStreamState spectral;  // the same, for the spectral vocoder
    bool failed = false;                // the processor could not compute it (device error)
    std::string error;
    int processor = -1;               // which of the stream's processors it went to
    std::vector<float> spectral_out;  // scratch for the spectral vocoder's output

    // Set by the scheduler when it hands the job over: with finished_ns it
    // gives what a deadline has to allow for, the processor's wake-up included.
    std::int64_t submitted_ns = 0;

    // Outputs (valid once done).
    std::vector<float> samples;  // at the voice's rate
    std::size_t sample_count = 0;
    std::int64_t started_ns = 0, finished_ns = 0;

    // Hand-off.
    std::mutex* done_mutex = nullptr;
    std::condition_variable* done_cv = nullptr;
    std::atomic<bool> done{false};
    std::atomic<bool> in_use{false};  // queued or running on a processor
};

// A worker thread that computes block jobs one at a time. MLSA blocks always
// run on the host; spectral blocks run on the processor's backend (the CPU
// backend, or a GPU). A device error fails the job (the scheduler then hands
// it to a CPU processor), marks the processor unhealthy, and schedules a
// re-initialisation of its device state off the audio path, after the
// backoff its DeviceHealthBreaker sets; after the breaker's
// kMaxConsecutiveFailures errors in a row it stays off.
class BlockProcessor {
  public:
    static constexpr int kMaxFailures = DeviceHealthBreaker::kMaxConsecutiveFailures;
    static constexpr std::size_t kMaxBatch = 256;  // jobs computed together

    BlockProcessor(std::string name, bool realtime_priority, FaultPlan fault = {},
                   std::shared_ptr<gpu::Backend> backend = nullptr);
    ~BlockProcessor();
    BlockProcessor(const BlockProcessor&) = delete;
    BlockProcessor& operator=(const BlockProcessor&) = delete;

    const std::string& name() const { return name_; }
    // True while a job is queued or running.
    bool busy() const { return pending_.load(std::memory_order_acquire) > 0; }
    // False after a device error until the device state is rebuilt; false for
    // good after kMaxFailures in a row.
    bool healthy() const { return healthy_.load(std::memory_order_acquire); }
    bool disabled() const { return health_.disabled(); }
    int failures() const { return static_cast<int>(health_.failures()); }
    std::string last_error() const { return health_.last_error(); }
    bool realtime() const { return realtime_; }
    gpu::Backend* backend() const { return backend_.get(); }
    gpu::MemoryUsage memory_usage() const { return pool_->usage(); }
    void submit(BlockJob* job);
    // Spectral streams: build the device state (and bake FFT plans) now, on
    // this processor's thread, then measure what a two-frame block costs.
    // Until that is done the processor reports itself unhealthy, so the
    // scheduler does not wait on a cold device.
    void prepare_spectral(const gpu::SpectralVocoderConfig& config);
    // The measured cost of a two-frame spectral block (0 until measured).
    std::int64_t calibrated_block_ns() const { return calibrated_ns_.load(); }
    // Batching: how many batches ran, how many jobs they held, the largest.
    std::uint64_t batches() const { return batches_.get(); }
    std::uint64_t batched_jobs() const { return batch_jobs_.get(); }
    std::int64_t largest_batch() const { return max_batch_.get(); }

  private:
    void run();
    void compute(BlockJob& job);
    void compute_spectral(const std::vector<BlockJob*>& batch);
    void note_failure(const std::string& what);
    void rebuild();

    std::string name_;
    FaultPlan fault_;
    std::mt19937 fault_rng_;
    std::shared_ptr<gpu::Backend> backend_;
    std::unique_ptr<gpu::MemoryPool> pool_;           // device buffers of this processor
    std::unique_ptr<gpu::SpectralVocoder> spectral_;  // built on first use, rebuilt after errors
    std::optional<gpu::SpectralVocoderConfig> spectral_config_;
    std::atomic<std::int64_t> calibrated_ns_{0};
    rt::Counter batches_, batch_jobs_;
    rt::MaxGauge max_batch_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<BlockJob*> queue_;
    std::atomic<int> pending_{0};
    std::atomic<bool> healthy_{true};
    DeviceHealthBreaker health_;
    bool stop_ = false;
    bool realtime_ = false;
    bool want_realtime_;
    std::vector<double> scratch_;
    std::vector<float> noise_;
    std::thread thread_;
};

}  // namespace etude::engine
