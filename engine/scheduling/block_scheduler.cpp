#include "engine/scheduling/block_scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "engine/scheduling/deadline.h"
#include "engine/scheduling/device_choice.h"
#include "engine/scheduling/engine_workers.h"
#include "gpu/registry.h"
#include "rt/monotonic_clock.h"

namespace etude::engine {
namespace {

// The least time the block scheduler plans for a block beyond its measured
// cost: the hand-over to a processor thread and back (wake-ups).
constexpr std::int64_t kWakeAllowanceNs = 1'000'000;
constexpr int kMaxChoices = 4;

}  // namespace

BlockScheduler::BlockScheduler(EngineWorkers& workers, const StreamOptions& options,
                               const FaultSpec& faults, const FliteVoice& voice,
                               const PlaybackRing& ring, BlockSink& sink, BlockRecorder& records)
    : options_(options),
      rate_(options.sample_rate),
      ring_(ring),
      sink_(sink),
      records_(records),
      frames_per_block_(std::max<std::size_t>(
          1, static_cast<std::size_t>(
                 std::lround(std::get<BuiltinVoiceOptions>(options.voice).block_ms / 5.0)))),
      primary_("cpu-primary", options.realtime_workers, faults.primary),
      fallback_("cpu-fallback", options.realtime_workers, faults.fallback),
      spectral_(std::get<BuiltinVoiceOptions>(options.voice).vocoder == "spectral") {
    if (spectral_) open_gpu(workers, faults);
    // Estimators per (processor, tier): Full and Reduced on each. The
    // margin is at least kWakeAllowanceNs: a block costs ~0.1 ms, so with
    // the estimator's default 0.2 ms floor a fallback sent at its cut-off
    // had 0.0-0.1 ms of slack left, and on a VM a thread's wake-up
    // sometimes takes longer than that (late blocks in half the runs of
    // BlockScheduler.slow_primary_..., now and then an underrun).
    for (auto& e : estimators_) e = LatencyEstimator(0.95, 0.25, kWakeAllowanceNs);
    prepare_voice(voice);
}

BlockScheduler::~BlockScheduler() {
    // Jobs may still sit on a processor; wait until they are off it.
    for (auto& j : jobs_)
        if (j) wait_until_off_processor(*j);
}

void BlockScheduler::wait_until_off_processor(const BlockJob& job) {
    while (job.in_use.load(std::memory_order_acquire))
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    // A processor clears in_use and notifies inside done_mu_; taking it once
    // here waits out that notify, after which nothing touches the job or
    // done_cv_ again.
    std::lock_guard lock(done_mu_);
}

void BlockScheduler::stop() {
    {
        std::lock_guard lock(done_mu_);
        stopping_.store(true, std::memory_order_release);
    }
    done_cv_.notify_all();
}

void BlockScheduler::wait_for_device() {
    if (!spectral_) return;
    const auto until = Clock::now() + std::chrono::seconds(60);
    auto ready = [&](const BlockProcessor& p) { return p.healthy() || p.disabled(); };
    while (Clock::now() < until && !(ready(primary_) && (!gpu_ || ready(*gpu_))))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void BlockScheduler::fill_stats(StreamStats& s) const {
    s.frames_vocoded += frames_vocoded_.get();
    s.realtime_workers = primary_.realtime() && fallback_.realtime();
    if (gpu_) {
        s.gpu_device = gpu_name_;
        s.gpu_failures = static_cast<std::uint64_t>(gpu_->failures());
        s.gpu_disabled = gpu_->disabled();
        s.gpu_ready = gpu_->healthy() && !gpu_->disabled();
        s.gpu_last_error = gpu_->last_error();
        s.gpu_batches = gpu_->batches();
        s.gpu_batched_jobs = gpu_->batched_jobs();
        s.gpu_largest_batch = gpu_->largest_batch();
    } else {
        s.gpu_note = gpu_note_;
    }
}

std::vector<std::pair<std::string, std::vector<gpu::KernelTiming>>> BlockScheduler::kernel_timings()
    const {
    std::vector<std::pair<std::string, std::vector<gpu::KernelTiming>>> out;
    if (!spectral_) return out;
    if (gpu_ && gpu_->backend()) out.emplace_back(gpu_->name(), gpu_->backend()->kernel_timings());
    out.emplace_back("cpu", gpu::shared_cpu_backend()->kernel_timings());
    return out;
}

// The spectral vocoder may run on a GPU: open the requested (or best)
// device; if it is the CPU, or cannot be opened, the CPU processors do
// the work and the reason is kept for the statistics.
void BlockScheduler::open_gpu(EngineWorkers& workers, const FaultSpec& faults) {
    try {
        // The one "auto" policy (engine/scheduling/device_choice.h): an explicitly named
        // device is always used; auto takes a GPU only.
        GpuTier tier = open_gpu_tier(options_.backend, options_.device);
        if (!tier.backend) {
            gpu_note_ = "the spectral vocoder runs on the CPU backend (" + tier.choice.note + ")";
            return;
        }
        const gpu::DeviceInfo d = tier.choice.device;
        auto backend = tier.backend;
        if (faults.device) backend->inject_fault(*faults.device);
        gpu_forced_ = tier.choice.named;
        // One processor per device, shared by every stream on it, so the
        // device gets one batch of launches for all of them.
        gpu_ = workers.shared_gpu_processor(
            std::string(gpu::to_string(d.kind)) + ":" + std::to_string(d.index), [&] {
                return std::make_shared<BlockProcessor>(
                    std::string("gpu-") + gpu::to_string(d.kind), false, FaultPlan{}, backend);
            });
        gpu_name_ = d.name;
    } catch (const std::exception& e) {
        gpu_note_ = std::string("no GPU processor: ") + e.what();
    }
}

void BlockScheduler::prepare_voice(const FliteVoice& v) {
    if (prepared_voice_ == &v) return;
    prepared_voice_ = &v;
    const auto& cfg = v.vocoder_config();
    for (auto& j : jobs_) {
        // Old jobs may still be on a processor (abandoned after a cut-off).
        if (j) wait_until_off_processor(*j);
        j = std::make_unique<BlockJob>(cfg);
        j->samples.resize(frames_per_block_ * cfg.frame_period);
        j->done_mutex = &done_mu_;
        j->done_cv = &done_cv_;
    }
    abandoned_.clear();  // their jobs were replaced above
    state_.emplace(cfg);
    spectral_state_.emplace(spectral_config(cfg));
    if (spectral_) {
        primary_.prepare_spectral(spectral_config(cfg));
        if (gpu_) gpu_->prepare_spectral(spectral_config(cfg));
    }
    resampler_.reset();
    if (rate_ != v.sample_rate()) {
        resampler_.emplace(v.sample_rate(), rate_);
        resampled_.resize(resampler_->max_output_for(frames_per_block_ * cfg.frame_period));
    }
}

LatencyEstimator& BlockScheduler::estimator(const Choice& c) {
    return estimators_[static_cast<std::size_t>(c.processor) * 2 +
                       (c.quality == Quality::Reduced ? 1 : 0)];
}

namespace {

dsp::MlsaTier tier_of(Quality q) {
    return q == Quality::Reduced ? dsp::MlsaTier::Reduced : dsp::MlsaTier::Full;
}

}  // namespace

BlockJob* BlockScheduler::free_job() {
    for (auto& j : jobs_) {
        const bool awaiting_measure =
            std::any_of(abandoned_.begin(), abandoned_.end(),
                        [&](const Abandoned& a) { return a.job == j.get(); });
        if (!awaiting_measure && !j->in_use.load(std::memory_order_acquire)) return j.get();
    }
    return nullptr;
}

bool BlockScheduler::schedule(const AnalysedSentence& u) {
    compute_ns_ = 0;
    prepare_voice(*u.voice);
    dsp::MlsaVocoder& state = *state_;
    state.reset();
    NoiseSource noise;
    noise.restart();
    spectral_state_->reset();
    if (resampler_) resampler_->reset();
    const auto& f = u.frames;
    const std::size_t period = u.voice->vocoder_config().frame_period;
    const double ratio = rate_ / u.voice->sample_rate();
    const std::uint64_t gen = u.origin.generation;
    const std::vector<Choice> choices = candidates();

    for (std::size_t first = 0; first < f.frames; first += frames_per_block_) {
        const std::size_t count = std::min(frames_per_block_, f.frames - first);
        const bool last = first + count == f.frames;
        const auto expected_out =
            static_cast<std::size_t>(static_cast<double>(count * period) * ratio) + 64;
        if (!sink_.wait_for_room(expected_out, gen)) return false;

        measure_abandoned();
        const std::int64_t now = rt::now_ns();
        const PlaybackState playback = ring_.playback_state();
        const std::int64_t deadline = deadline_ns(now, playback);
        const bool may_reduce = may_reduce_quality(playback);
        BlockRecord rec;
        rec.index = records_.next_index();
        rec.deadline_ns = deadline;
        rec.dispatched_ns = now;

        // Candidates in order of preference (see candidates()); a
        // processor is out while busy or after a device error.
        auto pick = [&](std::int64_t from,
                        std::optional<Processor> exclude) -> std::optional<Choice> {
            Candidate cands[kMaxChoices];
            const int n = static_cast<int>(choices.size());
            for (int i = 0; i < n; ++i) {
                const Choice& c = choices[static_cast<std::size_t>(i)];
                auto& e = estimator(c);
                e.set_now(rec.index);
                const BlockProcessor& p = processor(c.processor);
                // The GPU processor is shared by streams: it is "busy" for
                // this stream only while one of this stream's jobs is on it.
                const bool busy =
                    c.processor == Processor::Gpu ? has_job_on(c.processor) : p.busy();
                cands[i] = {c.processor, c.quality, e.estimate_ns(),
                            !busy && p.healthy() && (may_reduce || c.quality == Quality::Full)};
            }
            const int i = choose_candidate(std::span(cands, static_cast<std::size_t>(n)), from,
                                           deadline, exclude);
            if (i < 0) return std::nullopt;
            return choices[static_cast<std::size_t>(i)];
        };

        std::optional<Choice> first_choice = pick(now, std::nullopt);
        if (!first_choice) {
            // Every processor still holds an abandoned job: wait for one.
            std::unique_lock lock(done_mu_);
            done_cv_.wait(lock,
                          [&] { return !primary_.busy() || !fallback_.busy() || stopping(); });
            if (stopping()) return false;
            first_choice = pick(rt::now_ns(), std::nullopt);
            if (!first_choice) first_choice = Choice{Processor::CpuPrimary, Quality::Full};
        }
        BlockJob* job = dispatch(*first_choice, state, noise, f, first, count, last);
        if (!job) return false;

        // Cut-off: the latest moment another processor can still start
        // and be expected to finish before the deadline.
        std::int64_t fallback_est = INT64_MAX;
        for (const Choice& c : choices)
            if (c.processor != first_choice->processor)
                fallback_est = std::min(fallback_est, estimator(c).estimate_ns());
        const std::int64_t cutoff = deadline - fallback_est;
        BlockJob* result = job;
        Choice used = *first_choice;
        if (!wait_done(*job, cutoff, gen)) {
            if (sink_.cancelled(gen) || sink_.shutting_down()) return false;
            // Missed the cut-off, or the device failed: another processor
            // produces the block from the same starting state instead.
            std::optional<Choice> fb = pick(rt::now_ns(), first_choice->processor);
            if (!fb && job->failed) fb = Choice{Processor::CpuFallback, Quality::Full};
            if (fb) {
                if (BlockJob* second = dispatch(*fb, state, noise, f, first, count, last)) {
                    rec.fell_back = true;
                    result = second;
                    used = *fb;
                    records_.note_fallback();
                }
            }
            if (!wait_done(*result, INT64_MAX, gen)) return false;
            if (result->failed) return false;  // nothing left that can make it
        }
        // From hand-over to result, not compute alone: on a loaded or
        // virtual machine the worker's wake-up takes a share of the time
        // a cut-off leaves, and a block planned without it comes late.
        estimator(used).add(result->finished_ns - result->submitted_ns, rec.index);
        if (result != job && !job->failed) abandoned_.push_back({job, *first_choice});

        // Commit: the block's end state becomes the stream's state.
        state = result->vocoder;
        noise = result->noise;
        *spectral_state_ = result->spectral;
        rec.processor = to_record(used.processor);
        rec.quality = used.quality;
        rec.reduced_tier = used.quality != Quality::Full;
        rec.started_ns = result->started_ns;
        rec.finished_ns = result->finished_ns;
        compute_ns_ += result->finished_ns - result->started_ns;
        records_.record(rec);
        frames_vocoded_.add(count);

        const std::span<const float> block(result->samples.data(), result->sample_count);
        if (!emit(block, last, u)) return false;
    }
    return true;
}

// The candidates, best first: for the MLSA vocoder the stream's own CPU
// processor then the fallback, at full then reduced quality; for the
// spectral vocoder the GPU (if one was opened) then both CPU processors.
const std::vector<BlockScheduler::Choice>& BlockScheduler::candidates() {
    choices_.clear();
    if (spectral_) {
        // Measured, not guessed: the GPU goes first only if its
        // calibration says it makes a block at least as fast as the CPU.
        const auto g = gpu_ ? gpu_->calibrated_block_ns() : 0;
        const auto c = primary_.calibrated_block_ns();
        // A device the user named explicitly always goes first.
        const bool gpu_first = gpu_ && (gpu_forced_ || c == 0 || (g > 0 && g <= c));
        if (gpu_first) choices_.push_back({Processor::Gpu, Quality::Full});
        choices_.push_back({Processor::CpuPrimary, Quality::Full});
        choices_.push_back({Processor::CpuFallback, Quality::Full});
        if (gpu_ && !gpu_first) choices_.push_back({Processor::Gpu, Quality::Full});
    } else {
        choices_.push_back({Processor::CpuPrimary, Quality::Full});
        choices_.push_back({Processor::CpuFallback, Quality::Full});
        if (options_.allow_reduced_tier) {
            choices_.push_back({Processor::CpuPrimary, Quality::Reduced});
            choices_.push_back({Processor::CpuFallback, Quality::Reduced});
        }
    }
    return choices_;
}

bool BlockScheduler::has_job_on(Processor p) const {
    for (const auto& j : jobs_)
        if (j && j->processor == static_cast<int>(p) && j->in_use.load(std::memory_order_acquire))
            return true;
    return false;
}

// A job abandoned after its cut-off still tells how slow its processor
// was: measure it once it completes, so the estimate learns.
void BlockScheduler::measure_abandoned() {
    std::erase_if(abandoned_, [&](const Abandoned& a) {
        if (!a.job->done.load(std::memory_order_acquire)) return false;
        estimator(a.choice).add(a.job->finished_ns - a.job->submitted_ns, records_.peek_index());
        return true;
    });
}

namespace {

// Frames [first, first + count) of `from` into `to`, reusing its capacity.
void copy_frames(const AcousticFrames& from, std::size_t first, std::size_t count,
                 AcousticFrames& to) {
    to.frames = count;
    to.mcep_order = from.mcep_order;
    to.bands = from.bands;
    const auto rows = [&](const std::vector<float>& v, std::size_t width, std::vector<float>& out) {
        out.assign(v.begin() + static_cast<std::ptrdiff_t>(first * width),
                   v.begin() + static_cast<std::ptrdiff_t>((first + count) * width));
    };
    rows(from.f0, 1, to.f0);
    rows(from.mcep, from.mcep_order, to.mcep);
    rows(from.strengths, from.bands, to.strengths);
}

}  // namespace

BlockJob* BlockScheduler::dispatch(const Choice& choice, const dsp::MlsaVocoder& state,
                                   const NoiseSource& noise, const AcousticFrames& f,
                                   std::size_t first, std::size_t count, bool last) {
    BlockJob* job = free_job();
    if (!job) return nullptr;
    job->kind = spectral_ ? VocoderKind::Spectral : VocoderKind::Mlsa;
    job->vocoder = state;
    job->noise = noise;
    job->spectral = *spectral_state_;
    copy_frames(f, first, count, job->frames);
    job->last_block = last;
    job->tier = tier_of(choice.quality);
    job->processor = static_cast<int>(choice.processor);
    job->submitted_ns = rt::now_ns();
    processor(choice.processor).submit(job);
    return job;
}

// Waits for a job until `until_ns`; false on timeout, cancel or shutdown.
bool BlockScheduler::wait_done(BlockJob& job, std::int64_t until_ns, std::uint64_t gen) {
    std::unique_lock lock(done_mu_);
    for (;;) {
        if (job.done.load(std::memory_order_acquire)) return !job.failed;
        if (sink_.cancelled(gen) || stopping()) return false;
        const std::int64_t now = rt::now_ns();
        if (now >= until_ns) return false;
        const std::int64_t wait_ns = std::min<std::int64_t>(until_ns - now, 5'000'000);
        done_cv_.wait_for(lock, std::chrono::nanoseconds(wait_ns));
    }
}

// Resamples (if needed) and writes a block; the sentence's last block also
// flushes the resampler.
bool BlockScheduler::emit(std::span<const float> block, bool last, const AnalysedSentence& s) {
    if (!resampler_) return sink_.write(block, s.origin, last);
    const std::size_t m = resampler_->process(block, resampled_);
    if (!sink_.write(std::span<const float>(resampled_.data(), m), s.origin, false)) return false;
    if (!last) return true;
    const std::size_t t = resampler_->process({}, resampled_, true);
    return sink_.write(std::span<const float>(resampled_.data(), t), s.origin, true);
}

bool BlockScheduler::copy_ahead(const AnalysedSentence& u) {
    compute_ns_ = 0;
    if (u.state != AnalysedSentence::Rendered || sink_.cancelled(u.origin.generation)) return false;
    const std::size_t period = u.voice->vocoder_config().frame_period;
    const auto chunk = static_cast<std::size_t>(static_cast<double>(frames_per_block_ * period) *
                                                rate_ / u.voice->sample_rate());
    std::span<const float> audio(u.audio);
    while (!audio.empty()) {
        const std::size_t n = std::min(chunk, audio.size());
        const bool last = n == audio.size();
        if (!sink_.wait_for_room(n, u.origin.generation)) return false;
        BlockRecord rec;
        rec.index = records_.next_index();
        rec.processor = BlockRecord::Ahead;
        const std::int64_t now = rt::now_ns();
        rec.dispatched_ns = u.render_started_ns;
        rec.started_ns = u.render_started_ns;
        rec.finished_ns = u.render_finished_ns;
        rec.deadline_ns = deadline_ns(now, ring_.playback_state());
        records_.record(rec);
        if (!sink_.write(audio.first(n), u.origin, last)) return false;
        audio = audio.subspan(n);
    }
    return true;
}

}  // namespace etude::engine
