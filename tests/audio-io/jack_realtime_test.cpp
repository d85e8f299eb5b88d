// JACK's process thread, running our callback through speech, cancel and
// silence, makes no allocation, lock, sleep or blocking call.
#include <gtest/gtest.h>

#include <cstdlib>

#include "audio-io/jack_output.h"
#include "support/emulation.h"
#include "support/jack_harness.h"
#include "support/realtime_guard.h"

using namespace etude;

TEST(JackRealtime, marking_a_foreign_thread_catches_its_allocations) {
    // The check below marks JACK's thread, which the test does not own; prove
    // that marking by thread id works at all.
    std::atomic<bool> marked{false}, done{false};
    test::reset_realtime_violations();
    std::thread t([&] {
        while (!marked) std::this_thread::yield();
        static void* volatile sink;  // volatile: the pair cannot be optimised away
        sink = std::malloc(64);
        std::free(sink);
        done = true;
    });
    test::mark_thread(t.native_handle());
    marked = true;
    while (!done) std::this_thread::yield();
    test::unmark_thread();
    t.join();
    const auto v = test::realtime_violations();
    EXPECT_GE(v.allocations, 1u);
    EXPECT_GE(v.frees, 1u);
    test::reset_realtime_violations();
}

TEST(JackRealtime, process_callback_never_allocates_locks_or_blocks) {
    ETUDE_SKIP_WHEN_EMULATED("JACK's process thread runs against jackd's clock");
    test::JackServer server(48000, 128, "rt");
    ASSERT_TRUE(server.ready()) << server.log();
    engine::Engine engine;
    audio_io::JackOptions opts;
    opts.client_name = "etude-rt";
    opts.server_name = server.name();
    audio_io::JackOutput jack(engine, opts);
    jack.activate();
    // Let the process thread settle (first cycles set up thread state), then watch it.
    while (jack.callbacks() < 20) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    test::reset_realtime_violations();
    test::mark_thread(jack.process_thread());

    jack.stream().push_text(
        "The process callback is watched. It may only copy samples. This one is cut.");
    jack.stream().end_input();
    while (jack.stream().stats().samples_delivered < 48000 * 3)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    jack.stream().cancel();
    jack.stream().push_text("And speech resumes after the cancel.");
    jack.stream().end_input();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (jack.stream().busy() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto calls = jack.callbacks();
    while (jack.callbacks() < calls + 50) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    test::unmark_thread();

    const auto v = test::realtime_violations();
    EXPECT_EQ(v.total(), 0u) << "first violation: " << v.first << " (allocations " << v.allocations
                             << ", frees " << v.frees << ", locks " << v.locks << ", blocking "
                             << v.blocking_calls << ")";
    EXPECT_FALSE(jack.stream().busy());
    EXPECT_EQ(jack.stream().stats().underruns, 0u);
    EXPECT_GT(jack.callbacks(), 1000u);
}
