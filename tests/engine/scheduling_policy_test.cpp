// The scheduling policy shared by text and mel streams, on its own with a
// fake clock (times are plain numbers): the deadline (deadline.h) and the
// order across streams it gives sentences, the chooser
// (processor_chooser.h) and the device-health breaker (device_health.h).
#include <gtest/gtest.h>

#include <cstdint>

#include "engine/scheduling/deadline.h"
#include "engine/scheduling/device_health.h"
#include "engine/scheduling/processor_chooser.h"

using namespace etude::engine;

namespace {

constexpr std::int64_t kMs = 1'000'000;

// 1 kHz: one sample is one millisecond, so deadlines read in samples.
PlaybackState state(std::size_t buffered, bool playing, std::size_t pull_period = 0) {
    return {.rate = 1000.0,
            .buffered = buffered,
            .prebuffer = 100,
            .pull_period = pull_period,
            .playing = playing,
            .live_consumer = true};
}

}  // namespace

// ---- deadline ---------------------------------------------------------------

TEST(Deadline, before_playback_the_latency_budget_is_the_least_time_there_is) {
    const std::int64_t now = 5'000 * kMs;
    EXPECT_EQ(deadline_ns(now, state(0, false)), now + 100 * kMs);
    EXPECT_EQ(deadline_ns(now, state(30, false)), now + 100 * kMs);
    EXPECT_EQ(deadline_ns(now, state(250, false)), now + 250 * kMs);  // more buffered: more time
}

TEST(Deadline, once_playing_it_counts_only_what_the_ring_holds) {
    const std::int64_t now = 7 * kMs;
    // One block buffered right after a late fallback: 10 ms, not the 100 ms budget.
    EXPECT_EQ(deadline_ns(now, state(10, true)), now + 10 * kMs);
    EXPECT_EQ(deadline_ns(now, state(0, true)), now);
}

TEST(Deadline, leaves_the_consumers_period_out) {
    EXPECT_EQ(deadline_ns(0, state(40, true, 16)), 24 * kMs);
    EXPECT_EQ(deadline_ns(0, state(10, true, 16)), 0);  // less than a period: due now
    EXPECT_EQ(deadline_ns(0, state(0, false, 16)), 84 * kMs);
}

TEST(Deadline, an_offline_reader_has_the_budget_but_never_reduced_quality) {
    PlaybackState offline = state(0, false);
    offline.live_consumer = false;
    // A late device is still covered by the CPU for read() ...
    EXPECT_EQ(deadline_ns(0, offline), 100 * kMs);
    // ... but no block is made worse for a reader who hears nothing late.
    EXPECT_FALSE(may_reduce_quality(offline));
    EXPECT_TRUE(may_reduce_quality(state(0, false)));
}

// An offline reader's chunk goes to a GPU whatever the deadline would price
// quicker; a live stream's is priced, and so is any chunk on a device that
// shares the host's cores (lavapipe, PoCL) or on a GPU slower than the CPU
// for a chunk alone.
TEST(Deadline, an_offline_reader_on_a_gpu_gives_the_device_every_chunk_it_may_take) {
    EXPECT_TRUE(device_first(/*read_offline=*/true, /*device_is_gpu=*/true,
                             /*device_was_quicker=*/true));
    EXPECT_FALSE(device_first(false, true, true));
    EXPECT_FALSE(device_first(true, false, true));
    EXPECT_FALSE(device_first(true, true, false));
    EXPECT_FALSE(device_first(false, false, false));
}

// ---- the order across streams ----------------------------------------------

namespace {

StreamHorizon waiting(std::int64_t pushed_ns, double queued_s = 0.0) {
    return {.started = false, .pushed_ns = pushed_ns, .audio_s = queued_s};
}
StreamHorizon playing(std::int64_t start_ns, double audio_s) {
    return {.started = true, .listener_start_ns = start_ns, .audio_s = audio_s};
}

}  // namespace

