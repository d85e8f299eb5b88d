// Where the Vulkan queue puts barriers (gpu/vulkan/barrier_plan.h): only
// where a command depends on one since the last barrier.
#include "gpu/vulkan/barrier_plan.h"

#include <gtest/gtest.h>

using etude::gpu::vk::BarrierPlan;
using etude::gpu::vk::BufferAccess;

namespace {

BufferAccess access(std::initializer_list<std::uint64_t> reads,
                    std::initializer_list<std::uint64_t> writes) {
    BufferAccess a;
    std::copy(reads.begin(), reads.end(), a.reads.begin());
    std::copy(writes.begin(), writes.end(), a.writes.begin());
    return a;
}

}  // namespace

TEST(BarrierPlan, the_first_command_of_a_buffer_waits_for_earlier_submissions) {
    BarrierPlan plan;
    plan.start();
    EXPECT_TRUE(plan.next(access({1}, {2})));
    plan.start();
    EXPECT_TRUE(plan.next(access({3}, {4})));  // unrelated, but a new buffer
}

TEST(BarrierPlan, independent_commands_share_no_barrier) {
    BarrierPlan plan;
    plan.start();
    plan.next(access({1, 10}, {2}));
    // Other inputs, other outputs; reading what the first one read is fine.
    EXPECT_FALSE(plan.next(access({1, 11}, {3})));
    EXPECT_FALSE(plan.next(access({12}, {4})));
    EXPECT_EQ(plan.barriers(), 1u);
    EXPECT_EQ(plan.commands(), 3u);
}

TEST(BarrierPlan, read_after_write_waits) {
    BarrierPlan plan;
    plan.start();
    plan.next(access({1}, {2}));
    EXPECT_TRUE(plan.next(access({2}, {3})));
}

TEST(BarrierPlan, write_after_write_and_write_after_read_wait) {
    BarrierPlan plan;
    plan.start();
    plan.next(access({1}, {2}));
    EXPECT_TRUE(plan.next(access({5}, {2})));  // writes what was written
    plan.start();
    plan.next(access({1}, {2}));
    EXPECT_TRUE(plan.next(access({6}, {1})));  // overwrites what was read
}

TEST(BarrierPlan, a_barrier_settles_everything_before_it) {
    BarrierPlan plan;
    plan.start();
    plan.next(access({1}, {2}));
    plan.next(access({3}, {4}));
    EXPECT_TRUE(plan.next(access({2}, {5})));  // waits for the first
    // Buffer 4 was written before that barrier: reading it needs no other.
    EXPECT_FALSE(plan.next(access({4}, {6})));
    // But 5 was written after it.
    EXPECT_TRUE(plan.next(access({5}, {7})));
}

TEST(BarrierPlan, an_empty_buffer_is_no_dependency) {
    BarrierPlan plan;
    plan.start();
    plan.next(access({0}, {2}));
    EXPECT_FALSE(plan.next(access({0, 9}, {3})));
}
