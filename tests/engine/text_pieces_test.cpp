// Text arriving in pieces (a language model's tokens): a stream holds the
// sentence a piece leaves unfinished until more text or end_input(), so
// any cuts, even inside a word or a UTF-8 character, give the audio of the
// whole text; read() waits for the end of the input, read_some() hands on
// what is ready and returns at once when the stream waits for its caller.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "support/stream_output.h"
#include "support/test_data.h"

using namespace etude::engine;
using etude::test::read_all;

namespace {

const std::string kText =
    "Pieces arrive a few bytes at a time. Dr. Smith's café opens at 9.30, "
    "doesn't it? Ünïcödé — ok!";

std::vector<float> whole(Engine& engine, const StreamOptions& o, const std::string& text) {
    auto s = engine.create_stream(o);
    s->push_text(text);
    s->end_input();
    return read_all(*s);
}

std::vector<float> in_pieces(Engine& engine, const StreamOptions& o, const std::string& text,
                             const std::vector<std::size_t>& cuts) {
    auto s = engine.create_stream(o);
    std::size_t from = 0;
    for (std::size_t cut : cuts) {
        s->push_text(std::string_view(text).substr(from, cut - from));
        from = cut;
    }
    s->push_text(std::string_view(text).substr(from));
    s->end_input();
    return read_all(*s);
}

}  // namespace

TEST(TextPieces, any_cuts_give_the_audio_of_the_whole_text) {
    Engine engine;
    const auto want = whole(engine, {}, kText);
    ASSERT_GT(want.size(), 16000u);
    std::vector<std::vector<std::size_t>> cuts_list;
    std::vector<std::size_t> every3;  // inside words and inside characters
    for (std::size_t c = 3; c < kText.size(); c += 3) every3.push_back(c);
    cuts_list.push_back(every3);
    std::mt19937 rng(11);
    for (int r = 0; r < 3; ++r) {
        std::vector<std::size_t> cuts;
        for (std::size_t c = 1 + rng() % 7; c < kText.size(); c += 1 + rng() % 7) cuts.push_back(c);
        cuts_list.push_back(cuts);
    }
    for (const auto& cuts : cuts_list) EXPECT_EQ(in_pieces(engine, {}, kText, cuts), want);
}

TEST(TextPieces, a_piper_voice_in_pieces_equals_the_whole_text) {
    Engine engine;
    StreamOptions o;
    o.voice = PiperVoiceOptions{
        .piper_voice = etude::test::test_data_dir() + "/piper/test_medium_multi.onnx", .seed = 3};
    o.sample_rate = 0;
    o.backend = "cpu";
    const std::string text = "The wind rose at dawn. Did the boats come home?";
    const auto want = whole(engine, o, text);
    ASSERT_GT(want.size(), 0u);
    std::vector<std::size_t> cuts;
    for (std::size_t c = 2; c < text.size(); c += 5) cuts.push_back(c);
    const auto got = in_pieces(engine, o, text, cuts);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(got, want);
}

TEST(TextPieces, the_unfinished_sentence_waits_for_the_end_of_the_input) {
    Engine engine;
    auto s = engine.create_stream();
    EXPECT_EQ(s->push_text("One finished sentence. And an unfinis"), 1u);
    std::vector<float> block(4096);
    std::size_t first = 0, n;
    // The first sentence's audio comes; then nothing is on its way, so
    // read_some returns at once although the stream is busy (held text).
    while ((n = s->read_some(block, 5000)) > 0) first += n;
    EXPECT_GT(first, 0u);
    EXPECT_TRUE(s->busy());
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(s->read_some(block, 5000), 0u);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
    EXPECT_EQ(s->stats().sentences_queued, 1u);
    // read() waits for the end of the input, given from another thread.
    std::thread ender([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        s->push_text("hed one");
        EXPECT_EQ(s->end_input(), 1u);
    });
    std::size_t rest = 0;
    while ((n = s->read(block)) > 0) rest += n;
    ender.join();
    EXPECT_GT(rest, 0u);
    EXPECT_FALSE(s->busy());
    EXPECT_EQ(s->stats().sentences_spoken, 2u);
}

TEST(TextPieces, a_character_cut_in_two_is_joined_and_a_bad_one_refused) {
    Engine engine;
    auto s = engine.create_stream();
    const std::string cafe = "Caf\xC3\xA9 au lait.";
    s->push_text(cafe.substr(0, 4));  // ends inside the two-byte é
    s->push_text(cafe.substr(4));
    s->end_input();
    const auto got = read_all(*s);
    EXPECT_EQ(got, whole(engine, {}, cafe));
    // A piece that does not continue the character begun is refused, with
    // the place; the input is unchanged and can go on.
    s->push_text("Na\xC3");
    EXPECT_THROW(s->push_text("x"), etude::Error);
    // An input may not end inside a character.
    EXPECT_THROW(s->end_input(), etude::Error);
    s->push_text("\xAFve.");
    EXPECT_EQ(s->end_input(), 1u);
    EXPECT_GT(read_all(*s).size(), 0u);
}

TEST(TextPieces, cancel_drops_the_held_text_and_the_stream_goes_on) {
    Engine engine;
    auto s = engine.create_stream();
    s->push_text("This sentence is never fini");
    EXPECT_TRUE(s->busy());
    s->cancel();
    EXPECT_FALSE(s->busy());
    std::vector<float> block(512);
    EXPECT_EQ(s->read(block), 0u);  // nothing held, nothing queued
    s->push_text("shed? ");         // a new input: its own sentence
    s->end_input();
    EXPECT_EQ(read_all(*s), whole(engine, {}, "shed?"));
}
