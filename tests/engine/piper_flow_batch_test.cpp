// The flow pushes of several Piper streams that share one device flow (one
// voice, speaker and device) run as one batch (VitsFlowNetwork::joiner(),
// models/stream_joiner.h), as the decoder's chunks do: each stream's flow
// and audio are its solo ones, a device error in a batch reaches every
// stream of it and each goes on (alone, or on the CPU's flow), an
// out-of-memory halves the batches after it, a stream cancelled while its
// push waits in a batch leaves the others whole, and a block pushed
// together on one thread (how the capacity measurement times the flow)
// runs as one batch. On lavapipe (Vulkan) and PoCL (OpenCL), each skipped
// where absent, and on the CPU backend; joining is on by default on a GPU
// only, so the tests switch it on, and the joiner's pause() makes the
// batches certain rather than a matter of timing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/models/vits/flow_stream.h"
#include "engine/voices/piper_voice.h"
#include "gpu/registry.h"
#include "support/emulation.h"
#include "support/model_parity.h"
#include "support/piper_on_device.h"
#include "support/piper_test_ids.h"
#include "support/random_prior.h"
#include "support/stream_output.h"
#include "support/test_data.h"

using namespace etude::engine;
using etude::test::max_abs_diff;
using etude::test::random_prior;

namespace {

const std::string kVoice = etude::test::test_data_dir() + "/piper/test_medium.onnx";

// A batch item is the same computation as the window alone, so a stream's
// flow in a batch equals its flow alone to float rounding at most: within
// the flow's own parity bound (a streamed flow against the whole one,
// tests/engine/models/vits_parity_test.cpp). Mixing two streams' held frames
// would be off by the size of the latent itself (about 1): the streams'
// priors differ.
constexpr double kFlowBound = 1e-5;
// A stream's audio against its CPU render: piper_device_flow_test.cpp's
// bound, the Piper audio's parity bound on every backend.
constexpr double kDeviceBound = 1e-4;

// A sentence of 150 - 7 i frames for stream i (of 4), pushed with the
// schedule below: two pushes of 48 frames for every stream, then 48 and 6
// for stream 0 and, flushing, 47, 40 and 33 frames for the others, so that
// a batch may hold windows that line up and others that do not.
int frames_of(int i) {
    return 150 - 7 * i;
}

// The flow of `prior` as a Piper stream asks for it: 16 more frames of
// output each time (so several pushes, as the decoder's chunks come).
std::vector<float> flow_of(VitsFlowStream& s, const std::vector<float>& prior, int frames) {
    std::vector<float> z(prior.size());
    for (int until = 16; s.made() < frames; until += 16) s.run_until(prior, frames, until, z);
    return z;
}

class PiperFlowBatch : public etude::test::PiperOnDevice {
  protected:
    void SetUp() override {
        PiperOnDevice::SetUp();
        if (!device_) return;
        voice_ = PiperVoice::open(kVoice);
        // A flow of this test's own (the voice's shared one serves the
        // engine's streams), copied as a device's flow is.
        flow_ =
            std::make_shared<const VitsFlowNetwork>(*voice_->network().flow_network(0), device_);
        flow_->set_join_streams(true);
        channels_ = flow_->channels();
    }
    void TearDown() override {
        if (!device_) return;
        device_->inject_fault({});  // nothing left over for later tests
        device_->reset_health();
    }
    // Each stream's flow, pushed on a thread of its own; every stream's
    // first push waits in the paused joiner until all of them do, so the
    // first batch holds them all. An error a stream's flow throws is kept.
    std::vector<std::vector<float>> together(std::vector<std::unique_ptr<VitsFlowStream>>& streams,
                                             const std::vector<std::vector<float>>& priors,
                                             std::vector<std::exception_ptr>& errors) {
        auto& joiner = *flow_->joiner();
        std::vector<std::vector<float>> out(streams.size());
        errors.assign(streams.size(), nullptr);
        joiner.pause();
        std::vector<std::thread> threads;
        for (std::size_t i = 0; i < streams.size(); ++i)
            threads.emplace_back([&, i] {
                try {
                    out[i] = flow_of(*streams[i], priors[i], frames_of(int(i)));
                } catch (...) {
                    errors[i] = std::current_exception();
                }
            });
        etude::test::wait_until([&] { return joiner.waiting() == streams.size(); });
        EXPECT_EQ(joiner.waiting(), streams.size());
        joiner.resume();
        for (auto& t : threads) t.join();
        return out;
    }
    std::vector<float> solo(const std::vector<float>& prior, int frames) {
        VitsFlowStream s(flow_);
        s.set_batching(Batching::Alone);
        return flow_of(s, prior, frames);
    }

