// wyoming-piper's --auto-punctuation: the mark added to a request that ends
// without one, for whole text and for text streamed in pieces cut anywhere.
#include "server/end_punctuation.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

using etude::server::EndPunctuation;

TEST(EndPunctuation, text_ending_in_none_of_the_marks_gets_the_first) {
    const EndPunctuation rule;  // wyoming-piper's default
    EXPECT_EQ(rule.missing_after("Turn on the lights"), ".");
    EXPECT_EQ(rule.missing_after("Turn on the lights \n\t"), ".");
    EXPECT_EQ(rule.missing_after("Are they on?"), "");
    EXPECT_EQ(rule.missing_after("Done! "), "");
    EXPECT_EQ(rule.missing_after("終わりました。"), "");
    EXPECT_EQ(rule.missing_after("هل انتهى؟"), "");
    EXPECT_EQ(rule.missing_after("He said \"hi.\""), ".");  // as wyoming-piper: the last character
    EXPECT_EQ(rule.missing_after("Café"), ".");
    EXPECT_EQ(rule.missing_after(""), "");
    EXPECT_EQ(rule.missing_after(" \n "), "");
}

TEST(EndPunctuation, the_marks_are_characters_and_empty_turns_it_off) {
    const EndPunctuation wide("。.");
    EXPECT_EQ(wide.missing_after("hi"), "。");
    EXPECT_EQ(wide.missing_after("hi."), "");
    // A mark's last byte alone is not the mark: 。 is E3 80 82.
    EXPECT_EQ(wide.missing_after("hi\x82"), "。");
    EXPECT_EQ(EndPunctuation("").missing_after("hi"), "");
    EXPECT_THROW(EndPunctuation("\xff"), std::invalid_argument);
    EXPECT_THROW(EndPunctuation(".\xe3\x80"), std::invalid_argument);
}

TEST(EndPunctuation, streamed_text_is_judged_by_its_end_however_it_was_cut) {
    const EndPunctuation rule;
    const std::string text = "It is 21 degrees。 Tonight it rains";
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
        EndPunctuation::Follower f(rule);
        f.feed(text.substr(0, cut));
        f.feed(text.substr(cut));
        EXPECT_EQ(f.missing(), ".") << cut;
    }
    // Ends in a mark split over two pieces, then white space alone.
    EndPunctuation::Follower f(rule);
    f.feed("Done\xef\xbc");
    f.feed("\x81");
    f.feed("  ");
    f.feed("");
    EXPECT_EQ(f.missing(), "");
    EndPunctuation::Follower nothing(rule);
    nothing.feed("   ");
    EXPECT_EQ(nothing.missing(), "");
}
