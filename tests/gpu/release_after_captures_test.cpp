// ReleaseAfterCaptures (gpu/release_after_captures.h), the rule the CUDA
// module keeps so that no thread's cudaFree spoils another's stream capture:
// on the host, with releases that only note that they ran. The CUDA side
// (every free and capture through it) runs only on a GPU machine.
#include "gpu/release_after_captures.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using etude::gpu::ReleaseAfterCaptures;

TEST(ReleaseAfterCaptures, with_no_capture_in_progress_a_release_runs_at_once) {
    ReleaseAfterCaptures gate;
    int ran = 0;
    gate.release([&] { ++ran; });
    EXPECT_EQ(ran, 1);
    EXPECT_EQ(gate.waiting(), 0u);
}

TEST(ReleaseAfterCaptures, releases_wait_for_the_last_capture_and_run_in_order) {
    ReleaseAfterCaptures gate;
    std::vector<int> ran;
    gate.begin_capture();
    gate.begin_capture();  // a second thread's, overlapping
    gate.release([&] { ran.push_back(1); });
    gate.release([&] { ran.push_back(2); });
    EXPECT_TRUE(ran.empty());
    EXPECT_EQ(gate.waiting(), 2u);
    gate.end_capture();
    EXPECT_TRUE(ran.empty()) << "one capture is still in progress";
    gate.end_capture();
    EXPECT_EQ(ran, (std::vector<int>{1, 2}));
    EXPECT_EQ(gate.waiting(), 0u);
    EXPECT_EQ(gate.captures_in_progress(), 0u);
    gate.release([&] { ran.push_back(3); });
    EXPECT_EQ(ran.size(), 3u) << "after the captures, at once again";
}

// A capture that failed to begin is ended by its caller too: an end with
// none in progress runs what waits and never goes below zero.
TEST(ReleaseAfterCaptures, an_extra_end_neither_underflows_nor_loses_a_release) {
    ReleaseAfterCaptures gate;
    gate.end_capture();
    EXPECT_EQ(gate.captures_in_progress(), 0u);
    gate.begin_capture();
    int ran = 0;
    gate.release([&] { ++ran; });
    gate.end_capture();
    EXPECT_EQ(ran, 1);
}

// A release that throws is a free that failed: the others still run.
TEST(ReleaseAfterCaptures, a_release_that_throws_does_not_stop_the_others) {
    ReleaseAfterCaptures gate;
    gate.begin_capture();
    int ran = 0;
    gate.release([] { throw 1; });
    gate.release([&] { ++ran; });
    EXPECT_NO_THROW(gate.end_capture());
    EXPECT_EQ(ran, 1);
}

// The recording thread frees inside its own capture (a buffer grown by the
// recorded body), and other threads free while it records: nobody blocks,
// and nothing is released until the capture ends.
TEST(ReleaseAfterCaptures, threads_releasing_during_a_capture_never_block_on_it) {
    ReleaseAfterCaptures gate;
    std::atomic<int> ran{0};
    gate.begin_capture();
    gate.release([&] { ran.fetch_add(1); });  // the recording thread's own
    std::vector<std::thread> others;
    for (int t = 0; t < 4; ++t)
        others.emplace_back([&] {
            for (int i = 0; i < 100; ++i) gate.release([&] { ran.fetch_add(1); });
        });
    for (auto& t : others) t.join();  // returned while the capture is in progress
    EXPECT_EQ(ran.load(), 0);
    EXPECT_EQ(gate.waiting(), 401u);
    gate.end_capture();
    EXPECT_EQ(ran.load(), 401);
}
