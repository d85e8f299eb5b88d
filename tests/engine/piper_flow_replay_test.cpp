// A settled batch of Piper flow streams side by side replayed from its
// recording (models/recorded_step.h: RecordedBatches, as a decoder's batch
// replays: recorded_batch_test.cpp) against the same batches run operation
// by operation, on a backend that replays natively: Vulkan (lavapipe in
// CI) and CUDA (on a GPU machine), each skipped without its device; on the
// CPU every batch runs op by op.
//
// A replayed batch issues the kernels its op-by-op run issues, on the same
// values, so the two agree bit for bit; against each stream's flow alone
// the bound is piper_flow_batch_test.cpp's (1e-5), which also holds a batch
// split by page against the same batch whole on CUDA, whose cuBLAS sums a
// product of another shape in another order (test::batch_keeps_bits).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/vits/flow_stream.h"
#include "engine/voices/piper_voice.h"
#include "gpu/registry.h"
#include "support/flow_twins.h"
#include "support/model_parity.h"
#include "support/piper_on_device.h"
#include "support/test_data.h"

using namespace etude::engine;
using etude::test::FlowTwins;

namespace {

const std::string kVoice = etude::test::test_data_dir() + "/piper/test_medium.onnx";
constexpr double kFlowBound = 1e-5;  // piper_flow_batch_test.cpp's
// A device's flow against the CPU's: the backends' parity bound.
constexpr double kCpuBound = 1e-4;
// Four: a batch of a power of two members runs as one recorded step
// (RecordedBatches::step_sizes).
constexpr int kStreams = 4;

class PiperFlowReplay : public etude::test::PiperOnDevice {
  protected:
    void SetUp() override {
        PiperOnDevice::SetUp();
        if (!device_) return;
        voice_ = PiperVoice::open(kVoice);
        device_->reset_health();
    }
    void TearDown() override {
        if (!device_) return;
        device_->set_profiling(false);
        device_->reset_health();
    }
    // A copy of the voice's flow on the device, joining or not.
    std::shared_ptr<const VitsFlowNetwork> flow(bool join) const {
        auto f =
            std::make_shared<const VitsFlowNetwork>(*voice_->network().flow_network(0), device_);
        f->set_join_streams(join);
        return f;
    }
    // kStreams streams of a flow of their own, beside twins alone; their
    // settled batches replaying where `replay`.
    FlowTwins twins(const std::shared_ptr<const VitsFlowNetwork>& joint, bool replay,
                    int frames) const {
        FlowTwins t(joint, flow(false), kStreams, frames);
        for (int i = 0; i < kStreams; ++i) t.joint(i).set_replay(replay);
        return t;
    }
    // A stream's settled pushes alone, of a flow that joins or not, replayed
    // and op by op (the test below).
    void lone_settled_pushes_replay_bit_for_bit(bool join);
    // Stream i's flow replayed against its twin's in batches op by op that
    // were split otherwise (steps of powers of two, pages): the same bits
    // where the backend's batches keep them, else within kFlowBound
    // (cuBLAS sums another shape in another order).
    void expect_op_by_ops_flow(const FlowTwins& replayed, const FlowTwins& op_by_op, int i) const {
        ASSERT_FALSE(replayed.joint_out(i).empty());
        if (etude::test::batch_keeps_bits(GetParam()))
            EXPECT_TRUE(etude::test::identical(replayed.joint_out(i), op_by_op.joint_out(i)))
                << "max |difference| "
                << etude::test::max_abs_diff(replayed.joint_out(i), op_by_op.joint_out(i));
        else
            EXPECT_LE(etude::test::max_abs_diff(replayed.joint_out(i), op_by_op.joint_out(i)),
                      kFlowBound);
    }
    std::shared_ptr<const PiperVoice> voice_;
};

// Four streams, four blocks of 16 frames (the windows fill: the flow's
// context is 32 frames; the last two, settled, are a key of their own),
// seven of 8 and a flushing one: the first batch of 8 runs op by op (it
// sizes its key's buffers), the second is recorded and replayed, the
// other five replayed; the device sees each
// replayed batch as its priors' uploads, the replay and one download per
// stream. Each stream's flow equals the same batches op by op (streams of
// another flow, replay off) bit for bit, and its flow alone within the bound.
TEST_P(PiperFlowReplay, a_replayed_batch_equals_the_batch_op_by_op_bit_for_bit_and_the_solo_flow) {
    const int frames = 4 * 16 + 7 * 8 + 5;
    const auto replaying = flow(true), not_replaying = flow(true);
    FlowTwins replayed = twins(replaying, true, frames);
    FlowTwins op_by_op = twins(not_replaying, false, frames);
    const std::vector<int> all{0, 1, 2, 3};
    for (int i = 0; i < 4; ++i) {
        replayed.push(*device_, all, 16, false);
        op_by_op.push(*device_, all, 16, false);
    }
    const ReplayStats settling = replaying->batch_replay_stats();
    EXPECT_EQ(settling.recordings, 1u) << "the settled blocks of 16";
    std::uint64_t ops_replayed = 0, ops_op_by_op = 0;
    for (int i = 0; i < 7; ++i) {
        device_->set_profiling(true);
        ops_replayed = replayed.push(*device_, all, 8, false);
        ops_op_by_op = op_by_op.push(*device_, all, 8, false);
        device_->set_profiling(false);
    }
    const ReplayStats st = replaying->batch_replay_stats();
    EXPECT_EQ(st.op_by_op - settling.op_by_op, 1u);
    EXPECT_EQ(st.recordings - settling.recordings, 1u);
    EXPECT_EQ(st.replayed - settling.replayed, 6u);
    EXPECT_EQ(not_replaying->batch_replay_stats().replayed, 0u);
    std::printf(
        "[ %-8s ] a settled flow batch of %d streams x 8 frames: %llu operations op by op, "
        "%llu replayed\n",
        name_.c_str(), kStreams, (unsigned long long)ops_op_by_op,
        (unsigned long long)ops_replayed);
    EXPECT_EQ(ops_replayed, 3u * kStreams + 2)
        << "two uploads a stream, the members' slots' upload, the replay, a download";
    replayed.push(*device_, all, 5, true);
    op_by_op.push(*device_, all, 5, true);
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_FALSE(replayed.joint_out(i).empty());
        EXPECT_TRUE(etude::test::identical(replayed.joint_out(i), op_by_op.joint_out(i)))
            << "max |difference| "
            << etude::test::max_abs_diff(replayed.joint_out(i), op_by_op.joint_out(i));
        EXPECT_LE(replayed.diff(i), kFlowBound);
        EXPECT_GT(etude::test::rms(replayed.joint_out(i)), 0.1) << "a flow of nothing";
    }
}

