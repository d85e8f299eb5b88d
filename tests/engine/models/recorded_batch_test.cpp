// A settled batch of decoder streams side by side replayed from its
// recording (models/recorded_step.h: RecordedBatches) against the same
// batch run operation by operation, on a backend that replays natively:
// Vulkan (lavapipe in CI) and CUDA (on a GPU machine), each skipped without
// its device; on the CPU every batch runs op by op.
//
// The network: the Piper medium-shaped decoder of recorded_step_test.cpp
// (tests/data/piper/test_medium) on a random latent, its streams taking
// slots of their network (set_join_streams, as on a GPU) and pushed
// together (NetworkStream::push_together). A replayed batch issues the
// kernels its op-by-op run issues, on the same values, so the two agree
// bit for bit; against each stream pushed alone the bound is the one a
// batch holds against its streams alone on a device, 1e-5
// (joint_push_test.cpp), which also holds a batch split by page against
// the same batch whole on CUDA, whose cuBLAS sums a product of another
// shape in another order (test::batch_keeps_bits); against the CPU, the
// backends' parity bound, 1e-4.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/models/mel_vocoder_stream.h"
#include "engine/models/neural_model.h"
#include "engine/models/recorded_step.h"
#include "engine/models/stream_joiner.h"
#include "engine/models/vits/vits_decoder.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/piper_on_device.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

const std::string kVoice = test::test_data_dir() + "/piper/test_medium.onnx";
constexpr int kSampleRate = 22050;  // test_medium's (only metadata to the decoder)
constexpr int kLatentFrames = 320;  // four streams 60 frames apart, 120 frames each

std::vector<float> random_latent(int channels) {
    std::vector<float> l(static_cast<std::size_t>(channels) * kLatentFrames);
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : l) v = normal(rng);
    return l;
}

// A stream of a batch: where it reads the latent from, what it has taken,
// and its audio.
struct Member {
    std::unique_ptr<NetworkStream> stream;
    int start = 0, fed = 0;
    std::vector<float> audio, mel;
};

class RecordedBatch : public test::OnBackend {
  protected:
    RecordedBatch() : OnBackend(" — the replayed batch tests are skipped") {}
    void SetUp() override {
        OnBackend::SetUp();
        if (IsSkipped()) return;
        weights_ = std::make_shared<VitsWeights>(read_vits_weights(kVoice));
        model_ = load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", backend_);
        model_->set_join_streams(true);  // (its streams take slots, as on a GPU)
        latent_ = random_latent(model_->audio().n_mels);
    }
    void TearDown() override {
        if (!backend_) return;
        backend_->inject_fault({});
        backend_->set_profiling(false);
        backend_->reset_health();
    }
    // `count` streams of `model`, the i-th reading the latent from frame
    // 60 i; replaying where `replay`.
    std::vector<Member> open(const NeuralModel& model, std::size_t count, bool replay) {
        std::vector<Member> m(count);
        for (std::size_t i = 0; i < count; ++i) {
            m[i].stream = model.open_stream();
            m[i].stream->set_replay(replay);
            m[i].start = 60 * static_cast<int>(i);
        }
        return m;
    }
    // One push of `frames` frames by the members `who`, together (alone
    // where one); the operations it issued while profiling.
    std::uint64_t push(std::vector<Member>& members, const std::vector<std::size_t>& who,
                       int frames, bool flush = false) {
        std::vector<StreamPush> pushes;
        for (std::size_t i : who) {
            Member& m = members[i];
            copy_mel_frames(latent_, model_->audio().n_mels, kLatentFrames, m.start + m.fed, frames,
                            m.mel);
            pushes.push_back({m.stream.get(), m.mel.data(), frames, flush, &m.audio});
            m.fed += frames;
        }
        const std::uint64_t before = test::operations(*backend_);
        pushes[0].stream->push_together(pushes);
        return test::operations(*backend_) - before;
    }
    // A replayed stream's audio against the same stream's in batches op by
    // op that were split otherwise (steps of powers of two, pages): the same
    // bits where the backend's batches keep them, else within the 1e-5 a
    // batch holds against its streams alone (cuBLAS sums another shape in
    // another order).
    void expect_op_by_ops_audio(const Member& replayed, const Member& op_by_op) const {
        ASSERT_FALSE(replayed.audio.empty());
        if (test::batch_keeps_bits(GetParam()))
            EXPECT_TRUE(test::identical(replayed.audio, op_by_op.audio))
                << "max |difference| " << test::max_abs_diff(replayed.audio, op_by_op.audio);
        else
            EXPECT_LE(test::max_abs_diff(replayed.audio, op_by_op.audio), 1e-5);
        EXPECT_GT(test::rms(replayed.audio), 0.01) << "a silent decoder would compare nothing";
    }
    std::shared_ptr<const VitsWeights> weights_;
    std::shared_ptr<NeuralModel> model_;
    std::vector<float> latent_;
};