    std::shared_ptr<const PiperVoice> voice_;
    std::shared_ptr<const VitsFlowNetwork> flow_;
    int channels_ = 0;
};

TEST_P(PiperFlowBatch, streams_pushed_at_once_meet_in_batches_and_each_flow_is_its_solo_flow) {
    constexpr int kStreams = 4;
    std::vector<std::vector<float>> priors, want;
    std::vector<std::unique_ptr<VitsFlowStream>> streams;
    for (int i = 0; i < kStreams; ++i) {
        priors.push_back(random_prior(channels_, frames_of(i), 100 + i));
        want.push_back(solo(priors.back(), frames_of(i)));
        streams.push_back(std::make_unique<VitsFlowStream>(flow_));
    }
    EXPECT_EQ(flow_->joiner()->stats().pushes, 0u) << "a push kept alone went to the joiner";
    ASSERT_GT(max_abs_diff(want[0], want[1]), 0.1) << "the streams' flows must differ";
    std::vector<std::exception_ptr> errors;
    const auto got = together(streams, priors, errors);
    const JoinStats stats = flow_->joiner()->stats();
    EXPECT_EQ(stats.largest, std::uint64_t(kStreams)) << "the first pushes met";
    EXPECT_GT(flow_->batched_layer_calls(), 0u) << "no layer ran the streams in one call";
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_FALSE(errors[i]);
        EXPECT_GE(streams[i]->batched_pushes(), 1u);
        // (Where pushes replay, the sentence's end goes as blocks of powers
        // of two and a flush of one frame: VitsFlowStream::run_until.)
        if (GetParam() == etude::gpu::BackendKind::Cpu ||
            GetParam() == etude::gpu::BackendKind::OpenCl)
            EXPECT_EQ(streams[i]->pushes(), i == 0 ? 4u : 3u);
        else
            EXPECT_GT(streams[i]->pushes(), i == 0 ? 4u : 3u);
        ASSERT_EQ(got[i].size(), want[i].size());
        const double diff = max_abs_diff(got[i], want[i]);
        std::printf(
            "[ %-8s ] stream %d: %llu of %llu pushes batched; max |batched - solo| = %.3g\n",
            name_.c_str(), i, (unsigned long long)streams[i]->batched_pushes(),
            (unsigned long long)streams[i]->pushes(), diff);
        EXPECT_LE(diff, kFlowBound);
        // OpenCL's and Vulkan's convolution kernels sum each output of a
        // batch item in the order they sum it alone: bit for bit (measured
        // so on the CPU backend too).
        if (GetParam() != etude::gpu::BackendKind::Cpu) {
            EXPECT_EQ(diff, 0.0);
        }
    }
}

// The batched path as the capacity measurement times it
// (models/batch_timing.h): streams pushed a block together on one thread,
// no joiner, run as one batch; a block of the wrong size, or streams of two
// networks, are refused before anything runs.
TEST_P(PiperFlowBatch, a_block_pushed_together_runs_as_one_batch_and_bad_blocks_are_refused) {
    constexpr int kFrames = VitsFlowStream::kMinPush;
    VitsFlowStream a(flow_), b(flow_);
    VitsFlowStream* both[] = {&a, &b};
    const std::vector<float> block = random_prior(channels_, kFrames, 300);
    std::size_t layers = 0;
    for (const auto& coupling : flow_->couplings()) layers += coupling.in_layers.size();
    const std::uint64_t before = flow_->batched_layer_calls();
    VitsFlowStream::push_block_together(both, block, kFrames);
    // Every WaveNet layer's convolution: one call for both streams.
    EXPECT_EQ(flow_->batched_layer_calls() - before, layers);
    EXPECT_EQ(flow_->joiner()->stats().pushes, 0u) << "the block went through the joiner";
    for (const VitsFlowStream* s : both) {
        EXPECT_EQ(s->pushes(), 1u);
        EXPECT_EQ(s->batched_pushes(), 1u);
        // The output lags the input by the flow's context.
        EXPECT_EQ(s->made(), kFrames - flow_->context());
    }
    const std::vector<float> short_block(block.begin(), block.end() - 1);
    EXPECT_THROW(VitsFlowStream::push_block_together(both, short_block, kFrames),
                 std::invalid_argument);
    VitsFlowStream other(voice_->network().flow_network(0));
    VitsFlowStream* mixed[] = {&a, &other};
    EXPECT_THROW(VitsFlowStream::push_block_together(mixed, block, kFrames), std::invalid_argument);
    EXPECT_EQ(a.pushes(), 1u) << "a refused block was pushed";
    EXPECT_EQ(other.pushes(), 0u) << "a refused block was pushed";
}

