// A decoder stream's chunks replayed from recordings (models/recorded_step.h)
// against the same stream run operation by operation, on a backend that
// replays natively: Vulkan (lavapipe in CI) and CUDA (on a GPU machine),
// each skipped without its device.
//
// The network: a Piper medium-shaped decoder (tests/data/piper/test_medium,
// HiFi-GAN through models/vits/vits_decoder.h) on a random latent, long
// enough for Piper's chunk schedule (4, 4, 8, 16, 32, 32, ...) and a last
// partial chunk. Replayed and op-by-op runs issue the same kernels on the same
// values, so they agree bit for bit; against the CPU the bound is the
// backends' parity bound, 1e-4 (neural_vocoder_test.cpp).
//
// That replays are really taken is checked twice: by the stream's own counts
// (ReplayStats) and by the backend's profile, where a native replay is one
// "replay" entry (gpu/backend.h).
#include "engine/models/recorded_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/models/mel_vocoder_stream.h"
#include "engine/models/neural_model.h"
#include "engine/models/vits/vits_decoder.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

const std::string kVoice = test::test_data_dir() + "/piper/test_medium.onnx";
constexpr int kSampleRate = 22050;  // test_medium's (only metadata to the decoder)

struct Latent {
    std::vector<float> data;  // [channels][frames]
    int channels = 0, frames = 0;
};

Latent random_latent(int channels, int frames) {
    Latent l{std::vector<float>(static_cast<std::size_t>(channels) * frames), channels, frames};
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : l.data) v = normal(rng);
    return l;
}

// Piper's schedule (piper_stream_voice.cpp), then more 32s and a partial one.
const std::vector<int> kPiperChunks = {4, 4, 8, 16, 32, 32, 32, 32, 7};

// Pushes `chunks` of `latent` from frame `start` through `stream`, the last
// one flushing when `flush`; returns the audio.
std::vector<float> speak(NetworkStream& stream, const Latent& latent,
                         const std::vector<int>& chunks, bool flush = true, int start = 0) {
    std::vector<float> out, part;
    int f = start;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        copy_mel_frames(latent.data, latent.channels, latent.frames, f, chunks[i], part);
        stream.push(part.data(), chunks[i], flush && i + 1 == chunks.size(), out, Batching::Alone);
        f += chunks[i];
    }
    return out;
}

class RecordedStep : public test::OnBackend {
  protected:
    RecordedStep() : OnBackend(" — the replayed decoder tests are skipped") {}
    void SetUp() override {
        OnBackend::SetUp();
        if (IsSkipped()) return;
        weights_ = std::make_shared<VitsWeights>(read_vits_weights(kVoice));
        model_ = load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", backend_);
        // Recordings of each stream's own: where the network's streams join
        // (on a GPU, by default) a lone push replays the lane's instead
        // (recorded_batch_test.cpp).
        model_->set_join_streams(false);
        latent_ = random_latent(model_->audio().n_mels, 256);
    }
    void TearDown() override {
        if (!backend_) return;
        backend_->inject_fault({});
        backend_->set_profiling(false);
        backend_->reset_health();
    }
    // The same chunks op by op: the reference the replays must equal.
    std::vector<float> op_by_op(const std::vector<int>& chunks, int start = 0) {
        auto s = model_->open_stream();
        s->set_replay(false);
        auto audio = speak(*s, latent_, chunks, true, start);
        EXPECT_EQ(s->replay_stats().replayed, 0u);
        return audio;
    }
    std::shared_ptr<const VitsWeights> weights_;
    std::shared_ptr<NeuralModel> model_;
    Latent latent_;
};

TEST_P(RecordedStep, piper_schedule_replayed_equals_op_by_op_bit_for_bit_and_the_cpu) {
    auto s = model_->open_stream();
    const auto got = speak(*s, latent_, kPiperChunks);
    const ReplayStats st = s->replay_stats();
    // 32 is the only size seen three times settled: sized, recorded, replayed.
    EXPECT_GE(st.recordings, 1u);
    EXPECT_GE(st.replayed, 3u);
    const auto want = op_by_op(kPiperChunks);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(test::identical(got, want)) << "max |difference| " << test::max_abs_diff(got, want);

    auto cpu_model =
        load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", gpu::shared_cpu_backend());
    auto cpu = cpu_model->open_stream();
    const auto on_cpu = speak(*cpu, latent_, kPiperChunks);
    ASSERT_EQ(on_cpu.size(), got.size());
    const double diff = test::max_abs_diff(got, on_cpu);
    std::printf("[ %-8s ] replayed Piper schedule: max |replayed - CPU| = %.3g over %zu\n",
                gpu::to_string(GetParam()), diff, got.size());
    EXPECT_LE(diff, 1e-4);
    EXPECT_GT(test::rms(on_cpu), 0.01) << "a silent decoder would compare nothing";
}

