// Several streams of one neural vocoder pushed together (one backend call per
// layer for all of them, NetworkStream::push_together) against the same
// streams pushed alone: each stream's audio must be its solo audio. The
// streams start at different frames of the reference mel, push chunks of
// different sizes, sit some pushes out and end at different pushes, so the
// windows lined up side by side differ in length and in how much each layer
// holds (a stream's first chunk has the left padding in front of it, its last
// the right padding behind).
//
// Tolerance: none for the CPU backend's direct convolutions (AVX2 with FMA or NEON;
// every layer of these test models), which sum each output in one fixed
// order wherever it lies in the signal, so a stream's outputs are the same
// operations in the same order together or alone. SGEMM (the CPU's other
// path, which a real voice's largest upsamplers take) and a GPU's kernels may
// block a longer signal's sums differently: there the bound is the one
// chunked streaming already holds against a whole run for the same reason,
// 1e-5 on outputs of magnitude up to 1 (tanh), about 2^7 float roundings
// (2^-23 each) of the largest sums.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "audio-io/npy_file.h"
#include "engine/models/batch_major.h"
#include "engine/models/neural_model.h"
#include "gpu/cpu/cpu_direct_conv.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

const std::string kData = test::test_data_dir() + "/neural/";

class JointPush : public test::OnBackend {
  protected:
    JointPush() : OnBackend(" — these tests are skipped") {}
};

// One stream's plan: where in the mel it starts, its chunk sizes in turn
// (0: sits this push out), and how many frames it takes in all.
struct Plan {
    int start = 0;
    std::vector<int> chunks;
    int frames = 0;
};

// Pushes every stream of `plans` alone and, in a twin, together with the
// others due at the same push; each twin's audio must equal its solo audio
// (bit for bit when `exact`).
// A stream's audio from a batch against its audio pushed alone: the same
// bits where `exact` (the CPU's direct convolutions: a batch item is the
// same computation), else within 1e-5 (a device's rounding).
void expect_its_solo_audio(const std::vector<float>& got, const std::vector<float>& want,
                           bool exact) {
    ASSERT_EQ(got.size(), want.size());
    ASSERT_FALSE(want.empty());
    const double diff = test::max_abs_diff(got, want);  // a NaN counts as infinitely far
    if (exact) {
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * want.size()))
            << "max |difference| " << diff;
        EXPECT_EQ(diff, 0.0);
    } else {
        EXPECT_LE(diff, 1e-5);
    }
}

void check_together_equals_alone(const std::shared_ptr<gpu::Backend>& backend, const char* name,
                                 bool exact) {
    const std::vector<Plan> plans = {
        {0, {4}, 40},               // the engine's Piper chunk at 100 ms
        {3, {1, 7, 0, 2, 13}, 45},  // short and long, a push sat out
        {10, {32, 0, 0, 5}, 38},    // a long first chunk
        {7, {2, 3}, 9},             // ends (flushes) while the others go on
        {1, {0, 0, 6, 9, 1}, 47},   // joins late
        {5, {4}, 40},               // the first one's chunks from another frame:
                                    // their windows line up, one batched call
    };
    SCOPED_TRACE(name);
    auto mel_file = audio_io::read_npy(kData + std::string(name) + "_mel.npy");
    const int n_mels = static_cast<int>(mel_file.shape[0]);
    const int total = static_cast<int>(mel_file.shape[1]);
    auto model = NeuralModel::load(kData + name + ".lef", backend);
    const std::size_t count = plans.size();
    std::vector<std::unique_ptr<NetworkStream>> joint(count), solo(count);
    for (std::size_t i = 0; i < count; ++i) {
        joint[i] = model->open_stream();
        solo[i] = model->open_stream();
        ASSERT_TRUE(joint[i] && solo[i]) << name << " runs incrementally";
    }
    std::vector<std::vector<float>> joint_out(count), solo_out(count), mels(count);
    std::vector<int> fed(count, 0);
    std::vector<bool> done(count, false);
    int joined = 0;  // pushes that joined two or more streams
    for (int round = 0; std::find(done.begin(), done.end(), false) != done.end(); ++round) {
        std::vector<StreamPush> pushes;
        for (std::size_t i = 0; i < count; ++i) {
            const Plan& p = plans[i];
            if (done[i]) continue;
            const int want = p.chunks[static_cast<std::size_t>(round) % p.chunks.size()];
            if (want == 0) continue;
            const int n = std::min(want, p.frames - fed[i]);
            const bool flush = fed[i] + n == p.frames;
            ASSERT_LE(p.start + p.frames, total);
            copy_mel_frames(mel_file.data, n_mels, total, p.start + fed[i], n, mels[i]);
            solo[i]->push(mels[i].data(), n, flush, solo_out[i], Batching::Alone);
            pushes.push_back({joint[i].get(), mels[i].data(), n, flush, &joint_out[i]});
            fed[i] += n;
            done[i] = flush;
        }
        if (pushes.empty()) continue;
        joined += pushes.size() > 1;
        pushes[0].stream->push_together(pushes);
    }
    EXPECT_GT(joined, 3);
    // Windows that line up did run as one call (Vocos never batches).
    if (std::string(name) != "vocos") {
        EXPECT_GT(model->batched_layer_calls(), 0u);
    }
    for (std::size_t i = 0; i < count; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        expect_its_solo_audio(joint_out[i], solo_out[i], exact);
    }
}