// A failing device operation partway through a batch (some of its layers
// ran) reaches every stream of it, naming the batch; each stream, reset as
// a Piper stream's device flow is after an error, then makes its solo flow.
// An out-of-memory also halves the batches after it.
TEST_P(PiperFlowBatch, a_device_error_in_a_batch_reaches_every_stream_and_each_goes_on) {
    constexpr int kStreams = 4;
    std::vector<std::vector<float>> priors, want;
    std::vector<std::unique_ptr<VitsFlowStream>> streams;
    for (int i = 0; i < kStreams; ++i) {
        priors.push_back(random_prior(channels_, frames_of(i), 200 + i));
        want.push_back(solo(priors.back(), frames_of(i)));
        streams.push_back(std::make_unique<VitsFlowStream>(flow_));
    }
    for (const auto kind :
         {etude::gpu::GpuFault::KernelFailure, etude::gpu::GpuFault::OutOfMemory}) {
        const bool oom = kind == etude::gpu::GpuFault::OutOfMemory;
        SCOPED_TRACE(oom ? "out of memory" : "failed launch");
        const JoinStats before = flow_->joiner()->stats();
        etude::gpu::GpuFault fault;
        fault.kind = kind;
        fault.count = 1;
        fault.after = 100;  // inside the first batch's couplings
        device_->inject_fault(fault);
        std::vector<std::exception_ptr> errors;
        together(streams, priors, errors);
        device_->inject_fault({});
        device_->reset_health();
        const JoinStats after = flow_->joiner()->stats();
        EXPECT_EQ(after.batches, before.batches + 1) << "each stream stops at its first push";
        for (int i = 0; i < kStreams; ++i) {
            SCOPED_TRACE("stream " + std::to_string(i));
            ASSERT_TRUE(errors[i]) << "a stream of the batch did not hear of the error";
            try {
                std::rethrow_exception(errors[i]);
            } catch (const etude::gpu::OutOfMemory& e) {
                EXPECT_TRUE(oom) << e.what();
            } catch (const etude::gpu::DeviceError& e) {
                EXPECT_FALSE(oom) << e.what();
                EXPECT_NE(std::string(e.what()).find("a batch of 4 streams"), std::string::npos)
                    << e.what();
            } catch (...) {
                ADD_FAILURE() << "not a device error";
            }
        }
        if (oom) {
            EXPECT_EQ(after.out_of_memory, 1u);
            EXPECT_EQ(after.cap, std::uint64_t(kStreams / 2));
        }
    }
    // Each stream from a fresh state: the others' errors left nothing in it.
    // (After the out-of-memory, batches of two at most.)
    for (auto& s : streams) s->reset();
    const JoinStats before = flow_->joiner()->stats();
    std::vector<std::exception_ptr> errors;
    const auto got = together(streams, priors, errors);
    const JoinStats after = flow_->joiner()->stats();
    EXPECT_GT(after.batches, before.batches);
    EXPECT_EQ(after.largest, std::uint64_t(kStreams)) << "(the first batch, before the halving)";
    EXPECT_LE(after.pushes - before.pushes, 2 * (after.batches - before.batches))
        << "a batch after the out-of-memory took more than two";
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_FALSE(errors[i]);
        ASSERT_EQ(got[i].size(), want[i].size());
        EXPECT_LE(max_abs_diff(got[i], want[i]), kFlowBound);
    }
}

