// Piper voices through the engine's streams: the audio read or pulled from
// a stream equals the offline render (the whole sentence's latent and
// decoder, noise drawn in sentence order from the stream's seed) within the
// chunked decoder's bound, for any chunk size the latency budget picks; bad
// requests are refused with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/piper/espeak_session.h"
#include "engine/voices/piper_voice.h"
#include "gpu/host_compute.h"
#include "gpu/registry.h"
#include "support/emulation.h"
#include "support/model_parity.h"
#include "support/piper_test_ids.h"
#include "support/stream_output.h"
#include "support/test_data.h"

using namespace etude::engine;
using etude::test::max_abs_diff;
using etude::test::read_all;

namespace {

const std::string kData = etude::test::test_data_dir() + "/piper/";
const std::string kMulti = kData + "test_medium_multi.onnx";

// The chunked decoder's streamed audio against the whole sentence's: the
// bound tests/engine/models/vits_voice_test.cpp holds the VITS stream to.
constexpr double kChunkedBound = 1e-5;

std::vector<std::vector<std::int64_t>> sentences() {
    return etude::test::piper_test_sentences();
}

// A sentence past a staged prior's first durations and their reach
// (VitsTextToLatent::kStagedPhonemes): the stream makes its later durations
// after its first audio, and the audio is still the offline render's.
std::vector<std::int64_t> long_sentence() {
    const auto ids = sentences()[0];
    std::vector<std::int64_t> out{ids.front()};
    while (out.size() < 250) out.insert(out.end(), ids.begin() + 1, ids.end() - 1);
    out.push_back(ids.back());
    return out;
}

// What a stream with this seed says for these sentences, made offline.
std::vector<float> offline(const std::string& path, const std::vector<std::vector<std::int64_t>>& s,
                           const std::string& speaker, std::uint64_t seed) {
    const auto voice = PiperVoice::open(path);
    const int id = voice->speaker_id(speaker);
    const VitsScales scales = voice->scales({}, {}, {});
    const auto decoder = voice->load_decoder(id, etude::gpu::shared_cpu_backend());
    std::mt19937_64 noise(seed);
    std::vector<float> out;
    for (const auto& ids : s) {
        const auto latent = voice->latent(ids, id, scales, noise);
        const auto audio = decoder->vocode(latent.z, latent.frames);
        out.insert(out.end(), audio.begin(), audio.end());
    }
    return out;
}

StreamOptions piper_options(const std::string& speaker, std::uint64_t seed, double latency_ms) {
    StreamOptions o;
    o.voice = PiperVoiceOptions{.piper_voice = kMulti, .speaker = speaker, .seed = seed};
    o.sample_rate = 0;  // the voice's own, 22050 Hz
    o.latency_ms = latency_ms;
    o.backend = "cpu";
    return o;
}

std::vector<float> pull_at_audio_clock(Stream& stream) {
    return etude::test::pull_at_audio_clock(stream, 22050);
}

}  // namespace

TEST(PiperStream, read_equals_the_offline_render_with_the_same_seed) {
    Engine engine;
    // The long sentence first: the next ones' noise follows its own.
    auto s = sentences();
    s.insert(s.begin(), long_sentence());
    const auto expected = offline(kMulti, s, "speaker_2", 7);
    ASSERT_GT(expected.size(), 0u);
    // A sentence's chunks from 1 frame (20 ms), 4 frames (100 ms) or 32
    // frames (800 ms) on, growing to 32 (1, 1, 2, 4, ...).
    for (double latency : {20.0, 100.0, 800.0}) {
        SCOPED_TRACE(latency);
        auto stream = engine.create_stream(piper_options("speaker_2", 7, latency));
        EXPECT_EQ(stream->sample_rate(), 22050.0);
        for (const auto& ids : s) stream->push_phoneme_ids(ids);
        const auto got = read_all(*stream);
        ASSERT_EQ(got.size(), expected.size());
        EXPECT_LE(max_abs_diff(got, expected), kChunkedBound);
        const auto stats = stream->stats();
        EXPECT_EQ(stats.sentences_spoken, 3u);
        EXPECT_EQ(stats.vocoder, "vits");
        EXPECT_EQ(stats.mel_chunks_phase, 0u);
    }
}

