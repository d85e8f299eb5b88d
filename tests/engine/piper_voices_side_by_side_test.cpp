// Voices of every size, and two speakers of one voice, speak at once on one
// device (lavapipe for Vulkan, PoCL for OpenCL; each skips where absent).
// Each (voice, speaker) has a decoder of its own on the device, and the
// chunks of the streams that share one, or whose decoders share their
// weights (a voice's speakers: models/shared_batching.h), meet in batches
// (engine/models/stream_joiner.h); streams of other networks run beside
// them. Every stream must still be its own audio: the CPU's render of the
// same voice, speaker, seed and text, within the bound a device holds
// against the CPU. A batch that mixed two streams' state, or a chunk that
// went through another voice's or speaker's network, would be far outside
// it (those voices differ in every weight), and the lengths would differ
// too (x_low speaks at 16 kHz, the others at 22.05 kHz).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/models/neural_model.h"
#include "engine/models/stream_joiner.h"
#include "engine/models/vits/flow_network.h"
#include "engine/voices/piper_voice.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/piper_on_device.h"
#include "support/piper_test_ids.h"
#include "support/stream_output.h"
#include "support/test_data.h"

using namespace etude::engine;
using etude::test::max_abs_diff;
using etude::test::read_all;

namespace {

const std::string kData = etude::test::test_data_dir() + "/piper/";

// The bound of the device-flow and CLI tests: every backend is within 1e-4
// of PyTorch's float64 render (tests/engine/models/vits_parity_test.cpp),
// and float rounding in another order through the flow and decoder moves
// the audio by about 1e-6 of its peak.
constexpr double kDeviceBound = 1e-4;

struct Voice {
    std::string file;
    std::string speaker;  // empty: the voice's one speaker
    std::uint64_t seed;
};

// Two streams of the medium voice share its decoder: their chunks are the
// ones made to meet in a batch (below). The others each have a network of
// their own on the device: x_low, high, and speakers 0 and 2 of the
// four-speaker voice (one decoder per speaker, its conditioning folded into
// the input convolution's bias, the rest of its weights speaker 0's,
// shared: piper_speaker_weights_test.cpp).
const std::vector<Voice> kVoices{
    {kData + "test_medium.onnx", "", 31},        {kData + "test_medium.onnx", "", 32},
    {kData + "test_x_low.onnx", "", 33},         {kData + "test_high.onnx", "", 34},
    {kData + "test_medium_multi.onnx", "0", 35}, {kData + "test_medium_multi.onnx", "2", 36},
};

StreamOptions options(const Voice& v, const std::string& backend) {
    return etude::test::piper_on_device(v.file, backend, v.seed, v.speaker);
}

// A device network's streams joined for a test: the engine joins them on a
// GPU only (on lavapipe and PoCL, devices made of the host's cores, a batch
// runs on one thread what the streams would run side by side); here they
// are joined to run the batched path, and set back to the engine's choice
// after.
template <class Network>
class JoinedForTheTest {
  public:
    JoinedForTheTest(Network& network, const etude::gpu::Backend& device)
        : network_(network), gpu_(device.info().is_gpu) {
        network_.set_join_streams(true);
    }
    ~JoinedForTheTest() { network_.set_join_streams(gpu_); }
    JoinedForTheTest(const JoinedForTheTest&) = delete;
    JoinedForTheTest& operator=(const JoinedForTheTest&) = delete;