// A steady batch (every stream's layers settled, blocks of one length, none
// flushing) runs side by side (models/batch_major.h, vits/flow_batch_major.cpp),
// beside the streams that are not steady: each stream's output is its solo
// output through a stream sitting a push out, a stream going on alone
// after a batch, a batch in scattered slots, a stream dropped (as a
// cancelled one is) and a fresh one taking its slot while the others go
// on, and the final flush; bit for bit on the devices (their kernels sum a
// batch item as they sum it alone). The twins' layers hold their frames in
// slots of their network's buffers (HeldSlots), the solo streams' (of a
// network that does not join) in buffers of their own. And a stream's share
// of a side-by-side batch's operations is its own only: its prior's two
// uploads and its output's download (the held frames of streams in
// neighbouring slots go as one copy per layer and delay for all of them),
// where its push alone issues some 250. Every other operation is one call
// for the batch, as the push alone makes it once (the gate included: one
// gated_tanh over the batch's items), and two copies gather the batch's
// output halves, where a push alone downloads its own in two: a batch of
// four issues a push alone's operations, three streams' three more and
// one: 258 against 248, measured (260 while each stream downloaded its
// halves in two, 292 while the gate gathered the batch's halves with two
// copies a layer). Walked layer by layer, as before the batches ran side by side,
// a stream's share was 264 and a batch of four 1,072.
TEST_P(PiperFlowBatch, a_steady_batch_runs_side_by_side_each_stream_its_solo_flow) {
    constexpr int kStreams = 5, kFrames = 16, kBlocks = 12;
    const auto solo_flow =
        std::make_shared<const VitsFlowNetwork>(*voice_->network().flow_network(0), device_);
    solo_flow->set_join_streams(false);
    std::vector<std::unique_ptr<VitsFlowStream>> joint(kStreams), solo(kStreams);
    // (Op by op: a settled batch would replay its recording where the
    // device replays natively; piper_flow_replay_test.cpp tests that.)
    const auto joint_stream = [&] {
        auto s = std::make_unique<VitsFlowStream>(flow_, kFrames);
        s->set_replay(false);
        return s;
    };
    for (auto& s : joint) s = joint_stream();
    for (auto& s : solo) s = std::make_unique<VitsFlowStream>(solo_flow, kFrames);
    const int frames = kFrames * kBlocks;
    std::vector<std::vector<float>> priors, joint_out(kStreams), solo_out(kStreams);
    for (int i = 0; i < kStreams; ++i)
        priors.push_back(random_prior(channels_, frames, 400 + std::uint32_t(i)));
    std::vector<int> fed(kStreams, 0);
    // The next block of each stream of `who`, pushed alone by its twin and
    // together here; the operations the batch issued (while profiling).
    const auto push = [&](const std::vector<int>& who, bool flush) {
        std::vector<std::vector<float>> blocks;
        std::vector<VitsFlowStream*> streams;
        for (int i : who) {
            std::vector<float> block(std::size_t(channels_) * kFrames);
            for (int c = 0; c < channels_; ++c)
                std::copy_n(priors[std::size_t(i)].begin() + std::ptrdiff_t(c) * frames + fed[i],
                            kFrames, block.begin() + std::ptrdiff_t(c) * kFrames);
            fed[i] += kFrames;
            VitsFlowStream* twin = solo[std::size_t(i)].get();
            const std::span<const float> one[] = {block};
            const auto alone =
                VitsFlowStream::push_blocks_together({&twin, 1}, one, kFrames, flush);
            auto& out = solo_out[std::size_t(i)];
            out.insert(out.end(), alone[0].begin(), alone[0].end());
            blocks.push_back(std::move(block));
            streams.push_back(joint[std::size_t(i)].get());
        }
        const std::vector<std::span<const float>> spans(blocks.begin(), blocks.end());
        const std::uint64_t before = etude::test::operations(*device_);
        const auto got = VitsFlowStream::push_blocks_together(streams, spans, kFrames, flush);
        const std::uint64_t issued = etude::test::operations(*device_) - before;
        for (std::size_t k = 0; k < who.size(); ++k) {
            auto& out = joint_out[std::size_t(who[k])];
            out.insert(out.end(), got[k].begin(), got[k].end());
        }
        return issued;
    };
    const std::vector<int> all{0, 1, 2, 3, 4}, four{0, 1, 2, 3};
    for (int round = 0; round < 4; ++round) push(all, false);  // the windows fill
    device_->set_profiling(true);
    const std::uint64_t of_four = push(four, false);  // stream 4 sits this one out
    const std::uint64_t of_five = push(all, false);
    const std::uint64_t alone = push({0}, false);  // and goes on alone
    device_->set_profiling(false);
    std::printf("[ %-8s ] operations: 4 streams %llu, 5 streams %llu, one alone %llu\n",
                name_.c_str(), (unsigned long long)of_four, (unsigned long long)of_five,
                (unsigned long long)alone);
    // (On OpenCL each slot is a page of its own, batch_major.h says why:
    // each stream's held frames then go in copies of their own, still far
    // fewer operations than its push alone.)
    const bool shared_pages = HeldSlots::slots_per_page(*device_) > 1;
    if (shared_pages) {
        EXPECT_EQ(of_five - of_four, 3u) << "a stream in a neighbouring slot: its prior's two "
                                            "uploads and its output's download";
        // Three more streams' shares, and the two copies that gather the
        // batch's halves where a push alone downloads its own in two.
        EXPECT_EQ(of_four, alone + 3 * 3 + 1) << "an operation of the walk is not one call for "
                                                 "the batch (a gather, a copy per stream)";
    }
    EXPECT_LT(of_five - of_four, alone)
        << "a stream's share of a batch is not below its push alone";
    const std::uint64_t streams_alone = shared_pages ? 2 : 4;
    EXPECT_LT(of_four, streams_alone * alone)
        << "a batch of four issues more operations than " << streams_alone << " streams alone";
    push({3, 1, 4}, false);  // scattered slots (stream 0 pushed ahead)
    push({2, 0}, false);
    // Stream 2 goes (its slot back) and a fresh one takes its place; it
    // pushes beside the others, side by side, until its layers settle.
    std::vector<float> dropped_joint = std::move(joint_out[2]),
                       dropped_solo = std::move(solo_out[2]);
    joint_out[2].clear();
    solo_out[2].clear();
    joint[2].reset();
    joint[2] = joint_stream();
    solo[2] = std::make_unique<VitsFlowStream>(solo_flow, kFrames);
    fed[2] = 0;
    priors[2] = random_prior(channels_, frames, 499);
    for (int round = 0; round < 3; ++round) push(all, false);
    push(all, true);
    const bool exact = GetParam() != etude::gpu::BackendKind::Cpu;
    const auto same = [&](const std::vector<float>& got, const std::vector<float>& want) {
        ASSERT_EQ(got.size(), want.size());
        ASSERT_FALSE(want.empty());
        const double diff = max_abs_diff(got, want);
        std::printf("[ %-8s ] max |side by side - solo| = %.3g\n", name_.c_str(), diff);
        EXPECT_LE(diff, kFlowBound);
        if (exact) {
            EXPECT_EQ(diff, 0.0);
        }
    };
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        same(joint_out[std::size_t(i)], solo_out[std::size_t(i)]);
    }
    SCOPED_TRACE("the stream dropped");
    same(dropped_joint, dropped_solo);
}