// A sentence's first chunk is the latency budget's (half of it: 1 frame of
// 256 samples at 22050 Hz for 20 ms, 4 for 100 ms); each next one is as long
// as all the chunks before it, up to 32 frames (small chunks cost decoder
// time, and a chunk no longer than the audio before it asks no more of the
// producer than a fixed chunk does).
TEST(PiperStream, a_sentences_chunks_grow_from_the_latency_budget_to_32_frames) {
    Engine engine;
    for (const auto& [latency, first] : {std::pair{20.0, 1}, std::pair{100.0, 4}}) {
        SCOPED_TRACE(latency);
        auto stream = engine.create_stream(piper_options("", 5, latency));
        stream->push_phoneme_ids(long_sentence());
        read_all(*stream);
        const auto stats = stream->stats();
        ASSERT_GT(stats.mel_frames, 200u);
        std::uint64_t chunks = 0;
        for (std::uint64_t done = 0, size = first; done < stats.mel_frames;
             done += size, size = std::clamp<std::uint64_t>(done, first, 32))
            ++chunks;
        EXPECT_EQ(stats.mel_chunks_cpu, chunks) << stats.mel_frames << " frames";
    }
}

TEST(PiperStream, a_seed_reproduces_the_audio_and_another_seed_and_speaker_differ) {
    Engine engine;
    const auto s = sentences();
    auto speak = [&](const std::string& speaker, std::uint64_t seed) {
        auto stream = engine.create_stream(piper_options(speaker, seed, 100));
        stream->push_phoneme_ids(s[0]);
        return read_all(*stream);
    };
    const auto a = speak("speaker_1", 3);
    EXPECT_EQ(speak("speaker_1", 3), a);
    EXPECT_GT(max_abs_diff(speak("speaker_1", 4), a), 1e-3);
    EXPECT_GT(max_abs_diff(speak("2", 3), a), 1e-3);  // a speaker by id
}

TEST(PiperStream, pulled_live_equals_the_offline_render) {
    ETUDE_SKIP_WHEN_EMULATED("the stream is pulled at the audio clock");
    Engine engine;
    const auto s = sentences();
    const auto expected = offline(kMulti, s, "", 11);
    auto stream = engine.create_stream(piper_options("", 11, 200));
    for (const auto& ids : s) stream->push_phoneme_ids(ids);
    const auto got = pull_at_audio_clock(*stream);
    const auto stats = stream->stats();
    EXPECT_EQ(stats.underruns, 0u) << "the producer fell behind a real-time consumer";
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_LE(max_abs_diff(got, expected), kChunkedBound);
}

// The order across streams: offline readers have no listener, so their
// producers step down from real time (and to below normal work) at their
// first read(), and a stream pulled in real time beside them is still fed
// whole, equal to its offline render.
TEST(PiperStream, offline_readers_step_down_and_a_live_stream_beside_them_is_fed) {
    ETUDE_SKIP_WHEN_EMULATED(
        "a live stream pulled at the audio clock must be fed beside offline readers");
    Engine engine;
    const auto s = sentences();
    const auto expected = offline(kMulti, s, "", 11);
    std::atomic<bool> stop{false};
    std::vector<std::thread> readers;
    std::vector<std::unique_ptr<Stream>> reader_streams;
    for (int i = 0; i < 4; ++i)  // all made before any reader runs: the vector stays put
        reader_streams.push_back(engine.create_stream(piper_options("", 100 + i, 200)));
    for (int i = 0; i < 4; ++i) {
        readers.emplace_back([&, i] {
            std::vector<float> block(4096);
            while (!stop.load()) {
                reader_streams[i]->push_phoneme_ids(s[0]);
                reader_streams[i]->read(block);
                while (reader_streams[i]->busy() && reader_streams[i]->read(block) > 0) {
                }
            }
        });
    }
    auto live = engine.create_stream(piper_options("", 11, 200));
    for (const auto& ids : s) live->push_phoneme_ids(ids);
    const auto got = pull_at_audio_clock(*live);
    stop = true;
    for (auto& t : readers) t.join();
    const auto stats = live->stats();
    EXPECT_EQ(stats.underruns, 0u) << "the live stream fell behind beside offline readers";
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_LE(max_abs_diff(got, expected), kChunkedBound);
    if (!stats.realtime_workers)
        GTEST_SKIP() << "SCHED_FIFO is refused here: no producer runs in real time to step down";
    for (const auto& r : reader_streams)
        EXPECT_FALSE(r->stats().realtime_workers) << "an offline reader's producer kept SCHED_FIFO";
}

