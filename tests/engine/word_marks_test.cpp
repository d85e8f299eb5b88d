// Word marks (Stream::report_words): each written word comes out in order,
// at the sample where its speech starts; off by default.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/piper/espeak_session.h"
#include "support/piper_test_stream.h"
#include "support/stream_output.h"

using namespace etude::engine;

namespace {

struct Spoken {
    std::vector<float> audio;
    std::vector<SpeechMark> marks;
};

Spoken speak(Engine& engine, const StreamOptions& o, const std::string& text, bool words = true) {
    auto s = engine.create_stream(o);
    s->report_words(words);
    s->push_text(text);
    s->end_input();
    Spoken out;
    out.audio = etude::test::read_all(*s);
    out.marks = etude::test::take_marks(*s);
    return out;
}

std::vector<std::string> names(const std::vector<SpeechMark>& marks) {
    std::vector<std::string> out;
    for (const auto& m : marks) {
        EXPECT_EQ(m.kind, SpeechMark::Word) << m.name;
        out.push_back(m.name);
    }
    return out;
}

double rms(const std::vector<float>& a, std::size_t from, std::size_t to) {
    double sum = 0;
    for (std::size_t i = from; i < to; ++i) sum += double(a[i]) * a[i];
    return to > from ? std::sqrt(sum / double(to - from)) : 0.0;
}

void expect_in_order_inside(const Spoken& s) {
    for (std::size_t i = 1; i < s.marks.size(); ++i)
        EXPECT_GT(s.marks[i].sample, s.marks[i - 1].sample) << s.marks[i].name;
    if (!s.marks.empty()) {
        EXPECT_LT(s.marks.back().sample, s.audio.size());
    }
}

}  // namespace

TEST(WordMarks, a_built_in_voice_marks_each_written_word_where_its_speech_starts) {
    Engine engine;
    StreamOptions o;  // slt at 16 kHz
    const auto both = speak(engine, o, "Hello there. Goodbye now.");
    EXPECT_EQ(names(both.marks), (std::vector<std::string>{"Hello", "there", "Goodbye", "now"}));
    expect_in_order_inside(both);

    // A sentence's first word follows its leading pause: the 40 ms before
    // it are far quieter than the 100 ms after (wrong by a frame or two this
    // still holds; wrong by a word, or counted from the wrong start, not).
    const auto hello = speak(engine, o, "Hello there.");
    ASSERT_EQ(hello.marks.size(), 2u);
    const std::size_t at = hello.marks[0].sample, ms = 16;
    ASSERT_GT(at, 40 * ms);
    EXPECT_LT(rms(hello.audio, at - 40 * ms, at) * 10, rms(hello.audio, at, at + 100 * ms));
    // The second sentence's words sit where they sit when it is spoken
    // alone, after the first sentence's audio.
    const auto goodbye = speak(engine, o, "Goodbye now.");
    ASSERT_EQ(goodbye.marks.size(), 2u);
    EXPECT_EQ(both.marks[2].sample, hello.audio.size() + goodbye.marks[0].sample);
    EXPECT_EQ(both.marks[3].sample, hello.audio.size() + goodbye.marks[1].sample);
    const std::size_t bye = goodbye.marks[0].sample;
    EXPECT_LT(rms(goodbye.audio, bye - 40 * ms, bye) * 10, rms(goodbye.audio, bye, bye + 100 * ms));
}

TEST(WordMarks, a_token_spoken_as_several_words_is_one_mark_and_the_rate_scales_them) {
    Engine engine;
    StreamOptions o;
    const auto at16 = speak(engine, o, "It costs 42 dollars.");
    EXPECT_EQ(names(at16.marks), (std::vector<std::string>{"It", "costs", "42", "dollars"}));
    o.sample_rate = 48000;
    const auto at48 = speak(engine, o, "It costs 42 dollars.");
    ASSERT_EQ(at48.marks.size(), at16.marks.size());
    for (std::size_t i = 0; i < at16.marks.size(); ++i)
        EXPECT_EQ(at48.marks[i].sample, 3 * at16.marks[i].sample) << at16.marks[i].name;
}

TEST(WordMarks, are_off_by_default_and_do_not_change_the_audio) {
    Engine engine;
    StreamOptions o;
    const auto without = speak(engine, o, "Nothing is marked here.", false);
    const auto with = speak(engine, o, "Nothing is marked here.", true);
    EXPECT_TRUE(without.marks.empty());
    EXPECT_EQ(with.marks.size(), 4u);
    EXPECT_EQ(with.audio, without.audio);
}

