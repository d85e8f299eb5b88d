#include "engine/block_processor.h"

#include <algorithm>
#include <chrono>

#include "rt/monotonic_clock.h"
#include "rt/realtime_thread.h"

namespace etude::engine {

CpuProcessor::CpuProcessor(std::string name, bool realtime_priority, FaultPlan fault)
    : name_(std::move(name)),
      fault_(fault),
      fault_rng_(fault.seed),
      want_realtime_(realtime_priority) {
    scratch_.resize(1024);
    noise_.resize(1024);
    thread_ = std::thread([this] { run(); });
}

CpuProcessor::~CpuProcessor() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void CpuProcessor::submit(BlockJob* job) {
    job->done.store(false, std::memory_order_relaxed);
    job->in_use.store(true, std::memory_order_relaxed);
    pending_.fetch_add(1, std::memory_order_acq_rel);
    {
        std::lock_guard lock(mu_);
        queue_.push_back(job);
    }
    cv_.notify_one();
}

void CpuProcessor::run() {
    // Below the audio callback's priority (JACK uses ~10 above its own), above normal work.
    if (want_realtime_) realtime_ = rt::make_current_thread_realtime(5);
    for (;;) {
        BlockJob* job;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (stop_) return;
            job = queue_.front();
            queue_.pop_front();
        }
        job->started_ns = rt::now_ns();
        compute(*job);
        if (fault_.slow_probability > 0 &&
            std::uniform_real_distribution<double>(0, 1)(fault_rng_) < fault_.slow_probability)
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(fault_.slow_ms));
        job->finished_ns = rt::now_ns();
        {
            std::lock_guard lock(*job->done_mutex);
            job->done.store(true, std::memory_order_release);
            job->in_use.store(false, std::memory_order_release);
        }
        pending_.fetch_sub(1, std::memory_order_acq_rel);
        job->done_cv->notify_all();
    }
}

void CpuProcessor::compute(BlockJob& job) {
    const AcousticFrames& f = *job.frames;
    const std::size_t period = job.vocoder.config().frame_period;
    if (scratch_.size() < period) {
        scratch_.resize(period);
        noise_.resize(period);
    }
    job.vocoder.set_tier(job.tier);
    std::size_t n_out = 0;
    for (std::size_t i = job.first_frame; i < job.first_frame + job.frame_count; ++i) {
        for (std::size_t k = 0; k < period; ++k) noise_[k] = job.noise.next();
        const std::size_t n = job.vocoder.synthesize_frame(
            f.f0[i], std::span(f.mcep).subspan(i * f.mcep_order, f.mcep_order),
            std::span(f.strengths).subspan(i * f.bands, f.bands), std::span(noise_).first(period),
            std::span(scratch_).first(period));
        if (job.samples.size() < n_out + n) job.samples.resize(n_out + n);
        for (std::size_t k = 0; k < n; ++k)
            job.samples[n_out + k] =
                static_cast<float>(std::clamp(scratch_[k] / 32768.0, -1.0, 1.0));
        n_out += n;
    }
    job.sample_count = n_out;
}

}  // namespace etude::engine
