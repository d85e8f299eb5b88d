// A server's streams (SchedulingClass::Network) and offline streams of a
// Piper voice on the CPU have no producer thread each: the engine's step
// pool of their class (engine/scheduling/step_pool.h, a thread per turn of
// the class's gate) steps them a chunk at a time
// (engine/streams/stream_core_steps.cpp). Their audio is the
// offline render's, as a stream with a producer of its own gives it; and a
// step never waits for room in a ring, so streams read one after another by
// one thread (each left full until its turn comes) all finish: a pool whose
// threads waited for their rings' readers would hang there, every thread
// holding a stream nobody reads yet.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/voices/piper_voice.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/piper_test_ids.h"
#include "support/process_threads.h"
#include "support/stream_output.h"
#include "support/test_data.h"

using namespace etude::engine;
using etude::test::max_abs_diff;
using etude::test::read_all;
using etude::test::threads_of_this_process;

namespace {

const std::string kVoice = etude::test::test_data_dir() + "/piper/test_medium.onnx";

// The chunked decoder's streamed audio against the whole sentence's
// (tests/engine/piper_stream_test.cpp).
constexpr double kChunkedBound = 1e-5;

StreamOptions stepped_options(std::uint64_t seed,
                              SchedulingClass scheduling = SchedulingClass::Network) {
    StreamOptions o;
    o.voice = PiperVoiceOptions{.piper_voice = kVoice, .seed = seed};
    o.sample_rate = 0;  // the voice's own
    o.latency_ms = 100;
    o.backend = "cpu";
    o.scheduling = scheduling;
    return o;
}

std::vector<float> offline(const std::vector<std::vector<std::int64_t>>& s, std::uint64_t seed) {
    const auto voice = PiperVoice::open(kVoice);
    const VitsScales scales = voice->scales({}, {}, {});
    const auto decoder = voice->load_decoder(0, etude::gpu::shared_cpu_backend());
    std::mt19937_64 noise(seed);
    std::vector<float> out;
    for (const auto& ids : s) {
        const auto latent = voice->latent(ids, 0, scales, noise);
        const auto audio = decoder->vocode(latent.z, latent.frames);
        out.insert(out.end(), audio.begin(), audio.end());
    }
    return out;
}

void expect_streams_read_one_after_another_finish_as_rendered(SchedulingClass scheduling) {
    const auto s = etude::test::piper_test_sentences();
    // Three times over: seconds of audio per stream, many rings' worth.
    std::vector<std::vector<std::int64_t>> text;
    for (int k = 0; k < 3; ++k) text.insert(text.end(), s.begin(), s.end());
    Engine::Options engine_options;
    engine_options.network_turns = 2;  // (the offline gate's: a turn per usable CPU)
    Engine engine(engine_options);
    constexpr int kStreams = 8;
    std::vector<std::unique_ptr<Stream>> streams;
    streams.push_back(engine.create_stream(stepped_options(100, scheduling)));
    // The pool's threads are made with the first such stream; the others
    // add none.
    const int threads_with_one = threads_of_this_process();
    for (int i = 1; i < kStreams; ++i)
        streams.push_back(
            engine.create_stream(stepped_options(100 + std::uint64_t(i), scheduling)));
    EXPECT_EQ(threads_of_this_process(), threads_with_one)
        << "a stream of a Piper voice on the CPU made a thread of its own";
    for (auto& st : streams)
        for (const auto& ids : text) st->push_phoneme_ids(ids);
    // Every stream's ring fills while the first is read; a hang here is a
    // step waiting for room, so the reading has a bound of its own.
    auto reading = std::async(std::launch::async, [&] {
        std::vector<std::vector<float>> got;
        for (auto& st : streams) got.push_back(read_all(*st));
        return got;
    });
    ASSERT_EQ(reading.wait_for(std::chrono::minutes(3)), std::future_status::ready)
        << "streams read one after another did not finish";
    const auto got = reading.get();
    for (int i = 0; i < kStreams; ++i) {
        SCOPED_TRACE(i);
        const auto expected = offline(text, 100 + std::uint64_t(i));
        ASSERT_EQ(got[std::size_t(i)].size(), expected.size());
        EXPECT_LE(max_abs_diff(got[std::size_t(i)], expected), kChunkedBound);
        const auto stats = streams[std::size_t(i)]->stats();
        EXPECT_EQ(stats.sentences_spoken, text.size());
        EXPECT_FALSE(stats.realtime_workers);
    }
}

}  // namespace

TEST(PiperSteppedStreams, network_streams_read_one_after_another_all_finish_as_rendered) {
    expect_streams_read_one_after_another_finish_as_rendered(SchedulingClass::Network);
}

TEST(PiperSteppedStreams, offline_streams_read_one_after_another_all_finish_as_rendered) {
    expect_streams_read_one_after_another_finish_as_rendered(SchedulingClass::Offline);
}

// A cancel while the pool holds the stream's audio (its ring full, nobody
// reading) drops it, and the next push is spoken from its start.
TEST(PiperSteppedStreams, a_cancel_while_the_ring_is_full_drops_the_held_audio) {
    const auto s = etude::test::piper_test_sentences();
    Engine engine;
    StreamOptions options = stepped_options(7);
    auto& piper = std::get<PiperVoiceOptions>(options.voice);
    piper.noise_scale = 0.0f;
    piper.noise_w = 0.0f;
    auto stream = engine.create_stream(options);
    for (int k = 0; k < 4; ++k)
        for (const auto& ids : s) stream->push_phoneme_ids(ids);
    // Until its ring is full and the rest waits (no reader yet).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::uint64_t made = 0;
    while (std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const auto now = stream->stats().mel_chunks_cpu;
        if (now > 0 && now == made) break;  // no chunk for 100 ms: it waits for room
        made = now;
    }
    stream->cancel();
    // What the cancel left (its fade) is read and dropped.
    std::vector<float> scratch(1 << 16);
    while (stream->read_some(scratch, 200) > 0) {
    }
    stream->push_phoneme_ids(s[0]);
    const auto got = read_all(*stream);
    // Without noise the sentence's audio is the same whatever the cancelled
    // speech drew: exactly the offline render, and nothing of before.
    const auto voice = PiperVoice::open(kVoice);
    const auto decoder = voice->load_decoder(0, etude::gpu::shared_cpu_backend());
    std::mt19937_64 noise(99);
    const auto latent = voice->latent(s[0], 0, voice->scales(0.0f, {}, 0.0f), noise);
    const auto expected = decoder->vocode(latent.z, latent.frames);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_LE(max_abs_diff(got, expected), kChunkedBound);
    const auto stats = stream->stats();
    EXPECT_EQ(stats.cancels, 1u);
    EXPECT_GE(stats.sentences_dropped, 1u);
    EXPECT_GE(stats.sentences_spoken, 1u);
}