// The order across streams for the producers' work (engine/scheduling/deadline_gate.h):
// with one turn, three streams read flat out with read_some() (live, real
// time, seconds ahead of their listeners: not due) and a new stream pushed
// beside them. While the new stream's first chunk waited for its turn, no
// running stream's chunk may be granted one: the new stream's is due first.
// (First come, first served would let the running streams' chunks that
// were already waiting go first.)
//
// Network streams (a server's) keep the same order at a gate of their own,
// with a turn per core and no SCHED_FIFO: the same holds for them.
namespace {

void expect_first_chunks_before_running_streams(SchedulingClass scheduling) {
    // The order judged holds for running streams that are not due: seconds
    // ahead of listeners whose clocks run in real time. Under an emulator,
    // 10-50 times slower, they fall behind those clocks and are rightly
    // granted first (a failure seen once in the aarch64 suite under qemu).
    ETUDE_SKIP_WHEN_EMULATED("the running streams must stay seconds ahead of real time");
    // One turn, so that running streams' chunks wait beside the new one's.
    Engine::Options options;
    options.work_turns = 1;
    options.network_turns = 1;
    Engine engine(options);
    const auto s = sentences();
    std::atomic<bool> stop{false};
    const auto stream_options = [&](std::uint64_t seed) {
        StreamOptions o = piper_options("", seed, 200);
        o.scheduling = scheduling;
        return o;
    };
    std::vector<std::unique_ptr<Stream>> running;
    for (int i = 0; i < 3; ++i) running.push_back(engine.create_stream(stream_options(20 + i)));
    std::vector<std::thread> readers;
    for (int i = 0; i < 3; ++i)
        readers.emplace_back([&, i] {
            std::vector<float> block(4096);
            for (int k = 0; k < 40; ++k) running[i]->push_phoneme_ids(long_sentence());
            while (!stop.load()) running[i]->read_some(block, 50);
        });
    // Until every running stream has made seconds of audio (far ahead of its
    // listener clock, which started at its first audio).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool ahead = false;
    while (!ahead && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ahead = true;
        for (const auto& r : running) ahead = ahead && r->stats().samples_delivered > 3 * 22050;
    }
    if (!ahead) {
        stop = true;
        for (auto& t : readers) t.join();
        FAIL() << "the running streams did not make 3 s of audio each in 60 s: the order judged "
                  "below needs them ahead of their listeners";
    }
    // Whether a running stream's chunk asked for its turn before `first`
    // did and got it after: it waited beside it.
    const auto contended = [&](const BlockRecord& first) {
        int n = 0;
        for (const auto& r : running)
            for (const auto& rec : r->block_records())
                n += rec.turn_asked_ns < first.turn_asked_ns &&
                     rec.turn_granted_ns > first.turn_asked_ns;
        return n;
    };
    // New streams one after another; each one's first chunk and what the
    // running streams were granted meanwhile. At least four, and more (up to
    // sixteen) until a running stream's chunk has waited beside one: on a
    // loaded machine the running streams' readers may not keep their
    // producers asking for turns at every new stream's start.
    std::vector<BlockRecord> firsts;
    int seen_contending = 0;
    for (int n = 0; n < 16 && (n < 4 || seen_contending == 0); ++n) {
        auto fresh = engine.create_stream(stream_options(11));
        fresh->push_phoneme_ids(s[0]);
        std::vector<float> block(4096);
        while (fresh->read_some(block, 100) == 0 && std::chrono::steady_clock::now() < until) {
        }
        if (scheduling == SchedulingClass::Live && !fresh->stats().realtime_workers) break;
        const auto records = fresh->block_records();
        ASSERT_FALSE(records.empty());
        firsts.push_back(records.front());
        seen_contending += contended(firsts.back());
    }
    stop = true;
    for (auto& t : readers) t.join();
    if (firsts.empty()) GTEST_SKIP() << "SCHED_FIFO is refused here: such streams take no turns";
    int contending = 0;
    for (const BlockRecord& first : firsts) {
        ASSERT_GT(first.turn_granted_ns, 0) << "the chunk took no turn";
        contending += contended(first);
        int overtaking = 0;
        for (const auto& r : running)
            for (const auto& rec : r->block_records())
                overtaking += rec.turn_granted_ns > first.turn_asked_ns &&
                              rec.turn_granted_ns < first.turn_granted_ns;
        EXPECT_EQ(overtaking, 0) << "running streams' chunks went before a new stream's first";
    }
    // The case the test is about happened: running streams' chunks waited
    // beside a new stream's first, and it went first.
    EXPECT_GT(contending, 0) << "no running stream's chunk was waiting beside it";
}

}  // namespace

