#include "cli/say_report.h"

#include <cstdio>
#include <exception>

#include "engine/devices.h"

namespace etude::cli {

void Progress::update(const engine::StreamStats& s, bool force) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    std::fprintf(stderr, "\r[etude] sentence %llu/%llu, %.1f s of audio ",
                 static_cast<unsigned long long>(s.sentences_spoken),
                 static_cast<unsigned long long>(s.sentences_queued),
                 static_cast<double>(s.samples_delivered) / rate_);
    shown_ = true;
}

void Progress::finish() {
    if (shown_) std::fputc('\n', stderr);
}

void add_run(engine::StreamStats& total, const engine::StreamStats& run, bool first) {
    if (first) {
        total = run;
        return;
    }
    const double first_audio_ms = total.first_audio_ms;
    engine::StreamStats sum = run;
    sum.first_audio_ms = first_audio_ms;
    sum.samples_delivered += total.samples_delivered;
    sum.underruns += total.underruns;
    sum.underrun_samples += total.underrun_samples;
    sum.sentences_queued += total.sentences_queued;
    sum.sentences_spoken += total.sentences_spoken;
    sum.sentences_dropped += total.sentences_dropped;
    sum.sentences_unspeakable += total.sentences_unspeakable;
    if (sum.unspeakable_reason.empty()) sum.unspeakable_reason = total.unspeakable_reason;
    sum.frames_vocoded += total.frames_vocoded;
    sum.frontend_seconds += total.frontend_seconds;
    sum.vocoder_seconds += total.vocoder_seconds;
    sum.blocks += total.blocks;
    sum.blocks_primary += total.blocks_primary;
    sum.blocks_fallback += total.blocks_fallback;
    sum.blocks_ahead += total.blocks_ahead;
    sum.fallbacks += total.fallbacks;
    sum.late_blocks += total.late_blocks;
    sum.reduced_tier_blocks += total.reduced_tier_blocks;
    sum.blocks_gpu += total.blocks_gpu;
    sum.gpu_failures += total.gpu_failures;
    sum.mel_chunks_gpu += total.mel_chunks_gpu;
    sum.mel_chunks_cpu += total.mel_chunks_cpu;
    sum.mel_chunks_phase += total.mel_chunks_phase;
    sum.flow_pushes_gpu += total.flow_pushes_gpu;
    sum.flow_pushes_cpu += total.flow_pushes_cpu;
    sum.flow_takeovers += total.flow_takeovers;
    sum.flow_pushes_batched += total.flow_pushes_batched;
    sum.analyses_gpu += total.analyses_gpu;
    sum.analyses_cpu += total.analyses_cpu;
    sum.analyses_near_tie += total.analyses_near_tie;
    sum.analyses_batched += total.analyses_batched;
    total = std::move(sum);
}

