// SSML as stream input (Stream::push_ssml): marks come out in order at the
// sample where the audio after them starts, breaks are exact silence,
// malformed SSML is spoken as its text, and bad input is refused whole.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/piper/espeak_session.h"
#include "support/piper_test_stream.h"
#include "support/stream_output.h"

using namespace etude::engine;
using etude::test::read_all;
using etude::test::take_marks;

namespace {

std::vector<float> say(Engine& engine, const StreamOptions& o, const std::string& text) {
    auto s = engine.create_stream(o);
    s->push_text(text);
    s->end_input();
    return read_all(*s);
}

std::vector<float> slice(const std::vector<float>& v, std::size_t from, std::size_t n) {
    return {v.begin() + static_cast<std::ptrdiff_t>(from),
            v.begin() + static_cast<std::ptrdiff_t>(from + n)};
}

}  // namespace

TEST(SsmlStream, marks_are_placed_where_the_audio_after_them_starts) {
    Engine engine;
    StreamOptions o;  // slt at 16 kHz: Flite's front end is deterministic
    const auto one = say(engine, o, "The lights are off.");
    const auto two = say(engine, o, "The door is locked.");
    ASSERT_GT(one.size(), 1000u);
    ASSERT_GT(two.size(), 1000u);

    auto s = engine.create_stream(o);
    s->push_ssml(
        "<speak><mark name=\"start\"/>The lights are off.<mark name=\"__spd_1\"/>"
        "The door is locked.<mark name=\"end\"/></speak>");
    s->end_input();
    const auto audio = read_all(*s);
    const auto marks = take_marks(*s);

    ASSERT_EQ(marks.size(), 3u);
    EXPECT_STREQ(marks[0].name, "start");
    EXPECT_STREQ(marks[1].name, "__spd_1");
    EXPECT_STREQ(marks[2].name, "end");
    EXPECT_EQ(marks[0].sample, 0u);
    EXPECT_EQ(marks[1].sample, one.size());
    EXPECT_EQ(marks[2].sample, one.size() + two.size());
    // The audio is the two sentences spoken alone, back to back.
    ASSERT_EQ(audio.size(), one.size() + two.size());
    EXPECT_EQ(slice(audio, 0, one.size()), one);
    EXPECT_EQ(slice(audio, one.size(), two.size()), two);
    EXPECT_EQ(s->position(), audio.size());
    EXPECT_EQ(s->stats().marks, 3u);
    EXPECT_EQ(s->stats().sentences_spoken, 2u);  // marks are not sentences
}

TEST(SsmlStream, a_break_is_exact_silence_between_the_sentences) {
    Engine engine;
    StreamOptions o;
    const auto one = say(engine, o, "Wait.");
    const auto two = say(engine, o, "Go.");
    auto s = engine.create_stream(o);
    s->push_ssml("<speak>Wait.<break time=\"250ms\"/><mark name=\"go\"/>Go.</speak>");
    s->end_input();
    const auto audio = read_all(*s);
    const std::size_t gap = 16000 / 4;
    ASSERT_EQ(audio.size(), one.size() + gap + two.size());
    EXPECT_EQ(slice(audio, 0, one.size()), one);
    EXPECT_EQ(slice(audio, one.size(), gap), std::vector<float>(gap, 0.0f));
    EXPECT_EQ(slice(audio, one.size() + gap, two.size()), two);
    const auto marks = take_marks(*s);
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_EQ(marks[0].sample, one.size() + gap);
}

TEST(SsmlStream, malformed_ssml_is_spoken_as_its_text) {
    Engine engine;
    StreamOptions o;
    auto s = engine.create_stream(o);
    // Unclosed and unknown elements, an entity: not well-formed XML.
    s->push_ssml("<speak>Hello <unknown>world. And &amp; more.");
    s->end_input();
    const auto audio = read_all(*s);
    EXPECT_FALSE(audio.empty());
    const auto text_too = say(engine, o, "Hello world. And & more.");
    EXPECT_EQ(audio, text_too);
}