// Four streams (a power of two: one recorded step, RecordedBatches::
// step_sizes), three batches of 4 frames (the layers settle: three states,
// each a key sized op by op), seven of 8 and a last flushing one of 5: the
// first settled batch of 8 runs op by op (it sizes its key's buffers), the
// second is recorded and replayed, the other five replayed; the backend sees six native replays,
// each a batch's only operation besides its mels' uploads and its audio's downloads. Each stream's
// audio equals the same batches op by op (a second model's streams, replay off) bit for bit, and
// its audio pushed alone within 1e-5.
TEST_P(RecordedBatch, a_replayed_batch_equals_the_batch_op_by_op_bit_for_bit_and_the_solo_audio) {
    constexpr std::size_t kStreams = 4;
    auto twin_model = load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", backend_);
    twin_model->set_join_streams(true);
    auto solo_model = load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", backend_);
    std::vector<Member> replayed = open(*model_, kStreams, true);
    std::vector<Member> op_by_op = open(*twin_model, kStreams, false);
    std::vector<Member> solo = open(*solo_model, kStreams, true);
    const std::vector<std::size_t> all{0, 1, 2, 3};
    for (int i = 0; i < 3; ++i) {
        push(replayed, all, 4);
        push(op_by_op, all, 4);
        for (std::size_t s : all) push(solo, {s}, 4);
    }
    EXPECT_EQ(model_->batch_replay_stats().op_by_op, 3u) << "each filling state a key, sized";
    std::uint64_t ops_replayed = 0, ops_op_by_op = 0;
    backend_->reset_timings();
    for (int i = 0; i < 7; ++i) {
        backend_->set_profiling(true);
        ops_replayed = push(replayed, all, 8);
        ops_op_by_op = push(op_by_op, all, 8);
        backend_->set_profiling(false);
        for (std::size_t s : all) push(solo, {s}, 8);
    }
    const ReplayStats st = model_->batch_replay_stats();
    EXPECT_EQ(st.op_by_op, 3u + 1u);
    EXPECT_EQ(st.recordings, 1u);
    EXPECT_EQ(st.replayed, 6u);
    EXPECT_EQ(test::replays(*backend_), 6u) << "the backend's own count of native replays";
    EXPECT_EQ(twin_model->batch_replay_stats().replayed, 0u);
    std::printf(
        "[ %-8s ] a settled batch of %zu streams x 8 frames: %llu operations op by op, "
        "%llu replayed\n",
        gpu::to_string(GetParam()), kStreams, (unsigned long long)ops_op_by_op,
        (unsigned long long)ops_replayed);
    EXPECT_EQ(ops_replayed, 2 * kStreams + 2)
        << "the mels' uploads, the members' slots' upload, the replay, the downloads";
    push(replayed, all, 5, true);
    push(op_by_op, all, 5, true);
    for (std::size_t s : all) push(solo, {s}, 5, true);
    for (std::size_t s : all) {
        SCOPED_TRACE("stream " + std::to_string(s));
        ASSERT_FALSE(replayed[s].audio.empty());
        EXPECT_TRUE(test::identical(replayed[s].audio, op_by_op[s].audio))
            << "max |difference| " << test::max_abs_diff(replayed[s].audio, op_by_op[s].audio);
        ASSERT_EQ(replayed[s].audio.size(), solo[s].audio.size());
        EXPECT_LE(test::max_abs_diff(replayed[s].audio, solo[s].audio), 1e-5);
        EXPECT_GT(test::rms(replayed[s].audio), 0.01) << "a silent decoder would compare nothing";
    }
}

