// Piper voices through the engine: real-time factor of a Piper stream read
// offline (every sentence from its phoneme ids: the prior on an engine
// worker, the flow and the decoder chunk by chunk on the producer), and the time from
// push_text() to the first sample of a sentence. The voices come from
// ETUDE_PIPER_VOICES (default /tmp/etude_piper_full), made by
//   /usr/bin/python3 tools/piper_reference/make_voices.py --full-size DIR
// (Piper's published sizes, random weights: the same work as a trained
// voice), and ETUDE_PIPER_EXTRA: more .onnx paths, colon-separated (the
// real en_US-joe-medium). The sentences' ids come from ETUDE_PIPER_IDS, JSON
// lines as `etude phonemize` prints them. bench/piper_compare.py runs this
// beside Piper itself and ONNX Runtime for docs/benchmarks.md; threads are
// OMP_NUM_THREADS (the CPU backend's work sharing).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace {

using etude::engine::Engine;
using etude::engine::SchedulingClass;
using etude::engine::StreamOptions;

std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}

std::vector<std::vector<std::int64_t>> sentence_ids() {
    std::vector<std::vector<std::int64_t>> all;
    std::ifstream in(env_or("ETUDE_PIPER_IDS", ""));
    std::string line;
    while (std::getline(in, line))
        if (!line.empty())
            all.push_back(
                nlohmann::json::parse(line)["phoneme_ids"].get<std::vector<std::int64_t>>());
    return all;
}

// latency_ms sets the decoder's chunk (half of it: 4 frames at the default
// 100 ms, the most, 32, from 750 ms on at 22050 Hz).
StreamOptions options_for(const std::string& voice, double latency_ms = 100.0) {
    StreamOptions o;
    o.voice = etude::engine::PiperVoiceOptions{.piper_voice = voice};
    o.latency_ms = latency_ms;
    o.sample_rate = 0;  // the voice's own
    o.backend = "cpu";
    o.scheduling = SchedulingClass::Offline;
    return o;
}

// Every sentence through one stream, read as fast as it is made.
void run_sentences(benchmark::State& state, const std::string& voice, double latency_ms) {
    const auto ids = sentence_ids();
    if (ids.empty()) {
        state.SkipWithError("no sentences: set ETUDE_PIPER_IDS to `etude phonemize` output");
        return;
    }
    try {
        Engine engine(Engine::Options{{voice}});
        std::size_t samples = 0;
        double rate = 0;
        std::vector<float> block(8192);
        for (auto _ : state) {
            auto stream = engine.create_stream(options_for(voice, latency_ms));
            rate = stream->sample_rate();
            for (const auto& s : ids) stream->push_phoneme_ids(s);
            samples = 0;
            std::size_t n;
            while ((n = stream->read(block)) > 0) samples += n;
        }
        const double audio_seconds = static_cast<double>(samples) / rate;
        // Real-time factor as ONNX Runtime's tables give it: compute seconds
        // per second of audio (smaller is faster).
        state.counters["rtf"] =
            benchmark::Counter(audio_seconds * static_cast<double>(state.iterations()),
                               benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
        state.counters["audio_s"] = audio_seconds;
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}

// push_text() of one sentence into an idle stream to its first sample
// (front end, text-to-latent, the first decoder chunk); a new stream each
// time, the voice already open.
// idle_ms: quiet before each push, as a voice assistant's request comes
// after silence. On the 2-vCPU VMs this costs several milliseconds over
// back-to-back pushes (caches, and cores the host lets idle), so both are
// measured.
void run_first_audio(benchmark::State& state, const std::string& voice, const std::string& text,
                     int idle_ms) {
    try {
        Engine engine(Engine::Options{{voice}});
        double total_ms = 0;
        std::vector<float> block(256);
        for (auto _ : state) {
            if (idle_ms > 0) {
                state.PauseTiming();
                std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
                state.ResumeTiming();
            }
            auto stream = engine.create_stream(options_for(voice));
            stream->push_text(text);
            stream->end_input();
            while (stream->read(block) > 0) {
            }
            total_ms += stream->stats().first_audio_ms;
        }
        state.counters["first_audio_ms"] = total_ms / static_cast<double>(state.iterations());
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
}

void register_all() {
    std::vector<std::string> voices;
    const std::string dir = env_or("ETUDE_PIPER_VOICES", "/tmp/etude_piper_full");
    for (const char* size : {"x_low", "medium", "high"})
        voices.push_back(dir + "/full_" + std::string(size) + ".onnx");
    std::stringstream extra(env_or("ETUDE_PIPER_EXTRA", ""));
    for (std::string p; std::getline(extra, p, ':');)
        if (!p.empty()) voices.push_back(p);
    // 28 words, the first-audio sentence length.
    const std::string text =
        "The old lighthouse keeper climbed the narrow stairs every evening to light the lamp "
        "that guided fishing boats safely past the rocks and into the quiet harbor.";
    for (const auto& v : voices) {
        const std::string name = std::filesystem::path(v).stem().string();
        for (const int latency : {100, 800})
            benchmark::RegisterBenchmark(
                ("Piper/sentences/" + name + "/latency" + std::to_string(latency)).c_str(),
                [=](benchmark::State& s) { run_sentences(s, v, latency); })
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime()
                ->MinTime(1.0);
        benchmark::RegisterBenchmark(("Piper/first_audio/" + name).c_str(),
                                     [=](benchmark::State& s) { run_first_audio(s, v, text, 0); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->Iterations(5);
        benchmark::RegisterBenchmark(("Piper/first_audio_after_idle/" + name).c_str(),
                                     [=](benchmark::State& s) { run_first_audio(s, v, text, 300); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->Iterations(15);
    }
}

const int registered = (register_all(), 0);

}  // namespace
