#include "engine/scheduling/mel_scheduler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include "engine/error.h"
#include "engine/models/stream_joiner.h"
#include "engine/scheduling/deadline.h"
#include "engine/scheduling/device_choice.h"
#include "gpu/registry.h"
#include "rt/monotonic_clock.h"

namespace etude::engine {
namespace {

// Frames run once per tier at start-up to measure it (and warm it up: plans,
// kernel compilation, first allocations).
constexpr int kCalibrationFrames = 16;

std::int64_t time_run(const std::function<void()>& f) {
    const auto t0 = rt::now_ns();
    f();
    return rt::now_ns() - t0;
}

// The GPU and CPU tiers may run different models of one family (say
// HiFi-GAN V1 on the GPU, V3 on the CPU): they must agree on everything that
// fixes the timeline and the input.
void check_compatible(const ModelAudioParams& a, const std::string& gpu_label,
                      const ModelAudioParams& b, const std::string& cpu_label) {
    const bool same = a.architecture == b.architecture && a.sample_rate == b.sample_rate &&
                      a.hop == b.hop && a.n_fft == b.n_fft && a.n_mels == b.n_mels &&
                      a.mel_scale == b.mel_scale && a.mel_norm == b.mel_norm && a.fmin == b.fmin &&
                      a.fmax == b.fmax && a.padding == b.padding && a.log_floor == b.log_floor;
    if (!same)
        throw Error("the CPU model " + cpu_label + " cannot stand in for " + gpu_label +
                    ": both must be the same family with the same audio and mel settings");
}

}  // namespace

MelScheduler::MelScheduler(MelSchedulerOptions options) : options_(std::move(options)) {
    const std::string cpu_path =
        options_.cpu_model_path.empty() ? options_.model_path : options_.cpu_model_path;
    auto load = [&](const std::string& path, std::shared_ptr<gpu::Backend> backend) {
        return options_.load_model ? options_.load_model(std::move(backend))
                                   : NeuralModel::load(path, std::move(backend));
    };
    cpu_model_ = load(cpu_path, gpu::shared_cpu_backend());
    const auto& a = cpu_model_->audio();
    stats_.model = options_.load_model ? options_.label : a.architecture + " (" + cpu_path + ")";
    stats_.latency_ms = 1000.0 * cpu_model_->streaming_latency_samples() / a.sample_rate;
    if (options_.backend != "cpu") {
        try {
            std::string where;
            auto backend = open_model_backend(options_.backend, options_.device, &where);
            if (backend.get() != gpu::shared_cpu_backend().get()) {
                gpu_model_ = load(options_.model_path, backend);
                gpu_backend_ = backend;
                stats_.gpu_device = where;
                if (cpu_path != options_.model_path) {
                    check_compatible(gpu_model_->audio(), gpu_model_->label(), a,
                                     cpu_model_->label());
                    separate_ = true;
                    stats_.model =
                        a.architecture + " (GPU " + options_.model_path + ", CPU " + cpu_path + ")";
                }
            } else {
                stats_.gpu_note = "the model runs on the " + where;
            }
        } catch (const gpu::DeviceError& e) {
            gpu_model_.reset();
            gpu_backend_.reset();
            stats_.gpu_note = std::string("no GPU tier: ") + e.what();
        } catch (const std::invalid_argument& e) {
            throw Error(e.what());  // a bad backend name or device index
        }
    } else {
        stats_.gpu_note = "the CPU was asked for";
    }
    // Without a GPU tier only the CPU model runs, but the upstream acoustic
    // model was chosen for `model_path`: a CPU model that reads another mel
    // would be a silent wrong result on CPU-only machines, so check it here too.
    if (!gpu_model_ && cpu_path != options_.model_path)
        check_compatible(read_model_audio(options_.model_path), options_.model_path, a,
                         cpu_model_->label());
    stream_ = std::make_unique<MelVocoderStream>(cpu_model_);
    if (separate_) gpu_stream_ = std::make_unique<MelVocoderStream>(gpu_model_);
    // The CPU model's streaming state now rather than in the first chunks
    // (the GPU's is prepared with its calibration, where its errors are handled).
    stream_->prepare();
    right_context_ = cpu_model_->right_context();
    if (separate_) right_context_ = std::max(right_context_, gpu_model_->right_context());
    if (options_.allow_phase_fallback)
        phase_ = std::make_unique<dsp::MelPhaseVocoder>(log_mel_config(a));
    out_rate_ = options_.output_rate > 0 ? options_.output_rate : a.sample_rate;
    if (std::lround(out_rate_) != a.sample_rate) resampler_.emplace(a.sample_rate, out_rate_);

    // Calibrate every tier on a short window of quiet mel, so the first
    // choice is a measurement rather than a guess.
    const int n = kCalibrationFrames;
    const int window = n + cpu_model_->left_context() + cpu_model_->right_context();
    std::vector<float> mel(static_cast<std::size_t>(window) * a.n_mels,
                           static_cast<float>(std::log(a.log_floor)));
    std::vector<float> values(static_cast<std::size_t>(n) * cpu_model_->values_per_frame());
    auto per_frame = [&](std::int64_t ns) { return ns / window; };
    // With the CPU model the only tier there is nothing to choose between,
    // and a stream should not wait for a measurement nobody reads (a Piper
    // voice's decoder took a tenth of a second per new server stream);
    // its estimate then starts at 0 and learns from the chunks it makes.
    const std::int64_t cpu_ns = gpu_model_ || phase_ ? time_run([&] {
        cpu_model_->run(mel.data(), window, cpu_model_->left_context(), n, values.data());
    })
                                                     : 0;
    per_frame_[1] = LatencyEstimator(0.95, 0.25, 200'000, per_frame(cpu_ns));
    if (gpu_model_) {
        try {
            if (separate_) {
                gpu_stream_->prepare();
            } else {
                stream_->set_model(gpu_model_);
                stream_->prepare();
                stream_->set_model(cpu_model_);
            }
            gpu_model_->run(mel.data(), window, gpu_model_->left_context(), n, values.data());
            const auto ns = time_run([&] {
                gpu_model_->run(mel.data(), window, gpu_model_->left_context(), n, values.data());
            });
            per_frame_[0] = LatencyEstimator(0.95, 0.25, 200'000, per_frame(ns));
            gpu_calibrated_quicker_ = ns <= cpu_ns;
            // Before the first chunk: the device is "chosen" if it keeps up
            // with the audio (a frame's audio made in less than it lasts),
            // or is pinned.
            last_chose_gpu_ =
                options_.cpu_busy || per_frame(ns) * a.sample_rate < 1'000'000'000LL * a.hop;
            // Test hook: the injected fault applies to the work, not the calibration.
            if (options_.gpu_fault.kind != gpu::GpuFault::None)
                gpu_model_->backend().inject_fault(options_.gpu_fault);
        } catch (const gpu::DeviceError& e) {
            stats_.gpu_note = std::string("GPU tier failed its calibration: ") + e.what();
            stream_->set_model(cpu_model_);
            stream_->release(*gpu_model_);
            gpu_model_.reset();
            gpu_backend_.reset();
            gpu_stream_.reset();
            separate_ = false;
            right_context_ = cpu_model_->right_context();
        }
    }
    if (phase_) {
        std::vector<float> hop(static_cast<std::size_t>(a.hop));
        // The quickest of three runs: phase reconstruction takes about a
        // millisecond here, so one preemption during a single timed run
        // could price it above the model, and a chunk with no time left
        // then went to the model (seen once in a loaded round of
        // MelStream.tiers_switch_without_losing_the_timeline).
        std::int64_t ns = std::numeric_limits<std::int64_t>::max();
        for (int run = 0; run < 3; ++run) {
            ns = std::min(ns, time_run([&] {
                              for (int f = 0; f < n; ++f)
                                  phase_->push_frame(std::span<const float>(mel.data(), a.n_mels),
                                                     hop);
                          }));
            phase_->reset();
        }
        per_frame_[2] = LatencyEstimator(0.95, 0.25, 200'000, std::max<std::int64_t>(1, ns / n));
    }
}

MelScheduler::~MelScheduler() = default;

void MelScheduler::reset() {
    stream_->reset();
    if (gpu_stream_) gpu_stream_->reset();
    if (phase_) phase_->reset();
    phase_audio_.clear();
    phase_start_ = 0;
    timeline_ = 0;
    if (resampler_) resampler_->reset();
}

long MelScheduler::frames_to_run(int tier) const {
    const auto& m = tier == 0 ? *gpu_model_ : *cpu_model_;
    // A stream that runs this tier's model layer by layer takes just the new
    // frames; otherwise the chunk reruns (or primes from) the left context.
    const MelVocoderStream& s = separate_ && tier == 0 ? *gpu_stream_ : *stream_;
    return std::max<long>(1, s.frames_to_run(m));
}

int MelScheduler::choose(std::int64_t budget_ns, bool may_reduce_quality) {
    ++stamp_;
    for (auto& e : per_frame_) e.set_now(stamp_);
    // Tiers 0-2 as candidates, best first. The models are priced by the
    // frames the network will run (context only when the stream must prime
    // or recompute it); phase reconstruction by the chunk's frames.
    Candidate c[3];
    int tier_of[3];
    int n = 0;
    const bool gpu_may_try = gpu_model_ && gpu_health_.may_try(rt::now_ns());
    // A drill's pin (ETUDE_FAULT=cpu-busy): the device's own output and its
    // failures are what it rehearses, and under load the CPU would be the
    // quicker tier for every chunk that fits nowhere. An offline reader's
    // chunk on a GPU goes there too (deadline.h's device_first()).
    if (gpu_may_try &&
        (options_.cpu_busy ||
         device_first(read_offline_, gpu_model_->backend().info().is_gpu, gpu_calibrated_quicker_)))
        return 0;
    if (gpu_model_) {
        c[n] = {Processor::Gpu, Quality::Full, per_frame_[0].estimate_ns() * frames_to_run(0),
                gpu_may_try};
        tier_of[n++] = 0;
    }
    c[n] = {Processor::CpuPrimary, Quality::Full, per_frame_[1].estimate_ns() * frames_to_run(1),
            true};
    tier_of[n++] = 1;
    if (phase_ && may_reduce_quality) {
        c[n] = {Processor::CpuPrimary, Quality::PhaseReconstruction, per_frame_[2].estimate_ns(),
                true};
        tier_of[n++] = 2;
    }
    const int i = choose_candidate(std::span(c, static_cast<std::size_t>(n)), 0, budget_ns);
    return tier_of[i];  // the CPU model is always available
}

std::uint64_t MelScheduler::frames_run() const {
    return stream_->frames_run() + (gpu_stream_ ? gpu_stream_->frames_run() : 0);
}

// Frames whose audio every neural tier can make now: both models keep in
// step, so either can take the next chunk.
long MelScheduler::ready_end() const {
    return std::max<long>(0, stream_->received_frames() - right_context_);
}

std::vector<float> MelScheduler::run_model(int tier, bool last) {
    if (!separate_) {
        stream_->set_model(tier == 0 ? gpu_model_ : cpu_model_);
        return last ? stream_->finish() : stream_->drain_to(ready_end());
    }
    MelVocoderStream& run = tier == 0 ? *gpu_stream_ : *stream_;
    MelVocoderStream& other = tier == 0 ? *stream_ : *gpu_stream_;
    auto audio = last ? run.finish() : run.drain_to(ready_end());
    if (last)
        other.reset();
    else
        other.skip_to(ready_end());
    return audio;
}

void MelScheduler::set_batching(Batching batching, bool may_wait) {
    join_may_wait_ = may_wait;
    stream_->set_batching(batching);
    if (gpu_stream_) gpu_stream_->set_batching(batching);
}

std::span<const float> MelScheduler::process(std::span<const float> mel, int frames, bool last,
                                             std::int64_t budget_ns, MelChunkReport& report,
                                             bool may_reduce_quality,
                                             const std::function<void()>& to_device) {
    const auto& a = cpu_model_->audio();
    report = {};
    report.started_ns = rt::now_ns();
    stream_->append(mel, frames);  // checks the chunk before anything changes
    if (gpu_stream_) gpu_stream_->append(mel, frames);
    {
        std::lock_guard lock(stats_mu_);
        stats_.frames += static_cast<std::uint64_t>(frames);
    }

    // The shadow tier sees every frame, whichever tier makes the audio.
    if (phase_) {
        std::vector<float> column(static_cast<std::size_t>(a.n_mels));
        const std::size_t hop = static_cast<std::size_t>(a.hop);
        for (int f = 0; f < frames; ++f) {
            for (int c = 0; c < a.n_mels; ++c)
                column[c] = mel[static_cast<std::size_t>(c) * frames + f];
            const std::size_t at = phase_audio_.size();
            phase_audio_.resize(at + hop);
            phase_->push_frame(column, std::span<float>(phase_audio_.data() + at, hop));
        }
        if (last) {
            const std::size_t at = phase_audio_.size();
            phase_audio_.resize(at + phase_->flush_samples());
            phase_->flush(std::span<float>(phase_audio_.data() + at, phase_->flush_samples()));
        }
    }

    int tier = choose(budget_ns, may_reduce_quality);
    last_chose_gpu_ = tier == 0;
    if (tier == 0) {
        // Its push may wait for other streams' to share the device's batch,
        // within the chunk's slack (deadline.h).
        const std::int64_t now = rt::now_ns();
        const std::int64_t wait_until =
            join_may_wait_ ? join_wait_until_ns(now, report.started_ns + budget_ns,
                                                per_frame_[0].estimate_ns() * frames_to_run(0))
                           : 0;
        (separate_ ? *gpu_stream_ : *stream_).set_join_wait_until(wait_until);
    }
    if (tier == 0 && to_device) to_device();
    const std::uint64_t ran_before = frames_run();
    std::vector<float> audio;
    const auto t0 = rt::now_ns();
    const auto gathered_before = join_gather_wait_ns_on_this_thread();
    if (tier < 2) {
        try {
            audio = run_model(tier, last);
            if (tier == 0) gpu_health_.record_success();
        } catch (const gpu::DeviceError& e) {
            if (tier != 0) throw;
            // The CPU copy of the model remakes the chunk from the same
            // state; the device's state is the backend's, rebuilt by
            // reset_health() (the model's weights and runners stay valid).
            gpu_health_.record_failure(rt::now_ns(), e.what());
            gpu_model_->backend().reset_health();
            report.fell_back = true;
            tier = 1;
            audio = run_model(1, last);
        }
    } else {
        // Phase reconstruction covers what the network would have produced.
        std::size_t n;
        if (last) {
            const long total = a.architecture == "vocos"
                                   ? std::max<long>(0, (stream_->received_frames() - 1) * a.hop)
                                   : stream_->received_frames() * a.hop;
            n = static_cast<std::size_t>(std::max<long>(0, total - timeline_));
            stream_->reset();
            if (gpu_stream_) gpu_stream_->reset();
        } else {
            n = stream_->skip_to(ready_end());
            if (gpu_stream_) gpu_stream_->skip_to(ready_end());
        }
        audio.assign(n, 0.0f);
        const long offset = phase_ ? static_cast<long>(phase_->latency_samples()) : 0;
        for (std::size_t i = 0; i < n; ++i) {
            const long at = timeline_ + static_cast<long>(i) + offset - phase_start_;
            if (at >= 0 && at < static_cast<long>(phase_audio_.size())) audio[i] = phase_audio_[at];
        }
    }
    // (Less any wait for other streams' pushes to join its batch: a choice
    // the deadline allowed, not the device's speed.)
    const auto spent = rt::now_ns() - t0 - (join_gather_wait_ns_on_this_thread() - gathered_before);
    if (frames > 0) {
        // Per frame the network ran (context included), as the stream counted.
        const std::uint64_t ran = tier < 2 ? frames_run() - ran_before : 0;
        per_frame_[tier].add(spent / static_cast<std::int64_t>(std::max<std::uint64_t>(
                                         ran, static_cast<std::uint64_t>(frames))),
                             stamp_);
    }
    {
        std::lock_guard lock(stats_mu_);
        ++stats_.chunks[tier];
    }
    timeline_ += static_cast<long>(audio.size());
    if (last) timeline_ = 0;

    // Drop shadow audio the timeline has passed.
    if (phase_) {
        const long keep_from = last ? phase_start_ + static_cast<long>(phase_audio_.size())
                                    : timeline_ + static_cast<long>(phase_->latency_samples());
        const long drop =
            std::clamp<long>(keep_from - phase_start_, 0, static_cast<long>(phase_audio_.size()));
        phase_audio_.erase(phase_audio_.begin(), phase_audio_.begin() + drop);
        phase_start_ += drop;
        if (last) {
            phase_audio_.clear();
            phase_start_ = 0;
            phase_->reset();
        }
    }

    report.tier = tier;
    report.processor = tier == 0 ? Processor::Gpu : Processor::CpuPrimary;
    report.quality = tier == 2 ? Quality::PhaseReconstruction : Quality::Full;
    report.finished_ns = rt::now_ns();
    if (!resampler_) {
        out_ = std::move(audio);
    } else {
        out_.resize(resampler_->max_output_for(audio.size()));
        out_.resize(resampler_->process(audio, out_, last));
    }
    return out_;
}

MelSchedulerStats MelScheduler::stats() const {
    MelSchedulerStats s;
    {
        std::lock_guard lock(stats_mu_);
        s = stats_;
    }
    s.gpu_failures = gpu_health_.failures();
    s.gpu_disabled = gpu_health_.disabled();
    s.gpu_ready = gpu_model_ && gpu_health_.may_try(rt::now_ns());  // fixed after construction
    s.gpu_last_error = gpu_health_.last_error();
    return s;
}

}  // namespace etude::engine