// A lone push of a stream with a slot replays the lane's recordings as a
// batch of one, so that every stream of the network shares them: three
// streams pushed one at a time through one schedule (three chunks of 4 as
// the layers fill, three of 8, a flush of 5), the first sizes each key,
// the second records it, and the third replays every push, a native
// replay and its uploads and download each. Each stream's audio equals the
// same pushes op by op bit for bit (on CUDA within 1e-5: a batch of one is
// another shape than a stream's own walk).
TEST_P(RecordedBatch, a_lone_push_replays_the_recordings_every_stream_of_the_network_shares) {
    auto twin_model = load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", backend_);
    twin_model->set_join_streams(true);
    std::vector<Member> replayed = open(*model_, 3, true);
    std::vector<Member> op_by_op = open(*twin_model, 3, false);
    const std::vector<std::pair<int, bool>> schedule = {{4, false}, {4, false}, {4, false},
                                                        {8, false}, {8, false}, {8, false},
                                                        {4, false}, {1, true}};
    ReplayStats before;
    for (std::size_t s = 0; s < 3; ++s) {
        before = model_->batch_replay_stats();
        backend_->reset_timings();
        backend_->set_profiling(true);
        std::uint64_t most_ops = 0;
        for (const auto& [frames, flush] : schedule)
            most_ops = std::max(most_ops, push(replayed, {s}, frames, flush));
        backend_->set_profiling(false);
        for (const auto& [frames, flush] : schedule) push(op_by_op, {s}, frames, flush);
        if (s == 2) {
            EXPECT_EQ(most_ops, 4u) << "a push's mels and slot uploaded, its replay, its download";
            EXPECT_EQ(test::replays(*backend_), schedule.size());
        }
    }
    const ReplayStats st = model_->batch_replay_stats();
    EXPECT_EQ(st.op_by_op, before.op_by_op) << "the third stream sized a key";
    EXPECT_EQ(st.recordings, before.recordings) << "the third stream recorded a key";
    EXPECT_EQ(st.replayed - before.replayed, schedule.size());
    EXPECT_EQ(twin_model->batch_replay_stats().replayed, 0u);
    for (std::size_t s = 0; s < 3; ++s) {
        SCOPED_TRACE("stream " + std::to_string(s));
        expect_op_by_ops_audio(replayed[s], op_by_op[s]);
    }
}

// A page's members split into steps of powers of two, largest first, so
// that a lane's batches of every size up to a page's hold a few keys.
TEST(RecordedBatchSteps, a_page_splits_into_powers_of_two_largest_first) {
    using Sizes = std::vector<std::size_t>;
    EXPECT_EQ(RecordedBatches::step_sizes(0), Sizes{});
    EXPECT_EQ(RecordedBatches::step_sizes(1), Sizes{1});
    EXPECT_EQ(RecordedBatches::step_sizes(4), Sizes{4});
    EXPECT_EQ(RecordedBatches::step_sizes(13), (Sizes{8, 4, 1}));
    EXPECT_EQ(RecordedBatches::step_sizes(255), (Sizes{128, 64, 32, 16, 8, 4, 2, 1}));
    EXPECT_EQ(RecordedBatches::step_sizes(256), Sizes{256});
}

