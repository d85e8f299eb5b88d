// One lane per device and class of stream (models/device_lane.h): the
// joiners of several networks on one device run their batches on one
// thread, the most urgent first whichever network it is of, and a joiner
// that holds its batch back for its members does not hold the others'.
// The pushes are plain numbers, recorded in the order their batches ran;
// the waits end on what they wait for, never on a clock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
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

// Two networks' joiners on one device's lane.
struct TwoNetworks {
    std::shared_ptr<DeviceLane> lane = std::make_shared<DeviceLane>();
    PushJoiner<int> analysis{lane}, decoder{lane};
    BatchRecorder order;
};

TEST(DeviceLane, the_networks_of_a_device_run_their_batches_on_one_thread) {
    TwoNetworks d;
    d.analysis.push(1, d.order.run());
    d.decoder.push(2, d.order.run());
    d.analysis.push(3, d.order.run());
    ASSERT_EQ(d.order.threads.size(), 3u);
    EXPECT_NE(d.order.threads[0], std::this_thread::get_id());
    EXPECT_EQ(d.order.threads[1], d.order.threads[0]);
    EXPECT_EQ(d.order.threads[2], d.order.threads[0]);
    EXPECT_EQ(d.lane->batches(), 3u);
}

// Pushes of two networks wait while the lane is paused; it then runs the
// batch whose most urgent push ranks first, whichever network's: the push
// with no slack, then the earlier time to wait until. Each network's
// pushes still go in one batch of their own.
TEST(DeviceLane, the_most_urgent_batch_runs_first_whichever_networks) {
    TwoNetworks d;
    d.lane->pause();
    const std::int64_t now = rt::now_ns();
    std::vector<std::thread> threads;
    const auto push = [&](PushJoiner<int>& j, int value, std::int64_t until, std::size_t before) {
        test::wait_until([&] { return d.analysis.waiting() + d.decoder.waiting() == before; });
        threads.emplace_back([&, value, until] { j.push(value, d.order.run(), until); });
    };
    push(d.analysis, 1, now + 3 * kFarNs, 0);
    push(d.decoder, 2, now + 2 * kFarNs, 1);
    push(d.decoder, 3, now + 4 * kFarNs, 2);
    test::wait_until([&] { return d.analysis.waiting() + d.decoder.waiting() == 3; });
    d.lane->resume();
    for (auto& t : threads) t.join();
    ASSERT_EQ(d.order.batches.size(), 2u);
    EXPECT_EQ(d.order.batches[0], (std::vector<int>{2, 3})) << "the decoder's push due first";
    EXPECT_EQ(d.order.batches[1], (std::vector<int>{1}));

    // A push with no slack left goes first, though it came last.
    d.lane->pause();
    threads.clear();
    const std::int64_t later = rt::now_ns();
    push(d.decoder, 4, later + kFarNs, 0);
    push(d.analysis, 5, 0, 1);
    test::wait_until([&] { return d.analysis.waiting() + d.decoder.waiting() == 2; });
    d.lane->resume();
    for (auto& t : threads) t.join();
    ASSERT_EQ(d.order.batches.size(), 4u);
    EXPECT_EQ(d.order.batches[2], std::vector<int>{5});
    EXPECT_EQ(d.order.batches[3], std::vector<int>{4});
}

// While one network's joiner holds its batch back for a member that has
// not pushed, the lane runs another network's batch; the held one runs once
// its member comes.
TEST(DeviceLane, a_batch_held_for_its_members_does_not_hold_another_networks) {
    TwoNetworks d;
    JoinMembership<int> first, second;  // the analysis lane's two members
    first.enter(d.analysis);
    second.enter(d.analysis);
    std::thread held([&] { d.analysis.push(1, d.order.run(), rt::now_ns() + kFarNs); });
    test::wait_until([&] { return d.analysis.waiting() == 1; });
    d.decoder.push(2, d.order.run(), rt::now_ns() + kFarNs);  // runs while 1 is held
    {
        std::lock_guard lock(d.order.mu);
        ASSERT_EQ(d.order.batches.size(), 1u);
        EXPECT_EQ(d.order.batches[0], std::vector<int>{2});
    }
    EXPECT_EQ(d.analysis.waiting(), 1u) << "still held for its second member";
    d.analysis.push(3, d.order.run(), rt::now_ns() + kFarNs);
    held.join();
    ASSERT_EQ(d.order.batches.size(), 2u);
    EXPECT_EQ(d.order.batches[1], (std::vector<int>{1, 3}));
    EXPECT_EQ(d.analysis.stats().waited, 1u);
    EXPECT_EQ(d.analysis.stats().all_members, 1u);
}