// After its first chunk of a key (which sizes that key's buffers) a stream
// records the second and replays every later one: six chunks of 8 after
// eight of 4 make one recording and five replays, and the backend sees
// exactly five replays. (The chunks of 4 before every layer's window is
// full are keys of their own, each state once, so each is sized op by op
// and no more: three for this decoder, whose first chunks reach its last
// layers shortened by the lags in front of them.)
TEST_P(RecordedStep, each_chunk_size_is_recorded_once_and_replayed_after) {
    auto s = model_->open_stream();
    const std::vector<int> fours(8, 4), eights(6, 8);
    std::vector<float> got = speak(*s, latent_, fours, false);
    const ReplayStats after4 = s->replay_stats();
    EXPECT_EQ(after4.recordings, 1u);
    EXPECT_EQ(after4.op_by_op, 3u + 1u) << "three filling states, then the settled 4";
    EXPECT_GE(after4.replayed, 4u) << "at most three chunks of 4 before the layers settle";
    backend_->reset_timings();
    backend_->set_profiling(true);
    const auto more = speak(*s, latent_, eights, false, 32);
    backend_->set_profiling(false);
    got.insert(got.end(), more.begin(), more.end());
    const ReplayStats after8 = s->replay_stats();
    EXPECT_EQ(after8.recordings - after4.recordings, 1u);
    EXPECT_EQ(after8.op_by_op - after4.op_by_op, 1u);
    EXPECT_EQ(after8.replayed - after4.replayed, 5u);
    EXPECT_EQ(test::replays(*backend_), 5u) << "the backend's own count of native replays";

    std::vector<int> all = fours;
    all.insert(all.end(), eights.begin(), eights.end());
    auto ref = model_->open_stream();
    ref->set_replay(false);
    EXPECT_TRUE(test::identical(got, speak(*ref, latent_, all, false)));
}

// Every push of an utterance replays once the stream has met its keys
// twice: the first chunks, while the windows fill (each utterance starts
// fresh), and the flush too. A flush of 13 frames goes as chunks of 8 and 4
// and a flush of the last frame (HifiGanStream::push_in_steps), keys every
// utterance meets again, where a flush of its own length would be a key
// seldom seen twice. The third utterance is all replays (three native
// replays for the flush); each equals the same chunks op by op bit for bit,
// and the CPU's, which pushes the flush whole, within 1e-4.
TEST_P(RecordedStep, an_utterances_first_chunks_and_its_flush_replay_from_the_third_on) {
    const std::vector<int> chunks = {8, 8, 8, 8, 8, 13};
    constexpr std::uint64_t kPushes = 5 + 3;  // the flush as 8, 4 and 1
    auto s = model_->open_stream();
    auto ref = model_->open_stream();
    ref->set_replay(false);
    auto cpu_model =
        load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", gpu::shared_cpu_backend());
    auto cpu = cpu_model->open_stream();
    ReplayStats before;
    for (int utterance = 0; utterance < 3; ++utterance) {
        SCOPED_TRACE("utterance " + std::to_string(utterance));
        before = s->replay_stats();
        backend_->reset_timings();
        backend_->set_profiling(true);
        const auto got = speak(*s, latent_, chunks, true, 20 * utterance);
        backend_->set_profiling(false);
        const auto want = speak(*ref, latent_, chunks, true, 20 * utterance);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_TRUE(test::identical(got, want))
            << "max |difference| " << test::max_abs_diff(got, want);
        const auto on_cpu = speak(*cpu, latent_, chunks, true, 20 * utterance);
        ASSERT_EQ(on_cpu.size(), got.size());
        EXPECT_LE(test::max_abs_diff(got, on_cpu), 1e-4);
        s->reset();
        ref->reset();
        cpu->reset();
    }
    const ReplayStats last = s->replay_stats();
    EXPECT_EQ(last.op_by_op, before.op_by_op) << "a key of the third utterance was new";
    EXPECT_EQ(last.recordings, before.recordings);
    EXPECT_EQ(last.replayed - before.replayed, kPushes);
    EXPECT_EQ(test::replays(*backend_), kPushes) << "the backend's own count of native replays";
    EXPECT_EQ(ref->replay_stats().replayed, 0u);
}