const char* const kModels[] = {"hifigan_v1", "hifigan_v2", "hifigan_v3", "vocos"};

// Whether this CPU runs the test models' layers through the direct loops
// (an x86-64 CPU without AVX2 with FMA, or ETUDE_CPU_DIRECT_CONV=0: SGEMM).
bool cpu_runs_direct() {
    gpu::Conv1dShape conv;
    conv.kernel = 3;
    gpu::Conv1dShape up;
    up.kernel = 4;
    up.stride = 2;
    up.padding = 1;
    return gpu::cpu::direct_conv1d_applies(conv) && gpu::cpu::direct_conv_transpose1d_applies(up);
}

TEST_P(JointPush, each_stream_pushed_together_gives_its_solo_audio) {
    const bool exact = GetParam() == gpu::BackendKind::Cpu && cpu_runs_direct();
    for (const char* name : kModels) check_together_equals_alone(backend_, name, exact);
}

// A steady batch (every stream settled, pushing 4-frame chunks, none flushing)
// runs side by side (engine/models/batch_major.h): each stream's audio is
// still its solo audio, through streams leaving the batch (one dropped, as a
// cancelled stream is, one sitting a push out), a lone push between batches
// (replayed from its recording where the backend records), a batch of streams
// in scattered slots and the final flush (side by side too). The twins' layers hold their samples
// in slots of their network's buffers (HeldSlots), the solo streams' (of a
// second model, which does not batch) in buffers of their own. And a stream's
// share of the batch's operations is its own only: its mel's upload and its
// audio's download, 2 (the held samples of streams in neighbouring slots, as
// the twins are, opened one after another, go as one copy per layer for all of
// them). Looser, and true even for streams in scattered slots (two copies per
// layer and delay): under half a lone push's operations (its window's three
// copies, the activation and the convolution per layer, two to five copies and
// the sum per delay). Before the batches ran side by side a stream's share was
// more than a lone push (each layer's window copied into the joint buffer and
// its outputs out again).
TEST_P(JointPush, a_steady_batch_runs_side_by_side_each_stream_its_solo_audio) {
    const bool cpu = GetParam() == gpu::BackendKind::Cpu, exact = cpu && cpu_runs_direct();
    // On a device, V1 (V2's layers at twice the channels) is left out:
    // lavapipe takes most of a minute over it.
    const std::vector<std::string> names = {"hifigan_v1", "hifigan_v2", "hifigan_v3"};
    for (std::size_t n = cpu ? 0 : 1; n < names.size(); ++n) {
        const char* name = names[n].c_str();
        SCOPED_TRACE(name);
        auto mel_file = audio_io::read_npy(kData + std::string(name) + "_mel.npy");
        const int n_mels = static_cast<int>(mel_file.shape[0]);
        const int total = static_cast<int>(mel_file.shape[1]);
        auto model = NeuralModel::load(kData + name + ".lef", backend_);
        model->set_join_streams(true);  // (its streams then take slots, as on a GPU)
        // The solo streams' layers hold their samples in buffers of their
        // own: a network that does not batch.
        auto solo_model = NeuralModel::load(kData + name + ".lef", backend_);
        solo_model->set_join_streams(false);
        constexpr std::size_t kStreams = 8;
        // Stream 0 pushes the most, 12 chunks from frame 0 (stream i starts
        // at frame i and pushes fewer).
        constexpr int kChunk = 4;
        ASSERT_GE(total, 12 * kChunk);
        std::vector<std::unique_ptr<NetworkStream>> joint(kStreams), solo(kStreams);
        for (auto& s : joint) ASSERT_TRUE(s = model->open_stream());
        for (auto& s : solo) ASSERT_TRUE(s = solo_model->open_stream());
        std::vector<std::vector<float>> joint_out(kStreams), solo_out(kStreams), mels(kStreams);
        std::vector<int> fed(kStreams, 0);
        // One push of the streams `who` (stream i from mel frame i on); the
        // operations it issued.
        const auto push = [&](const std::vector<std::size_t>& who, bool flush) {
            std::vector<StreamPush> pushes;
            for (std::size_t i : who) {
                copy_mel_frames(mel_file.data, n_mels, total, static_cast<int>(i) + fed[i], kChunk,
                                mels[i]);
                solo[i]->push(mels[i].data(), kChunk, flush, solo_out[i], Batching::Alone);
                pushes.push_back({joint[i].get(), mels[i].data(), kChunk, flush, &joint_out[i]});
                fed[i] += kChunk;
            }
            const std::uint64_t before = test::operations(*backend_);
            pushes[0].stream->push_together(pushes);
            return test::operations(*backend_) - before;
        };
        const std::vector<std::size_t> all{0, 1, 2, 3, 4, 5, 6, 7}, half{0, 1, 2, 3};
        // The first chunks of streams started together go side by side too
        // (their layers in one state): a stream's share of a first push is
        // its mel's upload alone (a first 4-frame chunk makes no audio yet:
        // the layers' lags), where walked layer by layer, as first chunks
        // went before, it was about a third of three streams' push. (Op by
        // op: replayed, the five would be recorded steps of four and one.)
        for (auto& s : joint) s->set_replay(false);
        backend_->set_profiling(true);
        const std::uint64_t first_five = push({0, 1, 2, 3, 4}, false);
        const std::uint64_t first_three = push({5, 6, 7}, false);
        backend_->set_profiling(false);
        const std::uint64_t first_share = (first_five - first_three) / 2;
        std::printf("[ %-8s ] %s, a first push: 3 streams %llu operations, 5 streams %llu\n",
                    gpu::to_string(GetParam()), name, (unsigned long long)first_three,
                    (unsigned long long)first_five);
        if (HeldSlots::slots_per_page(*backend_) > 1) {
            EXPECT_EQ(first_share, 1u)
                << "a first push: 3 streams " << first_three << ", 5 streams " << first_five;
        }
        EXPECT_LT(first_share, first_three / 4);
        // The batches measured run op by op too: a batch replays from its
        // recording where the backend records (recorded_batch_test.cpp).
        for (int round = 0; round < 4; ++round) push(all, false);  // the windows fill
        backend_->set_profiling(true);
        const std::uint64_t four = push(half, false);  // 4..7 sit this one out
        const std::uint64_t eight = push(all, false);
        const std::uint64_t alone = push({0}, false);
        backend_->set_profiling(false);
        for (auto& s : joint) s->set_replay(true);
        const double share = static_cast<double>(eight - four) / 4.0;
        EXPECT_LT(2.0 * share, static_cast<double>(alone))
            << "operations: 4 streams " << four << ", 8 streams " << eight << ", one alone "
            << alone;
        // (On OpenCL each slot is a page of its own, batch_major.h says why:
        // each stream's held samples then go in copies of their own.)
        if (HeldSlots::slots_per_page(*backend_) > 1) {
            EXPECT_EQ(share, 2.0) << "a stream in a neighbouring slot: its mel's upload and its "
                                     "audio's download";
        }
        push({0}, false);           // alone, replayed where the backend records
        push({6, 2, 4, 0}, false);  // scattered slots: a copy for each
        joint[7].reset();           // a stream dropped between batches
        solo[7].reset();
        const std::vector<std::size_t> seven{0, 1, 2, 3, 4, 5, 6};
        push(seven, false);
        // Their sentences' ends together (all settled, in one state) go
        // side by side too: under half of seven flushes alone, each more
        // than a lone push (its zeros' copies besides).
        backend_->set_profiling(true);
        const std::uint64_t flush_seven = push(seven, true);
        backend_->set_profiling(false);
        std::printf("[ %-8s ] %s, a steady push alone %llu operations, 7 streams' flush %llu\n",
                    gpu::to_string(GetParam()), name, (unsigned long long)alone,
                    (unsigned long long)flush_seven);
        EXPECT_LT(2 * flush_seven, 7 * alone) << "the flushes went their own ways";
        for (std::size_t i = 0; i + 1 < kStreams; ++i) {
            SCOPED_TRACE("stream " + std::to_string(i));
            expect_its_solo_audio(joint_out[i], solo_out[i], exact);
        }
    }
}

