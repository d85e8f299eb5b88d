// Stream::pull() follows the real-time rules: no allocation, free, lock,
// sleep or blocking call on the calling thread, through speech, underruns,
// cancel and silence.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/engine.h"
#include "support/realtime_guard.h"

using namespace etude::engine;
using etude::test::RealtimeScope;

TEST(RealtimeGuard, detects_allocation_and_locking_on_a_marked_thread) {
    // The guard itself must be able to fail, or the test below proves nothing.
    etude::test::reset_realtime_violations();
    std::thread([] {
        RealtimeScope rt;
        std::vector<int> v(100);  // allocates
        std::mutex m;
        std::lock_guard lock(m);  // locks
        std::this_thread::sleep_for(std::chrono::microseconds(10));
    }).join();
    const auto v = etude::test::realtime_violations();
    EXPECT_GE(v.allocations, 1u);
    EXPECT_GE(v.frees, 1u);
    EXPECT_GE(v.locks, 1u);
    EXPECT_GE(v.blocking_calls, 1u);
    etude::test::reset_realtime_violations();
}

TEST(RealtimePull, pull_never_allocates_locks_or_blocks) {
    Engine engine;
    StreamOptions o;
    o.sample_rate = 48000;  // exercise the resampling producer too
    auto stream = engine.create_stream(o);
    stream->push_text(
        "Real time rules apply here. Nothing may allocate in the callback. "
        "The third sentence will be cancelled part way through, and more.");
    etude::test::reset_realtime_violations();

    std::atomic<std::uint64_t> pulled{0}, calls{0};
    std::atomic<bool> stop{false};
    std::thread audio([&] {
        float block[128];
        // Spin-wait between callbacks: a sleep here would itself be a violation.
        auto next = std::chrono::steady_clock::now();
        RealtimeScope rt;
        while (!stop.load(std::memory_order_relaxed)) {
            if (std::chrono::steady_clock::now() < next) continue;
            next += std::chrono::microseconds(1333);  // 64 frames at 48 kHz, pulled at 2x speed
            pulled.fetch_add(stream->pull(block), std::memory_order_relaxed);
            calls.fetch_add(1, std::memory_order_relaxed);
        }
    });
    // Cancel part way, then push more text, then let it finish.
    while (pulled.load() < 48000 * 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stream->cancel();
    stream->push_text("After the cancel we speak again.");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (stream->busy() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // Some silent pulls after the end, too.
    const auto c = calls.load();
    while (calls.load() < c + 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop = true;
    audio.join();

    const auto v = etude::test::realtime_violations();
    EXPECT_EQ(v.total(), 0u) << "first violation: " << v.first << " (allocations " << v.allocations
                             << ", frees " << v.frees << ", locks " << v.locks << ", blocking "
                             << v.blocking_calls << ")";
    EXPECT_GT(pulled.load(), 48000u * 3);
    EXPECT_GT(calls.load(), 1000u);
    EXPECT_FALSE(stream->busy());
}

// The same rules for a mel stream: the neural vocoder, its chunk scheduler
// and the phase-reconstruction shadow all run on the producer thread; the
// consumer only copies from the ring, through speech, cancel and silence.
TEST(RealtimePull, mel_stream_pull_never_allocates_locks_or_blocks) {
    Engine engine;
    StreamOptions o;
    o.model = ETUDE_TEST_DATA "/neural/hifigan_v1.lef";
    o.backend = "cpu";
    o.sample_rate = 48000;  // resampled from the model's 22050 Hz
    auto stream = engine.create_stream(o);
    const std::size_t n_mels = stream->mel_bands();
    ASSERT_EQ(n_mels, 80u);
    // A steady voiced-like log-mel: 200 frames (2.3 s) in chunks of 10.
    std::vector<float> chunk(n_mels * 10);
    for (std::size_t m = 0; m < n_mels; ++m)
        for (std::size_t f = 0; f < 10; ++f)
            chunk[m * 10 + f] =
                -2.0f - 0.05f * static_cast<float>(m) + 0.1f * static_cast<float>(f % 3);
    auto push_utterance = [&](int chunks) {
        for (int i = 0; i < chunks; ++i) stream->push_mel(chunk, 10, i + 1 == chunks);
    };
    push_utterance(20);
    etude::test::reset_realtime_violations();

    std::atomic<std::uint64_t> pulled{0}, calls{0};
    std::atomic<bool> stop{false};
    std::thread audio([&] {
        float block[128];
        auto next = std::chrono::steady_clock::now();
        RealtimeScope rt;
        while (!stop.load(std::memory_order_relaxed)) {
            if (std::chrono::steady_clock::now() < next) continue;
            next += std::chrono::microseconds(1333);
            pulled.fetch_add(stream->pull(block), std::memory_order_relaxed);
            calls.fetch_add(1, std::memory_order_relaxed);
        }
    });
    while (pulled.load() < 48000) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stream->cancel();
    push_utterance(10);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (stream->busy() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const auto c = calls.load();
    while (calls.load() < c + 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop = true;
    audio.join();

    const auto v = etude::test::realtime_violations();
    EXPECT_EQ(v.total(), 0u) << "first violation: " << v.first << " (allocations " << v.allocations
                             << ", frees " << v.frees << ", locks " << v.locks << ", blocking "
                             << v.blocking_calls << ")";
    EXPECT_GT(pulled.load(), 48000u);
    EXPECT_FALSE(stream->busy());
    const auto s = stream->stats();
    EXPECT_EQ(s.cancels, 1u);
    EXPECT_GT(s.mel_chunks_cpu + s.mel_chunks_phase, 0u);
}
