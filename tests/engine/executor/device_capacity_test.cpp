// Admission on a device (engine/executor/batch_cost_fit.h): a BatchCost
// fitted from batches timed on it, the streams that cost carries, and a
// server's slots sized by that figure refusing the stream beyond it, while
// the simulated device (simulated_streams.h) holds every stream it admits.
// Every figure expected is worked out here from the costs, not taken from
// the code.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/executor/batch_cost_fit.h"
#include "server/synthesis_slots.h"
#include "tests/engine/executor/simulated_streams.h"

using namespace etude::engine;
using namespace etude::engine::executor;
using namespace etude::engine::executor::sim;

namespace {

// The headroom admission plans with (engine/capacity.cpp): a fifth free.
constexpr double kHeadroom = 0.8;

std::vector<TimedBatch> timed(const BatchCost& cost, std::vector<std::int64_t> frames,
                              std::vector<double> noise = {}) {
    std::vector<TimedBatch> t;
    for (std::size_t i = 0; i < frames.size(); ++i) {
        const double scale = i < noise.size() ? 1.0 + noise[i] : 1.0;
        t.push_back({frames[i], std::llround(static_cast<double>(cost.of(frames[i])) * scale)});
    }
    return t;
}

}  // namespace

TEST(BatchCostFit, recovers_the_launch_and_frame_costs_of_exact_timings) {
    // 3 ms a launch, 5 us a frame, timed at 1 to 32 streams of 32 frames.
    const BatchCost truth{3'000'000, 5'000.0};
    const BatchCost fit = fit_batch_cost(timed(truth, {32, 64, 128, 256, 512, 1024}));
    EXPECT_NEAR(static_cast<double>(fit.launch_ns), 3e6, 1.0);
    EXPECT_NEAR(fit.frame_ns, 5000.0, 1e-3);
}

TEST(BatchCostFit, noisy_timings_land_near_the_costs) {
    // Each timing off by up to 2 %: the fit stays within a tenth on the
    // launch and 3 % on the frames.
    const BatchCost truth{2'000'000, 4'000.0};
    const BatchCost fit = fit_batch_cost(
        timed(truth, {32, 64, 128, 256, 512, 1024}, {0.02, -0.02, 0.01, -0.01, 0.02, -0.015}));
    EXPECT_NEAR(static_cast<double>(fit.launch_ns), 2e6, 2e5);
    EXPECT_NEAR(fit.frame_ns, 4000.0, 120.0);
}

TEST(BatchCostFit, a_negative_launch_cost_fits_the_frames_through_zero) {
    // (32, 100 ns) and (64, 300 ns) would give -100 ns a launch; through
    // zero: (32 x 100 + 64 x 300) / (32^2 + 64^2) = 22400 / 5120.
    const std::vector<TimedBatch> t{{32, 100}, {64, 300}};
    const BatchCost fit = fit_batch_cost(t);
    EXPECT_EQ(fit.launch_ns, 0);
    EXPECT_DOUBLE_EQ(fit.frame_ns, 22400.0 / 5120.0);
}

TEST(BatchCostFit, larger_batches_no_slower_are_priced_as_the_largest_per_frame) {
    const std::vector<TimedBatch> t{{32, 1000}, {64, 990}, {128, 980}};
    const BatchCost fit = fit_batch_cost(t);
    EXPECT_EQ(fit.launch_ns, 0);
    EXPECT_DOUBLE_EQ(fit.frame_ns, 980.0 / 128.0);
}

TEST(BatchCostFit, one_batch_size_or_an_empty_batch_is_refused) {
    const std::vector<TimedBatch> one{{32, 1000}, {32, 1100}};
    EXPECT_THROW(fit_batch_cost(one), std::invalid_argument);
    const std::vector<TimedBatch> empty{{0, 1000}, {32, 1100}};
    EXPECT_THROW(fit_batch_cost(empty), std::invalid_argument);
}

TEST(CarriedStreams, the_largest_batch_in_time_gives_the_streams) {
    const double unit_s = 22 * 256 / 22050.0;  // 0.255420 s
    // 2 ms + 4 us a frame: 256 chunks of 22 frames take 24.528 ms, well in
    // time; 0.8 x 256 x 0.255420 / 0.024528 = 2,132.7.
    const auto fast = carried_streams({2'000'000, 4'000.0}, 22, unit_s, kHeadroom, 256);
    EXPECT_EQ(fast.batch_units, 256);
    EXPECT_EQ(fast.streams, 2132);
    // No launch cost, 100 us a frame: a chunk takes 2.2 ms, and 92 of them
    // (202.4 ms) are the most within 0.8 x 255.42 = 204.3 ms; they carry
    // 0.8 x 0.25542 / 0.0022 = 92.88 streams.
    const auto timely = carried_streams({0, 100'000.0}, 22, unit_s, kHeadroom, 256);
    EXPECT_EQ(timely.batch_units, 92);
    EXPECT_EQ(timely.streams, 92);
    // 10 ms a frame: one chunk alone takes 220 ms, later than its audio
    // allows: nothing carried.
    const auto slow = carried_streams({0, 10'000'000.0}, 22, unit_s, kHeadroom, 256);
    EXPECT_EQ(slow.batch_units, 1);
    EXPECT_EQ(slow.streams, 0);
}

// A device of 5 ms a launch and 40 us a frame, batches of 32: 5 + 28.16 =
// 33.16 ms a batch for 32 x 0.25542 s; 0.8 x 32 x 0.25542 / 0.03316 =
// 197.2 streams. The slots of that size take 197 syntheses and refuse the
// next; the simulated device holds all 197 in real time, and falls behind
// at half as many again: the figure is what it carries.
TEST(DeviceAdmission, refuses_the_stream_beyond_what_the_device_carries) {
    const BatchCost cost{5 * kMs, 40'000.0};
    const SimVoice voice;
    const auto carried =
        carried_streams(cost, voice.chunk_frames, voice.chunk_audio_s, kHeadroom, 32);
    ASSERT_EQ(carried.batch_units, 32);
    ASSERT_EQ(carried.streams, 197);
    const auto admitted = static_cast<std::size_t>(carried.streams);

    etude::server::SynthesisSlots slots(admitted, 0);
    const auto never = [] { return false; };
    for (std::size_t i = 0; i < admitted; ++i)
        ASSERT_EQ(slots.acquire(std::chrono::milliseconds(0), never),
                  etude::server::SynthesisSlots::Outcome::Granted);
    EXPECT_EQ(slots.acquire(std::chrono::milliseconds(0), never),
              etude::server::SynthesisSlots::Outcome::Busy);

    const Executor::ProcessorSpec device{Processor::Gpu, {carried.batch_units, 100 * kMs}, cost, 1};
    const auto streams = [&](int count) {
        std::vector<SimStream> s;
        for (int i = 0; i < count; ++i) s.push_back({i * 5 * kMs, voice, 30});
        return s;
    };
    {
        Executor executor({device});
        EXPECT_EQ(simulate(executor, streams(carried.streams)).total_underruns(), 0);
    }
    {
        Executor executor({device});
        EXPECT_GT(simulate(executor, streams(carried.streams * 3 / 2)).total_underruns(), 0);
    }
}