TEST(SsmlStream, bad_input_is_refused_whole_with_the_reason) {
    Engine engine;
    auto s = engine.create_stream({});
    const std::string long_name(SpeechMark::kMaxName + 1, 'm');
    try {
        s->push_ssml("<speak>Said first.<mark name=\"" + long_name + "\"/>Then.</speak>");
        FAIL() << "a mark name past the limit was accepted";
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("mark name longer than 63 bytes"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(s->push_ssml("<speak>caf\xc3</speak>"), etude::Error);
    // Nothing of either was queued.
    EXPECT_FALSE(s->busy());
    EXPECT_EQ(s->stats().sentences_queued, 0u);
    // A name at the limit is fine.
    const std::string max_name(SpeechMark::kMaxName, 'k');
    s->push_ssml("<speak>Fine.<mark name=\"" + max_name + "\"/></speak>");
    s->end_input();
    read_all(*s);
    SpeechMark m;
    ASSERT_TRUE(s->next_mark(m));
    EXPECT_EQ(std::string(m.name), max_name);
}

TEST(SsmlStream, a_cancel_drops_the_marks_of_the_dropped_speech) {
    Engine engine;
    auto s = engine.create_stream({});
    s->push_ssml("<speak>One two three.<mark name=\"old\"/>Four five six seven.</speak>");
    s->end_input();
    // Read until the producer has passed the mark (it runs only its latency
    // ahead of the reader); the mark is recorded, not taken.
    std::vector<float> block(160);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (s->stats().marks == 0 && std::chrono::steady_clock::now() < until)
        s->read_some(block, 10);
    ASSERT_EQ(s->stats().marks, 1u);
    s->cancel();
    s->push_ssml("<speak>Again.<mark name=\"new\"/></speak>");
    s->end_input();
    read_all(*s);
    const auto marks = take_marks(*s);
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_STREQ(marks[0].name, "new");
}

TEST(SsmlStream, a_piper_voice_places_marks_too) {
    if (!etude::piper::EspeakSession::available())
        GTEST_SKIP() << "built without espeak-ng (ETUDE_WITH_ESPEAK=OFF)";
    Engine engine;
    StreamOptions o = etude::test::piper_test_stream(3);
    // Both sentences from one seeded stream, so the noise is drawn alike.
    auto plain = engine.create_stream(o);
    plain->push_text("The wind rose. ");
    plain->push_text("The boats came home.");
    plain->end_input();
    const auto expected = read_all(*plain);

    auto s = engine.create_stream(o);
    s->push_ssml("<speak>The wind rose.<mark name=\"m\"/> The boats came home.</speak>");
    s->end_input();
    const auto audio = read_all(*s);
    ASSERT_EQ(audio.size(), expected.size());
    const auto marks = take_marks(*s);
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_GT(marks[0].sample, 0u);
    EXPECT_LT(marks[0].sample, audio.size());
    // The mark sits where the first sentence's audio ends: a stream of that
    // sentence alone, with the same seed, is that long.
    auto first = engine.create_stream(o);
    first->push_text("The wind rose.");
    first->end_input();
    EXPECT_EQ(marks[0].sample, read_all(*first).size());
}

// More marks and breaks in a row than the stream's look-ahead holds: each
// one taken must let the next text be analysed (a stream once stalled here,
// its last sentence never analysed).
TEST(SsmlStream, many_marks_and_breaks_in_a_row_do_not_stall_the_stream) {
    Engine engine;
    StreamOptions o;
    auto s = engine.create_stream(o);
    std::string doc = "<speak>First.";
    for (int i = 0; i < 8; ++i) doc += "<mark name=\"m" + std::to_string(i) + "\"/>";
    for (int i = 0; i < 8; ++i) doc += "<break time=\"5ms\"/>";
    doc += "Last.<mark name=\"end\"/></speak>";
    s->push_ssml(doc);
    s->end_input();
    const auto audio = read_all(*s);
    const auto marks = take_marks(*s);
    ASSERT_EQ(marks.size(), 9u);
    EXPECT_STREQ(marks.back().name, "end");
    EXPECT_EQ(marks.back().sample, audio.size());
    EXPECT_EQ(s->stats().sentences_spoken, 2u);
}

// Parsed text with its marks and breaks (what the speech-dispatcher module
// pushes) gives what the same SSML gives.
TEST(SsmlStream, push_mark_and_push_break_equal_the_ssml) {
    Engine engine;
    StreamOptions o;
    auto a = engine.create_stream(o);
    a->push_ssml("<speak>Left.<mark name=\"x\"/><break time=\"120ms\"/>Right.</speak>");
    a->end_input();
    const auto want = read_all(*a);
    const auto want_marks = take_marks(*a);

    auto b = engine.create_stream(o);
    b->push_text("Left.");
    b->push_mark("x");
    b->push_break(120);
    b->push_text("Right.");
    b->end_input();
    EXPECT_EQ(read_all(*b), want);
    const auto got_marks = take_marks(*b);
    ASSERT_EQ(got_marks.size(), 1u);
    ASSERT_EQ(want_marks.size(), 1u);
    EXPECT_EQ(got_marks[0].sample, want_marks[0].sample);

    EXPECT_THROW(b->push_mark(std::string(SpeechMark::kMaxName + 1, 'n')), etude::Error);
    EXPECT_THROW(b->push_break(-1), etude::Error);
    EXPECT_THROW(b->push_break(60001), etude::Error);
    EXPECT_FALSE(b->busy());
}
