// What a thread per stream costs on the CPU: N Piper streams' sentences
// made through their voices' steps (StreamVoice::begin(), step(): a
// sentence's analysis, then a chunk a step), with no engine, no gate and no
// ring, either
//   --threads K      on K threads, stream i on thread i mod K, each thread
//                    stepping its streams in turn, a chunk of each: what an
//                    executor stepping every stream from a few threads
//                    would do (one thread spreads each operation over the
//                    CPU backend's workers; more compute each on their own
//                    core, as the engine's turn holders do);
//   --threads each   each stream stepped on a thread of its own, all at
//                    once, each on its own core: a producer per stream,
//                    without the engine's turns.
// Prints the aggregate speed (seconds of audio per second of wall time)
// and how busy the host's CPUs were, beside etude_many_streams
// --offline-only, which makes the same sentences through the engine's
// streams (docs/benchmarks.md).
//
//   etude_stepped_streams --voice VOICE.onnx --ids-from FILE.json
//                         [--streams 16] [--rounds 3] [--threads K|each]
//
// Each stream speaks the "phoneme_ids" of FILE three times (three
// sentences), as etude_many_streams --ids-from does.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/host_cpu.h"
#include "engine/voices/piper_voice.h"
#include "gpu/cpu/openblas_kernels.h"
#include "gpu/host_compute.h"
#include "tests/support/stepped_piper_stream.h"

namespace {

using etude::bench::cpu_model;
using etude::bench::cpu_seconds;
using Clock = std::chrono::steady_clock;
using etude::test::SteppedPiperStream;

constexpr const char* kUsage =
    "usage: etude_stepped_streams --voice VOICE.onnx --ids-from FILE.json [--streams N]\n"
    "                             [--rounds N] [--threads K|each]\n"
    "N Piper streams (default 16) each speak FILE's \"phoneme_ids\" three times through\n"
    "their voices' steps, with no engine: on K threads each stepping its share of the\n"
    "streams in turn, or on a thread per stream (each, the default); prints the\n"
    "aggregate speed and how busy the CPUs were, for each of --rounds (default 3).\n";

int usage(const char* why) {
    std::fprintf(stderr, "etude_stepped_streams: %s\n%s", why, kUsage);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string voice_path, ids_path, threads = "each";
    int streams = 16, rounds = 3;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        const auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        const char* v = a.rfind("--", 0) == 0 ? value() : nullptr;
        if (!v) return usage(("what is " + a + "?").c_str());
        if (a == "--voice")
            voice_path = v;
        else if (a == "--ids-from")
            ids_path = v;
        else if (a == "--streams")
            streams = std::atoi(v);
        else if (a == "--rounds")
            rounds = std::atoi(v);
        else if (a == "--threads")
            threads = v;
        else
            return usage(("unknown option " + a).c_str());
    }
    if (voice_path.empty() || ids_path.empty()) return usage("--voice and --ids-from are needed");
    if (streams < 1 || rounds < 1) return usage("--streams and --rounds take a count of 1 or more");
    // Threads that step the streams: a stream each, or K sharing them.
    const int stepping = threads == "each" ? streams : std::atoi(threads.c_str());
    if (stepping < 1) return usage("--threads takes a count of 1 or more, or each");
    std::ifstream in(ids_path);
    if (!in) return usage(("cannot read " + ids_path).c_str());
    try {
        const auto ids =
            nlohmann::json::parse(in).at("phoneme_ids").get<std::vector<std::int64_t>>();
        const auto voice = etude::engine::PiperVoice::open(voice_path);
        std::printf(
            "%s, %u CPUs, %s; %s; %d streams, three sentences each, stepped on %d threads\n",
            cpu_model().c_str(), std::thread::hardware_concurrency(),
            etude::gpu::cpu::openblas_kernels().c_str(), voice_path.c_str(), streams, stepping);
        for (int round = 0; round < rounds; ++round) {
            std::vector<std::unique_ptr<SteppedPiperStream>> all;
            for (int i = 0; i < streams; ++i)
                all.push_back(std::make_unique<SteppedPiperStream>(voice, voice_path, i));
            const auto t0 = Clock::now();
            const double cpu0 = cpu_seconds();
            // Thread k steps streams k, k + K, ...: a sentence each at a
            // time, begun (its analysis) in turn, then stepped in turn until
            // every one of them is done.
            const auto step_share = [&](int k) {
                // With more than one, each computes on its own core, as the
                // engine's turn holders do (gpu/host_compute.h): loops of
                // two threads spread over the same workers would put a
                // third thread on two cores.
                const etude::gpu::host::SoloScope solo(stepping > 1);
                for (int sentence = 0; sentence < 3; ++sentence) {
                    for (int i = k; i < streams; i += stepping) all[i]->begin(ids);
                    for (bool any = true; any;) {
                        any = false;
                        for (int i = k; i < streams; i += stepping)
                            if (all[i]->more) {
                                all[i]->step();
                                any = true;
                            }
                    }
                }
            };
            std::vector<std::thread> steppers;
            for (int k = 0; k < stepping; ++k) steppers.emplace_back(step_share, k);
            for (auto& t : steppers) t.join();
            const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
            const double cpu = cpu_seconds() - cpu0;
            double audio = 0.0;
            for (const auto& s : all) audio += double(s->sink.audio.size()) / voice->sample_rate();
            std::printf("  round %d: %5.1fx real time; host CPU busy %3.0f%% of %u CPUs\n",
                        round + 1, audio / wall,
                        100.0 * cpu / wall / std::thread::hardware_concurrency(),
                        std::thread::hardware_concurrency());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "etude_stepped_streams: %s\n", e.what());
        return 1;
    }
    return 0;
}