TEST(PiperStream, a_new_streams_first_chunk_goes_before_running_streams_not_yet_due) {
    expect_first_chunks_before_running_streams(SchedulingClass::Live);
}

TEST(PiperStream, a_new_network_streams_first_chunk_goes_before_running_ones_not_yet_due) {
    expect_first_chunks_before_running_streams(SchedulingClass::Network);
}

TEST(PiperStream, text_is_spoken_through_the_voices_own_front_end) {
    if (!etude::piper::EspeakSession::available())
        GTEST_SKIP() << "built without espeak-ng (ETUDE_WITH_ESPEAK=OFF)";
    Engine engine;
    const std::string text = "The wind rose at dawn. Did the boats come home?";
    const auto voice = PiperVoice::open(kMulti);
    std::vector<std::vector<std::int64_t>> ids;
    for (const auto& sentence : voice->phonemize(text)) ids.push_back(sentence.ids.ids);
    ASSERT_EQ(ids.size(), 2u);
    auto stream = engine.create_stream(piper_options("speaker_0", 5, 100));
    // The first sentence is released by the push (white space follows it),
    // the second by the end of the input.
    EXPECT_EQ(stream->push_text(text), 1u);
    EXPECT_EQ(stream->end_input(), 1u);
    const auto got = read_all(*stream);
    const auto expected = offline(kMulti, ids, "speaker_0", 5);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_LE(max_abs_diff(got, expected), kChunkedBound);
}

// PiperVoiceOptions::sentence_silence_ms: silence before each sentence that
// follows another of the same input (as Piper writes it between the
// sentences of one synthesis), none after the last, none before the next
// input's first, none between pushed phoneme ids; the speech itself is
// unchanged, sample for sample.
TEST(PiperStream, sentence_silence_goes_between_the_sentences_of_an_input_only) {
    if (!etude::piper::EspeakSession::available())
        GTEST_SKIP() << "built without espeak-ng (ETUDE_WITH_ESPEAK=OFF)";
    Engine engine;
    const std::string first = "The wind rose at dawn. Did the boats come home?";
    const std::string second = "The wind rose at dawn.";
    const auto voice = PiperVoice::open(kMulti);
    std::vector<std::vector<std::int64_t>> ids;
    for (const auto& text : {first, second})
        for (const auto& sentence : voice->phonemize(text)) ids.push_back(sentence.ids.ids);
    ASSERT_EQ(ids.size(), 3u);
    auto options = piper_options("speaker_0", 5, 100);
    std::get<PiperVoiceOptions>(options.voice).sentence_silence_ms = 50.0;
    auto stream = engine.create_stream(options);
    // The first input in two pieces, cut inside its first sentence.
    stream->push_text(first.substr(0, 9));
    stream->push_text(first.substr(9));
    stream->end_input();
    stream->push_text(second);
    stream->end_input();
    stream->push_phoneme_ids(ids[2]);
    const auto got = read_all(*stream);

    const std::size_t gap = 1102;  // 50 ms at 22050 Hz, whole samples
    std::vector<std::vector<std::int64_t>> all = ids;
    all.push_back(ids[2]);
    const auto whole = offline(kMulti, all, "speaker_0", 5);
    const auto one = offline(kMulti, {ids[0]}, "speaker_0", 5);
    std::vector<float> expected(whole.begin(), whole.begin() + one.size());
    expected.insert(expected.end(), gap, 0.0f);
    expected.insert(expected.end(), whole.begin() + one.size(), whole.end());
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_LE(max_abs_diff(got, expected), kChunkedBound);
    EXPECT_EQ(stream->stats().sentences_spoken, 4u);

    // A mark inside a sentence cuts it for the voice, but no silence goes
    // into the cut: one gap, between the two sentences, as without the mark.
    std::size_t lengths[2];
    for (int spaced = 0; spaced < 2; ++spaced) {
        auto o = piper_options("speaker_0", 5, 100);
        std::get<PiperVoiceOptions>(o.voice).sentence_silence_ms = spaced ? 50.0 : 0.0;
        auto s = engine.create_stream(o);
        s->push_ssml(
            "<speak>The wind rose <mark name=\"m\"/>at dawn. Did the boats come "
            "<prosody rate=\"1.2\">home</prosody>?</speak>");
        s->end_input();
        lengths[spaced] = read_all(*s).size();
    }
    EXPECT_EQ(lengths[1] - lengths[0], gap);

    auto bad = piper_options("", 0, 100);
    for (double ms : {-1.0, 60001.0}) {
        std::get<PiperVoiceOptions>(bad.voice).sentence_silence_ms = ms;
        EXPECT_THROW(engine.create_stream(bad), etude::Error) << ms;
    }
}

