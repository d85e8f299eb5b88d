#include "engine/scheduling/block_processor.h"

#include <algorithm>
#include <chrono>

#include "gpu/registry.h"
#include "rt/monotonic_clock.h"
#include "rt/realtime_thread.h"

namespace etude::engine {

bool same_config(const gpu::SpectralVocoderConfig& a, const gpu::SpectralVocoderConfig& b) {
    return a.sample_rate == b.sample_rate && a.frame_period == b.frame_period &&
           a.n_fft == b.n_fft && a.order == b.order && a.alpha == b.alpha && a.gain == b.gain &&
           a.beta == b.beta && a.bands == b.bands;
}

gpu::SpectralVocoderConfig spectral_config(const dsp::MlsaConfig& voice) {
    gpu::SpectralVocoderConfig c;
    c.sample_rate = voice.sample_rate;
    c.frame_period = static_cast<int>(voice.frame_period);
    c.order = static_cast<int>(voice.order);
    c.alpha = voice.alpha;
    c.gain = voice.gain;
    c.beta = voice.beta;
    c.bands = voice.band_filters.empty() ? 5 : static_cast<int>(voice.band_filters.size());
    return c;
}

BlockProcessor::BlockProcessor(std::string name, bool realtime_priority, FaultPlan fault,
                               std::shared_ptr<gpu::Backend> backend)
    : name_(std::move(name)),
      fault_(fault),
      fault_rng_(fault.seed),
      backend_(backend ? std::move(backend) : gpu::shared_cpu_backend()),
      pool_(std::make_unique<gpu::MemoryPool>(*backend_)),
      want_realtime_(realtime_priority) {
    scratch_.resize(1024);
    noise_.resize(1024);
    thread_ = std::thread([this] { run(); });
}

BlockProcessor::~BlockProcessor() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void BlockProcessor::submit(BlockJob* job) {
    job->done.store(false, std::memory_order_relaxed);
    job->failed = false;
    job->in_use.store(true, std::memory_order_relaxed);
    pending_.fetch_add(1, std::memory_order_acq_rel);
    {
        std::lock_guard lock(mu_);
        queue_.push_back(job);
    }
    cv_.notify_one();
}

void BlockProcessor::run() {
    // Below the audio callback's priority (JACK uses ~10 above its own), above normal work.
    if (want_realtime_) realtime_ = rt::make_current_thread_realtime(kProcessorPriority);
    std::vector<BlockJob*> batch;
    for (;;) {
        batch.clear();
        {
            std::unique_lock lock(mu_);
            if (!healthy_ && !disabled() && queue_.empty()) {
                // Rebuild the device state off the audio path, after the
                // breaker's backoff.
                const auto wait = std::max<std::int64_t>(0, health_.retry_at_ns() - rt::now_ns());
                cv_.wait_for(lock, std::chrono::nanoseconds(wait), [&] { return stop_; });
                if (stop_) return;
                lock.unlock();
                rebuild();
                continue;
            }
            cv_.wait(lock, [&] { return stop_ || !queue_.empty() || (!healthy_ && !disabled()); });
            if (stop_) return;
            if (queue_.empty()) continue;  // woken to (re)build device state
            // Everything waiting goes in one batch: for a device shared by
            // many streams that is one set of launches for all of them.
            while (!queue_.empty() && batch.size() < kMaxBatch) {
                batch.push_back(queue_.front());
                queue_.pop_front();
            }
        }
        const auto started = rt::now_ns();
        for (BlockJob* job : batch) job->started_ns = started;
        try {
            if (batch.front()->kind == VocoderKind::Spectral) {
                compute_spectral(batch);
                health_.record_success();
            } else {
                for (BlockJob* job : batch) compute(*job);
            }
        } catch (const std::exception& e) {
            // A device error: the batch's jobs fail (the scheduler gives each
            // to a CPU processor) and this processor rebuilds its device
            // state before taking more.
            for (BlockJob* job : batch) {
                job->failed = true;
                job->error = e.what();
            }
            note_failure(e.what());
        }
        if (fault_.slow_probability > 0 &&
            std::uniform_real_distribution<double>(0, 1)(fault_rng_) < fault_.slow_probability)
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(fault_.slow_ms));
        const auto finished = rt::now_ns();
        for (BlockJob* job : batch) {
            job->finished_ns = finished;
            pending_.fetch_sub(1, std::memory_order_acq_rel);
            // The last touch of the job and of its scheduler's condition
            // variable happens under the scheduler's mutex: once in_use reads
            // false, the scheduler may free the job (a voice change) or
            // itself (shutdown), and it takes this mutex before it does, so
            // it cannot free them while this block still notifies.
            std::condition_variable* cv = job->done_cv;
            std::lock_guard lock(*job->done_mutex);
            job->done.store(true, std::memory_order_release);
            job->in_use.store(false, std::memory_order_release);
            cv->notify_all();
        }
        batches_.add();
        batch_jobs_.add(batch.size());
        max_batch_.store_max(static_cast<std::int64_t>(batch.size()));
    }
}