// A failing operation partway through a steady batch side by side (each
// stream's first push made alone, so that the batch's pushes are settled
// and of one length) reaches every stream of it, naming the batch; each
// stream, reset, then makes its solo flow.
TEST_P(PiperFlowBatch, a_device_error_in_a_steady_batch_reaches_every_stream) {
    constexpr int kStreams = 4;
    std::vector<std::vector<float>> priors, want, z(kStreams);
    std::vector<std::unique_ptr<VitsFlowStream>> streams;
    for (int i = 0; i < kStreams; ++i) {
        priors.push_back(random_prior(channels_, frames_of(i), 500 + std::uint32_t(i)));
        want.push_back(solo(priors.back(), frames_of(i)));
        streams.push_back(std::make_unique<VitsFlowStream>(flow_));
        VitsFlowStream& s = *streams.back();
        z[std::size_t(i)].resize(priors.back().size());
        s.set_batching(Batching::Alone);
        s.run_until(priors.back(), frames_of(i), 16, z[std::size_t(i)]);
        s.set_batching(Batching::Join);
    }
    etude::gpu::GpuFault fault;
    fault.kind = etude::gpu::GpuFault::KernelFailure;
    fault.count = 1;
    fault.after = 100;  // past the uploads, inside the couplings
    auto& joiner = *flow_->joiner();
    const JoinStats before = joiner.stats();
    std::vector<std::exception_ptr> errors(kStreams);
    joiner.pause();
    device_->inject_fault(fault);
    std::vector<std::thread> threads;
    for (int i = 0; i < kStreams; ++i)
        threads.emplace_back([&, i] {
            try {
                // The second push: 48 frames for every stream, none the last.
                streams[std::size_t(i)]->run_until(priors[std::size_t(i)], frames_of(i), 64,
                                                   z[std::size_t(i)]);
            } catch (...) {
                errors[std::size_t(i)] = std::current_exception();
            }
        });
    etude::test::wait_until([&] { return joiner.waiting() == std::size_t(kStreams); });
    EXPECT_EQ(joiner.waiting(), std::size_t(kStreams));
    joiner.resume();
    for (auto& t : threads) t.join();
    device_->inject_fault({});
    device_->reset_health();
    EXPECT_EQ(joiner.stats().batches, before.batches + 1);
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_TRUE(errors[std::size_t(i)]) << "a stream of the batch did not hear of the error";
        try {
            std::rethrow_exception(errors[std::size_t(i)]);
        } catch (const etude::gpu::DeviceError& e) {
            EXPECT_NE(std::string(e.what()).find("a batch of 4 streams"), std::string::npos)
                << e.what();
        } catch (...) {
            ADD_FAILURE() << "not a device error";
        }
    }
    for (auto& s : streams) s->reset();
    const auto got = together(streams, priors, errors);
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_FALSE(errors[std::size_t(i)]);
        ASSERT_EQ(got[std::size_t(i)].size(), want[std::size_t(i)].size());
        EXPECT_LE(max_abs_diff(got[std::size_t(i)], want[std::size_t(i)]), kFlowBound);
    }
}