// A sentence longer than the phonemizer's bound is cut for the voice
// (piper::Phonemizer::kMaxSentencePhonemes, at a clause's end) but stays one
// sentence: no sentence silence goes into the cut, as Piper, which does not
// cut, puts none there.
TEST(PiperStream, no_sentence_silence_goes_into_a_long_sentences_cut) {
    if (!etude::piper::EspeakSession::available())
        GTEST_SKIP() << "built without espeak-ng (ETUDE_WITH_ESPEAK=OFF)";
    std::string text;
    for (int i = 0; i < 16; ++i) text += "the wind rose over the quiet harbour at dawn, ";
    text += "and the boats came home.";
    const auto pieces = PiperVoice::open(kMulti)->phonemize(text);
    ASSERT_GE(pieces.size(), 2u) << "not cut: the test needs a longer sentence";
    for (std::size_t i = 0; i < pieces.size(); ++i)
        EXPECT_EQ(pieces[i].continued, i + 1 < pieces.size()) << i;
    Engine engine;
    std::size_t lengths[2];
    for (int spaced = 0; spaced < 2; ++spaced) {
        auto o = piper_options("speaker_0", 5, 100);
        std::get<PiperVoiceOptions>(o.voice).sentence_silence_ms = spaced ? 50.0 : 0.0;
        auto s = engine.create_stream(o);
        s->push_text(text + " Then the sun came up.");
        s->end_input();
        lengths[spaced] = read_all(*s).size();
    }
    // One gap: before the second sentence, none in the first one's cut.
    EXPECT_EQ(lengths[1] - lengths[0], 1102u);
}

TEST(PiperStream, a_cancel_stops_the_sentence_and_the_stream_speaks_again) {
    Engine engine;
    const auto s = sentences();
    auto stream = engine.create_stream(piper_options("", 1, 100));
    for (int i = 0; i < 4; ++i) stream->push_phoneme_ids(s[i % 2]);
    std::vector<float> block(512);
    ASSERT_GT(stream->read(block), 0u);
    stream->cancel();
    read_all(*stream);  // the fade, then nothing: returns
    EXPECT_FALSE(stream->busy());
    stream->push_phoneme_ids(s[0]);
    EXPECT_GT(read_all(*stream).size(), 0u);
}

