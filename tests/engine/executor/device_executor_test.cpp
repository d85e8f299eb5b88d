// The device executor's core (engine/executor/) with a simulated device
// (simulated_streams.h): its batches, its deadline order, what it does
// when the device is lost, out of memory or a stream is cancelled, and
// admission by the device's capacity. Every figure expected here is worked
// out from the cost models in this file, not from what the code gave.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/executor/executor.h"
#include "engine/executor/ready_queue.h"
#include "tests/engine/executor/simulated_streams.h"

using namespace etude::engine;
using namespace etude::engine::executor;
using namespace etude::engine::executor::sim;

namespace {

// A device that costs 2 ms a launch and 4 us a mel frame: a batch of 256
// chunks of 22 frames takes 2 + 22.5 = 24.5 ms and makes 256 x 0.255 s of
// audio, 2,660 times real time. One chunk alone: 2.09 ms, 122 times.
Executor::ProcessorSpec device(int max_units = 256) {
    return {Processor::Gpu, {max_units, 100 * kMs}, {2 * kMs, 4'000.0}, 1};
}
// The CPU pool: 16 workers, no launch cost, 400 us a frame: a chunk
// takes 8.8 ms, 29 times real time per worker.
Executor::ProcessorSpec cpu_pool(int workers = 16) {
    return {Processor::CpuPrimary, {1, 0}, {0, 400'000.0}, workers};
}

// `count` streams pushed `spacing` apart, from t = 0.
std::vector<SimStream> streams(int count, std::int64_t spacing_ns, int chunks = 8,
                               SimVoice voice = {}) {
    std::vector<SimStream> s;
    for (int i = 0; i < count; ++i) s.push_back({i * spacing_ns, voice, chunks});
    return s;
}

WorkUnit unit(std::uint64_t stream, std::uint32_t network, std::int64_t deadline_ms,
              bool started = false) {
    const std::int64_t d = deadline_ms * kMs;
    return {stream, network, 10, {d, started ? d - kChunkUrgentNs : WorkDue::kNever}};
}

}  // namespace

// ---- the ready queue --------------------------------------------------------

TEST(ReadyQueue, a_batch_is_the_unit_due_first_and_its_networks_units_within_the_window) {
    ReadyQueue q;
    q.push(unit(1, 7, 300));
    q.push(unit(2, 7, 100));
    q.push(unit(3, 9, 120));  // another network: never in the same batch
    q.push(unit(4, 7, 190));
    q.push(unit(5, 7, 260));  // beyond the 100 ms window of the first
    const auto batch = q.take_batch(0, {8, 100 * kMs}, {kMs, 1000.0});
    ASSERT_EQ(batch.size(), 2u);
    EXPECT_EQ(batch[0].stream, 2u);
    EXPECT_EQ(batch[1].stream, 4u);
    EXPECT_EQ(q.size(), 3u);
    EXPECT_EQ(q.take_batch(0, {8, 100 * kMs}, {kMs, 1000.0})[0].stream, 3u);
}

TEST(ReadyQueue, a_started_streams_urgent_unit_goes_before_an_earlier_new_one) {
    ReadyQueue q;
    q.push(unit(1, 7, 200));        // a new stream's first chunk
    q.push(unit(2, 7, 260, true));  // urgent from 110 ms
    const BatchRule alone{1, 0};
    EXPECT_EQ(q.take_batch(100 * kMs, alone, {})[0].stream, 1u);  // not urgent yet: by deadline
    q.push(unit(1, 7, 200));
    EXPECT_EQ(q.take_batch(120 * kMs, alone, {})[0].stream, 2u);  // urgent: first
}

TEST(ReadyQueue, a_batch_grows_only_while_its_first_unit_stays_in_time) {
    ReadyQueue q;
    for (int i = 0; i < 10; ++i) q.push(unit(static_cast<std::uint64_t>(i), 7, 50));
    // 10 frames a unit at 1 ms a frame, 5 ms a launch: by 50 ms, 4 units
    // (5 + 40 = 45 ms) fit and a fifth (55 ms) does not.
    EXPECT_EQ(q.take_batch(0, {64, kMs}, {5 * kMs, 1'000'000.0}).size(), 4u);
}

TEST(ReadyQueue, removing_a_stream_leaves_the_others) {
    ReadyQueue q;
    q.push(unit(1, 7, 10));
    q.push(unit(2, 7, 20));
    q.push(unit(1, 8, 30));
    EXPECT_EQ(q.remove_stream(1), 2u);
    ASSERT_EQ(q.size(), 1u);
    EXPECT_EQ(q.take_batch(0, {8, kMs}, {})[0].stream, 2u);
}

TEST(BatchCost, capacity_follows_from_full_batches) {
    // 256 x 22 frames: 24.528 ms for 256 x 0.2554 s; 70 % of it planned:
    // 0.7 x 256 x 0.25542 / 0.024528 = 1,866 streams.
    const auto d = device();
    EXPECT_EQ(real_time_capacity(d.cost, d.rule, 22, 22 * 256 / 22050.0, 0.7), 1866);
    // One chunk per launch: 0.7 x 0.25542 / 0.002088 = 85.
    EXPECT_EQ(real_time_capacity(d.cost, {1, 0}, 22, 22 * 256 / 22050.0, 0.7), 85);
}

// ---- a thousand streams -----------------------------------------------------

TEST(DeviceExecutor, a_thousand_streams_started_within_a_second_are_heard_in_time) {
    Executor executor({device(), cpu_pool()});
    const auto result = simulate(executor, streams(1000, kMs));
    EXPECT_EQ(result.total_underruns(), 0);
    EXPECT_EQ(result.made_twice, 0);
    for (int made : result.chunks_made) ASSERT_EQ(made, 8);
    EXPECT_LT(result.first_audio_percentile(0.95), 250 * kMs);
    // Batches form: on average many units share a launch, none mixes
    // networks and none exceeds the rule.
    EXPECT_GT(result.mean_batch(0), 4.0);
    for (const auto& b : result.batches) {
        EXPECT_TRUE(b.one_network);
        EXPECT_LE(b.units, 256u);
    }
}

TEST(DeviceExecutor, without_batches_the_same_device_and_cpus_fall_behind) {
    // What makes the test above pass is the batching: one unit per launch
    // the device makes 122x real time, the CPUs 464x, and a thousand
    // streams need 1,000x.
    Executor executor({device(1), cpu_pool()});
    const auto result = simulate(executor, streams(1000, kMs));
    EXPECT_GT(result.total_underruns(), 100);
}

TEST(DeviceExecutor, voices_of_other_sizes_are_batched_beside_each_other_never_together) {
    SimVoice x_low{.analysis_network = 3,
                   .analysis_frames = 8,
                   .chunk_network = 4,
                   .chunk_frames = 44,
                   .chunk_audio_s = 44 * 256 / 16000.0};
    auto mixed = streams(300, 2 * kMs);
    for (std::size_t i = 0; i < mixed.size(); i += 3) mixed[i].voice = x_low;
    Executor executor({device(), cpu_pool()});
    const auto result = simulate(executor, mixed);
    EXPECT_EQ(result.total_underruns(), 0);
    for (const auto& b : result.batches) EXPECT_TRUE(b.one_network);
    for (int made : result.chunks_made) EXPECT_EQ(made, 8);
}

// ---- faults -----------------------------------------------------------------

TEST(DeviceExecutor, a_device_lost_mid_batch_has_its_units_remade_on_the_cpus) {
    // 100 streams need 100x real time: the 16 CPU workers (464x) carry
    // them once the device is gone, with the deadline order's slack.
    Executor executor({device(), cpu_pool()});
    SimFaults faults;
    faults.lose_processor_0_during_batch = 40;
    const auto result = simulate(executor, streams(100, 5 * kMs, 12), faults);
    EXPECT_FALSE(executor.available(0));
    EXPECT_GT(result.lost_in_flight, 0u);
    EXPECT_EQ(result.total_underruns(), 0);
    EXPECT_EQ(result.made_twice, 0);
    EXPECT_EQ(result.chunks_after_loss_on_0, 0);
    EXPECT_EQ(result.unroutable, 0);
    for (int made : result.chunks_made) EXPECT_EQ(made, 12);
    bool cpu_after = false;
    for (const auto& b : result.batches)
        cpu_after |= b.processor == 1 && b.start_ns >= result.lost_at_ns;
    EXPECT_TRUE(cpu_after);
}

TEST(DeviceExecutor, out_of_memory_makes_smaller_batches_not_failures) {
    Executor executor({device(), cpu_pool()});
    SimFaults faults;
    faults.processor_0_memory_units = 40;
    const auto result = simulate(executor, streams(1000, kMs), faults);
    EXPECT_GT(result.out_of_memory, 0);
    EXPECT_LE(executor.rule(0).max_units, 40);
    for (const auto& b : result.batches)
        if (b.processor == 0) {
            EXPECT_LE(b.units, 40u);
        }
    for (int made : result.chunks_made) EXPECT_EQ(made, 8);
    EXPECT_EQ(result.total_underruns(), 0);
}

TEST(DeviceExecutor, a_stream_cancelled_inside_a_batch_leaves_the_others_intact) {
    Executor executor({device(), cpu_pool()});
    SimFaults faults;
    faults.cancel_stream = 7;
    faults.cancel_at_ns = 300 * kMs;
    const auto result = simulate(executor, streams(200, 2 * kMs), faults);
    EXPECT_LT(result.chunks_made[7], 8);
    for (std::size_t s = 0; s < result.chunks_made.size(); ++s)
        if (s != 7) {
            EXPECT_EQ(result.chunks_made[s], 8) << "stream " << s;
        }
    EXPECT_EQ(result.total_underruns(), 0);
    EXPECT_EQ(result.made_twice, 0);
}

// ---- admission --------------------------------------------------------------

TEST(DeviceExecutor, the_capacity_it_admits_is_carried_and_half_again_is_not) {
    // A device alone, slower: 5 ms a launch, 40 us a frame, 32 units a
    // batch. Full batches: 5 + 28.16 = 33.16 ms for 32 x 0.2554 s.
    const Executor::ProcessorSpec slow{Processor::Gpu, {32, 100 * kMs}, {5 * kMs, 40'000.0}, 1};
    const SimVoice voice;
    const int capacity =
        real_time_capacity(slow.cost, slow.rule, voice.chunk_frames, voice.chunk_audio_s, 0.7);
    EXPECT_EQ(capacity, 172);  // 0.7 x 32 x 0.25542 / 0.03316
    {
        Executor executor({slow});
        const auto result = simulate(executor, streams(capacity, 5 * kMs, 30));
        EXPECT_EQ(result.total_underruns(), 0);
    }
    {
        Executor executor({slow});
        const auto result = simulate(executor, streams(capacity * 3 / 2, 5 * kMs, 30));
        EXPECT_GT(result.total_underruns(), 0);
    }
}