// ---- Piper streams of the engine, on a device ------------------------------

StreamOptions options(const std::string& backend, std::uint64_t seed) {
    return etude::test::piper_on_device(kVoice, backend, seed);
}

class PiperStreamsFlowBatch : public etude::test::PiperOnDevice {
  protected:
    void SetUp() override {
        PiperOnDevice::SetUp();
        if (!device_) return;
        // The streams' shared flow on the device joins their pushes, as on
        // a GPU; set back after the test (the voice stays open).
        // (The voice held, so that the engine's streams open this one.)
        voice_ = PiperVoice::open(kVoice);
        flow_ = voice_->load_flow(0, device_);
        flow_->set_join_streams(true);
        // (The engine's default turns: a push waiting in a batch holds none.)
        engine_ = std::make_unique<Engine>();
    }
    void TearDown() override {
        streams_.clear();
        if (!device_) return;
        device_->inject_fault({});  // nothing left over for later tests
        device_->reset_health();
        flow_->set_join_streams(device_->info().is_gpu);
    }
    // kStreams streams, stream i speaking sentence i % 2 with seed 31 + i,
    // read live (read_some(): an offline reader's pushes stay out of
    // batches), their first flow pushes held in the paused joiner until all
    // of them wait there; then `inside` runs, and the batch.
    static constexpr int kStreams = 3;
    std::vector<std::vector<float>> speak_together(const std::function<void()>& inside) {
        const auto text = etude::test::piper_test_sentences();
        auto& joiner = *flow_->joiner();
        joiner.pause();
        streams_.clear();
        for (int i = 0; i < kStreams; ++i) {
            streams_.push_back(engine_->create_stream(options(name_, 31 + i)));
            streams_.back()->push_phoneme_ids(text[std::size_t(i % 2)]);
            streams_.back()->end_input();
        }
        std::vector<std::vector<float>> got(kStreams);
        std::vector<std::thread> readers;
        for (int i = 0; i < kStreams; ++i)
            readers.emplace_back([&, i] {
                Stream& s = *streams_[std::size_t(i)];
                got[std::size_t(i)] = etude::test::read_some_to_the_end(s);
            });
        etude::test::wait_until([&] { return joiner.waiting() == kStreams; });
        EXPECT_EQ(joiner.waiting(), std::size_t(kStreams));
        inside();
        joiner.resume();
        for (auto& t : readers) t.join();
        EXPECT_GE(joiner.stats().largest, std::uint64_t(kStreams)) << "the first pushes met";
        return got;
    }
    // Stream i's CPU render.
    std::vector<float> cpu_render(int i) {
        auto cpu = engine_->create_stream(options("cpu", 31 + i));
        cpu->push_phoneme_ids(etude::test::piper_test_sentences()[std::size_t(i % 2)]);
        cpu->end_input();
        return etude::test::read_all(*cpu);
    }

