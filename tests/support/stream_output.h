// What the engine tests read out of a stream: all its audio, offline
// (read() until it ends) or pulled at the audio clock, and the marks it has
// reached so far.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace etude::test {

inline std::vector<float> read_all(engine::Stream& stream) {
    std::vector<float> out, block(1000);
    for (std::size_t n; (n = stream.read(block)) > 0;)
        out.insert(out.end(), block.begin(), block.begin() + static_cast<std::ptrdiff_t>(n));
    return out;
}

// A consumer at the audio clock: 256 samples every 256/rate s, until the
// stream has spoken everything (or a minute has passed).
inline std::vector<float> pull_at_audio_clock(engine::Stream& stream, double rate) {
    std::vector<float> got, block(256);
    auto next = std::chrono::steady_clock::now();
    const auto give_up = next + std::chrono::seconds(60);
    while ((stream.busy() || got.empty()) && std::chrono::steady_clock::now() < give_up) {
        const std::size_t n = stream.pull(block);
        got.insert(got.end(), block.begin(), block.begin() + static_cast<long>(n));
        next += std::chrono::microseconds(static_cast<long>(256 * 1e6 / rate));
        std::this_thread::sleep_until(next);
    }
    return got;
}

// A consumer as a server is (read_some(), which keeps the stream in the
// deadline order where read() steps it down), until the stream has spoken
// everything or five minutes have passed (a bound for a hang, not a timing
// check: lavapipe makes a test voice at about real time on loaded cores).
inline std::vector<float> read_some_to_the_end(engine::Stream& stream) {
    std::vector<float> got, block(1024);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    while (std::chrono::steady_clock::now() < give_up) {
        const std::size_t n = stream.read_some(block, 100);
        got.insert(got.end(), block.begin(), block.begin() + static_cast<long>(n));
        if (n == 0 && !stream.busy()) break;
    }
    return got;
}

inline std::vector<engine::SpeechMark> take_marks(engine::Stream& stream) {
    std::vector<engine::SpeechMark> out;
    for (engine::SpeechMark m; stream.next_mark(m);) out.push_back(m);
    return out;
}

}  // namespace etude::test