// A batch of three members in page 0 and five in page 1 (slot order) runs
// as steps 2, 1 (page 0), then 4, 1 (page 1), each given its members, their
// slots in the page and the page; a first step with no set leaves the whole
// batch op by op, having run nothing; a later one is a logic error.
TEST(RecordedBatchSteps, a_batch_runs_each_pages_members_as_steps_with_their_slots) {
    struct Slot {
        std::size_t page;
        int index;
        std::pair<std::size_t, int> order() const { return {page, index}; }
    };
    const std::vector<Slot> slots = {{0, 3}, {0, 5}, {0, 9}, {1, 0},
                                     {1, 1}, {1, 4}, {1, 7}, {1, 8}};
    struct Step {
        std::vector<std::size_t> members;
        std::vector<int> slots;
        long page;
    };
    std::vector<Step> ran;
    const auto slot_of = [&](std::size_t i) -> const Slot& { return slots[i]; };
    const auto record = [&](const std::vector<std::size_t>& m, std::vector<int> s, long page) {
        ran.push_back({m, std::move(s), page});
        return true;
    };
    ASSERT_TRUE(RecordedBatches::run_by_page(slots.size(), slot_of, record));
    ASSERT_EQ(ran.size(), 4u);
    EXPECT_EQ(ran[0].members, (std::vector<std::size_t>{0, 1}));
    EXPECT_EQ(ran[0].slots, (std::vector<int>{3, 5}));
    EXPECT_EQ(ran[0].page, 0);
    EXPECT_EQ(ran[1].members, (std::vector<std::size_t>{2}));
    EXPECT_EQ(ran[1].slots, (std::vector<int>{9}));
    EXPECT_EQ(ran[2].members, (std::vector<std::size_t>{3, 4, 5, 6}));
    EXPECT_EQ(ran[2].slots, (std::vector<int>{0, 1, 4, 7}));
    EXPECT_EQ(ran[2].page, 1);
    EXPECT_EQ(ran[3].members, (std::vector<std::size_t>{7}));
    EXPECT_EQ(ran[3].slots, (std::vector<int>{8}));
    EXPECT_EQ(ran[3].page, 1);
    int calls = 0;
    EXPECT_FALSE(RecordedBatches::run_by_page(slots.size(), slot_of,
                                              [&](const auto&, std::vector<int>, long) {
                                                  ++calls;
                                                  return false;
                                              }));
    EXPECT_EQ(calls, 1) << "nothing more is tried once the first step has no set";
    calls = 0;
    EXPECT_THROW(RecordedBatches::run_by_page(
                     slots.size(), slot_of,
                     [&](const auto&, std::vector<int>, long) { return ++calls == 1; }),
                 std::logic_error);
}

// Three streams: each settled batch runs as a step of two and a step of
// one (the first of each sized op by op, the second recorded, the rest
// replayed), two native replays a batch; each stream's audio equals the
// same batches op by op bit for bit (on CUDA within 1e-5: the op-by-op
// batch of three is another cuBLAS shape).
TEST_P(RecordedBatch, a_batch_of_three_replays_as_steps_of_two_and_one) {
    auto twin_model = load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", backend_);
    twin_model->set_join_streams(true);
    std::vector<Member> replayed = open(*model_, 3, true);
    std::vector<Member> op_by_op = open(*twin_model, 3, false);
    const std::vector<std::size_t> all{0, 1, 2};
    for (int i = 0; i < 3; ++i) {
        push(replayed, all, 4);
        push(op_by_op, all, 4);
    }
    backend_->reset_timings();
    std::uint64_t ops_replayed = 0;
    for (int i = 0; i < 5; ++i) {
        backend_->set_profiling(true);
        ops_replayed = push(replayed, all, 8);
        backend_->set_profiling(false);
        push(op_by_op, all, 8);
    }
    const ReplayStats st = model_->batch_replay_stats();
    EXPECT_EQ(st.op_by_op, 2u * 3u + 2u)
        << "a key of two members and one of one, for each filling state and settled";
    EXPECT_EQ(st.recordings, 2u);
    EXPECT_EQ(st.replayed, 2u * 4u);
    EXPECT_EQ(test::replays(*backend_), 2u * 4u);
    EXPECT_EQ(ops_replayed, 2u * 3u + 2u * 2u)
        << "each step: its mels' uploads, its slots' upload, its replay, its downloads";
    for (std::size_t s : all) {
        SCOPED_TRACE("stream " + std::to_string(s));
        expect_op_by_ops_audio(replayed[s], op_by_op[s]);
    }
}