// The time a held push waited while the device ran another network's batch
// is the device's latency, not waiting for members: the push's thread does
// not count it as gathering (join_gather_wait_ns_on_this_thread(), which a
// caller subtracts from the device's timing).
TEST(DeviceLane, a_held_push_does_not_count_another_networks_batch_as_gathering) {
    TwoNetworks d;
    JoinMembership<int> first, second;
    first.enter(d.analysis);
    second.enter(d.analysis);
    static constexpr std::int64_t kBatchNs = 100'000'000;
    std::int64_t waited = 0, gathered = 0;
    std::thread held([&] {
        const std::int64_t before = join_gather_wait_ns_on_this_thread();
        const std::int64_t from = rt::now_ns();
        d.analysis.push(1, d.order.run(), rt::now_ns() + kFarNs);
        waited = rt::now_ns() - from;
        gathered = join_gather_wait_ns_on_this_thread() - before;
    });
    test::wait_until([&] { return d.analysis.holding(); });
    // Held for its member alone a while, then another network's batch of
    // at least kBatchNs while it is still held.
    static constexpr std::int64_t kAloneNs = 20'000'000;
    std::this_thread::sleep_for(std::chrono::nanoseconds(kAloneNs));
    d.decoder.push(2, [](std::span<const int>) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(kBatchNs));
    });
    d.analysis.push(3, d.order.run(), rt::now_ns() + kFarNs);
    held.join();
    EXPECT_GE(waited, kBatchNs);
    EXPECT_GE(gathered, kAloneNs);
    EXPECT_LE(gathered, waited - kBatchNs);
}

// A member's push that comes while another network's batch runs still
// waits, with the pushes before it, for the member that has not pushed:
// only a batch of its own network ends its wait.
TEST(DeviceLane, another_networks_batch_does_not_end_a_hold_for_members) {
    TwoNetworks d;
    JoinMembership<int> m1, m2, m3;
    for (auto* m : {&m1, &m2, &m3}) m->enter(d.analysis);
    std::vector<std::thread> threads;
    threads.emplace_back([&] { d.analysis.push(1, d.order.run(), rt::now_ns() + kFarNs); });
    test::wait_until([&] { return d.analysis.holding(); });
    // The decoder's batch runs until the analysis' second push is waiting.
    std::atomic<bool> release{false};
    threads.emplace_back([&] {
        d.decoder.push(
            9, [&](std::span<const int>) { test::wait_until([&] { return release.load(); }); });
    });
    test::wait_until([&] { return d.lane->busy(); });
    threads.emplace_back([&] { d.analysis.push(2, d.order.run(), rt::now_ns() + kFarNs); });
    test::wait_until([&] { return d.analysis.waiting() == 2; });
    release = true;
    // The lane has finished the decoder's batch and chosen what follows.
    test::wait_until([&] { return d.lane->batches() >= 1; });
    EXPECT_TRUE(d.analysis.holding());
    EXPECT_EQ(d.analysis.waiting(), 2u);
    // The last member's push, with no slack (so a wrong early batch cannot
    // leave it waiting): it joins the two held, first.
    d.analysis.push(3, d.order.run(), 0);
    for (auto& t : threads) t.join();
    ASSERT_EQ(d.order.batches.size(), 1u);  // (the decoder's run records nothing)
    EXPECT_EQ(d.order.batches[0], (std::vector<int>{3, 1, 2}));
}

// A joiner that ends while a test has paused its lane runs what it has
// left: its end does not wait for the lane's resume().
TEST(DeviceLane, a_joiner_ends_while_its_lane_is_paused) {
    auto lane = std::make_shared<DeviceLane>();
    BatchRecorder order;
    std::thread pusher;
    {
        PushJoiner<int> goes{lane};
        lane->pause();
        pusher = std::thread([&] { goes.push(1, order.run()); });
        test::wait_until([&] { return goes.waiting() == 1; });
    }  // its end runs the push
    pusher.join();
    ASSERT_EQ(order.batches.size(), 1u);
    EXPECT_EQ(order.batches[0], std::vector<int>{1});
}

// A network that goes (a voice unloaded) leaves the lane to the others.
TEST(DeviceLane, a_joiner_that_goes_leaves_the_others_on_the_lane) {
    auto lane = std::make_shared<DeviceLane>();
    BatchRecorder order;
    PushJoiner<int> stays{lane};
    {
        PushJoiner<int> goes{lane};
        goes.push(1, order.run());
        stays.push(2, order.run());
    }
    stays.push(3, order.run());
    ASSERT_EQ(order.batches.size(), 3u);
    EXPECT_EQ(order.batches[2], std::vector<int>{3});
    EXPECT_EQ(order.threads[2], order.threads[0]);
}

// One lane per device and class while a joiner holds it; another device,
// another class or none (a joiner's own) get their own.
TEST(DeviceLane, one_lane_per_device_and_class) {
    if (const char* v = std::getenv("ETUDE_DEVICE_LANES"); v && *v)
        GTEST_SKIP() << "ETUDE_DEVICE_LANES=" << v << " gives each joiner a lane of its own";
    const int device = 0, other = 0;
    std::shared_ptr<DeviceLane> live = DeviceLane::shared(&device, 0);
    EXPECT_EQ(DeviceLane::shared(&device, 0), live);
    EXPECT_NE(DeviceLane::shared(&device, 10), live);
    EXPECT_NE(DeviceLane::shared(&other, 0), live);
    EXPECT_NE(DeviceLane::shared(nullptr, 0), DeviceLane::shared(nullptr, 0));
    // Let go by all, it ends; the next of its key is a new one.
    std::weak_ptr<DeviceLane> gone = live;
    live.reset();
    EXPECT_TRUE(gone.expired());
}

}  // namespace
}  // namespace etude::engine