  private:
    Network& network_;
    bool gpu_;
};

// A stream of `engine` with `o`, given `ids` as its whole input.
std::unique_ptr<Stream> speaking(Engine& engine, const StreamOptions& o,
                                 const std::vector<std::int64_t>& ids) {
    auto stream = engine.create_stream(o);
    stream->push_phoneme_ids(ids);
    stream->end_input();
    return stream;
}

class PiperVoicesSideBySide : public etude::test::PiperOnDevice {
  protected:
    Engine engine_;
};

TEST_P(PiperVoicesSideBySide, every_size_and_speaker_at_once_on_one_device_is_each_its_own_audio) {
    const std::vector<std::int64_t> ids = etude::test::piper_test_sentences()[0];

    // Every network's decoder on this device joins its streams' chunks.
    // (The voices are held open: the engine's streams then find the same
    // ones, as a process opens each voice once while it is in use.)
    std::vector<std::shared_ptr<const PiperVoice>> voices;
    std::vector<std::shared_ptr<NeuralModel>> decoders;
    std::vector<std::unique_ptr<JoinedForTheTest<NeuralModel>>> joined;
    for (const auto& v : kVoices) {
        voices.push_back(PiperVoice::open(v.file));
        decoders.push_back(
            voices.back()->load_decoder(v.speaker.empty() ? 0 : std::stoi(v.speaker), device_));
        joined.push_back(
            std::make_unique<JoinedForTheTest<NeuralModel>>(*decoders.back(), *device_));
    }
    // The medium voice's joiner, paused: the two medium streams' first
    // chunks wait in it until both are there, so that a batch of two surely
    // forms (pushes otherwise meet only when their timing lets them).
    StreamJoiner* joiner = decoders[0]->joiner();
    ASSERT_NE(joiner, nullptr);
    ASSERT_EQ(decoders[1].get(), decoders[0].get()) << "the medium streams share a decoder";
    const JoinStats before = joiner->stats();
    joiner->pause();
    // So is the four-speaker voice's, whose two speakers' decoders (one
    // sharing the other's weights) batch in one lane.
    StreamJoiner* speakers_joiner = decoders[4]->joiner();
    ASSERT_NE(speakers_joiner, nullptr);
    ASSERT_EQ(decoders[5]->joiner(), speakers_joiner) << "each speaker's chunks batch apart";
    const JoinStats speakers_before = speakers_joiner->stats();
    speakers_joiner->pause();

    // Read live (read_some), as a server reads: an offline read() decodes
    // each chunk alone, never in a batch.
    std::vector<std::unique_ptr<Stream>> streams;
    for (const auto& v : kVoices) {
        streams.push_back(speaking(engine_, options(v, name_), ids));
    }
    etude::test::wait_until(
        [&] { return joiner->waiting() >= 2 && speakers_joiner->waiting() >= 2; });
    const std::size_t met = joiner->waiting(), speakers_met = speakers_joiner->waiting();
    joiner->resume();
    speakers_joiner->resume();
    ASSERT_EQ(met, 2u) << "the two medium streams' chunks did not both reach the joiner";
    ASSERT_EQ(speakers_met, 2u) << "the two speakers' chunks did not both reach the joiner";

    std::vector<std::vector<float>> live(streams.size());
    std::vector<float> block(1024);
    for (bool busy = true; busy;) {
        busy = false;
        for (std::size_t i = 0; i < streams.size(); ++i) {
            const std::size_t n = streams[i]->read_some(block, 20);
            live[i].insert(live[i].end(), block.begin(), block.begin() + static_cast<long>(n));
            busy = busy || n > 0 || streams[i]->busy();
        }
    }
    const JoinStats after = joiner->stats();
    EXPECT_GE(after.largest, 2u) << "no batch of the two medium streams formed";
    EXPECT_GT(after.batches, before.batches);
    const JoinStats speakers_after = speakers_joiner->stats();
    EXPECT_GE(speakers_after.largest, 2u) << "no batch of the two speakers' streams formed";
    EXPECT_GT(speakers_after.batches, speakers_before.batches);

    for (std::size_t i = 0; i < kVoices.size(); ++i) {
        const auto& v = kVoices[i];
        SCOPED_TRACE(v.file + " speaker '" + v.speaker + "'");
        const StreamStats stats = streams[i]->stats();
        EXPECT_GT(stats.mel_chunks_gpu, 0u) << "the decoder's chunks went to the device";
        EXPECT_EQ(stats.gpu_failures, 0u) << stats.gpu_last_error;
        const std::vector<float> expected = read_all(*speaking(engine_, options(v, "cpu"), ids));
        ASSERT_GT(expected.size(), 0u);
        ASSERT_EQ(live[i].size(), expected.size());
        const double diff = max_abs_diff(live[i], expected);
        std::printf("[ %-8s ] %s speaker '%s': %zu samples, max |device - cpu| = %.3g\n",
                    name_.c_str(), v.file.substr(kData.size()).c_str(), v.speaker.c_str(),
                    expected.size(), diff);
        EXPECT_LE(diff, kDeviceBound);
    }
    // The voices' lengths differ (another rate, other durations): a stream
    // that spoke through another's network would show here too.
    EXPECT_NE(live[2].size(), live[0].size());
}

// A chunk given to the device gives its turn back (mel_scheduler.h): with
// one turn for all streams' work, three streams' chunks still meet in the
// device's joiner. Were the turn held while the push waits, the second
// stream would wait for the turn instead, and no batch could take more
// chunks than the engine has turns (one per CPU less one: 15 beside a GPU
// with 16 host cores, against the hundreds of streams a GPU batches).
TEST_P(PiperVoicesSideBySide, chunks_on_the_device_give_their_turns_back_so_batches_outgrow_them) {
    const std::vector<std::int64_t> ids = etude::test::piper_test_sentences()[1];
    const auto voice = PiperVoice::open(kVoices[0].file);
    const auto decoder = voice->load_decoder(0, device_);
    const JoinedForTheTest<NeuralModel> joined(*decoder, *device_);
    StreamJoiner* joiner = decoder->joiner();
    ASSERT_NE(joiner, nullptr);
    Engine engine{Engine::Options{.work_turns = 1}};
    joiner->pause();
    std::vector<std::unique_ptr<Stream>> streams;
    for (std::uint64_t seed : {41, 42, 43}) {
        Voice v = kVoices[0];
        v.seed = seed;
        streams.push_back(speaking(engine, options(v, name_), ids));
    }
    etude::test::wait_until([&] { return joiner->waiting() >= 3; });
    const std::size_t met = joiner->waiting();
    joiner->resume();
    EXPECT_EQ(engine.stats().work_turns, 1);
    EXPECT_EQ(met, 3u) << "chunks waiting for the device held the only turn";
    for (auto& s : streams) {
        EXPECT_GT(read_all(*s).size(), 0u);
        EXPECT_EQ(s->stats().gpu_failures, 0u);
    }
    EXPECT_GE(joiner->stats().largest, 3u);
}

// Offline readers' chunks batch on a device too, among themselves
// (Batching::JoinOffline): a thousand streams read at once are a device's
// throughput case. They meet in a joiner of their own, never the live
// streams' (a batch runs at the priority of the thread that leads it, an
// offline reader's below normal), and each reader's audio is still its own.
TEST_P(PiperVoicesSideBySide, offline_readers_chunks_meet_in_batches_of_their_own) {
    const std::vector<std::int64_t> ids = etude::test::piper_test_sentences()[0];
    const auto voice = PiperVoice::open(kVoices[0].file);
    const auto decoder = voice->load_decoder(0, device_);
    const JoinedForTheTest<NeuralModel> joined(*decoder, *device_);
    StreamJoiner* offline = decoder->joiner(Batching::JoinOffline);
    StreamJoiner* live = decoder->joiner(Batching::Join);
    ASSERT_NE(offline, nullptr);
    ASSERT_NE(offline, live);
    const JoinStats live_before = live->stats();
    offline->pause();
    std::vector<std::vector<float>> got(2);
    std::vector<std::thread> readers;
    for (std::size_t i = 0; i < got.size(); ++i)
        readers.emplace_back([&, i] {
            // Of the offline class, as a benchmark's or a file's stream: a
            // stream read() is known to be read offline only from its first
            // read(), and the first sentence may be under way before it.
            StreamOptions o = options(kVoices[i], name_);
            o.scheduling = SchedulingClass::Offline;
            got[i] = read_all(*speaking(engine_, o, ids));
        });
    etude::test::wait_until([&] { return offline->waiting() >= 2; });
    const std::size_t met = offline->waiting();
    offline->resume();
    for (auto& t : readers) t.join();
    EXPECT_EQ(met, 2u) << "the offline readers' chunks did not meet";
    EXPECT_GE(offline->stats().largest, 2u);
    EXPECT_EQ(live->stats().pushes, live_before.pushes) << "an offline chunk in a live batch";
    for (std::size_t i = 0; i < got.size(); ++i) {
        const std::vector<float> expected =
            read_all(*speaking(engine_, options(kVoices[i], "cpu"), ids));
        ASSERT_EQ(got[i].size(), expected.size());
        EXPECT_LE(max_abs_diff(got[i], expected), kDeviceBound);
    }
}

// The flow's pushes on the device, as the decoder's chunks: a push gives
// the stream's turn back before it waits for the device (so with one turn,
// three live streams' pushes meet in the flow's joiner), and offline
// readers' pushes meet in a joiner of their own, never the live streams'.
TEST_P(PiperVoicesSideBySide, flow_pushes_give_their_turns_back_and_offline_ones_batch_apart) {
    const std::vector<std::int64_t> ids = etude::test::piper_test_sentences()[1];
    const auto voice = PiperVoice::open(kVoices[0].file);
    const auto flow = voice->load_flow(0, device_);
    const JoinedForTheTest<const VitsFlowNetwork> joined(*flow, *device_);
    Engine engine{Engine::Options{.work_turns = 1}};
    for (const bool offline : {false, true}) {
        SCOPED_TRACE(offline ? "offline readers" : "live streams");
        auto* joiner = flow->joiner(offline ? Batching::JoinOffline : Batching::Join);
        auto* other = flow->joiner(offline ? Batching::Join : Batching::JoinOffline);
        ASSERT_NE(joiner, nullptr);
        const auto other_before = other->stats().pushes;
        joiner->pause();
        std::vector<std::unique_ptr<Stream>> streams;
        for (std::uint64_t seed : {51, 52, 53}) {
            Voice v = kVoices[0];
            v.seed = seed;
            StreamOptions o = options(v, name_);
            if (offline) o.scheduling = SchedulingClass::Offline;
            streams.push_back(speaking(engine, o, ids));
        }
        etude::test::wait_until([&] { return joiner->waiting() >= 3; });
        const std::size_t met = joiner->waiting();
        joiner->resume();
        EXPECT_EQ(met, 3u) << "flow pushes waiting for the device held the only turn";
        for (auto& st : streams) {
            EXPECT_GT(read_all(*st).size(), 0u);
            EXPECT_GT(st->stats().flow_pushes_batched, 0u);
            EXPECT_EQ(st->stats().flow_pushes_cpu, 0u);
        }
        EXPECT_EQ(other->stats().pushes, other_before) << "a push in the other kind's batches";
    }
}

INSTANTIATE_TEST_SUITE_P(Devices, PiperVoicesSideBySide,
                         ::testing::Values(etude::gpu::BackendKind::Vulkan,
                                           etude::gpu::BackendKind::OpenCl),
                         [](const auto& info) { return etude::gpu::to_string(info.param); });

}  // namespace