// The CPU's other path, im2col or col2im around SGEMM, taken where the
// direct loops do not apply (x86-64 without AVX2, or a large upsampler such
// as a real Piper voice's first two): OpenBLAS blocks a longer product
// differently, so within the tolerance above (measured here: up to 2.3e-6).
TEST(JointPushCpu, each_stream_pushed_together_gives_its_solo_audio_through_sgemm) {
    std::string why;
    auto backend = test::backend_of(gpu::BackendKind::Cpu, why);
    ASSERT_TRUE(backend) << why;
    gpu::cpu::DirectConvOff sgemm_only;
    for (const char* name : kModels) check_together_equals_alone(backend, name, false);
}

// More streams than a page of slots (HeldSlots::kPage), so a batch spans
// two pages, and a stream closed and a fresh one opened in its place (it
// takes the slot given back) while the others go on side by side: each
// stream's audio is still its solo audio, bit for bit on the direct loops.
TEST(JointPushCpu, a_batch_across_pages_of_slots_and_a_slot_taken_again_keep_the_solo_audio) {
    std::string why;
    auto backend = test::backend_of(gpu::BackendKind::Cpu, why);
    ASSERT_TRUE(backend) << why;
    const char* name = "hifigan_v3";
    auto mel_file = audio_io::read_npy(kData + std::string(name) + "_mel.npy");
    const int n_mels = static_cast<int>(mel_file.shape[0]);
    const int total = static_cast<int>(mel_file.shape[1]);
    auto model = NeuralModel::load(kData + name + ".lef", backend);
    model->set_join_streams(true);
    auto solo_model = NeuralModel::load(kData + name + ".lef", backend);
    solo_model->set_join_streams(false);
    constexpr std::size_t kStreams = 18;  // past the first page of 16
    constexpr int kChunk = 4, kPushes = 9;
    // Stream i reads from frame i % 12 on: 11 + 9 chunks of 4 fit in the mel.
    ASSERT_GE(total, 11 + kPushes * kChunk);
    std::vector<std::unique_ptr<NetworkStream>> joint(kStreams), solo(kStreams);
    std::vector<std::vector<float>> joint_out(kStreams), solo_out(kStreams), mels(kStreams);
    std::vector<int> fed(kStreams, 0);
    for (auto& s : joint) ASSERT_TRUE(s = model->open_stream());
    for (auto& s : solo) ASSERT_TRUE(s = solo_model->open_stream());
    std::vector<float> replaced_joint, replaced_solo;  // the closed stream's audio
    for (int push = 0; push < kPushes; ++push) {
        if (push == 6) {
            // Stream 3 goes (its slot back) and a fresh one takes its place.
            replaced_joint = std::move(joint_out[3]);
            replaced_solo = std::move(solo_out[3]);
            joint_out[3].clear();
            solo_out[3].clear();
            joint[3].reset();
            joint[3] = model->open_stream();
            solo[3] = solo_model->open_stream();
        }
        const bool flush = push + 1 == kPushes;
        std::vector<StreamPush> pushes;
        for (std::size_t i = 0; i < kStreams; ++i) {
            copy_mel_frames(mel_file.data, n_mels, total, static_cast<int>(i % 12) + fed[i], kChunk,
                            mels[i]);
            solo[i]->push(mels[i].data(), kChunk, flush, solo_out[i], Batching::Alone);
            pushes.push_back({joint[i].get(), mels[i].data(), kChunk, flush, &joint_out[i]});
            fed[i] += kChunk;
        }
        pushes[0].stream->push_together(pushes);
    }
    const bool exact = cpu_runs_direct();
    const auto same = [&](const std::vector<float>& got, const std::vector<float>& want) {
        expect_its_solo_audio(got, want, exact);
    };
    for (std::size_t i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        same(joint_out[i], solo_out[i]);
    }
    SCOPED_TRACE("the stream closed");
    same(replaced_joint, replaced_solo);
}

INSTANTIATE_TEST_SUITE_P(Backends, JointPush,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Cuda, gpu::BackendKind::Vulkan),
                         [](const auto& info) { return std::string(gpu::to_string(info.param)); });

}  // namespace
}  // namespace etude::engine
