#include "server/capacity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "engine/error.h"

namespace etude::server {
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

}  // namespace

Capacity measure_capacity(engine::Engine& engine, const engine::StreamOptions& options) {
    auto stream = engine.create_stream(options);
    std::vector<float> block(4096);
    std::size_t samples = 0;
    const auto t0 = std::chrono::steady_clock::now();
    stream->push_text(kReply);
    stream->end_input();
    for (std::size_t n; (n = stream->read(block)) > 0;) samples += n;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (samples == 0) throw Error("the voice made no audio for the capacity measurement");
    Capacity c;
    c.speed = static_cast<double>(samples) / stream->sample_rate() / std::max(wall, 1e-6);
    c.streams = streams_at_speed(c.speed);
    return c;
}

std::size_t streams_at_speed(double speed) {
    return static_cast<std::size_t>(std::max(1.0, std::floor(speed * kHeadroom)));
}

}  // namespace etude::server
