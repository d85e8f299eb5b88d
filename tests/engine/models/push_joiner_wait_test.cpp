// Batches formed on purpose (models/stream_joiner.h): while members of a
// lane have not pushed, its thread holds a batch back for them within the
// slack of the pushes waiting, and no longer; a batch takes the most urgent
// pushes first and runs on the lane's own thread. The pushes are plain
// numbers and the batches are recorded, so these tests check the joiner's
// rule alone; the waits end on the condition they wait for (every member
// in, a member gone), not on a clock, except where the clock is the point,
// and there only what ran is checked, never how long it took.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/models/stream_joiner.h"
#include "rt/monotonic_clock.h"
#include "support/batch_recorder.h"
#include "support/wait_until.h"

namespace etude::engine {
namespace {

using test::BatchRecorder;
using test::kFarNs;

// One batch of one out of device memory: the batches after it take one.
void bound_batches_to_one(PushJoiner<int>& joiner) {
    EXPECT_THROW(joiner.push(0, [](std::span<const int>) { throw gpu::OutOfMemory("full"); }),
                 gpu::OutOfMemory);
    ASSERT_EQ(joiner.stats().cap, 1u);
}

// A lane with `n` members, none of them pushing yet, and the batches it
// runs.
struct Lane {
    explicit Lane(std::size_t n) : members(n) {
        for (auto& m : members) m.enter(joiner);
    }
    PushJoiner<int> joiner;  // (declared first: the members leave it)
    std::deque<JoinMembership<int>> members;
    BatchRecorder rec;
};

// Three members push one after another, each with time to spare: the first
// waits for the other two, and all three run as one batch.
TEST(PushJoinerWait, a_push_waits_for_its_lanes_members_and_they_run_as_one_batch) {
    Lane lane(3);
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
        // One at a time: each pushes once the one before it is waiting.
        test::wait_until([&] { return lane.joiner.waiting() == static_cast<std::size_t>(i); });
        threads.emplace_back(
            [&, i] { lane.joiner.push(i, lane.rec.run(), rt::now_ns() + kFarNs); });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(lane.rec.batches.size(), 1u);
    EXPECT_EQ(lane.rec.batches[0], (std::vector<int>{0, 1, 2}));
    const JoinStats s = lane.joiner.stats();
    EXPECT_EQ(s.waited, 1u);
    EXPECT_EQ(s.all_members, 1u);
}

// A push with no time to spare (0), or whose lane has no other member,
// runs at once.
TEST(PushJoinerWait, a_push_with_no_slack_or_no_one_to_wait_for_runs_at_once) {
    PushJoiner<int> joiner;
    BatchRecorder rec;
    JoinMembership<int> a, b;
    a.enter(joiner);
    joiner.push(1, rec.run(), rt::now_ns() + kFarNs);  // the only member
    b.enter(joiner);
    joiner.push(2, rec.run(), 0);                 // b has not pushed, but there is no slack
    joiner.push(3, rec.run(), rt::now_ns() - 1);  // its time has passed
    ASSERT_EQ(rec.batches.size(), 3u);
    EXPECT_EQ(joiner.stats().waited, 0u);
}

// A member that leaves (its utterance ended or was cut short) ends a wait
// that was for it alone.
TEST(PushJoinerWait, a_member_leaving_ends_the_wait_for_it) {
    Lane lane(2);
    std::thread t([&] { lane.joiner.push(7, lane.rec.run(), rt::now_ns() + kFarNs); });
    test::wait_until([&] { return lane.joiner.waiting() == 1; });
    lane.members[1].leave();
    t.join();
    ASSERT_EQ(lane.rec.batches.size(), 1u);
    EXPECT_EQ(lane.rec.batches[0], std::vector<int>{7});
    EXPECT_EQ(lane.joiner.members(), 1u);
}

// The wait ends at the earliest time the pushes waiting allow, with the
// members that did not come left out.
TEST(PushJoinerWait, a_push_waits_no_longer_than_its_slack) {
    Lane lane(2);  // the last never pushes
    const std::int64_t until = rt::now_ns() + 20'000'000;
    const std::int64_t gathered = join_gather_wait_ns_on_this_thread();
    lane.joiner.push(1, lane.rec.run(), until);
    EXPECT_GE(rt::now_ns(), until);
    // The wait is this thread's to subtract from the device's timing.
    EXPECT_GT(join_gather_wait_ns_on_this_thread(), gathered);
    ASSERT_EQ(lane.rec.batches.size(), 1u);
    EXPECT_EQ(lane.joiner.stats().waited, 1u);
    EXPECT_EQ(lane.joiner.stats().all_members, 0u);
}

// A push with no time to spare that comes while a batch waits for members
// (a stream's first audio, say) ends the wait: the batch runs at once with
// the pushes it has, the one with no time to spare first.
TEST(PushJoinerWait, a_push_with_no_slack_ends_the_wait_of_the_batch_it_joins) {
    Lane lane(3);  // the last never pushes
    std::thread t([&] { lane.joiner.push(1, lane.rec.run(), rt::now_ns() + kFarNs); });
    test::wait_until([&] { return lane.joiner.waiting() == 1; });
    lane.joiner.push(2, lane.rec.run(), 0);
    t.join();
    ASSERT_EQ(lane.rec.batches.size(), 1u);
    EXPECT_EQ(lane.rec.batches[0], (std::vector<int>{2, 1}));
}

// A batch runs on the lane's thread, not on the thread of any push in it:
// the device's work has a thread of its own, whatever the producers' are.
TEST(PushJoinerWait, a_batch_runs_on_the_lanes_own_thread) {
    PushJoiner<int> joiner;
    std::thread::id ran_on;
    joiner.push(1, [&](std::span<const int>) { ran_on = std::this_thread::get_id(); });
    EXPECT_NE(ran_on, std::thread::id());
    EXPECT_NE(ran_on, std::this_thread::get_id());
    std::thread::id again;
    joiner.push(2, [&](std::span<const int>) { again = std::this_thread::get_id(); });
    EXPECT_EQ(again, ran_on) << "one thread for the lane";
}

// Once out of memory bounds the batches, a batch takes the most urgent of
// the pushes waiting: those with no time to spare, then the earliest due
// (the earliest time each may wait until), not the first to come.
TEST(PushJoinerWait, a_bounded_batch_takes_the_most_urgent_pushes_first) {
    PushJoiner<int> joiner;
    BatchRecorder rec;
    ASSERT_NO_FATAL_FAILURE(bound_batches_to_one(joiner));
    std::vector<std::thread> threads;
    // Three pushes come while paused, the latest due first; the one with no
    // slack comes last. They run one a batch, most urgent first.
    joiner.pause();
    const std::int64_t now = rt::now_ns();
    const std::int64_t until[] = {now + 3 * kFarNs, now + 2 * kFarNs, 0};
    for (int i = 0; i < 3; ++i) {
        test::wait_until([&] { return joiner.waiting() == static_cast<std::size_t>(i); });
        threads.emplace_back([&, i] { joiner.push(10 + i, rec.run(), until[i]); });
    }
    test::wait_until([&] { return joiner.waiting() == 3; });
    joiner.resume();
    for (auto& t : threads) t.join();
    ASSERT_EQ(rec.batches.size(), 3u);
    EXPECT_EQ(rec.batches[0], std::vector<int>{12});
    EXPECT_EQ(rec.batches[1], std::vector<int>{11});
    EXPECT_EQ(rec.batches[2], std::vector<int>{10});
}

// Pushes that waited behind a batch (here: while the joiner was paused)
// meet the next batch and do not wait again for a member that is away.
TEST(PushJoinerWait, pushes_that_waited_behind_a_batch_do_not_wait_again) {
    Lane lane(3);  // the last never pushes
    lane.joiner.pause();
    std::thread ta([&] { lane.joiner.push(1, lane.rec.run(), rt::now_ns() + kFarNs); });
    std::thread tb([&] { lane.joiner.push(2, lane.rec.run(), rt::now_ns() + kFarNs); });
    test::wait_until([&] { return lane.joiner.waiting() == 2; });
    lane.joiner.resume();
    ta.join();
    tb.join();
    ASSERT_EQ(lane.rec.batches.size(), 1u);
    EXPECT_EQ(lane.rec.batches[0].size(), 2u);
    EXPECT_EQ(lane.joiner.stats().waited, 0u);
}

// A membership counts once however often its stream enters the same lane,
// moves with it to another lane, and leaves with the stream.
TEST(PushJoinerWait, membership_counts_each_stream_once_and_follows_its_lane) {
    PushJoiner<int> live, offline;
    JoinMembership<int> a;
    a.enter(live);
    a.enter(live);
    EXPECT_EQ(live.members(), 1u);
    a.enter(offline);
    EXPECT_EQ(live.members(), 0u);
    EXPECT_EQ(offline.members(), 1u);
    {
        JoinMembership<int> gone;
        gone.enter(offline);
        EXPECT_EQ(offline.members(), 2u);
    }
    EXPECT_EQ(offline.members(), 1u);
    a.leave();
    EXPECT_EQ(offline.members(), 0u);
}

// A push whose time to wait has passed ranks with the pushes that have
// none, in the order they came: pushes with no slack that keep coming do
// not pass it over for good once out of memory bounds the batches.
TEST(PushJoinerWait, a_push_whose_wait_has_passed_is_not_passed_over) {
    PushJoiner<int> joiner;
    BatchRecorder rec;
    ASSERT_NO_FATAL_FAILURE(bound_batches_to_one(joiner));
    joiner.pause();
    const std::int64_t until = rt::now_ns() + 1'000'000;
    std::thread first([&] { joiner.push(1, rec.run(), until); });
    test::wait_until([&] { return joiner.waiting() == 1; });
    std::thread second([&] { joiner.push(2, rec.run(), 0); });
    test::wait_until([&] { return joiner.waiting() == 2 && rt::now_ns() > until; });
    joiner.resume();
    first.join();
    second.join();
    ASSERT_EQ(rec.batches.size(), 2u);
    EXPECT_EQ(rec.batches[0], std::vector<int>{1});
    EXPECT_EQ(rec.batches[1], std::vector<int>{2});
}

}  // namespace
}  // namespace etude::engine