TEST(PiperStream, bad_requests_are_refused_with_the_reason) {
    Engine engine;
    auto message = [&](const StreamOptions& o) -> std::string {
        try {
            engine.create_stream(o);
        } catch (const etude::Error& e) {
            return e.what();
        }
        return "(no error)";
    };
    EXPECT_NE(message(piper_options("nobody", 0, 100)).find("nobody"), std::string::npos);
    EXPECT_NE(message(piper_options("7", 0, 100)).find("speaker 7"), std::string::npos);
    auto o = piper_options("", 0, 100);
    auto& piper = std::get<PiperVoiceOptions>(o.voice);
    piper.noise_scale = -1.0f;
    EXPECT_NE(message(o).find("noise_scale"), std::string::npos);
    piper = PiperVoiceOptions{.piper_voice = kMulti, .length_scale = 0.0f};
    EXPECT_NE(message(o).find("length_scale"), std::string::npos);
    piper = PiperVoiceOptions{.piper_voice = kData + "missing.onnx"};
    EXPECT_NE(message(o).find("missing.onnx.json"), std::string::npos);
    piper = PiperVoiceOptions{.piper_voice = "no-such-voice-anywhere"};
    EXPECT_NE(message(o).find("no-such-voice-anywhere"), std::string::npos);
    piper = PiperVoiceOptions{};
    EXPECT_NE(message(o).find("needs its voice"), std::string::npos);

    auto stream = engine.create_stream(piper_options("", 0, 100));
    EXPECT_THROW(stream->push_phoneme_ids(std::vector<std::int64_t>{1, 0, 99999, 0, 2}),
                 etude::Error);
    EXPECT_THROW(stream->push_phoneme_ids({}), etude::Error);
    EXPECT_THROW(stream->push_mel(std::vector<float>(192), 1), etude::Error);
    EXPECT_THROW(stream->set_voice("rms"), etude::Error);
    EXPECT_THROW(stream->push_text("\xff\xfe"), etude::Error);
    EXPECT_EQ(stream->mel_bands(), 0u);

    // The built-in voices take no phoneme ids; rate 0 is their own 16 kHz.
    StreamOptions flite;
    flite.sample_rate = 0;
    auto text = engine.create_stream(flite);
    EXPECT_EQ(text->sample_rate(), 16000.0);
    EXPECT_THROW(text->push_phoneme_ids(sentences()[0]), etude::Error);
}

TEST(PiperStream, a_voice_is_described_from_its_files) {
    const auto info = Engine::describe_voice(kMulti);
    EXPECT_EQ(info.name, "test_medium_multi");
    EXPECT_EQ(info.language, "en_US");
    EXPECT_EQ(info.quality, "medium");
    EXPECT_EQ(info.sample_rate, 22050);
    EXPECT_EQ(info.speakers,
              (std::vector<std::string>{"speaker_0", "speaker_1", "speaker_2", "speaker_3"}));
    // A graph that is no VITS network, with a good config beside it: the
    // network is what is refused, by name.
    const std::filesystem::path dir = std::filesystem::path(ETUDE_TEST_TMP) / "not-vits-voice";
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(kData + "not_vits.onnx", dir / "not_vits.onnx",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(kData + "test_x_low.onnx.json", dir / "not_vits.onnx.json",
                               std::filesystem::copy_options::overwrite_existing);
    try {
        Engine::describe_voice((dir / "not_vits.onnx").string());
        ADD_FAILURE() << "a graph that is not VITS was accepted";
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("not_vits.onnx"), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find(".onnx.json"), std::string::npos) << e.what();
    }
}

TEST(PiperStream, an_engine_keeps_preloaded_voices_open) {
    Engine engine(Engine::Options{{"slt", kMulti}});
    // The stream finds the same voice already read.
    auto stream = engine.create_stream(piper_options("", 0, 100));
    stream->push_phoneme_ids(sentences()[0]);
    EXPECT_GT(read_all(*stream).size(), 0u);
    EXPECT_THROW(Engine(Engine::Options{{"bogus"}}), etude::Error);
}

// A program that opens a stream per utterance (Python's synthesize(), a
// Pipecat service) read the voice's whole network again at each one once
// the last stream had closed: 300 ms of a 2-vCPU EPYC per call for a
// medium voice, minutes under qemu. A voice a stream opened is kept.
TEST(PiperStream, a_voice_a_stream_opened_stays_open_for_the_engines_life) {
    std::weak_ptr<const PiperVoice> seen;
    {
        Engine engine(Engine::Options{{"slt"}});
        {
            auto stream = engine.create_stream(piper_options("", 0, 100));
            stream->push_phoneme_ids(sentences()[0]);
            EXPECT_GT(read_all(*stream).size(), 0u);
        }
        seen = PiperVoice::open(kMulti);
        EXPECT_FALSE(seen.expired()) << "the voice was let go with its last stream";
        // The next stream speaks with the voice already read.
        auto again = engine.create_stream(piper_options("", 0, 100));
        EXPECT_EQ(PiperVoice::open(kMulti), seen.lock());
    }
    // The engine let it go: nothing else holds it.
    EXPECT_TRUE(seen.expired());
}