// The key holds the members' count (their page is the recording's
// variant): once one of four has gone, the other three are another batch,
// run as steps of two and one (RecordedBatches::step_sizes), each a key
// sized and recorded anew, never replayed from the four's recording (which
// would run the leaver's slot and hand the items to the wrong streams); the
// same members in another order replay theirs.
TEST_P(PiperFlowReplay, a_member_leaving_makes_a_new_key_and_another_order_of_the_same_does_not) {
    const int frames = 4 * 16 + 10 * 8;
    const auto replaying = flow(true), not_replaying = flow(true);
    FlowTwins replayed = twins(replaying, true, frames);
    FlowTwins op_by_op = twins(not_replaying, false, frames);
    const auto both = [&](const std::vector<int>& who, int block) {
        replayed.push(*device_, who, block, false);
        op_by_op.push(*device_, who, block, false);
    };
    for (int i = 0; i < 4; ++i) both({0, 1, 2, 3}, 16);
    const ReplayStats settling = replaying->batch_replay_stats();
    for (int i = 0; i < 3; ++i) both({0, 1, 2, 3}, 8);
    both({2, 0, 3, 1}, 8);  // the same slots: the same key
    ReplayStats st = replaying->batch_replay_stats();
    EXPECT_EQ(st.recordings - settling.recordings, 1u);
    EXPECT_EQ(st.replayed - settling.replayed, 3u);
    // Stream 0 sits out from here: the other three are another batch.
    both({1, 2, 3}, 8);
    EXPECT_EQ(replaying->batch_replay_stats().replayed, st.replayed)
        << "the four's recording was replayed for three";
    EXPECT_EQ(replaying->batch_replay_stats().op_by_op, st.op_by_op + 2)
        << "steps of two and one: two keys, each sizing its buffers";
    for (int i = 0; i < 3; ++i) both({3, 2, 1}, 8);
    st = replaying->batch_replay_stats();
    EXPECT_EQ(st.recordings - settling.recordings, 1u + 2u);
    EXPECT_EQ(st.replayed - settling.replayed, 3u + 2u * 3u);
    for (int i = 0; i < kStreams; ++i) {  // stream 0 up to its leaving
        SCOPED_TRACE("stream " + std::to_string(i));
        expect_op_by_ops_flow(replayed, op_by_op, i);
    }
}