    std::shared_ptr<const PiperVoice> voice_;
    std::shared_ptr<const VitsFlowNetwork> flow_;
    std::unique_ptr<Engine> engine_;
    std::vector<std::unique_ptr<Stream>> streams_;
};

// Stream 0 is cancelled while its first flow push waits in the batch: the
// others' pushes run in batches and their audio is each one's CPU render.
TEST_P(PiperStreamsFlowBatch, streams_flows_meet_in_batches_and_a_cancel_leaves_the_others_whole) {
    const auto got = speak_together([&] { streams_[0]->cancel(); });
    EXPECT_GT(flow_->batched_layer_calls(), 0u) << "no layer ran the streams in one call";
    EXPECT_FALSE(streams_[0]->busy());
    for (int i = 1; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        const StreamStats st = streams_[std::size_t(i)]->stats();
        EXPECT_GE(st.flow_pushes_batched, 1u) << "the stream's first push ran in a batch";
        EXPECT_LE(st.flow_pushes_batched, st.flow_pushes_gpu);
        EXPECT_EQ(st.flow_pushes_cpu, 0u);
        EXPECT_EQ(st.gpu_failures, 0u) << st.gpu_last_error;
        const auto want = cpu_render(i);
        ASSERT_EQ(got[std::size_t(i)].size(), want.size());
        const double diff = max_abs_diff(got[std::size_t(i)], want);
        std::printf(
            "[ %-8s ] stream %d: %llu of %llu flow pushes batched; max |device - cpu| = "
            "%.3g\n",
            name_.c_str(), i, (unsigned long long)st.flow_pushes_batched,
            (unsigned long long)st.flow_pushes_gpu, diff);
        EXPECT_LE(diff, kDeviceBound);
    }
}

// A failed launch inside the first batch (after its first operations):
// every stream of it has its sentence taken over by its own CPU flow, with
// the batch named in its last error, and no stream is lost: each one's
// audio is its CPU render.
TEST_P(PiperStreamsFlowBatch, a_device_error_in_a_batch_is_taken_over_by_each_streams_cpu_flow) {
    const auto got = speak_together([&] {
        etude::gpu::GpuFault fault;
        fault.kind = etude::gpu::GpuFault::KernelFailure;
        fault.count = 1;
        fault.after = 60;  // inside the batch's first coupling
        device_->inject_fault(fault);
    });
    device_->inject_fault({});
    device_->reset_health();
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        const StreamStats st = streams_[std::size_t(i)]->stats();
        EXPECT_EQ(st.flow_takeovers, 1u);
        EXPECT_GT(st.flow_pushes_cpu, 0u);
        EXPECT_EQ(st.gpu_failures, 1u);
        EXPECT_NE(st.gpu_last_error.find("VITS flow: a batch of 3 streams failed"),
                  std::string::npos)
            << st.gpu_last_error;
        const auto want = cpu_render(i);
        ASSERT_EQ(got[std::size_t(i)].size(), want.size());
        const double diff = max_abs_diff(got[std::size_t(i)], want);
        std::printf("[ %-8s ] stream %d after a fault in its batch: max |device - cpu| = %.3g\n",
                    name_.c_str(), i, diff);
        EXPECT_LE(diff, kDeviceBound);
    }
}

const auto kBackends = ::testing::Values(
    etude::gpu::BackendKind::Cpu, etude::gpu::BackendKind::Vulkan, etude::gpu::BackendKind::OpenCl);
const auto kDevices =
    ::testing::Values(etude::gpu::BackendKind::Vulkan, etude::gpu::BackendKind::OpenCl);
const auto kName = [](const auto& info) { return etude::gpu::to_string(info.param); };
INSTANTIATE_TEST_SUITE_P(Backends, PiperFlowBatch, kBackends, kName);
INSTANTIATE_TEST_SUITE_P(Devices, PiperStreamsFlowBatch, kDevices, kName);

}  // namespace
