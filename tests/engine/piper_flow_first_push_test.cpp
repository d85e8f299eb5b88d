// A Piper flow's streams that started together push their first blocks
// side by side (models/batch_major.h), not only once their layers settle:
// their pushes are in one state (every layer holding as many frames, from
// the prefill's zeros on), so each operation is one backend call for them,
// when first audio waits for it. Each stream's flow is still its solo flow
// (bit for bit on the devices, within the flow's bound on the CPU), whether
// the batch's streams are in one state or not (a stream started earlier
// goes its own way beside a group of others), and the first push of four
// streams costs a stream's uploads and downloads more than that of three.
// Their sentences' ends (flushes) go side by side too, and leave each
// stream as its own flush would.
// CPU backend, lavapipe (Vulkan) and PoCL (OpenCL), each skipped where
// absent; pushed together on one thread (push_blocks_together), as the
// joiner would run them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/models/vits/flow_stream.h"
#include "engine/voices/piper_voice.h"
#include "support/flow_twins.h"
#include "support/model_parity.h"
#include "support/piper_on_device.h"
#include "support/random_prior.h"
#include "support/test_data.h"

using namespace etude::engine;
using etude::test::FlowTwins;
using etude::test::max_abs_diff;
using etude::test::random_prior;

namespace {

const std::string kVoice = etude::test::test_data_dir() + "/piper/test_medium.onnx";

// piper_flow_batch_test.cpp's bound: a batch item is the computation of
// the stream's own push, so its flow equals the solo flow to float rounding
// at most (bit for bit where the kernels sum a batch item as they sum it
// alone: OpenCL's and Vulkan's).
constexpr double kFlowBound = 1e-5;

class PiperFlowFirstPush : public etude::test::PiperOnDevice {
  protected:
    void SetUp() override {
        PiperOnDevice::SetUp();
        if (!device_) return;
        voice_ = PiperVoice::open(kVoice);
        const VitsFlowNetwork& source = *voice_->network().flow_network(0);
        joint_ = std::make_shared<const VitsFlowNetwork>(source, device_);
        joint_->set_join_streams(true);
        solo_ = std::make_shared<const VitsFlowNetwork>(source, device_);
        solo_->set_join_streams(false);
    }
    // Within the bound; bit for bit on the devices.
    void same(double diff) const {
        EXPECT_LE(diff, kFlowBound);
        if (GetParam() != etude::gpu::BackendKind::Cpu) {
            EXPECT_EQ(diff, 0.0);
        }
    }