// Two streams of one model, pushes interleaved, each with its own sizes and
// recordings: each equals its own op-by-op run.
TEST_P(RecordedStep, interleaved_streams_keep_their_own_recordings_and_audio) {
    const std::vector<int> a_chunks = {8, 8, 8, 8, 8, 8, 8, 5};
    const std::vector<int> b_chunks = {4, 16, 16, 16, 16, 16, 16, 3};
    auto a = model_->open_stream();
    auto b = model_->open_stream();
    std::vector<float> a_out, b_out, part;
    int fa = 0, fb = 40;
    for (std::size_t i = 0; i < a_chunks.size(); ++i) {
        const bool last = i + 1 == a_chunks.size();
        copy_mel_frames(latent_.data, latent_.channels, latent_.frames, fa, a_chunks[i], part);
        a->push(part.data(), a_chunks[i], last, a_out, Batching::Alone);
        copy_mel_frames(latent_.data, latent_.channels, latent_.frames, fb, b_chunks[i], part);
        b->push(part.data(), b_chunks[i], last, b_out, Batching::Alone);
        fa += a_chunks[i];
        fb += b_chunks[i];
    }
    EXPECT_EQ(a->replay_stats().recordings, 1u);
    EXPECT_EQ(b->replay_stats().recordings, 1u);
    EXPECT_GE(a->replay_stats().replayed, 4u);
    EXPECT_GE(b->replay_stats().replayed, 3u);
    EXPECT_TRUE(test::identical(a_out, op_by_op(a_chunks)));
    EXPECT_TRUE(test::identical(b_out, op_by_op(b_chunks, 40)));
}

// A joiner's leader may run a batch of one that is another stream's push
// (once out of memory capped the batches at one, stream_joiner.h): the push
// replays its own stream's recording on its own layers, never the
// leader's, which here is settled on other frames with a recording of the
// same length.
TEST_P(RecordedStep, a_lone_push_run_by_another_stream_replays_its_own_recording) {
    const std::vector<int> chunks(10, 8);
    auto leader = model_->open_stream();
    speak(*leader, latent_, chunks, false, 100);
    const ReplayStats leaders = leader->replay_stats();
    ASSERT_EQ(leaders.recordings, 1u);
    auto a = model_->open_stream();
    std::vector<float> got, part;
    int f = 0;
    for (int c : chunks) {
        copy_mel_frames(latent_.data, latent_.channels, latent_.frames, f, c, part);
        f += c;
        const StreamPush push{a.get(), part.data(), c, false, &got};
        leader->push_together({&push, 1});
    }
    EXPECT_EQ(a->replay_stats().recordings, 1u);
    EXPECT_GE(a->replay_stats().replayed, 4u);
    EXPECT_EQ(leader->replay_stats().replayed, leaders.replayed) << "the leader's recording ran";
    auto ref = model_->open_stream();
    ref->set_replay(false);
    const auto want = speak(*ref, latent_, chunks, false);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(test::identical(got, want)) << "max |difference| " << test::max_abs_diff(got, want);
}

// What the lone recordings of a network's streams hold together is bounded
// (RecordingBudget: a thousand streams' sets would be tens of gigabytes).
// With room for the first stream's sets only, a second stream's sets are
// let go after their sizing chunks and its chunks run op by op, its audio
// the same; once the first stream is gone and its sets given back, the
// second records.
TEST_P(RecordedStep, lone_recordings_stay_within_the_networks_budget) {
    RecordingBudget& budget = *model_->lone_recordings();
    const std::vector<int> eights(10, 8);
    auto a = model_->open_stream();
    speak(*a, latent_, eights, false);
    ASSERT_EQ(a->replay_stats().recordings, 1u);
    const std::size_t first_sets = budget.held();
    ASSERT_GT(first_sets, 0u);
    std::printf("[ %-8s ] a decoder stream's sets for ten chunks of 8: %.2f MB\n",
                gpu::to_string(GetParam()), double(first_sets) / 1e6);
    budget.set_max_bytes(first_sets);
    auto b = model_->open_stream();
    const auto got = speak(*b, latent_, eights, false, 40);
    EXPECT_EQ(b->replay_stats().recordings, 0u) << "a second stream's set passed the budget";
    EXPECT_EQ(b->replay_stats().replayed, 0u);
    EXPECT_EQ(budget.held(), first_sets);
    auto ref = model_->open_stream();
    ref->set_replay(false);
    const auto want = speak(*ref, latent_, eights, false, 40);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(test::identical(got, want)) << "max |difference| " << test::max_abs_diff(got, want);
    a.reset();
    EXPECT_EQ(budget.held(), 0u) << "a stream's sets are given back when it goes";
    speak(*b, latent_, eights, false, 120);
    EXPECT_EQ(b->replay_stats().recordings, 1u) << "the room given back was not used";
    EXPECT_LE(budget.held(), budget.max_bytes());
}

