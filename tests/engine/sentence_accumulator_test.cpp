// Text streamed in pieces cut anywhere becomes exactly the sentences the
// whole text splits into, each released once the text after it proves it
// complete, none twice.
#include "engine/streams/sentence_accumulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/streams/text_input.h"

namespace {

using etude::engine::SentenceAccumulator;
using etude::engine::split_sentences;

// The sentences of the stretches an accumulator released, in order.
void append_sentences(std::vector<std::string>& out, const std::vector<std::string>& chunks) {
    for (const auto& c : chunks)
        for (auto& s : split_sentences(c)) out.push_back(std::move(s));
}

const char* kTexts[] = {
    "The kitchen lights are on. The bedroom is dark! Would you like the porch light? "
    "It is 21.5 degrees outside, and Dr. Smith said \"rain tonight.\" (Maybe.) Bye...",
    "One line\n\nAnother paragraph.\n  \n Third?! \"Quoted.\" End",
    "e.g. this is fine. J. R. R. Tolkien wrote it. Mt. Everest is tall.",
    "Ünïcödé text — with dashes. 日本語の文。 Next one! Done.",
};

std::vector<std::string> stream(const std::string& text, const std::vector<std::size_t>& cuts,
                                std::vector<std::size_t>* released_after = nullptr) {
    SentenceAccumulator acc;
    std::vector<std::string> out;
    std::size_t from = 0;
    for (std::size_t cut : cuts) {
        append_sentences(out, acc.add(std::string_view(text).substr(from, cut - from)));
        // Kept up to date piece by piece, it says what a look at the held text says.
        EXPECT_EQ(acc.holds_speech(), etude::engine::has_speakable_text(acc.held()));
        if (released_after) released_after->push_back(out.size());
        from = cut;
    }
    append_sentences(out, acc.add(std::string_view(text).substr(from)));
    append_sentences(out, {acc.finish()});
    return out;
}

TEST(SentenceAccumulator, any_cuts_give_the_whole_texts_sentences) {
    std::mt19937 rng(40);
    for (const std::string text : kTexts) {
        const auto whole = split_sentences(text);
        for (int round = 0; round < 300; ++round) {
            std::vector<std::size_t> cuts;
            const std::size_t n = 1 + rng() % 40;
            for (std::size_t i = 0; i < n; ++i) cuts.push_back(rng() % (text.size() + 1));
            std::sort(cuts.begin(), cuts.end());
            EXPECT_EQ(stream(text, cuts), whole) << text;
        }
        // Every single cut, too.
        for (std::size_t c = 0; c <= text.size(); ++c) EXPECT_EQ(stream(text, {c}), whole) << c;
    }
}

TEST(SentenceAccumulator, a_sentence_is_released_once_the_next_begins) {
    SentenceAccumulator acc;
    EXPECT_TRUE(acc.add("Hello wor").empty());
    EXPECT_TRUE(acc.add("ld.").empty());  // "world..." might follow
    const auto done = acc.add(" How");
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0], "Hello world.");
    EXPECT_TRUE(acc.add(" are you").empty());
    EXPECT_EQ(acc.held(), " How are you");
    EXPECT_EQ(acc.finish(), " How are you");
    EXPECT_EQ(acc.held(), "");
}

TEST(SentenceAccumulator, a_long_sentence_is_released_in_the_pieces_the_splitter_makes) {
    std::string text;
    for (int i = 0; i < 100; ++i) text += "word" + std::to_string(i) + ", ";
    text += "end.";
    const auto whole = split_sentences(text);
    ASSERT_GT(whole.size(), 1u);
    SentenceAccumulator acc;
    std::vector<std::string> early;
    for (std::size_t i = 0; i + 4 < text.size(); i += 4)
        append_sentences(early, acc.add(text.substr(i, 4)));
    EXPECT_FALSE(early.empty());  // released before the sentence ended
    ASSERT_LE(early.size(), whole.size());
    for (std::size_t i = 0; i < early.size(); ++i) EXPECT_EQ(early[i], whole[i]);
}

// Piper's streams set no limit: a long sentence is held whole, for
// espeak-ng to split as Piper does.
TEST(SentenceAccumulator, without_a_limit_a_long_sentence_is_held_whole) {
    std::string text;
    for (int i = 0; i < 100; ++i) text += "word" + std::to_string(i) + ", ";
    SentenceAccumulator acc(0);
    for (std::size_t i = 0; i < text.size(); i += 4)
        EXPECT_TRUE(acc.add(std::string_view(text).substr(i, 4)).empty());
    const auto done = acc.add("end. Next");
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0], text + "end.");
    EXPECT_EQ(acc.finish(), " Next");
}

// Random texts with long sentences, abbreviations, blank lines and
// multi-byte characters, cut at random: the same sentences as the whole.
TEST(SentenceAccumulator, random_texts_with_long_sentences_split_as_the_whole) {
    const char* words[] = {"alpha",    "Dr.",  "e.g.",   "3.",   "5",    "end.",
                           "yes!",     "no?!", "\"q.\"", "(x.)", "\n\n", "\n \n",
                           "日本語。", "—",    ",",      ";",    "a",    "longer-word"};
    std::mt19937 rng(7);
    for (int round = 0; round < 200; ++round) {
        std::string text;
        const int n = 1 + static_cast<int>(rng() % 400);
        for (int i = 0; i < n; ++i) {
            text += words[rng() % std::size(words)];
            if (rng() % 4 != 0) text += ' ';
        }
        std::vector<std::size_t> cuts;
        const std::size_t k = 1 + rng() % 60;
        for (std::size_t i = 0; i < k; ++i) cuts.push_back(rng() % (text.size() + 1));
        std::sort(cuts.begin(), cuts.end());
        EXPECT_EQ(stream(text, cuts), split_sentences(text)) << text;
    }
}

}  // namespace

// A long unfinished sentence in tiny pieces (a Piper stream has no length
// limit) is scanned once, not once per piece: 2 MB in 3-byte pieces is
// about 10^6 adds, which a rescan of the held text per add would take
// hours to get through (the test's timeout would end it), and the result
// is still the whole text's.
TEST(SentenceAccumulator, a_long_unfinished_sentence_is_not_rescanned_per_piece) {
    std::string text;
    while (text.size() < 2'000'000) text += "word, and another ";
    text += "end. Next";
    SentenceAccumulator acc(0);
    std::vector<std::string> done;
    for (std::size_t i = 0; i < text.size(); i += 3)
        for (auto& c : acc.add(std::string_view(text).substr(i, 3))) done.push_back(std::move(c));
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0], text.substr(0, text.size() - 5));
    EXPECT_EQ(acc.finish(), " Next");
}