// Members of one page copy their held frames by slot index (batch_major.h's
// SlotIndexed), so one recording serves any two streams of the page:
// {0, 1} sizes the key's buffers, {2, 3} records, {0, 3} and {1, 2} replay
// it. A batch over two pages (stream p is page 1's first: 16 on lavapipe,
// 256 on a large GPU) runs recorded steps per page (here one a page: each
// page's count a power of two), the page its
// recording's variant: {0, 1, p} replays page 0's pair and sizes a key of
// one member; {2, 3, p} replays page 0's pair again and records page 1's
// one; {1, p} records page 0's one and replays page 1's. Each stream's
// flow is the same bit for bit as the same batches op by op, which run a
// batch over two pages whole; on CUDA within 1e-5 of it.
TEST_P(PiperFlowReplay, any_members_of_a_page_replay_its_recording_and_a_batch_splits_by_page) {
    const int p = HeldSlots::slots_per_page(*device_);
    const int frames = 4 * 16 + 4 * 8;
    const auto replaying = flow(true), not_replaying = flow(true);
    FlowTwins replayed = twins(replaying, true, frames);
    FlowTwins op_by_op = twins(not_replaying, false, frames);
    for (int i = kStreams; i <= p; ++i) {
        replayed.joint(replayed.add(420 + std::uint32_t(i))).set_replay(true);
        op_by_op.joint(op_by_op.add(420 + std::uint32_t(i))).set_replay(false);
    }
    const auto both = [&](const std::vector<int>& who, int block) {
        replayed.push(*device_, who, block, false);
        op_by_op.push(*device_, who, block, false);
    };
    for (int i = 0; i < 4; ++i) both({0, 1, 2, 3, p}, 16);
    const ReplayStats settled = replaying->batch_replay_stats();
    for (const std::vector<int>& pair :
         std::vector<std::vector<int>>{{0, 1}, {2, 3}, {0, 3}, {1, 2}})
        both(pair, 8);
    ReplayStats st = replaying->batch_replay_stats();
    EXPECT_EQ(st.op_by_op - settled.op_by_op, 1u);
    EXPECT_EQ(st.recordings - settled.recordings, 1u);
    EXPECT_EQ(st.replayed - settled.replayed, 3u);
    both({0, 1, p}, 8);
    both({2, 3, p}, 8);
    both({1, p}, 8);
    st = replaying->batch_replay_stats();
    EXPECT_EQ(st.op_by_op - settled.op_by_op, 2u) << "a key of two members and one of one";
    EXPECT_EQ(st.recordings - settled.recordings, 3u) << "each key's recording for each page";
    EXPECT_EQ(st.replayed - settled.replayed, 8u);
    for (int i : {0, 1, 2, 3, p}) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_FALSE(replayed.joint_out(i).empty());
        expect_op_by_ops_flow(replayed, op_by_op, i);  // (op by op: whole)
    }
}