    std::shared_ptr<const PiperVoice> voice_;
    std::shared_ptr<const VitsFlowNetwork> joint_, solo_;
};

// Four streams started together push every block together, from the first
// (the windows filling from the prefill's zeros) through the steady ones
// to the flush, in blocks shorter than a layer's delay (5 frames), shorter
// than the flow's 32 frames of context (16: the first pushes' outputs run
// dry inside the couplings) and of a Piper stream's first push (48).
TEST_P(PiperFlowFirstPush, streams_started_together_push_side_by_side_each_its_solo_flow) {
    for (const int block : {5, 16, 48}) {
        SCOPED_TRACE("blocks of " + std::to_string(block));
        FlowTwins twins(joint_, solo_, 4, 6 * block + 3);
        const std::vector<int> all{0, 1, 2, 3};
        while (twins.fed(0) + block < twins.frames()) twins.push(*device_, all, block, false);
        twins.push(*device_, all, twins.frames() - twins.fed(0), true);
        for (int i = 0; i < 4; ++i) {
            SCOPED_TRACE("stream " + std::to_string(i));
            const double diff = twins.diff(i);
            std::printf("[ %-8s ] blocks of %d, stream %d: max |side by side - solo| = %.3g\n",
                        name_.c_str(), block, i, diff);
            same(diff);
        }
    }
}

// Streams 0 and 1 start a block earlier than 2 and 3: in the joins after,
// each pair is in one state and goes side by side, two groups beside each
// other, until all four settle and go as one; then a fresh stream joins
// them, in a state of its own, walked beside them. Each stream's flow is
// its solo flow. (BatchMajor refuses layers in different states, so a
// group mixing them would throw.)
TEST_P(PiperFlowFirstPush, streams_in_different_states_go_apart_and_each_is_its_solo_flow) {
    constexpr int kBlock = 12;
    FlowTwins twins(joint_, solo_, 4, 8 * kBlock);
    twins.push(*device_, {0, 1}, kBlock, false);
    const std::vector<int> all{0, 1, 2, 3};
    for (int round = 0; round < 4; ++round) twins.push(*device_, all, kBlock, false);
    const int fresh = twins.add(499);
    const std::vector<int> five{0, 1, 2, 3, 4};
    for (int round = 0; round < 2; ++round) twins.push(*device_, five, kBlock, false);
    twins.push(*device_, {2, 3, 4}, kBlock, false);
    twins.push(*device_, {0, 1}, kBlock, true);  // the end of their sentences
    twins.push(*device_, {2, 3}, kBlock, true);
    twins.push(*device_, {4}, twins.frames() - twins.fed(fresh), true);
    for (int i = 0; i < 5; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        same(twins.diff(i));
    }
}

// Four streams started together push every block together through their
// sentences' ends: the flushes (each window's zeros, every delay emptied)
// go side by side too, and leave each stream as its own flush would: after
// reset() the same streams' next sentences, again together, are each its
// solo flow, and so is a sentence that is one flush from the start (every
// window then holding the prefill's zeros and the flush's).
TEST_P(PiperFlowFirstPush, flushes_side_by_side_leave_each_stream_as_its_own_flush) {
    constexpr int kBlock = 16;
    FlowTwins twins(joint_, solo_, 4, 2 * kBlock + 7);
    const std::vector<int> all{0, 1, 2, 3};
    for (const int frames : {2 * kBlock + 7, 3 * kBlock + 5, 10}) {
        SCOPED_TRACE("a sentence of " + std::to_string(frames) + " frames");
        if (frames != twins.frames()) twins.next_sentence(frames);
        while (twins.fed(0) + kBlock < twins.frames()) twins.push(*device_, all, kBlock, false);
        twins.push(*device_, all, twins.frames() - twins.fed(0), true);
        for (int i = 0; i < 4; ++i) {
            SCOPED_TRACE("stream " + std::to_string(i));
            same(twins.diff(i));
        }
    }
}

// In one join, streams 0 and 1 flush 7 frames, 2 and 3 flush 11, and 4,
// in 0 and 1's state, pushes 7 frames that do not end its sentence: three
// groups (a flush groups only with flushes of its length), each stream its
// solo flow. (Had 4 gone with 0 and 1, it would have been flushed.)
TEST_P(PiperFlowFirstPush, flushes_of_other_lengths_or_beside_pushes_go_apart) {
    constexpr int kBlock = 12;
    FlowTwins twins(joint_, solo_, 4, 2 * kBlock + 7);
    const std::vector<int> all{0, 1, 2, 3};
    const int beside = twins.add(499, 2 * kBlock + 7 + 1);
    const std::vector<int> five{0, 1, 2, 3, beside};
    twins.push(*device_, five, kBlock, false);
    twins.push_each(*device_, five, {kBlock, kBlock, 8, 8, kBlock},
                    {false, false, false, false, false});
    twins.push_each(*device_, five, {7, 7, 11, 11, 7}, {true, true, true, true, false});
    twins.push(*device_, {beside}, 1, true);
    for (int i = 0; i < 5; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        same(twins.diff(i));
    }
}

// The first push of fresh streams is one side-by-side batch: a fifth stream
// in the next slot adds its prior's two uploads and its output's download
// (the batch's output gathered for it), and nothing else, where its first push alone issues some
// 250 operations (and four streams walked layer by layer together, as first pushes went before,
// over a thousand). On OpenCL each slot is a page of its own (batch_major.h): each stream's held
// frames then go in copies of their own, still far fewer operations than its push alone.
// (Op by op: replayed, five would be recorded steps of four and one, and a
// key met before replays.)
TEST_P(PiperFlowFirstPush, a_first_push_of_streams_started_together_is_one_batch) {
    constexpr int kBlock = VitsFlowStream::kMinPush;
    const auto first_push = [&](int streams) {
        FlowTwins twins(joint_, solo_, streams, 2 * kBlock);
        std::vector<int> all(std::size_t(streams), 0);
        for (int i = 0; i < streams; ++i) {
            all[std::size_t(i)] = i;
            twins.joint(i).set_replay(false);
        }
        device_->set_profiling(true);
        const std::uint64_t ops = twins.push(*device_, all, kBlock, false);
        device_->set_profiling(false);
        return ops;
    };
    const std::uint64_t alone = first_push(1), of_four = first_push(4), of_five = first_push(5);
    std::printf("[ %-8s ] first push: one stream %llu operations, 4 streams %llu, 5 streams %llu\n",
                name_.c_str(), (unsigned long long)alone, (unsigned long long)of_four,
                (unsigned long long)of_five);
    if (etude::engine::HeldSlots::slots_per_page(*device_) > 1) {
        EXPECT_EQ(of_five - of_four, 3u) << "a stream in a neighbouring slot: its prior's two "
                                            "uploads and its output's download";
        EXPECT_LT(of_four, 2 * alone) << "four streams' first pushes went their own ways";
    }
    EXPECT_LT(of_five - of_four, alone / 2) << "a stream's share of a first push is no batch's";
}

// The operations of 4 and 16 streams started together (docs/benchmarks.md
// quotes them): their first push (48 frames, a Piper stream's first) and
// their whole sentence of 150 frames (three pushes of 48, then the flush
// of 6, side by side as the pushes before it). Side by side, 16 streams'
// pushes cost less than twice 4 streams' where the held frames share
// pages, and 16 streams' flush less than half of 16 flushes alone
// anywhere (a stream's flush alone issues some 250 operations).
TEST_P(PiperFlowFirstPush, operations_of_streams_started_together) {
    constexpr int kBlock = VitsFlowStream::kMinPush, kFrames = 3 * kBlock + 6;
    std::uint64_t unflushed_of[17] = {}, flush_of[17] = {};
    for (const int streams : {1, 4, 16}) {
        FlowTwins twins(joint_, solo_, streams, kFrames);
        std::vector<int> all(std::size_t(streams), 0);
        for (int i = 0; i < streams; ++i) all[std::size_t(i)] = i;
        device_->set_profiling(true);
        const std::uint64_t first = twins.push(*device_, all, kBlock, false);
        std::uint64_t sentence = first;
        while (twins.fed(0) + kBlock < kFrames)
            sentence += twins.push(*device_, all, kBlock, false);
        unflushed_of[streams] = sentence;
        flush_of[streams] = twins.push(*device_, all, kFrames - twins.fed(0), true);
        sentence += flush_of[streams];
        device_->set_profiling(false);
        std::printf(
            "[ %-8s ] %2d streams started together: first push %llu operations, "
            "before the flush %llu, flush %llu, sentence of %d frames %llu\n",
            name_.c_str(), streams, (unsigned long long)first,
            (unsigned long long)unflushed_of[streams], (unsigned long long)flush_of[streams],
            kFrames, (unsigned long long)sentence);
        for (int i = 0; i < streams; ++i) same(twins.diff(i));
    }
    if (etude::engine::HeldSlots::slots_per_page(*device_) > 1) {
        EXPECT_LT(unflushed_of[16], 2 * unflushed_of[4]);
        EXPECT_LT(flush_of[16], 2 * flush_of[4]) << "the flushes went their own ways";
    }
    EXPECT_LT(unflushed_of[16], 8 * unflushed_of[1]);
    EXPECT_LT(2 * flush_of[16], 16 * flush_of[1]) << "the flushes went their own ways";
}

const auto kName = [](const auto& info) { return etude::gpu::to_string(info.param); };
INSTANTIATE_TEST_SUITE_P(Backends, PiperFlowFirstPush,
                         ::testing::Values(etude::gpu::BackendKind::Cpu,
                                           etude::gpu::BackendKind::Vulkan,
                                           etude::gpu::BackendKind::OpenCl),
                         kName);

}  // namespace