// Recordings stay valid across reset(): a stream cancelled mid-utterance and
// reset speaks the next utterance as a fresh stream does, replaying the
// recording of 8 it made before. Its first two chunks, while the windows
// fill, were met once before the reset and are recorded now; the flush of
// 3 (as 2 and a flush of 1) is keys of its own, sized.
TEST_P(RecordedStep, reset_mid_utterance_keeps_the_recordings_and_the_audio_right) {
    auto s = model_->open_stream();
    const std::vector<int> chunks = {8, 8, 8, 8, 8, 8, 3};
    speak(*s, latent_, {8, 8, 8, 8, 8}, false);  // cancelled here
    const ReplayStats before = s->replay_stats();
    ASSERT_EQ(before.recordings, 1u);
    s->reset();
    const auto got = speak(*s, latent_, chunks, true, 100);
    const ReplayStats after = s->replay_stats();
    EXPECT_EQ(after.recordings, before.recordings + 2) << "a recording was made again";
    EXPECT_GE(after.replayed - before.replayed, 4u);
    EXPECT_TRUE(test::identical(got, op_by_op(chunks, 100)));
}

// A device fault inside a replayed chunk: the push fails as any device
// error does, the chunk is remade on the CPU copy of the model (as the
// engine's scheduler does), the stream goes back to the device and replays
// again (its new runner's first chunks, filling its windows from the mel
// frames it keeps, are keys of their own, some recorded now), and its
// audio equals the CPU's.
TEST_P(RecordedStep, a_fault_in_a_replayed_chunk_is_remade_on_the_cpu_and_the_stream_goes_on) {
    auto cpu_model = std::shared_ptr<const NeuralModel>(
        load_vits_decoder(*weights_, kSampleRate, 0, "test_medium", gpu::shared_cpu_backend()));
    const std::vector<int> chunks = {4, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 6};
    const int fault_at = 6;  // the 7th chunk: 8s sized, recorded and replayed before it
    MelVocoderStream reference(cpu_model), stream(model_);
    std::vector<float> want, got, part;
    int f = 0, faults = 0;
    ReplayStats at_fault;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        copy_mel_frames(latent_.data, latent_.channels, latent_.frames, f, chunks[i], part);
        f += chunks[i];
        const auto w = reference.push(part, chunks[i]);
        want.insert(want.end(), w.begin(), w.end());
        stream.append(part, chunks[i]);
        if (static_cast<int>(i) == fault_at) {
            gpu::GpuFault fault;
            fault.kind = gpu::GpuFault::KernelFailure;
            fault.count = 1;
            fault.after = 1;  // the chunk's input copy, then its replay
            backend_->inject_fault(fault);
            at_fault = stream.replay_stats();
            ASSERT_GE(at_fault.replayed, 1u) << "chunks of 8 replay before the fault";
        }
        std::vector<float> out;
        try {
            out = stream.drain(false);
        } catch (const gpu::DeviceError& e) {
            ++faults;
            EXPECT_NE(std::string(e.what()).find("replay"), std::string::npos) << e.what();
            stream.set_model(cpu_model);
            out = stream.drain(false);
            backend_->reset_health();
            stream.set_model(model_);  // back on the device from the next chunk
        }
        got.insert(got.end(), out.begin(), out.end());
    }
    const auto w = reference.finish();
    want.insert(want.end(), w.begin(), w.end());
    const auto rest = stream.finish();
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(faults, 1);
    EXPECT_GT(stream.replay_stats().replayed, at_fault.replayed + 3)
        << "back on the device, the stream replays its recordings again";
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(test::max_abs_diff(got, want), 1e-4);
    EXPECT_GT(test::rms(want), 0.01);
}

// On the CPU (and OpenCL) a replay would call the same operations one by
// one: every chunk runs op by op, and nothing is recorded.
TEST(RecordedStepCpu, the_cpu_runs_every_chunk_op_by_op) {
    const auto weights = read_vits_weights(kVoice);
    auto model =
        load_vits_decoder(weights, kSampleRate, 0, "test_medium", gpu::shared_cpu_backend());
    const Latent latent = random_latent(model->audio().n_mels, 256);
    auto s = model->open_stream();
    EXPECT_GT(speak(*s, latent, kPiperChunks).size(), 0u);
    const ReplayStats st = s->replay_stats();
    EXPECT_EQ(st.recordings + st.replayed + st.op_by_op, 0u);
}

