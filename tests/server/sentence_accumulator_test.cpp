// Text streamed in pieces cut anywhere becomes exactly the sentences the
// whole text splits into, each released once the text after it proves it
// complete, none twice.
#include "server/sentence_accumulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/text_input.h"

namespace {

using etude::server::SentenceAccumulator;

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
        for (auto& s : acc.add(std::string_view(text).substr(from, cut - from))) out.push_back(s);
        if (released_after) released_after->push_back(out.size());
        from = cut;
    }
    for (auto& s : acc.add(std::string_view(text).substr(from))) out.push_back(s);
    for (auto& s : acc.finish()) out.push_back(s);
    return out;
}

TEST(SentenceAccumulator, any_cuts_give_the_whole_texts_sentences) {
    std::mt19937 rng(40);
    for (const std::string text : kTexts) {
        const auto whole = etude::engine::split_sentences(text);
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
    const auto rest = acc.finish();
    ASSERT_EQ(rest.size(), 1u);
    EXPECT_EQ(rest[0], "How are you");
}

TEST(SentenceAccumulator, a_long_sentence_is_released_in_the_pieces_the_splitter_makes) {
    std::string text;
    for (int i = 0; i < 100; ++i) text += "word" + std::to_string(i) + ", ";
    text += "end.";
    const auto whole = etude::engine::split_sentences(text);
    ASSERT_GT(whole.size(), 1u);
    SentenceAccumulator acc;
    std::vector<std::string> early;
    for (std::size_t i = 0; i + 4 < text.size(); i += 4)
        for (auto& s : acc.add(text.substr(i, 4))) early.push_back(s);
    EXPECT_FALSE(early.empty());  // released before the sentence ended
    ASSERT_LE(early.size(), whole.size());
    for (std::size_t i = 0; i < early.size(); ++i) EXPECT_EQ(early[i], whole[i]);
}

}  // namespace