// A device fault at a replayed batch (after its priors' uploads: the
// replay) reaches the batch's pushes as a device error, as any fault in a
// batch does (piper_flow_batch_test.cpp: each stream's CPU flow then takes
// its sentence over in the engine). The recordings stay valid: the streams'
// next sentences, in the same slots, replay them again, each stream's flow
// its solo flow; only the first two blocks' states, met a second time, are
// recorded now.
TEST_P(PiperFlowReplay, a_fault_in_a_replayed_batch_is_a_device_error_and_the_recording_stays) {
    const int frames = 4 * 16 + 4 * 8 + 5;
    const auto replaying = flow(true);
    // The twins alone on the CPU: on the device their pushes, made before
    // the batch's, would take the fault.
    FlowTwins replayed(replaying,
                       std::make_shared<const VitsFlowNetwork>(*voice_->network().flow_network(0),
                                                               etude::gpu::shared_cpu_backend()),
                       kStreams, frames);
    const std::vector<int> all{0, 1, 2, 3};
    for (int i = 0; i < 4; ++i) replayed.push(*device_, all, 16, false);
    for (int i = 0; i < 3; ++i) replayed.push(*device_, all, 8, false);
    const ReplayStats at_fault = replaying->batch_replay_stats();
    ASSERT_GE(at_fault.replayed, 2u) << "batches of 8 replay before the fault";
    etude::gpu::GpuFault fault;
    fault.kind = etude::gpu::GpuFault::KernelFailure;
    fault.count = 1;
    fault.after = 2 * kStreams + 1;  // the priors' and the slots' uploads, then the replay
    device_->inject_fault(fault);
    try {
        replayed.push(*device_, all, 8, false);
        ADD_FAILURE() << "the fault was not heard of";
    } catch (const etude::gpu::DeviceError& e) {
        EXPECT_NE(std::string(e.what()).find("replay"), std::string::npos) << e.what();
    }
    device_->inject_fault({});
    device_->reset_health();
    replayed.next_sentence(frames);
    for (int i = 0; i < 4; ++i) replayed.push(*device_, all, 16, false);
    for (int i = 0; i < 4; ++i) replayed.push(*device_, all, 8, false);
    replayed.push(*device_, all, 5, true);
    const ReplayStats after = replaying->batch_replay_stats();
    EXPECT_EQ(after.recordings, at_fault.recordings + 2) << "a recording was made again";
    EXPECT_GE(after.replayed, at_fault.replayed + 4) << "the next sentence replays it again";
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        EXPECT_LE(replayed.diff(i), kCpuBound);
    }
}

// A stream's pushes alone (most pushes in the engine on lavapipe, 1.2-1.3
// to a batch) replay their key's recording, as a decoder's lone chunks do
// (recorded_step_test.cpp): on the stream's own queue where the flow does
// not join, else the lane's recordings as a batch of one, which the
// network's streams share. Four blocks of 16 (the first two, while the
// windows fill, each a key sized op by op; of the last two, settled, one
// sizes and one records), seven of 8 (one sizes, one records, five replay
// more) and a flush, op by op. Each replayed push is its op-by-op push bit
// for bit, and the device sees it as the prior's two uploads, the replay
// and one download (and the slot's upload, as a batch of one).
TEST_P(PiperFlowReplay, a_lone_settled_push_replays_its_recording_bit_for_bit) {
    // Where a flow joins (on a GPU, by default) the stream's held frames lie
    // in the network's slots; else in buffers of its own.
    for (const bool join : {false, true}) {
        SCOPED_TRACE(join ? "a flow that joins" : "a flow that does not join");
        lone_settled_pushes_replay_bit_for_bit(join);
    }
}

