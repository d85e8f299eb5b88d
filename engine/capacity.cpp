// Engine::measure_capacity(): how many real-time streams this machine holds
// with a voice, measured by speaking a typical reply on several streams at
// once and timing them all.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/error.h"
#include "gpu/cpu/cpu_worker_pool.h"

namespace etude::engine {
namespace {

// An assistant's typical reply (the one bench/many_clients.py sends).
constexpr const char* kReply =
    "The living room lights are off and the front door is locked. "
    "Tomorrow will be sunny with a light breeze.";

// Kept free: a stream's start (its first sentence's prior and the flow's
// look-ahead) costs more than its real-time share, and starts come in
// bursts. Measured with bench/many_clients.py (en_US-joe-medium, 2-vCPU
// EPYC, 26x real time): 20 admitted (a fifth free) let 2 of 96 listeners
// run dry at 32 clients; 15 (two fifths free) none.
constexpr double kHeadroom = 0.6;

// The most streams the measurement speaks at once: enough to fill a large
// machine's cores, few enough to take about a second there.
constexpr int kMostAtOnce = 32;

}  // namespace

std::size_t realtime_streams_at(double speed) {
    return static_cast<std::size_t>(std::max(1.0, std::floor(speed * kHeadroom)));
}

EngineCapacity Engine::measure_capacity(const StreamOptions& options, int at_once) {
    if (at_once < 0 || at_once > kMostAtOnce)
        throw Error("measure_capacity: at_once must be from 0 to " + std::to_string(kMostAtOnce) +
                    ", not " + std::to_string(at_once));
    // One stream per usable CPU by default: a single stream does not fill
    // many cores (on 16 cores one Piper stream ran 24.5x real time and
    // sixteen together 75x), while on two cores one or two streams measure
    // the same.
    const int n = at_once > 0 ? at_once : std::clamp(gpu::cpu::usable_cpus(), 2, kMostAtOnce);
    std::vector<std::unique_ptr<Stream>> streams;
    for (int i = 0; i < n; ++i) streams.push_back(create_stream(options));
    std::vector<std::size_t> samples(static_cast<std::size_t>(n), 0);
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
    const auto t0 = std::chrono::steady_clock::now();
    {
        std::vector<std::jthread> readers;
        for (int i = 0; i < n; ++i)
            readers.emplace_back([&, i] {
                const auto k = static_cast<std::size_t>(i);
                try {
                    streams[k]->push_text(kReply);
                    streams[k]->end_input();
                    std::vector<float> block(4096);
                    for (std::size_t got; (got = streams[k]->read(block)) > 0;) samples[k] += got;
                } catch (...) {
                    errors[k] = std::current_exception();
                }
            });
    }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    double audio = 0;
    for (std::size_t i = 0; i < samples.size(); ++i) {
        if (samples[i] == 0) throw Error("the voice made no audio for the capacity measurement");
        audio += static_cast<double>(samples[i]) / streams[i]->sample_rate();
    }
    EngineCapacity c;
    c.streams_measured = n;
    c.speed = audio / std::max(wall, 1e-6);
    c.streams = realtime_streams_at(c.speed);
    return c;
}

}  // namespace etude::engine
