// Stream::pull() follows the real-time rules: no allocation, free, lock,
// sleep or blocking call on the calling thread, through speech, underruns,
// cancel and silence.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/engine.h"
#include "support/emulation.h"
#include "support/realtime_guard.h"
#include "support/test_data.h"

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

// A stand-in audio callback: pulls 128 samples every 1.333 ms (twice real
// time at 48 kHz) on a thread marked real-time for the guard. Spin-waits
// between callbacks: a sleep there would itself be a violation.
class PacedConsumer {
  public:
    // `take_marks`: each callback also takes the marks reached and reads
    // the position (Stream::next_mark, Stream::position), as a JACK client
    // that follows SSML marks would.
    explicit PacedConsumer(Stream& stream, bool take_marks = false)
        : thread_([this, &stream, take_marks] {
              float block[128];
              auto next = std::chrono::steady_clock::now();
              RealtimeScope rt;
              while (!stop_.load(std::memory_order_relaxed)) {
                  if (std::chrono::steady_clock::now() < next) continue;
                  next += std::chrono::microseconds(1333);
                  pulled_.fetch_add(stream.pull(block), std::memory_order_relaxed);
                  calls_.fetch_add(1, std::memory_order_relaxed);
                  SpeechMark mark;
                  while (take_marks && stream.next_mark(mark))
                      marks_.fetch_add(1, std::memory_order_relaxed);
                  if (take_marks) position_.store(stream.position(), std::memory_order_relaxed);
              }
          }) {}
    std::uint64_t marks() const { return marks_.load(); }
    std::uint64_t position() const { return position_.load(); }
    ~PacedConsumer() { stop(); }
    std::uint64_t pulled() const { return pulled_.load(); }
    std::uint64_t calls() const { return calls_.load(); }
    void wait_pulled(std::uint64_t n) const {
        while (pulled() < n) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Waits until the stream has nothing left, then for 50 more (silent) pulls.
    void drain(const Stream& stream) const {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (stream.busy() && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const auto c = calls();
        while (calls() < c + 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    void stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }

  private:
    std::atomic<std::uint64_t> pulled_{0}, calls_{0}, marks_{0}, position_{0};
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

void expect_no_violations() {
    const auto v = etude::test::realtime_violations();
    EXPECT_EQ(v.total(), 0u) << "first violation: " << v.first << " (allocations " << v.allocations
                             << ", frees " << v.frees << ", locks " << v.locks << ", blocking "
                             << v.blocking_calls << ")";
}

TEST(RealtimePull, pull_never_allocates_locks_or_blocks) {
    ETUDE_SKIP_WHEN_EMULATED("the consumer pulls at the pace of a real-time audio callback");
    Engine engine;
    StreamOptions o;
    o.sample_rate = 48000;  // exercise the resampling producer too
    auto stream = engine.create_stream(o);
    stream->push_text(
        "Real time rules apply here. Nothing may allocate in the callback. "
        "The third sentence will be cancelled part way through, and more.");
    stream->end_input();
    etude::test::reset_realtime_violations();

    PacedConsumer consumer(*stream);
    // Cancel part way, then push more text, then let it finish.
    consumer.wait_pulled(48000 * 3);
    stream->cancel();
    stream->push_text("After the cancel we speak again.");
    stream->end_input();
    consumer.drain(*stream);  // and some silent pulls after the end
    consumer.stop();

    expect_no_violations();
    EXPECT_GT(consumer.pulled(), 48000u * 3);
    EXPECT_GT(consumer.calls(), 1000u);
    EXPECT_FALSE(stream->busy());
}

// The same rules when the callback also follows SSML marks, through a cancel.
TEST(RealtimePull, taking_marks_never_allocates_locks_or_blocks) {
    ETUDE_SKIP_WHEN_EMULATED("the consumer pulls at the pace of a real-time audio callback");
    Engine engine;
    StreamOptions o;
    o.sample_rate = 48000;
    auto stream = engine.create_stream(o);
    stream->push_ssml(
        "<speak>First part.<mark name=\"a\"/> Second part.<break time=\"100ms\"/>"
        "<mark name=\"b\"/>Third part, cut by a cancel.<mark name=\"c\"/></speak>");
    stream->end_input();
    etude::test::reset_realtime_violations();

    PacedConsumer consumer(*stream, true);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (consumer.marks() < 2 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_GE(consumer.marks(), 2u) << "the first two marks never came";
    stream->cancel();
    stream->push_ssml("<speak>Again.<mark name=\"d\"/></speak>");
    stream->end_input();
    consumer.drain(*stream);
    consumer.stop();

    expect_no_violations();
    EXPECT_GE(consumer.marks(), 3u);
    EXPECT_GT(consumer.position(), 48000u);
}

// The same rules for a mel stream: the neural vocoder, its chunk scheduler
// and the phase-reconstruction shadow all run on the producer thread; the
// consumer only copies from the ring, through speech, cancel and silence.
TEST(RealtimePull, mel_stream_pull_never_allocates_locks_or_blocks) {
    ETUDE_SKIP_WHEN_EMULATED("the consumer pulls at the pace of a real-time audio callback");
    Engine engine;
    StreamOptions o;
    o.voice = MelVoiceOptions{.model = etude::test::test_data_dir() + "/neural/hifigan_v1.lef"};
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

    PacedConsumer consumer(*stream);
    consumer.wait_pulled(48000);
    stream->cancel();
    push_utterance(10);
    consumer.drain(*stream);
    consumer.stop();

    expect_no_violations();
    EXPECT_GT(consumer.pulled(), 48000u);
    EXPECT_FALSE(stream->busy());
    const auto s = stream->stats();
    EXPECT_EQ(s.cancels, 1u);
    EXPECT_GT(s.mel_chunks_cpu + s.mel_chunks_phase, 0u);
}
