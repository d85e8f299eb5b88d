#include "engine/streams/text_input.h"

#include <gtest/gtest.h>

#include "engine/utf8.h"

using namespace etude::engine;

TEST(TextInput, whitespace_only_is_not_speakable) {
    EXPECT_FALSE(has_speakable_text(""));
    EXPECT_FALSE(has_speakable_text(" \t\r\n  \n"));
    EXPECT_TRUE(has_speakable_text("  a "));
    EXPECT_TRUE(has_speakable_text("42"));
}

TEST(TextInput, splits_at_sentence_ends_but_not_abbreviations_or_decimals) {
    const auto s = split_sentences(
        "Hello there. Dr. Smith paid 3.50 dollars! Really?! \"Yes.\" Then J. R. left...  End");
    ASSERT_EQ(s.size(), 6u);
    EXPECT_EQ(s[0], "Hello there.");
    EXPECT_EQ(s[1], "Dr. Smith paid 3.50 dollars!");
    EXPECT_EQ(s[2], "Really?!");
    EXPECT_EQ(s[3], "\"Yes.\"");
    EXPECT_EQ(s[4], "Then J. R. left...");
    EXPECT_EQ(s[5], "End");
}

TEST(TextInput, blank_lines_end_a_sentence) {
    const auto s = split_sentences("A heading\n\nThe body text\ncontinues here");
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0], "A heading");
    EXPECT_EQ(s[1], "The body text\ncontinues here");
}

TEST(TextInput, long_sentences_are_cut_at_commas_or_spaces_within_the_limit) {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "word" + std::to_string(i) + (i % 10 == 9 ? ", " : " ");
    const auto s = split_sentences(text, 100);
    ASSERT_GT(s.size(), 10u);
    std::string joined;
    for (const auto& piece : s) {
        EXPECT_LE(piece.size(), 100u);
        EXPECT_TRUE(piece.back() == ',' || std::isalnum(static_cast<unsigned char>(piece.back())))
            << piece;
        joined += piece + " ";
    }
    // Nothing is lost: every word survives in order.
    EXPECT_NE(joined.find("word0 "), std::string::npos);
    EXPECT_NE(joined.find("word199"), std::string::npos);
}

TEST(TextInput, a_huge_token_is_cut_on_utf8_boundaries) {
    std::string text;
    for (int i = 0; i < 1000; ++i) text += "\xC3\xA9";  // 2000 bytes, no spaces
    const auto s = split_sentences(text, 101);
    std::size_t total = 0;
    for (const auto& piece : s) {
        EXPECT_FALSE(etude::utf8::find_bad_sequence(piece));
        total += piece.size();
    }
    EXPECT_EQ(total, text.size());
}

TEST(TextInput, nothing_speakable_yields_no_sentences) {
    EXPECT_TRUE(split_sentences("   \n\n \t ").empty());
    EXPECT_TRUE(split_sentences("").empty());
}