namespace {

void print_counters(const engine::StreamStats& s, double rate) {
    std::fprintf(stderr,
                 "stats: %.2f s of audio, %llu sentences spoken, %llu dropped, %llu underruns "
                 "(%llu samples), first audio %.1f ms, front end %.3f s, vocoder %.3f s\n"
                 "  latency %.1f ms, blocks %llu (primary %llu, fallback %llu, ahead %llu), "
                 "fallbacks %llu, late %llu, reduced tier %llu\n",
                 static_cast<double>(s.samples_delivered) / rate,
                 static_cast<unsigned long long>(s.sentences_spoken),
                 static_cast<unsigned long long>(s.sentences_dropped),
                 static_cast<unsigned long long>(s.underruns),
                 static_cast<unsigned long long>(s.underrun_samples), s.first_audio_ms,
                 s.frontend_seconds, s.vocoder_seconds, s.latency_ms,
                 static_cast<unsigned long long>(s.blocks),
                 static_cast<unsigned long long>(s.blocks_primary),
                 static_cast<unsigned long long>(s.blocks_fallback),
                 static_cast<unsigned long long>(s.blocks_ahead),
                 static_cast<unsigned long long>(s.fallbacks),
                 static_cast<unsigned long long>(s.late_blocks),
                 static_cast<unsigned long long>(s.reduced_tier_blocks));
}

void print_gpu_stats(const engine::StreamStats& s, const engine::StreamOptions& o) {
    if (s.gpu_device.empty()) {
        std::fprintf(stderr, "  spectral vocoder on the CPU (%s)\n", s.gpu_note.c_str());
        return;
    }
    std::fprintf(stderr, "  spectral vocoder on %s: %llu GPU blocks, %llu device failures%s%s\n",
                 s.gpu_device.c_str(), static_cast<unsigned long long>(s.blocks_gpu),
                 static_cast<unsigned long long>(s.gpu_failures),
                 s.gpu_disabled ? " (GPU now off)" : "",
                 s.gpu_last_error.empty() ? "" : ("; last error: " + s.gpu_last_error).c_str());
    // The kernel table is a bonus: a device that cannot be opened again
    // (it failed during the run) leaves it out rather than failing the run.
    try {
        for (const auto& t :
             engine::device_kernel_times(engine::with_device_environment({o.backend, o.device})))
            std::fprintf(stderr, "    %-18s %6llu calls, %8.3f ms total, %7.3f ms max\n",
                         t.name.c_str(), static_cast<unsigned long long>(t.calls), t.total_ms,
                         t.max_ms);
    } catch (const std::exception&) {
    }
}

// A Piper voice's decoder: which tier made its chunks, and on which device.
void print_decoder_stats(const engine::StreamStats& s) {
    if (s.gpu_device.empty())
        std::fprintf(stderr, "  decoder: %llu chunks on the CPU (%s)\n",
                     static_cast<unsigned long long>(s.mel_chunks_cpu),
                     s.gpu_note.empty() ? "no GPU tier" : s.gpu_note.c_str());
    else
        std::fprintf(
            stderr, "  decoder: %llu chunks on %s, %llu on the CPU, %llu device failures%s%s\n",
            static_cast<unsigned long long>(s.mel_chunks_gpu), s.gpu_device.c_str(),
            static_cast<unsigned long long>(s.mel_chunks_cpu),
            static_cast<unsigned long long>(s.gpu_failures), s.gpu_disabled ? " (GPU now off)" : "",
            s.gpu_last_error.empty() ? "" : ("; last error: " + s.gpu_last_error).c_str());
    // The flow and the text analysis (the encoder and the durations) go
    // where the decoder's chunks go (engine/voices/piper_stream_voice.h).
    if (!s.gpu_device.empty()) {
        std::fprintf(stderr,
                     "  flow: %llu pushes on the device (%llu in batches of streams), %llu on the "
                     "CPU, %llu sentences taken over by the CPU\n",
                     static_cast<unsigned long long>(s.flow_pushes_gpu),
                     static_cast<unsigned long long>(s.flow_pushes_batched),
                     static_cast<unsigned long long>(s.flow_pushes_cpu),
                     static_cast<unsigned long long>(s.flow_takeovers));
        std::fprintf(stderr,
                     "  text analysis: %llu sentences on the device (%llu in batches of streams), "
                     "%llu on the host (%llu near a duration tie)\n",
                     static_cast<unsigned long long>(s.analyses_gpu),
                     static_cast<unsigned long long>(s.analyses_batched),
                     static_cast<unsigned long long>(s.analyses_cpu),
                     static_cast<unsigned long long>(s.analyses_near_tie));
    }
}

}  // namespace

void print_stats(const engine::StreamStats& s, const engine::StreamOptions& o, double rate) {
    print_counters(s, rate);
    if (s.vocoder == "spectral") print_gpu_stats(s, o);
    if (s.vocoder == "vits") print_decoder_stats(s);
}

}  // namespace etude::cli