TEST(StreamOrder, new_streams_go_in_the_order_they_came) {
    EXPECT_LT(sentence_deadline_ns(waiting(100 * kMs)), sentence_deadline_ns(waiting(101 * kMs)));
    // Audio queued before a sentence gives it that much longer.
    EXPECT_EQ(sentence_deadline_ns(waiting(100 * kMs, 2.0)),
              sentence_deadline_ns(waiting(100 * kMs)) + 2'000 * kMs);
}

TEST(StreamOrder, a_new_stream_goes_before_a_started_one_with_seconds_left_to_play) {
    const std::int64_t now = 10'000 * kMs;
    // Started 2 s ago with 5 s of audio made and queued: 3 s left.
    const auto started = sentence_deadline_ns(playing(now - 2'000 * kMs, 5.0));
    EXPECT_LT(sentence_deadline_ns(waiting(now)), started);
}

TEST(StreamOrder, a_started_stream_about_to_run_dry_goes_before_a_new_one) {
    const std::int64_t now = 10'000 * kMs;
    // 0.3 s left to play: less than the lead a sentence needs.
    const auto started = sentence_deadline_ns(playing(now - 2'000 * kMs, 2.3));
    EXPECT_LT(started, sentence_deadline_ns(waiting(now)));
    EXPECT_LT(started, now);  // already due
}

TEST(StreamOrder, an_offline_reader_far_ahead_waits_for_a_stream_someone_hears) {
    const std::int64_t now = 10'000 * kMs;
    // Read for 1 s at 20x real time: 20 s of audio on a listener clock 1 s old.
    const auto reader = sentence_deadline_ns(playing(now - 1'000 * kMs, 20.0));
    const auto live = sentence_deadline_ns(playing(now - 1'000 * kMs, 1.8));
    EXPECT_LT(live, reader);
    EXPECT_LT(sentence_deadline_ns(waiting(now + 5'000 * kMs)), reader);
}

// ---- the order of the work that makes audio (two classes) ------------------

TEST(WorkOrder, a_new_streams_first_chunk_goes_before_a_started_streams_chunk_not_yet_due) {
    const std::int64_t now = 10'000 * kMs;
    // Started 1 s ago, 1.5 s written: 0.5 s before its listener needs more.
    const WorkDue running = chunk_due(playing(now - 1'000 * kMs, 1.5));
    const WorkDue fresh = chunk_due(waiting(now));
    EXPECT_TRUE(fresh.before(running, now));
    EXPECT_FALSE(running.before(fresh, now));
    // A new stream's work never becomes urgent: its target is a goal.
    EXPECT_EQ(fresh.order_class(now + 10'000 * kMs), 1);
}

TEST(WorkOrder, a_started_stream_close_to_running_dry_goes_before_new_streams_past_their_target) {
    const std::int64_t now = 10'000 * kMs;
    // 0.1 s left to play: less than kChunkUrgentNs.
    const WorkDue running = chunk_due(playing(now - 1'000 * kMs, 1.1));
    EXPECT_EQ(running.order_class(now), 0);
    // A new stream pushed 2 s ago is long past its target, an earlier deadline.
    const WorkDue late = chunk_due(waiting(now - 2'000 * kMs));
    EXPECT_LT(late.deadline_ns, running.deadline_ns);
    EXPECT_TRUE(running.before(late, now));
    // 0.3 s before, it was not yet urgent, and the late stream went first.
    EXPECT_TRUE(late.before(running, now - 300 * kMs));
}

TEST(WorkOrder, a_started_streams_sentence_is_urgent_from_its_deadline) {
    const std::int64_t now = 10'000 * kMs;
    const WorkDue due = sentence_due(playing(now - 2'000 * kMs, 2.3));
    EXPECT_EQ(due.deadline_ns, sentence_deadline_ns(playing(now - 2'000 * kMs, 2.3)));
    EXPECT_EQ(due.order_class(due.deadline_ns - 1), 1);
    EXPECT_EQ(due.order_class(due.deadline_ns), 0);
    EXPECT_EQ(sentence_due(waiting(now)).urgent_ns, WorkDue::kNever);
}

// ---- chooser ----------------------------------------------------------------

TEST(Chooser, picks_the_first_available_candidate_that_meets_the_deadline) {
    const Candidate c[] = {{Processor::CpuPrimary, Quality::Full, 5 * kMs, true},
                           {Processor::CpuFallback, Quality::Full, 1 * kMs, true},
                           {Processor::CpuPrimary, Quality::Reduced, kMs / 2, true}};
    EXPECT_EQ(choose_candidate(c, 0, 10 * kMs), 0);  // the preferred one fits
    EXPECT_EQ(choose_candidate(c, 0, 2 * kMs), 1);   // the primary is too slow
    EXPECT_EQ(choose_candidate(c, 0, kMs * 7 / 10), 2);
    EXPECT_EQ(choose_candidate(c, 8 * kMs, 10 * kMs), 1);  // `now` counts
}

TEST(Chooser, takes_the_quickest_when_none_meets_the_deadline) {
    const Candidate c[] = {{Processor::Gpu, Quality::Full, 3 * kMs, true},
                           {Processor::CpuPrimary, Quality::Full, 9 * kMs, true},
                           {Processor::CpuPrimary, Quality::PhaseReconstruction, 2 * kMs, true}};
    EXPECT_EQ(choose_candidate(c, 0, kMs), 2);
    EXPECT_EQ(choose_candidate(c, 0, 4 * kMs), 0);  // the GPU model fits: no phase
}

TEST(Chooser, skips_unavailable_candidates_and_the_excluded_processor) {
    const Candidate c[] = {{Processor::Gpu, Quality::Full, 1 * kMs, false},
                           {Processor::CpuPrimary, Quality::Full, 2 * kMs, true},
                           {Processor::CpuFallback, Quality::Full, 2 * kMs, true}};
    EXPECT_EQ(choose_candidate(c, 0, 10 * kMs), 1);
    EXPECT_EQ(choose_candidate(c, 0, 10 * kMs, Processor::CpuPrimary), 2);
    const Candidate none[] = {{Processor::CpuPrimary, Quality::Full, 1, false},
                              {Processor::CpuFallback, Quality::Full, 1, true}};
    EXPECT_EQ(choose_candidate(none, 0, 10, Processor::CpuFallback), -1);
}

// ---- device-health breaker ----------------------------------------------------

TEST(DeviceHealthBreaker, turns_the_device_off_after_three_failures_in_a_row) {
    DeviceHealthBreaker b;
    std::int64_t t = 0;
    for (int i = 0; i < DeviceHealthBreaker::kMaxConsecutiveFailures; ++i) {
        EXPECT_FALSE(b.disabled()) << i;
        b.record_failure(t, "kernel failed");
        t += 10'000 * kMs;  // far past any backoff
    }
    EXPECT_TRUE(b.disabled());
    EXPECT_FALSE(b.may_try(t));
    b.record_success();  // a late success does not bring it back
    EXPECT_TRUE(b.disabled());
    EXPECT_EQ(b.failures(), 3u);
    EXPECT_EQ(b.last_error(), "kernel failed");
}

TEST(DeviceHealthBreaker, a_success_ends_the_run_of_failures) {
    DeviceHealthBreaker b;
    std::int64_t t = 0;
    for (int round = 0; round < 5; ++round) {
        b.record_failure(t, "oom");
        b.record_failure(t + 100 * kMs, "oom");
        t += 10'000 * kMs;
        ASSERT_TRUE(b.may_try(t)) << round;
        b.record_success();
    }
    EXPECT_FALSE(b.disabled());
    EXPECT_EQ(b.failures(), 10u);  // all of them counted for the statistics
}

TEST(DeviceHealthBreaker, retries_at_once_after_one_error_then_backs_off_in_a_run) {
    DeviceHealthBreaker b;
    const std::int64_t t0 = 1'000 * kMs;
    EXPECT_TRUE(b.may_try(t0));
    b.record_failure(t0, "x");
    EXPECT_TRUE(b.may_try(t0));  // one error: rebuilt and retried at once
    const std::int64_t t1 = t0 + 50 * kMs;
    b.record_failure(t1, "x");  // a second in a row: out for the first backoff
    EXPECT_FALSE(b.may_try(t1 + DeviceHealthBreaker::kFirstBackoffNs - 1));
    EXPECT_TRUE(b.may_try(t1 + DeviceHealthBreaker::kFirstBackoffNs));
    b.record_success();
    b.record_failure(t1 + kMs, "x");  // a new run: at once again
    EXPECT_TRUE(b.may_try(t1 + kMs));
    b.record_failure(t1 + 2 * kMs, "x");
    EXPECT_EQ(b.retry_at_ns(), t1 + 2 * kMs + DeviceHealthBreaker::kFirstBackoffNs);
}
