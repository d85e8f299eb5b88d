// Processors: the places a block of vocoder frames can be computed. Today
// they are CPU worker threads; GPU backends will implement the same shape.
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
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dsp/mlsa_vocoder.h"
#include "engine/fault_plan.h"
#include "engine/flite_voice.h"
#include "engine/utterance_renderer.h"

namespace etude::engine {

struct BlockJob {
    explicit BlockJob(const dsp::MlsaConfig& config) : vocoder(config) {}

    // Inputs.
    const AcousticFrames* frames = nullptr;
    std::size_t first_frame = 0, frame_count = 0;
    dsp::MlsaTier tier = dsp::MlsaTier::Full;
    dsp::MlsaVocoder vocoder;  // state at the block start; advanced by the processor
    NoiseSource noise;

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

class CpuProcessor {
  public:
    CpuProcessor(std::string name, bool realtime_priority, FaultPlan fault = {});
    ~CpuProcessor();
    CpuProcessor(const CpuProcessor&) = delete;
    CpuProcessor& operator=(const CpuProcessor&) = delete;

    const std::string& name() const { return name_; }
    // True while a job is queued or running.
    bool busy() const { return pending_.load(std::memory_order_acquire) > 0; }
    bool realtime() const { return realtime_; }
    void submit(BlockJob* job);

  private:
    void run();
    void compute(BlockJob& job);

    std::string name_;
    FaultPlan fault_;
    std::mt19937 fault_rng_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<BlockJob*> queue_;
    std::atomic<int> pending_{0};
    bool stop_ = false;
    bool realtime_ = false;
    bool want_realtime_;
    std::vector<double> scratch_;
    std::vector<float> noise_;
    std::thread thread_;
};

}  // namespace etude::engine
