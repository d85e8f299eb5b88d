// The ScratchLender (engine/models/scratch_lender.h): sets are lent for a
// push and come back, no more than the bound are out at once, a loan that
// would pass the bound waits for one to come back, and the sets go when
// the network's last stream does. Threads meet through a latch the test
// holds, never through sleeps.
#include "engine/models/scratch_lender.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <span>
#include <vector>

#include "gpu/registry.h"

namespace etude::engine {
namespace {

// One stream's buffers, as a network's stream keeps them.
struct Stream {
    std::array<ScratchBuffer, 3> buffers;
    std::array<ScratchBuffer*, 3> group{&buffers[0], &buffers[1], &buffers[2]};
    std::span<ScratchBuffer* const> span() const { return group; }
};

class ScratchLenderTest : public ::testing::Test {
  protected:
    std::shared_ptr<gpu::Backend> cpu_ = gpu::shared_cpu_backend();
};

TEST_F(ScratchLenderTest, a_set_is_lent_for_a_push_and_lent_again_with_its_sizes) {
    ScratchLender lender(2);
    ScratchLender::User user(lender);
    Stream a, b;
    void* made = nullptr;
    {
        const std::span<ScratchBuffer* const> g = a.span();
        ScratchLender::Loan loan(lender, {&g, 1});
        made = a.buffers[1].need(*cpu_, 1000).handle();
    }
    // Between pushes the stream holds nothing.
    for (auto& buffer : a.buffers) EXPECT_FALSE(buffer.get());
    {
        const std::span<ScratchBuffer* const> g = b.span();
        ScratchLender::Loan loan(lender, {&g, 1});
        // The other stream gets the same set, its buffer as large as before.
        EXPECT_EQ(b.buffers[1].get().handle(), made);
        EXPECT_GE(b.buffers[1].get().floats(), 1000u);
        EXPECT_EQ(b.buffers[1].need(*cpu_, 1000).handle(), made) << "no new allocation";
    }
    EXPECT_EQ(lender.sets_made(), 1u);
    EXPECT_EQ(lender.sets_held(), 1u);
}

TEST_F(ScratchLenderTest, no_more_sets_than_the_bound_are_out_and_a_further_loan_waits) {
    ScratchLender lender(2);
    ScratchLender::User user(lender);
    Stream s[3];
    const std::span<ScratchBuffer*const> g0 = s[0].span(), g1 = s[1].span(), g2 = s[2].span();
    auto loan0 = std::make_unique<ScratchLender::Loan>(lender, std::span{&g0, 1});
    ScratchLender::Loan loan1(lender, {&g1, 1});
    std::atomic<bool> lent{false};
    auto third = std::async(std::launch::async, [&] {
        ScratchLender::Loan loan2(lender, {&g2, 1});
        lent = true;
        return lender.sets_held();
    });
    // Two are out: the third waits (a second is ample for a thread that
    // would not wait to have taken its set).
    EXPECT_EQ(third.wait_for(std::chrono::seconds(1)), std::future_status::timeout);
    EXPECT_FALSE(lent);
    loan0.reset();  // one comes back: the third takes it, not a new one
    EXPECT_EQ(third.get(), 2u);
    EXPECT_EQ(lender.sets_made(), 2u);
}

TEST_F(ScratchLenderTest, a_batch_takes_a_set_per_stream_even_past_the_bound_when_none_is_out) {
    ScratchLender lender(2);
    ScratchLender::User user(lender);
    Stream s[3];
    const std::vector<std::span<ScratchBuffer* const>> batch{s[0].span(), s[1].span(), s[2].span()};
    {
        ScratchLender::Loan loan(lender, batch);
        for (auto& stream : s) stream.buffers[0].need(*cpu_, 10);
        EXPECT_EQ(lender.sets_held(), 3u);
    }
    EXPECT_EQ(lender.sets_made(), 3u);
}

TEST_F(ScratchLenderTest, the_sets_go_with_the_last_stream) {
    ScratchLender lender(ScratchLender::bound_for(*cpu_));
    Stream a;
    {
        ScratchLender::User first(lender);
        {
            ScratchLender::User second(lender);
            const std::span<ScratchBuffer* const> g = a.span();
            ScratchLender::Loan loan(lender, {&g, 1});
            a.buffers[0].need(*cpu_, 4096);
        }
        EXPECT_EQ(lender.sets_held(), 1u) << "a stream is still open";
    }
    EXPECT_EQ(lender.sets_held(), 0u);
}

TEST_F(ScratchLenderTest, the_bound_on_the_cpu_is_its_usable_cores) {
    EXPECT_EQ(ScratchLender::bound_for(*cpu_),
              static_cast<std::size_t>(std::max(cpu_->info().compute_units, 1)));
}

}  // namespace
}  // namespace etude::engine
