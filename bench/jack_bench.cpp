// etude_jack_bench: live numbers through a real (headless) JACK server.
//
// Starts its own jackd with the dummy driver, plays an engine stream through
// our JackOutput into a trivial capture client, and reports:
//  * process-callback duration p50/p99/max,
//  * per-block compute latency p50/p95/p99/max per processor,
//  * push_text -> first non-zero sample at the JACK port (20-word sentence),
//  * a soak: underruns, xruns (ours and the trivial client's) over --seconds,
//    with both cores loaded by busy threads when --load is given.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "audio-io/jack_output.h"
#include "engine/engine.h"
#include "rt/monotonic_clock.h"
#include "support/jack_harness.h"

using namespace etude;

namespace {

constexpr const char* kSentence =
    "Please remind me to call the dentist tomorrow morning at nine, and then book a table for "
    "dinner.";
constexpr const char* kParagraph =
    "The old lighthouse keeper climbed the narrow stairs every evening at dusk. He trimmed the "
    "wick, "
    "polished the great lens, and watched the ships move slowly past the rocks. In winter the "
    "storms "
    "were fierce, but the light never failed, and sailors spoke of him with quiet gratitude.";

double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
    int period = 128, seconds = 60, rate = 48000, trials = 10;
    bool load = false;
    double latency_ms = 100;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
        if (a == "--period")
            period = next();
        else if (a == "--seconds")
            seconds = next();
        else if (a == "--rate")
            rate = next();
        else if (a == "--trials")
            trials = next();
        else if (a == "--latency-ms")
            latency_ms = next();
        else if (a == "--load")
            load = true;
        else {
            std::fprintf(stderr,
                         "usage: etude_jack_bench [--period FRAMES] [--rate HZ] [--seconds SOAK] "
                         "[--trials N] [--latency-ms MS] [--load]\n");
            return 2;
        }
    }
    test::JackServer server(rate, period, "bench");
    if (!server.ready()) {
        std::fprintf(stderr, "jackd did not start:\n%s\n", server.log().c_str());
        return 1;
    }
    test::CaptureClient capture(server.name(), 1.0);
    engine::Engine engine;
    audio_io::JackOptions opts;
    opts.client_name = "etude";
    opts.server_name = server.name();
    opts.stream.latency_ms = latency_ms;
    audio_io::JackOutput jack(engine, opts);
    jack.activate();
    jack.connect("capture:in");
    auto& stream = jack.stream();

    // 1. push_text -> first non-zero sample at the port.
    // Every wait is bounded: if JACK stopped calling a client, say so.
    auto wait_idle = [&] {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (stream.busy() && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return !stream.busy();
    };
    std::vector<double> first_ms;
    int missed = 0;
    for (int t = 0; t < trials; ++t) {
        if (!wait_idle()) ++missed;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        capture.rearm();
        const auto t0 = rt::now_ns();
        stream.push_text(kSentence);
        stream.end_input();
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (capture.first_sound_ns() == 0 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (capture.first_sound_ns() == 0) {
            ++missed;
        } else {
            first_ms.push_back(static_cast<double>(capture.first_sound_ns() - t0) / 1e6);
        }
        stream.cancel();
    }
    wait_idle();
    if (missed)
        std::fprintf(stderr, "etude_jack_bench: %d trial(s) saw no sound within 5 s\n", missed);

    // 2. Soak.
    const auto before = stream.stats();
    const auto xruns_before = jack.xruns();
    const int log_xruns_before = server.xruns();
    const int ours_before = server.xruns_blaming("etude"),
              ours_running_before = server.xruns_while_running("etude");
    const int trivial_before = server.xruns_blaming(test::CaptureClient::kName);
    {
        std::unique_ptr<test::CpuLoad> cpu;
        if (load) cpu = std::make_unique<test::CpuLoad>(2);
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
        while (std::chrono::steady_clock::now() < end) {
            const auto s = stream.stats();
            if (s.sentences_queued - s.sentences_spoken - s.sentences_dropped < 4)
                stream.push_text(kParagraph);
            stream.end_input();
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    const auto after = stream.stats();
    stream.cancel();

    // Per-block compute latency per processor (the soak's blocks).
    std::vector<double> compute[3];
    for (const auto& r : stream.block_records()) {
        if (r.processor == engine::BlockRecord::Ahead) {
            continue;  // made ahead of time: its cost is per utterance, not per block
        }
        compute[r.processor].push_back(r.compute_ms());
    }
    const auto& cb = jack.callback_durations();
    std::printf(
        "etude_jack_bench: jackd dummy %d Hz, %d-frame periods, latency budget %.0f ms, "
        "soak %d s%s, realtime workers %s\n",
        rate, period, latency_ms, seconds, load ? " with both cores loaded" : "",
        after.realtime_workers ? "yes" : "no");
    std::printf("| measure | value |\n|---|---|\n");
    std::printf(
        "| push_text -> first non-zero sample at the port (20 words, %d trials) | p50 %.1f ms, max "
        "%.1f ms |\n",
        trials, quantile(first_ms, 0.5), quantile(first_ms, 1.0));
    std::printf(
        "| process callback duration (%llu callbacks) | p50 %.1f us, p99 %.1f us, max %.1f us |\n",
        (unsigned long long)cb.count(), cb.percentile_us(0.5), cb.percentile_us(0.99), cb.max_us());
    const char* names[] = {"cpu-primary", "cpu-fallback"};
    for (int p = 0; p < 2; ++p)
        std::printf(
            "| block compute, %s (%zu blocks) | p50 %.3f ms, p95 %.3f ms, p99 %.3f ms, max %.3f ms "
            "|\n",
            names[p], compute[p].size(), quantile(compute[p], 0.5), quantile(compute[p], 0.95),
            quantile(compute[p], 0.99), quantile(compute[p], 1.0));
    std::printf("| blocks in soak (primary / fallback / ahead) | %llu / %llu / %llu |\n",
                (unsigned long long)(after.blocks_primary - before.blocks_primary),
                (unsigned long long)(after.blocks_fallback - before.blocks_fallback),
                (unsigned long long)(after.blocks_ahead - before.blocks_ahead));
    std::printf("| fallbacks after cut-off, late blocks | %llu, %llu |\n",
                (unsigned long long)(after.fallbacks - before.fallbacks),
                (unsigned long long)(after.late_blocks - before.late_blocks));
    std::printf("| engine underruns in soak | %llu |\n",
                (unsigned long long)(after.underruns - before.underruns));
    std::printf("| audio spoken in soak | %.1f s |\n",
                static_cast<double>(after.samples_delivered - before.samples_delivered) / rate);
    std::printf("| xruns seen by our client | %llu |\n",
                (unsigned long long)(jack.xruns() - xruns_before));
    std::printf("| xruns in jackd's log (all) | %d |\n", server.xruns() - log_xruns_before);
    std::printf("| ... naming etude as not finished (running / not yet scheduled) | %d / %d |\n",
                server.xruns_while_running("etude") - ours_running_before,
                (server.xruns_blaming("etude") - ours_before) -
                    (server.xruns_while_running("etude") - ours_running_before));
    std::printf("| ... naming the trivial capture client | %d |\n",
                server.xruns_blaming(test::CaptureClient::kName) - trivial_before);
    std::printf("| process callbacks of our client during the soak | %llu |\n",
                (unsigned long long)(jack.callbacks()));
    std::fflush(stdout);
    return 0;
}