void PiperFlowReplay::lone_settled_pushes_replay_bit_for_bit(bool join) {
    const int frames = 4 * 16 + 7 * 8 + 5;
    const auto replaying = flow(join), not_replaying = flow(join);
    FlowTwins replayed(replaying, flow(false), 1, frames);
    FlowTwins op_by_op(not_replaying, flow(false), 1, frames);
    op_by_op.joint(0).set_replay(false);
    // (A joining stream's lone pushes go through the lane's recordings.)
    const auto stats = [&] {
        return join ? replaying->batch_replay_stats() : replayed.joint(0).replay_stats();
    };
    for (int i = 0; i < 4; ++i) {
        replayed.push(*device_, {0}, 16, false);
        op_by_op.push(*device_, {0}, 16, false);
    }
    const ReplayStats settling = stats();
    EXPECT_EQ(settling.op_by_op, 2u + 1u) << "two filling states and the settled 16";
    EXPECT_EQ(settling.recordings, 1u);
    std::uint64_t ops_replayed = 0, ops_op_by_op = 0;
    for (int i = 0; i < 7; ++i) {
        device_->set_profiling(true);
        ops_replayed = replayed.push(*device_, {0}, 8, false);
        ops_op_by_op = op_by_op.push(*device_, {0}, 8, false);
        device_->set_profiling(false);
    }
    const ReplayStats st = stats();
    EXPECT_EQ(st.op_by_op - settling.op_by_op, 1u);
    EXPECT_EQ(st.recordings - settling.recordings, 1u);
    EXPECT_EQ(st.replayed - settling.replayed, 6u);
    EXPECT_EQ(op_by_op.joint(0).replay_stats().replayed, 0u);
    EXPECT_EQ(not_replaying->batch_replay_stats().replayed, 0u);
    std::printf(
        "[ %-8s ] a settled flow push of 8 frames alone: %llu operations op by op, "
        "%llu replayed\n",
        name_.c_str(), (unsigned long long)ops_op_by_op, (unsigned long long)ops_replayed);
    EXPECT_EQ(ops_replayed, join ? 5u : 4u)
        << "two uploads, (the slot's upload,) the replay, a download";
    replayed.push(*device_, {0}, 5, true);
    op_by_op.push(*device_, {0}, 5, true);
    ASSERT_FALSE(replayed.joint_out(0).empty());
    EXPECT_TRUE(etude::test::identical(replayed.joint_out(0), op_by_op.joint_out(0)))
        << "max |difference| "
        << etude::test::max_abs_diff(replayed.joint_out(0), op_by_op.joint_out(0));
    EXPECT_LE(replayed.diff(0), kFlowBound);
    EXPECT_GT(etude::test::rms(replayed.joint_out(0)), 0.1) << "a flow of nothing";
}

// The flow's lone recordings are bounded as the decoder's are
// (recorded_step_test.cpp): with room for the first stream's sets only, a
// second stream's pushes run op by op, each its op-by-op flow bit for bit,
// until the first stream is gone.
TEST_P(PiperFlowReplay, lone_recordings_stay_within_the_flows_budget) {
    const int frames = 4 * 16 + 12 * 8 + 5;
    const auto net = flow(false);
    etude::engine::RecordingBudget& budget = net->lone_recordings();
    auto first = std::make_unique<FlowTwins>(net, flow(false), 1, frames);
    for (int i = 0; i < 4; ++i) first->push(*device_, {0}, 16, false);
    for (int i = 0; i < 3; ++i) first->push(*device_, {0}, 8, false);
    const std::size_t sets = budget.held();  // of its filling states, 16 and 8
    ASSERT_GT(sets, 0u);
    budget.set_max_bytes(sets);
    FlowTwins second(net, flow(false), 1, frames);
    FlowTwins reference(flow(false), flow(false), 1, frames);
    reference.joint(0).set_replay(false);
    const auto both = [&](int block, bool flush) {
        second.push(*device_, {0}, block, flush);
        reference.push(*device_, {0}, block, flush);
    };
    for (int i = 0; i < 4; ++i) both(16, false);
    for (int i = 0; i < 4; ++i) both(8, false);
    EXPECT_EQ(second.joint(0).replay_stats().recordings, 0u) << "a second set passed the budget";
    EXPECT_EQ(budget.held(), sets);
    first.reset();
    EXPECT_EQ(budget.held(), 0u);
    for (int i = 0; i < 8; ++i) both(8, false);
    both(5, true);
    EXPECT_GE(second.joint(0).replay_stats().recordings, 1u) << "the room given back was not used";
    EXPECT_TRUE(etude::test::identical(second.joint_out(0), reference.joint_out(0)))
        << "max |difference| "
        << etude::test::max_abs_diff(second.joint_out(0), reference.joint_out(0));
}