// A key is the length, the members' state and their count (their page the
// recording's variant): the same members again (pushed in another order)
// replay their recording; once the first one has left, the other three are
// another batch, run as steps of two and one (RecordedBatches::
// step_sizes), each a key recorded anew and never replayed from the four's
// recording (which would run the leaver's slot and hand its items to the
// wrong streams); a new length is another key too. Each key: sized,
// recorded once, then replayed.
TEST_P(RecordedBatch, each_key_is_recorded_once_and_a_member_leaving_does_not_replay_a_stale_one) {
    auto twin_model = load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", backend_);
    twin_model->set_join_streams(true);
    std::vector<Member> replayed = open(*model_, 4, true);
    std::vector<Member> op_by_op = open(*twin_model, 4, false);
    const auto both = [&](const std::vector<std::size_t>& who, int frames) {
        push(replayed, who, frames);
        push(op_by_op, who, frames);
    };
    for (int i = 0; i < 3; ++i) both({0, 1, 2, 3}, 4);
    for (int i = 0; i < 3; ++i) both({0, 1, 2, 3}, 8);
    both({2, 0, 3, 1}, 8);  // the same slots: the same key
    ReplayStats st = model_->batch_replay_stats();
    EXPECT_EQ(st.op_by_op, 3u + 1u) << "three filling states and the settled 8";
    EXPECT_EQ(st.recordings, 1u);
    EXPECT_EQ(st.replayed, 3u);
    // Stream 0 leaves between batches.
    const std::vector<float> left = replayed[0].audio;
    replayed[0].stream.reset();
    op_by_op[0].stream.reset();
    both({1, 2, 3}, 8);
    const ReplayStats after_leaving = model_->batch_replay_stats();
    EXPECT_EQ(after_leaving.replayed, st.replayed) << "the four's recording was replayed";
    EXPECT_EQ(after_leaving.op_by_op, st.op_by_op + 2)
        << "steps of two and one: two new keys, each sizing its buffers";
    for (int i = 0; i < 3; ++i) both({3, 2, 1}, 8);
    st = model_->batch_replay_stats();
    EXPECT_EQ(st.recordings, 1u + 2u);
    EXPECT_EQ(st.replayed, 3u + 2u * 3u);
    both({1, 2, 3}, 16);  // another length: other keys
    both({1, 2, 3}, 16);
    st = model_->batch_replay_stats();
    EXPECT_EQ(st.op_by_op, 3u + 1u + 2u + 2u);
    EXPECT_EQ(st.recordings, 1u + 2u + 2u);
    EXPECT_TRUE(test::identical(left, op_by_op[0].audio));
    for (std::size_t s : {1, 2, 3}) {  // (op by op a batch of three: another split)
        SCOPED_TRACE("stream " + std::to_string(s));
        expect_op_by_ops_audio(replayed[s], op_by_op[s]);
    }
}