void BlockProcessor::compute(BlockJob& job) {
    const AcousticFrames& f = job.frames;
    const std::size_t period = job.vocoder.config().frame_period;
    if (scratch_.size() < period) {
        scratch_.resize(period);
        noise_.resize(period);
    }
    job.vocoder.set_tier(job.tier);
    if (job.samples.size() < f.frames * period) job.samples.resize(f.frames * period);
    std::size_t n_out = 0;
    for (std::size_t i = 0; i < f.frames; ++i)
        n_out += vocode_frame(job.vocoder, job.noise, f, i, std::span(noise_).first(period),
                              std::span(scratch_).first(period),
                              std::span(job.samples).subspan(n_out, period));
    job.sample_count = n_out;
}

}  // namespace etude::engine

namespace etude::engine {

void BlockProcessor::note_failure(const std::string& what) {
    spectral_.reset();
    health_.record_failure(rt::now_ns(), what);
    healthy_ = false;
}

void BlockProcessor::prepare_spectral(const gpu::SpectralVocoderConfig& config) {
    {
        std::lock_guard lock(mu_);
        // A processor shared by several streams is prepared once per
        // configuration; later streams find it ready (or warming up).
        if (spectral_config_ && same_config(*spectral_config_, config)) return;
        spectral_config_ = config;
        healthy_ = false;
    }
    cv_.notify_all();
}

void BlockProcessor::rebuild() {
    if (!spectral_config_) {
        healthy_ = true;
        return;
    }
    try {
        backend_->reset_health();
        spectral_ =
            std::make_unique<gpu::SpectralVocoder>(backend_, *spectral_config_, 64, pool_.get());
        spectral_->warm_up(4);  // blocks of up to two frames give at most 3 segments
        if (calibrated_ns_.load() == 0) {
            // A short calibration: five two-frame blocks of a neutral voice.
            const auto& c = *spectral_config_;
            gpu::SpectralStreamState st(c);
            std::vector<float> f0(2, 120.0f), mcep(static_cast<std::size_t>(2 * c.order), 0.0f),
                strengths(static_cast<std::size_t>(2 * c.bands), 0.5f), out;
            std::vector<std::int64_t> times;
            for (int i = 0; i < 6; ++i) {
                gpu::SpectralRequest r{&st, f0, mcep, strengths, i == 5, &out};
                const auto t0 = rt::now_ns();
                spectral_->render(std::span(&r, 1));
                times.push_back(rt::now_ns() - t0);
            }
            std::sort(times.begin() + 1, times.end());  // the first primes the stream
            calibrated_ns_ = times[3];
        }
        healthy_ = true;
    } catch (const std::exception& e) {
        note_failure(e.what());
    }
}

void BlockProcessor::compute_spectral(const std::vector<BlockJob*>& batch) {
    if (!spectral_) {
        if (disabled()) throw gpu::DeviceError(name_ + " is disabled after repeated device errors");
        // Device state is built here, on the processor's own thread, never on
        // the audio path.
        spectral_config_ = spectral_config(batch.front()->vocoder.config());
        backend_->reset_health();
        spectral_ =
            std::make_unique<gpu::SpectralVocoder>(backend_, *spectral_config_, 64, pool_.get());
        healthy_ = true;
    }
    std::vector<gpu::SpectralRequest> requests;
    requests.reserve(batch.size());
    for (BlockJob* job : batch) {
        const AcousticFrames& f = job->frames;
        job->spectral_out.clear();
        requests.push_back({&job->spectral, std::span(f.f0).first(f.frames),
                            std::span(f.mcep).first(f.frames * f.mcep_order),
                            std::span(f.strengths).first(f.frames * f.bands), job->last_block,
                            &job->spectral_out});
    }
    spectral_->render(requests);
    for (BlockJob* job : batch) {
        if (job->samples.size() < job->spectral_out.size())
            job->samples.resize(job->spectral_out.size());
        std::copy(job->spectral_out.begin(), job->spectral_out.end(), job->samples.begin());
        job->sample_count = job->spectral_out.size();
    }
}

}  // namespace etude::engine
