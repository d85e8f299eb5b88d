// Streams of one model pushing on their own threads meet in batches
// (StreamJoiner, on by default on a GPU): each stream's audio is its solo
// audio, a push that arrives while a batch runs goes in the next one, and a
// device error reaches every push of its batch. Run on the CPU backend with
// joining switched on, so that CI checks it without a GPU; the joiner's
// pause() makes the batches certain rather than a matter of timing.
#include "engine/models/stream_joiner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "audio-io/npy_file.h"
#include "engine/models/mel_vocoder_stream.h"
#include "engine/models/neural_model.h"
#include "gpu/cpu/cpu_direct_conv.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/test_data.h"
#include "support/wait_until.h"

namespace etude::engine {
namespace {

const std::string kData = test::test_data_dir() + "/neural/";

struct Mel {
    std::vector<float> data;
    int channels = 0, frames = 0;
};

Mel read_mel(const std::string& name) {
    auto npy = audio_io::read_npy(kData + name + "_mel.npy");
    return {std::move(npy.data), static_cast<int>(npy.shape[0]), static_cast<int>(npy.shape[1])};
}

// The mel from frame `start` on, in 4-frame chunks, through `stream`.
std::vector<float> speak(MelVocoderStream& stream, const Mel& mel, int start) {
    std::vector<float> out, part;
    for (int f = start; f < mel.frames; f += 4) {
        const int n = std::min(4, mel.frames - f);
        copy_mel_frames(mel.data, mel.channels, mel.frames, f, n, part);
        const auto got = stream.push(part, n);
        out.insert(out.end(), got.begin(), got.end());
    }
    const auto rest = stream.finish();
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
}

TEST(StreamJoiner, is_off_on_the_cpu_and_for_networks_that_cannot_batch) {
    auto hifigan = NeuralModel::load(kData + "hifigan_v1.lef", gpu::shared_cpu_backend());
    EXPECT_EQ(hifigan->joiner(), nullptr) << "a batch would run on one producer's thread";
    hifigan->set_join_streams(true);
    EXPECT_NE(hifigan->joiner(), nullptr);
    auto vocos = NeuralModel::load(kData + "vocos.lef", gpu::shared_cpu_backend());
    vocos->set_join_streams(true);
    EXPECT_EQ(vocos->joiner(), nullptr);
}

TEST(StreamJoiner, streams_on_their_own_threads_meet_in_batches_and_keep_their_solo_audio) {
    const Mel mel = read_mel("hifigan_v1");
    auto solo_model = NeuralModel::load(kData + "hifigan_v1.lef", gpu::shared_cpu_backend());
    auto model = NeuralModel::load(kData + "hifigan_v1.lef", gpu::shared_cpu_backend());
    model->set_join_streams(true);
    StreamJoiner& joiner = *model->joiner();
    constexpr int kStreams = 4;
    // Every stream starts at frame 0 or 2, so their chunks line up in pairs
    // or all together, and the first push of each waits until all four do.
    std::vector<std::vector<float>> solo(kStreams), joint(kStreams);
    for (int i = 0; i < kStreams; ++i) {
        MelVocoderStream s(solo_model);
        solo[i] = speak(s, mel, 2 * (i % 2));
    }
    joiner.pause();
    std::vector<std::thread> threads;
    for (int i = 0; i < kStreams; ++i)
        threads.emplace_back([&, i] {
            MelVocoderStream s(model);
            joint[i] = speak(s, mel, 2 * (i % 2));
        });
    test::wait_until([&] { return joiner.waiting() == kStreams; });
    EXPECT_EQ(joiner.waiting(), static_cast<std::size_t>(kStreams));
    joiner.resume();
    for (auto& t : threads) t.join();
    const JoinStats stats = joiner.stats();
    EXPECT_EQ(stats.largest, static_cast<std::uint64_t>(kStreams)) << "the first pushes met";
    EXPECT_LT(stats.batches, stats.pushes);
    gpu::Conv1dShape conv, up;
    conv.kernel = 3;
    up.kernel = 4;
    up.stride = 2;
    up.padding = 1;
    const bool direct =
        gpu::cpu::direct_conv1d_applies(conv) && gpu::cpu::direct_conv_transpose1d_applies(up);
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_EQ(joint[i].size(), solo[i].size());
        if (direct)  // joint_push_test.cpp says why bit for bit
            EXPECT_EQ(0,
                      std::memcmp(joint[i].data(), solo[i].data(), sizeof(float) * solo[i].size()));
        else
            EXPECT_LE(test::max_abs_diff(joint[i], solo[i]), 1e-5);
    }
}

// A stream is a member of its lane (the streams a batch may wait for,
// stream_joiner.h) from its utterance's first push to its flush, and no
// longer once the utterance is cancelled (reset) or its state dropped, so
// that no batch waits for a stream that will not push.
TEST(StreamJoiner, a_stream_is_a_member_of_its_lane_while_its_utterance_is_open) {
    const Mel mel = read_mel("hifigan_v1");
    auto model = NeuralModel::load(kData + "hifigan_v1.lef", gpu::shared_cpu_backend());
    model->set_join_streams(true);
    StreamJoiner& joiner = *model->joiner(Batching::Join);
    StreamJoiner& offline = *model->joiner(Batching::JoinOffline);
    MelVocoderStream s(model);
    std::vector<float> part;
    copy_mel_frames(mel.data, mel.channels, mel.frames, 0, 8, part);
    s.push(part, 8);
    EXPECT_EQ(joiner.members(), 1u) << "the utterance's first push";
    s.reset();  // a cancel
    EXPECT_EQ(joiner.members(), 0u) << "a cancelled utterance";
    s.push(part, 8);
    EXPECT_EQ(joiner.members(), 1u);
    s.set_batching(Batching::JoinOffline);
    s.push(part, 8);
    EXPECT_EQ(joiner.members(), 0u) << "it moved to the offline lane";
    EXPECT_EQ(offline.members(), 1u);
    s.finish();
    EXPECT_EQ(offline.members(), 0u) << "the flush";
    s.push(part, 8);
    EXPECT_EQ(offline.members(), 1u);
    {
        MelVocoderStream gone(model);
        gone.set_batching(Batching::JoinOffline);
        gone.push(part, 8);
        EXPECT_EQ(offline.members(), 2u);
    }
    EXPECT_EQ(offline.members(), 1u) << "a stream that ended";
}

// A push its caller keeps out of batches (Batching::Alone: an offline
// reader's producer) runs at once on its own thread, even while the joiner
// holds every push that may join: it neither waits for the joiner nor goes
// into its batches, and its audio is the solo audio.
TEST(StreamJoiner, a_push_kept_alone_runs_at_once_outside_the_batches) {
    const Mel mel = read_mel("hifigan_v1");
    auto solo_model = NeuralModel::load(kData + "hifigan_v1.lef", gpu::shared_cpu_backend());
    auto model = NeuralModel::load(kData + "hifigan_v1.lef", gpu::shared_cpu_backend());
    model->set_join_streams(true);
    StreamJoiner& joiner = *model->joiner();
    MelVocoderStream solo(solo_model);
    const std::vector<float> want = speak(solo, mel, 0);
    joiner.pause();
    std::atomic<bool> done{false};
    std::vector<float> got;
    std::thread alone([&] {
        MelVocoderStream s(model);
        s.set_batching(Batching::Alone);
        got = speak(s, mel, 0);
        done = true;
    });
    test::wait_until([&] { return done.load() || joiner.waiting() > 0; });
    const bool finished_while_paused = done.load();
    const std::size_t waited = joiner.waiting();
    joiner.resume();  // a push that did go to the joiner gets out, and the test ends
    alone.join();
    EXPECT_TRUE(finished_while_paused) << "the push waited for the paused joiner";
    EXPECT_EQ(waited, 0u);
    EXPECT_EQ(joiner.stats().pushes, 0u);
    EXPECT_EQ(got, want);
}

// Pushes `frames` frames of `part` from every stream on a thread of its own,
// all in one batch, with a kernel failure after `after` operations of it;
// then checks that the batch's every push heard of the error and that each
// stream, reset as MelVocoderStream resets its runner after a failed run,
// speaks as a fresh one does.
void expect_an_error_in_a_batch_to_reach_every_push(
    NeuralModel& model, std::vector<std::unique_ptr<NetworkStream>>& streams,
    const std::vector<float>& part, int frames, int after) {
    auto backend = gpu::shared_cpu_backend();
    StreamJoiner& joiner = *model.joiner();
    const std::uint64_t batches = joiner.stats().batches;
    std::atomic<int> failed{0}, other{0};
    joiner.pause();
    std::vector<std::thread> threads;
    for (auto& stream : streams)
        threads.emplace_back([&, s = stream.get()] {
            std::vector<float> values;
            try {
                s->push(part.data(), frames, false, values, Batching::Join);
            } catch (const gpu::DeviceError&) {
                ++failed;
            } catch (...) {
                ++other;
            }
        });
    test::wait_until([&] { return joiner.waiting() == streams.size(); });
    gpu::GpuFault fault;
    fault.kind = gpu::GpuFault::KernelFailure;
    fault.count = 1;
    fault.after = after;
    backend->inject_fault(fault);
    joiner.resume();
    for (auto& t : threads) t.join();
    backend->inject_fault({});  // nothing left over for later tests
    backend->reset_health();
    EXPECT_EQ(joiner.stats().batches, batches + 1);
    EXPECT_EQ(failed.load(), static_cast<int>(streams.size()));
    EXPECT_EQ(other.load(), 0);
    auto fresh = model.open_stream();
    std::vector<float> want;
    fresh->push(part.data(), frames, true, want, Batching::Alone);
    for (auto& s : streams) {
        s->reset();
        std::vector<float> got;
        s->push(part.data(), frames, true, got, Batching::Alone);
        EXPECT_EQ(got, want);
    }
}

// A device error partway through a batch (after some of its layers ran)
// reaches every push of it; each stream, reset, then speaks as a fresh one
// does.
TEST(StreamJoiner, a_device_error_reaches_every_push_of_its_batch) {
    const Mel mel = read_mel("hifigan_v1");
    auto model = NeuralModel::load(kData + "hifigan_v1.lef", gpu::shared_cpu_backend());
    model->set_join_streams(true);
    std::vector<float> part;
    copy_mel_frames(mel.data, mel.channels, mel.frames, 0, 8, part);
    std::vector<std::unique_ptr<NetworkStream>> streams;
    for (int i = 0; i < 3; ++i) streams.push_back(model->open_stream());
    // Partway: some layers of the batch have run.
    expect_an_error_in_a_batch_to_reach_every_push(*model, streams, part, 8, 40);
}

// The same for a steady batch, which runs side by side
// (engine/models/batch_major.h): streams that have settled, pushing chunks of
// one size.
TEST(StreamJoiner, a_device_error_in_a_steady_batch_reaches_every_push_of_it) {
    const Mel mel = read_mel("hifigan_v1");
    auto model = NeuralModel::load(kData + "hifigan_v1.lef", gpu::shared_cpu_backend());
    model->set_join_streams(true);
    constexpr int kStreams = 3;
    std::vector<float> part;
    copy_mel_frames(mel.data, mel.channels, mel.frames, 0, 4, part);
    std::vector<std::unique_ptr<NetworkStream>> streams;
    std::vector<std::vector<float>> settling(kStreams);
    for (int i = 0; i < kStreams; ++i) streams.push_back(model->open_stream());
    for (int round = 0; round < 6; ++round) {  // every layer's window fills
        std::vector<StreamPush> pushes;
        for (int i = 0; i < kStreams; ++i)
            pushes.push_back({streams[i].get(), part.data(), 4, false, &settling[i]});
        streams[0]->push_together(pushes);
    }
    // Partway: past the mel's uploads and the first layers.
    expect_an_error_in_a_batch_to_reach_every_push(*model, streams, part, 4, 30);
}

// A batch that runs out of device memory fails over like any device error
// (every push of it gets the error, to be remade on the CPU), and the
// batches after it take half as many pushes: with more streams than the
// device holds at once, smaller batches, not every batch failing.
TEST(StreamJoiner, a_batch_out_of_device_memory_halves_the_batches_after_it) {
    const Mel mel = read_mel("hifigan_v1");
    auto backend = gpu::shared_cpu_backend();
    auto model = NeuralModel::load(kData + "hifigan_v1.lef", backend);
    model->set_join_streams(true);
    StreamJoiner& joiner = *model->joiner();
    constexpr int kStreams = 4;
    std::vector<float> part;
    copy_mel_frames(mel.data, mel.channels, mel.frames, 0, 8, part);
    std::vector<std::unique_ptr<NetworkStream>> streams;
    for (int i = 0; i < kStreams; ++i) streams.push_back(model->open_stream());
    // All four push together while the joiner is paused, so they meet.
    const auto push_all = [&](std::vector<std::vector<float>>& out, std::atomic<int>& failed) {
        joiner.pause();
        std::vector<std::thread> threads;
        for (int i = 0; i < kStreams; ++i)
            threads.emplace_back([&, i] {
                try {
                    streams[i]->push(part.data(), 8, true, out[i], Batching::Join);
                } catch (const gpu::OutOfMemory&) {
                    ++failed;
                }
            });
        test::wait_until([&] { return joiner.waiting() == kStreams; });
        EXPECT_EQ(joiner.waiting(), static_cast<std::size_t>(kStreams));
        joiner.resume();
        for (auto& t : threads) t.join();
    };
    std::vector<std::vector<float>> first(kStreams), second(kStreams);
    std::atomic<int> failed_first{0}, failed_second{0};
    gpu::GpuFault fault;
    fault.kind = gpu::GpuFault::OutOfMemory;
    fault.count = 1;
    fault.after = 40;  // partway through the batch
    backend->inject_fault(fault);
    push_all(first, failed_first);
    backend->inject_fault({});
    backend->reset_health();
    JoinStats stats = joiner.stats();
    EXPECT_EQ(failed_first.load(), kStreams) << "every push of the batch hears of it";
    EXPECT_EQ(stats.batches, 1u);
    EXPECT_EQ(stats.out_of_memory, 1u);
    EXPECT_EQ(stats.cap, static_cast<std::uint64_t>(kStreams / 2));
    // The same chunks again, from a fresh state (as MelVocoderStream resets
    // its runner after a failed run): batches of two, each stream's audio
    // its solo audio.
    for (auto& s : streams) s->reset();
    push_all(second, failed_second);
    stats = joiner.stats();
    EXPECT_EQ(failed_second.load(), 0);
    EXPECT_EQ(stats.pushes, static_cast<std::uint64_t>(2 * kStreams));
    EXPECT_EQ(stats.batches, 3u) << "four pushes after the halving: two batches of two";
    auto fresh = model->open_stream();
    std::vector<float> want;
    fresh->push(part.data(), 8, true, want, Batching::Alone);
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_EQ(second[i].size(), want.size());
        EXPECT_LE(test::max_abs_diff(second[i], want), 1e-5);
    }
}

}  // namespace
}  // namespace etude::engine