// Members of one page copy their held samples by slot index
// (batch_major.h's SlotIndexed), so a recording serves any two streams of
// the page: {0, 1} sizes the key's buffers, {2, 3} records, {0, 3} and
// {1, 2} replay it. A batch over two pages (streams a and b are page 1's
// first: 16 and 17 on lavapipe, 256 and 257 on a large GPU) runs as
// recorded steps per page (here one a page: each page's count a power of
// two), keyed by its member count, the page its
// recording's variant: {0, 1, a, b} replays page 0's pair and records
// page 1's; {2, a, b} sizes a key of one member and replays page 1's pair;
// {3, b} records that key's two pages. Each stream's audio is the same bit
// for bit as the same batches op by op, which run a batch over two pages
// whole; on CUDA within 1e-5 of it (another shape, another order of sums).
TEST_P(RecordedBatch, any_members_of_a_page_replay_its_recording_and_a_batch_splits_by_page) {
    const std::size_t a = static_cast<std::size_t>(HeldSlots::slots_per_page(*backend_)), b = a + 1;
    auto twin_model = load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", backend_);
    twin_model->set_join_streams(true);
    std::vector<Member> replayed = open(*model_, b + 1, true);
    std::vector<Member> op_by_op = open(*twin_model, b + 1, false);
    for (std::size_t i : {a, b})  // (within the latent)
        replayed[i].start = op_by_op[i].start = 100 + 60 * static_cast<int>(i - a);
    const auto both = [&](const std::vector<std::size_t>& who, int frames) {
        push(replayed, who, frames);
        push(op_by_op, who, frames);
    };
    for (int i = 0; i < 3; ++i) both({0, 1, 2, 3, a, b}, 4);  // the layers settle
    for (const std::vector<std::size_t>& pair :
         std::vector<std::vector<std::size_t>>{{0, 1}, {2, 3}, {0, 3}, {1, 2}})
        both(pair, 8);
    // (The three filling states: keys of four members and of two, sized.)
    ReplayStats st = model_->batch_replay_stats();
    EXPECT_EQ(st.op_by_op, 2u * 3u + 1u);
    EXPECT_EQ(st.recordings, 1u);
    EXPECT_EQ(st.replayed, 3u) << "any two streams of page 0 replay the one recording";
    both({0, 1, a, b}, 8);
    both({2, a, b}, 8);
    both({3, b}, 8);
    st = model_->batch_replay_stats();
    EXPECT_EQ(st.op_by_op, 2u * 3u + 2u) << "a key of two members and one of one";
    EXPECT_EQ(st.recordings, 4u) << "each key's recording for each page";
    EXPECT_EQ(st.replayed, 8u);
    for (std::size_t s : {std::size_t(0), std::size_t(1), std::size_t(2), std::size_t(3), a, b}) {
        SCOPED_TRACE("stream " + std::to_string(s));
        expect_op_by_ops_audio(replayed[s], op_by_op[s]);
    }
}

// A page's size: one slot on OpenCL (batch_major.h says why), 256 on a GPU
// of 32 GB or more (30 GiB reported), where a thousand streams then replay
// in four pages, else 16 (a CPU device such as lavapipe, a small GPU).
TEST(HeldSlotsPage, is_one_on_opencl_256_on_a_large_gpu_else_16) {
    const auto page = [](gpu::BackendKind kind, bool gpu, std::size_t gib) {
        gpu::DeviceInfo info;
        info.kind = kind;
        info.is_gpu = gpu;
        info.global_memory = gib << 30;
        return HeldSlots::slots_per_page(info);
    };
    EXPECT_EQ(page(gpu::BackendKind::OpenCl, true, 141), 1);
    EXPECT_EQ(page(gpu::BackendKind::Cuda, true, 141), 256);
    EXPECT_EQ(page(gpu::BackendKind::Vulkan, true, 32), 256);
    EXPECT_EQ(page(gpu::BackendKind::Cuda, true, 31), 256);  // a card sold as 32 GB
    EXPECT_EQ(page(gpu::BackendKind::Cuda, true, 24), 16);
    EXPECT_EQ(page(gpu::BackendKind::Cuda, true, 8), 16);      // a Jetson's shared memory
    EXPECT_EQ(page(gpu::BackendKind::Vulkan, false, 64), 16);  // lavapipe on a large host
    EXPECT_EQ(page(gpu::BackendKind::Cpu, false, 64), 16);
}