// A joiner's leader may run a batch of one that is another stream's push
// (once out of memory capped the batches at one, stream_joiner.h): where
// the streams keep recordings of their own (a flow whose held frames are
// not in the network's slots), the push replays its own stream's recording
// on its own held frames, never the leader's, which is settled on another
// prior with a recording of the same key. Stream 0 leads every push of
// stream 1 here. (Streams with slots share the lane's recordings, each
// replay naming its members' slots: the tests above.)
TEST_P(PiperFlowReplay, a_lone_push_led_by_another_stream_replays_its_own_recording) {
    const int frames = 4 * 16 + 6 * 8 + 5;
    FlowTwins twins(flow(false), flow(false), 2, frames);
    for (int i = 0; i < 4; ++i) twins.push(*device_, {0}, 16, false);
    for (int i = 0; i < 4; ++i) twins.push(*device_, {0}, 8, false);
    const ReplayStats leaders = twins.joint(0).replay_stats();
    ASSERT_GE(leaders.replayed, 3u) << "the leader replays pushes of 8 of its own";
    const auto led = [&](int block, bool flush) {
        twins.push_each(*device_, {1}, {block}, {flush}, 0);
    };
    for (int i = 0; i < 4; ++i) led(16, false);
    for (int i = 0; i < 6; ++i) led(8, false);
    led(5, true);
    EXPECT_EQ(twins.joint(0).replay_stats().replayed, leaders.replayed)
        << "the leader's recording ran for another stream's push";
    EXPECT_GE(twins.joint(1).replay_stats().replayed, 4u);
    EXPECT_LE(twins.diff(1), kFlowBound);
}

INSTANTIATE_TEST_SUITE_P(Backends, PiperFlowReplay,
                         ::testing::Values(etude::gpu::BackendKind::Vulkan,
                                           etude::gpu::BackendKind::Cuda),
                         [](const auto& info) { return etude::gpu::to_string(info.param); });

// On the CPU (and OpenCL) a replay would call the same operations one by
// one: every batch and every push alone runs op by op, and nothing is
// recorded.
TEST(PiperFlowReplayCpu, the_cpu_runs_every_batch_op_by_op) {
    const auto voice = PiperVoice::open(kVoice);
    const auto cpu = etude::gpu::shared_cpu_backend();
    const auto joint =
        std::make_shared<const VitsFlowNetwork>(*voice->network().flow_network(0), cpu);
    joint->set_join_streams(true);
    const auto solo =
        std::make_shared<const VitsFlowNetwork>(*voice->network().flow_network(0), cpu);
    FlowTwins twins(joint, solo, 2, 4 * 16 + 4 * 8);
    for (int i = 0; i < 4; ++i) twins.push(*cpu, {0, 1}, 16, false);
    for (int i = 0; i < 4; ++i) twins.push(*cpu, {0, 1}, 8, false);
    EXPECT_FALSE(twins.joint_out(0).empty());
    const ReplayStats st = joint->batch_replay_stats();
    EXPECT_EQ(st.recordings + st.replayed + st.op_by_op, 0u);
    FlowTwins lone(solo, solo, 1, 4 * 16 + 4 * 8);  // and a stream's pushes alone
    for (int i = 0; i < 4; ++i) lone.push(*cpu, {0}, 16, false);
    for (int i = 0; i < 4; ++i) lone.push(*cpu, {0}, 8, false);
    EXPECT_FALSE(lone.joint_out(0).empty());
    const ReplayStats alone = lone.joint(0).replay_stats();
    EXPECT_EQ(alone.recordings + alone.replayed + alone.op_by_op, 0u);
}

}  // namespace
