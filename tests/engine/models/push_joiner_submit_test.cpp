// Pushes handed over without a thread waiting on each (models/stream_joiner.h:
// PushJoiner::submit() with a Ticket, then wait() or an on_done callback):
// what lets a few threads feed a device's batches for many streams. One
// thread submits the pushes of all the lane's members and the lane holds
// their batch for all of them, as it does for pushes on threads of their
// own; errors reach each ticket; a ticket going out of scope waits for its
// batch. The pushes are plain numbers and the batches are recorded (as in
// push_joiner_wait_test.cpp); no test waits on a clock.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <stdexcept>
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
using Ticket = PushJoiner<int>::Ticket;

// One thread submits a push for each of a lane's three members, each with
// time to spare: the lane holds the batch until the last is in and runs
// the three as one, which pushes that each block their thread cannot give
// from one thread. Each ticket is told once, and waits return at once.
TEST(PushJoinerSubmit, one_thread_fills_a_batch_with_every_members_push) {
    PushJoiner<int> joiner;
    std::deque<JoinMembership<int>> members(3);
    for (auto& m : members) m.enter(joiner);
    BatchRecorder rec;
    const auto run = rec.run();
    std::atomic<int> told{0};
    std::deque<Ticket> tickets(3);
    for (int i = 0; i < 3; ++i) {
        joiner.submit(tickets[static_cast<std::size_t>(i)], i, run, rt::now_ns() + kFarNs,
                      [&] { ++told; });
        // Held for the members still to come: nothing has run.
        if (i < 2) {
            EXPECT_EQ(joiner.waiting(), static_cast<std::size_t>(i + 1));
        }
    }
    test::wait_until([&] { return told.load() == 3; });
    for (auto& t : tickets) {
        EXPECT_TRUE(joiner.done(t));
        joiner.wait(t);
        EXPECT_FALSE(t.submitted());
    }
    ASSERT_EQ(rec.batches.size(), 1u);
    EXPECT_EQ(rec.batches[0], (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(joiner.stats().all_members, 1u);
    EXPECT_NE(rec.threads[0], std::this_thread::get_id());  // the lane's thread ran it
}

// Waited for in any order, a ticket is free to be submitted again; the
// same pushes through push() (a thread each, blocking) run in the same
// batches.
TEST(PushJoinerSubmit, tickets_are_waited_for_in_any_order_and_submitted_again) {
    PushJoiner<int> joiner;
    BatchRecorder rec;
    const auto run = rec.run();
    Ticket a, b;
    joiner.pause();
    joiner.submit(a, 1, run);
    joiner.submit(b, 2, run);
    EXPECT_FALSE(joiner.done(a));
    EXPECT_THROW(joiner.submit(a, 3, run), std::logic_error);  // still out
    joiner.resume();
    joiner.wait(b);
    joiner.wait(a);
    joiner.submit(a, 3, run);
    joiner.wait(a);
    ASSERT_EQ(rec.batches.size(), 2u);
    EXPECT_EQ(rec.batches[0], (std::vector<int>{1, 2}));
    EXPECT_EQ(rec.batches[1], (std::vector<int>{3}));
    EXPECT_THROW(joiner.wait(a), std::logic_error);  // not out
}

// A batch's error reaches every ticket in it, through wait(), and each is
// still told; an out-of-memory batch halves the batches after it, as for
// pushes that block.
TEST(PushJoinerSubmit, a_batchs_error_reaches_each_ticket) {
    PushJoiner<int> joiner;
    const PushJoiner<int>::RunBatch fail = [](std::span<const int>) {
        throw gpu::OutOfMemory("full");
    };
    std::atomic<int> told{0};
    Ticket a, b;
    joiner.pause();
    joiner.submit(a, 1, fail, 0, [&] { ++told; });
    joiner.submit(b, 2, fail, 0, [&] { ++told; });
    joiner.resume();
    EXPECT_THROW(joiner.wait(a), gpu::OutOfMemory);
    EXPECT_THROW(joiner.wait(b), gpu::OutOfMemory);
    test::wait_until([&] { return told.load() == 2; });
    EXPECT_EQ(joiner.stats().cap, 1u);
    // The error was handed out once: the ticket, submitted again, runs clean.
    BatchRecorder rec;
    const auto run = rec.run();
    joiner.submit(a, 5, run);
    EXPECT_NO_THROW(joiner.wait(a));
}

// A ticket that goes out of scope before its batch ran waits for it: the
// joiner never points at a waiter that is gone.
TEST(PushJoinerSubmit, a_ticket_going_out_of_scope_waits_for_its_batch) {
    PushJoiner<int> joiner;
    BatchRecorder rec;
    const auto run = rec.run();
    joiner.pause();
    std::atomic<bool> left{false};
    std::thread owner([&] {
        {
            Ticket t;
            joiner.submit(t, 9, run);
        }
        left = true;
    });
    test::wait_until([&] { return joiner.waiting() == 1; });
    // Its batch cannot run while paused, so the ticket's end is still waiting.
    EXPECT_FALSE(left.load());
    joiner.resume();
    owner.join();
    EXPECT_TRUE(left.load());
    ASSERT_EQ(rec.batches.size(), 1u);
    EXPECT_EQ(rec.batches[0], std::vector<int>{9});
}

// A callback that submits the stream's next push (as a stepping thread
// will, handing the stream back) runs outside the lane's lock: the next
// push goes into the next batch, and the joiner's end waits for both.
TEST(PushJoinerSubmit, a_callback_may_submit_the_next_push) {
    BatchRecorder rec;
    const auto run = rec.run();
    Ticket first, second;
    std::atomic<bool> second_told{false};
    {
        PushJoiner<int> joiner;
        joiner.submit(first, 1, run, 0,
                      [&] { joiner.submit(second, 2, run, 0, [&] { second_told = true; }); });
        test::wait_until([&] { return second_told.load(); });
        joiner.wait(first);
        joiner.wait(second);
    }
    ASSERT_EQ(rec.batches.size(), 2u);
    EXPECT_EQ(rec.batches[0], std::vector<int>{1});
    EXPECT_EQ(rec.batches[1], std::vector<int>{2});
}

}  // namespace
}  // namespace etude::engine