// The recordings a lane holds are bounded (RecordedBatches::kMaxBatches
// keys, each with its own joint buffers): a key past them takes the place
// of the one used longest ago, which, seen again, is sized and recorded
// anew; a key used since stays. A lane's own RecordedBatches, on the CPU
// backend (a recording there calls the operations again: the bookkeeping
// is the same), with keys of every length: decoder keys that many would
// need gigabytes of lavapipe's memory.
TEST(RecordedBatchCpu, past_kmaxbatches_keys_the_one_used_longest_ago_is_dropped) {
    constexpr long kKeys = static_cast<long>(RecordedBatches::kMaxBatches);
    auto backend = gpu::shared_cpu_backend();
    auto q = backend->create_queue();
    JointScratch joint;
    RecordedBatches batches(*backend, joint);
    const auto run = [&](long key) {
        RecordedSteps::Step step;
        step.stage_input = [](gpu::Queue&) {};
        step.body = [&](gpu::Queue& bq) {
            auto& b = joint.signals[0].need(*backend, 16);
            backend->fill(bq, b, 1.0f, 16);
            return SignalRef{&b, 1, 16};
        };
        step.take_output = [](gpu::Queue&, const SignalRef&) {};
        step.host_counts = [](std::vector<HostCount>&) {};
        ASSERT_TRUE(batches.steps().run(*q, {key}, step));
    };
    const auto sized = [&] { return batches.steps().stats().op_by_op; };
    for (long key = 1; key <= kKeys; ++key) run(key);
    ASSERT_EQ(sized(), std::uint64_t(kKeys));
    run(1);          // 1 used again: 2 is now the oldest
    run(kKeys + 1);  // a key more: 2's place
    EXPECT_EQ(sized(), std::uint64_t(kKeys + 1)) << "the new key got no buffers";
    run(1);
    EXPECT_EQ(sized(), std::uint64_t(kKeys + 1)) << "1, used since, was dropped";
    run(2);
    EXPECT_EQ(sized(), std::uint64_t(kKeys + 2)) << "2 was not dropped";
}