TEST(WordMarks, named_marks_and_words_come_in_the_order_they_are_heard) {
    Engine engine;
    StreamOptions o;
    auto s = engine.create_stream(o);
    s->report_words(true);
    s->push_ssml("<speak>Red apples.<mark name=\"m\"/>Green pears.</speak>");
    s->end_input();
    std::vector<float> block(1000);
    while (s->read(block) > 0) {
    }
    std::vector<std::string> got;
    std::uint64_t previous = 0;
    for (SpeechMark m; s->next_mark(m);) {
        got.push_back(std::string(m.kind == SpeechMark::Word ? "w:" : "m:") + m.name);
        EXPECT_GE(m.sample, previous) << m.name;
        previous = m.sample;
    }
    EXPECT_EQ(got, (std::vector<std::string>{"w:Red", "w:apples", "m:m", "w:Green", "w:pears"}));
}

// A Piper voice's words, at whole frames of its hop after their sentence's
// start, the same whatever size the decoder's chunks are (a long sentence's
// durations are made in stages while it plays: kRepeats phrases make a
// sentence of 313 ids, six times the 48 a staged prior knows at first
// (VitsTextToLatent::kStagedPhonemes), and 16 s of speech, far more than
// the chunks of either latency take to grow to 32 frames).
TEST(WordMarks, a_piper_voice_marks_words_alike_for_any_chunk_size) {
    if (!etude::piper::EspeakSession::available())
        GTEST_SKIP() << "built without espeak-ng (ETUDE_WITH_ESPEAK=OFF)";
    Engine engine;
    StreamOptions o = etude::test::piper_test_stream(5);
    constexpr int kRepeats = 8;
    std::string long_sentence = "The";
    for (int i = 0; i < kRepeats; ++i) long_sentence += " boats came home";
    long_sentence += ".";
    const std::string text = "The wind rose. " + long_sentence;
    o.latency_ms = 20;
    const auto small = speak(engine, o, text);
    o.latency_ms = 400;
    const auto large = speak(engine, o, text);
    ASSERT_EQ(small.marks.size(), 3u + 1 + 3 * kRepeats);
    EXPECT_EQ(names(small.marks)[3], "The");
    EXPECT_EQ(names(small.marks).back(), "home");
    expect_in_order_inside(small);
    ASSERT_EQ(large.marks.size(), small.marks.size());
    for (std::size_t i = 0; i < small.marks.size(); ++i)
        EXPECT_EQ(large.marks[i].sample, small.marks[i].sample) << i;
    // The second sentence starts after the first's audio, at whole frames.
    const auto first = speak(engine, o, "The wind rose.");
    EXPECT_GE(small.marks[3].sample, first.audio.size());
    EXPECT_EQ((small.marks[3].sample - first.audio.size()) % 256, 0u);
    for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(small.marks[i].sample % 256, 0u);
}

// A word's mark goes in as its audio goes into the ring, not when its
// sentence starts: a consumer that has read nothing finds only the words of
// the audio made ahead of it (the stream's latency), and after a cancel no
// mark names a word past the audio that was made.
TEST(WordMarks, go_in_with_their_audio_so_a_cancel_leaves_none_unspoken) {
    Engine engine;
    StreamOptions o;
    o.latency_ms = 100;
    auto s = engine.create_stream(o);
    s->report_words(true);
    const std::string sentence =
        "The quick brown fox jumps over the lazy dog while the farmer sleeps in the barn.";
    s->push_text(sentence);
    s->end_input();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // made ahead: 100 ms
    std::vector<SpeechMark> early;
    for (SpeechMark m; s->next_mark(m);) early.push_back(m);
    EXPECT_LT(early.size(), 8u) << "marks for the whole 16-word sentence before its audio";
    // Play half a second as a live consumer would, then cancel.
    std::vector<float> block(160);
    for (int i = 0; i < 50; ++i) {
        s->pull(block);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const std::uint64_t at_cancel = s->position();
    s->cancel();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<SpeechMark> late;
    for (SpeechMark m; s->next_mark(m);) late.push_back(m);
    const std::size_t ahead = static_cast<std::size_t>(16000 * 0.25);  // latency and a block or two
    for (const auto& m : late) EXPECT_LT(m.sample, at_cancel + ahead) << m.name;
    EXPECT_LT(early.size() + late.size(), 16u);
}