// The sets a RecordedSteps holds are bounded in bytes too (a lane's
// recordings: an eighth of the device's memory): past the bound the set
// used longest ago goes, never the one just used, and a key whose set went
// is sized anew when seen again. On the CPU backend (a recording there calls
// the operations again: the bookkeeping is the same).
TEST(RecordedStepCpu, sets_past_the_byte_bound_go_the_one_used_longest_ago_first) {
    auto backend = gpu::shared_cpu_backend();
    auto q = backend->create_queue();
    ScratchBuffer a, b;
    constexpr std::size_t kSetFloats = 2 * 1000;  // a key's two buffers at 1,000 floats
    RecordedSteps steps(*backend, {&a, &b}, 8, RecordedSteps::WhenFull::DropOldest,
                        kSetFloats * sizeof(float) * 3 / 2);
    const auto run = [&](long floats) {
        RecordedSteps::Step step;
        step.stage_input = [](gpu::Queue&) {};
        step.body = [&](gpu::Queue& bq) {
            const auto n = static_cast<std::size_t>(floats);
            backend->fill(bq, a.need(*backend, n), 1.0f, n);
            backend->fill(bq, b.need(*backend, n), 2.0f, n);
            return SignalRef{&b.get(), 1, static_cast<int>(floats)};
        };
        step.take_output = [](gpu::Queue&, const SignalRef&) {};
        step.host_counts = [](std::vector<HostCount>&) {};
        ASSERT_TRUE(steps.run(*q, {floats}, step));
    };
    run(1000);
    run(1000);  // recorded
    EXPECT_EQ(steps.stats().op_by_op, 1u);
    run(1000);
    EXPECT_EQ(steps.stats().op_by_op, 1u) << "a set within the bound was dropped";
    run(1001);  // a second set: past the bound, 1,000's goes
    EXPECT_EQ(steps.stats().op_by_op, 2u);
    run(1001);
    run(1000);
    EXPECT_EQ(steps.stats().op_by_op, 3u) << "1,000's set was kept past the bound";
    run(1000);
    EXPECT_EQ(steps.stats().op_by_op, 3u) << "the set just used was dropped";
}

// A replay runs no host code: it moves the step's host counts on by what
// the recorded body moved them, whatever they hold now (a window's held
// count, an upsampler's running totals), and a key that names other counts
// than its recording's is a logic error, not a silent wrong state.
TEST(RecordedStepCpu, a_replay_moves_the_host_counts_as_the_recorded_body_did) {
    auto backend = gpu::shared_cpu_backend();
    auto q = backend->create_queue();
    ScratchBuffer a;
    RecordedSteps steps(*backend, {&a});
    int held = -3;
    long total = 100;
    const auto step_of = [&](int length, bool with_total) {
        RecordedSteps::Step step;
        step.stage_input = [](gpu::Queue&) {};
        step.body = [&, length](gpu::Queue& bq) {
            backend->fill(bq, a.need(*backend, 4), 0.0f, 4);
            held = std::min(held + length, 2);  // a window filling to its hold
            total += length;
            return SignalRef{&a.get(), 1, 4};
        };
        step.take_output = [](gpu::Queue&, const SignalRef&) {};
        step.host_counts = [&, with_total](std::vector<HostCount>& counts) {
            counts.emplace_back(held);
            if (with_total) counts.emplace_back(total);
        };
        return step;
    };
    const RecordedSteps::Key fresh{4, -3};
    ASSERT_TRUE(steps.run(*q, fresh, step_of(4, true)));  // sizes the set: body ran
    EXPECT_EQ(held, 1);
    EXPECT_EQ(total, 104);
    held = -3;
    ASSERT_TRUE(steps.run(*q, fresh, step_of(4, true)));  // recorded: body ran
    EXPECT_EQ(held, 1);
    EXPECT_EQ(total, 108);
    EXPECT_EQ(steps.stats().recordings, 1u);
    held = -3;
    total = 1000;  // another stream's totals, in the same state
    ASSERT_TRUE(steps.run(*q, fresh, step_of(999, true)));  // replayed: the body's moves
    EXPECT_EQ(steps.stats().replayed, 2u);
    EXPECT_EQ(held, 1) << "the held count moved on by the recorded 4, not the body's 999";
    EXPECT_EQ(total, 1004);
    held = -3;
    EXPECT_THROW(steps.run(*q, fresh, step_of(4, false)), std::logic_error);
}

INSTANTIATE_TEST_SUITE_P(Backends, RecordedStep,
                         ::testing::Values(gpu::BackendKind::Vulkan, gpu::BackendKind::Cuda),
                         [](const auto& info) { return std::string(gpu::to_string(info.param)); });

}  // namespace
}  // namespace etude::engine