// A device fault at a replayed batch (after its mels' uploads: the replay):
// every push of the batch fails as any device error does, each stream remakes
// its chunk on the CPU copy of the model (as the engine's scheduler does),
// goes back to the device, where the batches replay again (the new
// runners' first chunks are keys of their own, some recorded now), and each
// stream's audio equals the CPU's. The streams
// (MelVocoderStreams, each on a thread of its own as in the engine) meet
// in batches through the model's joiner, paused until every push waits.
TEST_P(RecordedBatch, a_fault_in_a_replayed_batch_is_remade_on_the_cpu_and_the_streams_go_on) {
    constexpr std::size_t kStreams = 4;  // (one recorded step: a power of two)
    auto cpu_model = std::shared_ptr<const NeuralModel>(
        load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", gpu::shared_cpu_backend()));
    const std::shared_ptr<const NeuralModel> device_model = model_;
    StreamJoiner& joiner = *model_->joiner();
    std::vector<std::unique_ptr<MelVocoderStream>> streams, reference;
    for (std::size_t i = 0; i < kStreams; ++i) {
        streams.push_back(std::make_unique<MelVocoderStream>(device_model));
        reference.push_back(std::make_unique<MelVocoderStream>(cpu_model));
    }
    const int n_mels = model_->audio().n_mels;
    const std::vector<int> chunks = {16, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
    const std::size_t fault_at = 6;  // settled from the second; recorded, replayed before it
    std::vector<std::vector<float>> got(kStreams), want(kStreams);
    std::atomic<int> faults{0};
    ReplayStats at_fault;
    int f = 0;
    for (std::size_t c = 0; c < chunks.size(); ++c) {
        std::vector<std::vector<float>> parts(kStreams);
        for (std::size_t i = 0; i < kStreams; ++i) {
            copy_mel_frames(latent_, n_mels, kLatentFrames, 60 * static_cast<int>(i) + f, chunks[c],
                            parts[i]);
            const auto w = reference[i]->push(parts[i], chunks[c]);
            want[i].insert(want[i].end(), w.begin(), w.end());
            streams[i]->append(parts[i], chunks[c]);
        }
        f += chunks[c];
        if (c == fault_at) {
            at_fault = model_->batch_replay_stats();
            ASSERT_GE(at_fault.replayed, 1u) << "batches of 8 replay before the fault";
            gpu::GpuFault fault;
            fault.kind = gpu::GpuFault::KernelFailure;
            fault.count = 1;
            fault.after = kStreams + 1;  // the mels' and the slots' uploads, then the replay
            backend_->inject_fault(fault);
        }
        // Every stream's drain on a thread of its own; one that has no
        // frames ready pushes nothing, and is done.
        std::atomic<std::size_t> done{0};
        joiner.pause();
        std::vector<std::thread> threads;
        for (std::size_t i = 0; i < kStreams; ++i)
            threads.emplace_back([&, i] {
                std::vector<float> out;
                try {
                    out = streams[i]->drain(false);
                } catch (const gpu::DeviceError& e) {
                    ++faults;
                    EXPECT_NE(std::string(e.what()).find("replay"), std::string::npos) << e.what();
                    streams[i]->set_model(cpu_model);
                    out = streams[i]->drain(false);
                } catch (const std::exception& e) {
                    ADD_FAILURE() << "stream " << i << ": " << e.what();
                }
                got[i].insert(got[i].end(), out.begin(), out.end());
                ++done;
            });
        test::wait_until([&] { return joiner.waiting() + done.load() == kStreams; });
        joiner.resume();
        for (auto& t : threads) t.join();
        if (c == fault_at) {
            backend_->inject_fault({});
            backend_->reset_health();
            for (auto& s : streams) s->set_model(device_model);  // back from the next chunk
        }
    }
    for (std::size_t i = 0; i < kStreams; ++i) {
        const auto w = reference[i]->finish();
        want[i].insert(want[i].end(), w.begin(), w.end());
        const auto rest = streams[i]->finish();
        got[i].insert(got[i].end(), rest.begin(), rest.end());
    }
    EXPECT_EQ(faults.load(), static_cast<int>(kStreams)) << "every push of the batch hears of it";
    const ReplayStats after = model_->batch_replay_stats();
    EXPECT_GT(after.replayed, at_fault.replayed + 2)
        << "back on the device, the batches replay their recording again";
    for (std::size_t i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_EQ(got[i].size(), want[i].size());
        EXPECT_LE(test::max_abs_diff(got[i], want[i]), 1e-4);
        EXPECT_GT(test::rms(want[i]), 0.01);
    }
}

// On the CPU (and OpenCL) a replay would call the same operations one by
// one: every batch runs op by op, and nothing is recorded.
TEST(RecordedBatchCpu, the_cpu_runs_every_batch_op_by_op) {
    const auto weights = read_vits_weights(kVoice);
    auto model =
        load_vits_decoder(weights, kSampleRate, 0, "test_medium", gpu::shared_cpu_backend());
    model->set_join_streams(true);
    const std::vector<float> latent = random_latent(model->audio().n_mels);
    std::vector<std::unique_ptr<NetworkStream>> streams;
    std::vector<std::vector<float>> audio(2), mels(2);
    for (int i = 0; i < 2; ++i) streams.push_back(model->open_stream());
    for (int round = 0; round < 8; ++round) {
        std::vector<StreamPush> pushes;
        for (std::size_t i = 0; i < 2; ++i) {
            copy_mel_frames(latent, model->audio().n_mels, kLatentFrames,
                            60 * static_cast<int>(i) + 8 * round, 8, mels[i]);
            pushes.push_back({streams[i].get(), mels[i].data(), 8, false, &audio[i]});
        }
        pushes[0].stream->push_together(pushes);
    }
    EXPECT_GT(audio[0].size(), 0u);
    const ReplayStats st = model->batch_replay_stats();
    EXPECT_EQ(st.recordings + st.replayed + st.op_by_op, 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, RecordedBatch,
                         ::testing::Values(gpu::BackendKind::Vulkan, gpu::BackendKind::Cuda),
                         [](const auto& info) { return std::string(gpu::to_string(info.param)); });

}  // namespace
}  // namespace etude::engine