// One decoder per speaker and backend, shared by the streams: on a GPU, the
// streams' chunks then meet in batches (engine/models/stream_joiner.h).
TEST(PiperStream, the_streams_of_a_speaker_share_its_decoder_on_each_backend) {
    const auto voice = PiperVoice::open(kMulti);
    std::vector<std::shared_ptr<etude::gpu::Backend>> backends{etude::gpu::shared_cpu_backend()};
    std::string why;
    if (auto vulkan = etude::test::backend_of(etude::gpu::BackendKind::Vulkan, why))
        backends.push_back(vulkan);
    for (const auto& backend : backends) {
        SCOPED_TRACE(backend->info().name);
        const auto a = voice->load_decoder(1, backend);
        EXPECT_EQ(voice->load_decoder(1, backend).get(), a.get());
        EXPECT_NE(voice->load_decoder(2, backend).get(), a.get()) << "another speaker";
        EXPECT_EQ(&a->backend(), backend.get());
    }
}

// The front end runs on one thread per turn less one: several streams'
// sentences (their encoders and durations) are analysed at once, each in
// its turn (the streams are read live, with read_some(), so their work takes
// turns; each analysis is made 30 ms slower, so that two front ends that
// take sentences together surely overlap), and each stream's audio is still its offline render,
// sentence by sentence in the order pushed. With one turn there is one front end, and the count it
// keeps says so (which shows the count can tell the two apart).
TEST(PiperStream, several_streams_sentences_are_analysed_at_once_and_each_is_its_offline_render) {
    // Short and long (staged) sentences in turn, each kind after the other
    // once: the order pushed is checked across both. The overlap needs no
    // more: the four streams' first sentences wait for the front ends at
    // once. (One long sentence, not two: it is most of the audio, and of
    // the 72 s this test took under qemu.)
    const std::vector<std::vector<std::int64_t>> text{sentences()[1], long_sentence(),
                                                      sentences()[0]};
    constexpr int kStreams = 4;
    std::vector<std::vector<float>> want;  // each stream's offline render, for both runs
    for (int i = 0; i < kStreams; ++i)
        want.push_back(offline(kMulti, text, "", 40 + std::uint64_t(i)));
    for (const int turns : {1, 4}) {
        SCOPED_TRACE(turns);
        Engine::Options options;
        options.work_turns = turns;
        Engine engine(options);
        // (And no more than the CPUs the process may use, 2 at least.)
        const int front_ends =
            std::clamp(turns - 1, 1, std::max(2, etude::gpu::host::usable_cpus()));
        EXPECT_EQ(engine.stats().work_turns, turns);
        EXPECT_EQ(engine.stats().front_end_threads, front_ends);
        std::vector<std::unique_ptr<Stream>> streams;
        for (int i = 0; i < kStreams; ++i) {
            StreamOptions o = piper_options("", 40 + i, 100);
            o.faults = "slow-analysis:30";
            streams.push_back(engine.create_stream(o));
            for (const auto& ids : text) streams.back()->push_phoneme_ids(ids);
            streams.back()->end_input();
        }
        std::vector<std::vector<float>> got(kStreams);
        std::vector<std::thread> readers;
        for (int i = 0; i < kStreams; ++i)
            readers.emplace_back([&, i] {
                Stream& s = *streams[std::size_t(i)];
                std::vector<float> block(1024);
                const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
                while (std::chrono::steady_clock::now() < give_up) {
                    const std::size_t n = s.read_some(block, 100);
                    got[std::size_t(i)].insert(got[std::size_t(i)].end(), block.begin(),
                                               block.begin() + static_cast<long>(n));
                    if (n == 0 && !s.busy()) break;
                }
            });
        for (auto& t : readers) t.join();
        for (std::size_t i = 0; i < kStreams; ++i) {
            ASSERT_EQ(got[i].size(), want[i].size()) << "stream " << i;
            EXPECT_LE(max_abs_diff(got[i], want[i]), kChunkedBound) << "stream " << i;
        }
        if (turns == 1)
            EXPECT_EQ(engine.stats().most_analyses_at_once, 1);
        else
            EXPECT_GE(engine.stats().most_analyses_at_once, 2)
                << kStreams * text.size() << " sentences of " << kStreams
                << " streams, and never two analysed at once";
        EXPECT_LE(engine.stats().most_analyses_at_once, front_ends);
    }
}
