// wyoming-piper's --auto-punctuation: the mark added to a request that ends
// without one, for whole text and for text streamed in pieces cut anywhere,
// right after the last character (before white space that ends the text).
#include "server/end_punctuation.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

using etude::server::EndPunctuation;

TEST(EndPunctuation, text_ending_in_none_of_the_marks_gets_the_first) {
    const EndPunctuation rule;  // wyoming-piper's default
    EXPECT_EQ(rule.completed("Turn on the lights"), "Turn on the lights.");
    EXPECT_EQ(rule.completed("Are they on?"), "Are they on?");
    EXPECT_EQ(rule.completed("Done! "), "Done! ");
    EXPECT_EQ(rule.completed("終わりました。"), "終わりました。");
    EXPECT_EQ(rule.completed("هل انتهى؟"), "هل انتهى؟");
    // As wyoming-piper: the last character counts, a closing quote too.
    EXPECT_EQ(rule.completed("He said \"hi.\""), "He said \"hi.\".");
    EXPECT_EQ(rule.completed("Café"), "Café.");
    EXPECT_EQ(rule.completed(""), "");
    EXPECT_EQ(rule.completed(" \n "), " \n ");
}

TEST(EndPunctuation, the_mark_goes_before_the_white_space_that_ends_the_text) {
    const EndPunctuation rule;
    // After a blank line the mark would be a sentence of its own.
    EXPECT_EQ(rule.completed("Hello world\n\n"), "Hello world.");
    EXPECT_EQ(rule.completed("Turn on the lights \t"), "Turn on the lights.");
    // No-break and ideographic spaces end text as Python's strip() sees it.
    EXPECT_EQ(rule.completed("你好。\u3000"), "你好。\u3000");
    EXPECT_EQ(rule.completed("Hello\u00a0"), "Hello.");
}

TEST(EndPunctuation, the_marks_are_characters_and_empty_turns_it_off) {
    const EndPunctuation wide("。.");
    EXPECT_EQ(wide.missing_after("hi"), "。");
    EXPECT_EQ(wide.missing_after("hi."), "");
    // A mark's last byte alone is not the mark: 。 is E3 80 82.
    EXPECT_EQ(wide.missing_after("hi\x82"), "。");
    EXPECT_EQ(EndPunctuation("").completed("hi "), "hi ");
    EXPECT_THROW(EndPunctuation("\xff"), std::invalid_argument);
    EXPECT_THROW(EndPunctuation(".\xe3\x80"), std::invalid_argument);
}

// A stream's pieces, passed on, then the end: the same text as completed()
// of the whole, white space at the end aside (it waits, and the end drops it).
std::string follow(const EndPunctuation& rule, const std::vector<std::string>& pieces) {
    EndPunctuation::Follower f(rule);
    std::string out;
    for (const auto& p : pieces) out += f.pass(p);
    return out + f.finish();
}

TEST(EndPunctuation, streamed_text_gets_the_mark_where_the_whole_would) {
    const EndPunctuation rule;
    for (const std::string text : {"It is 21 degrees。 Tonight it rains", "Hello world\n\n",
                                   "Done! ", "Say \"hi\"  \n", "Café\u00a0"}) {
        std::string whole = rule.completed(text);
        for (std::size_t cut = 0; cut <= text.size(); ++cut) {
            const std::string got = follow(rule, {text.substr(0, cut), text.substr(cut)});
            // Trailing white space after a mark present is passed on at once.
            EXPECT_EQ(got, whole) << text << " cut at " << cut;
        }
    }
    // White space inside the text is passed on once the next character comes.
    EXPECT_EQ(follow(rule, {"Lights on", "\n\n", "Doors", " locked"}),
              "Lights on\n\nDoors locked.");
    EndPunctuation::Follower f(rule);
    EXPECT_EQ(f.pass("Lights on "), "Lights on");
    EXPECT_EQ(f.pass(" "), "");
    EXPECT_EQ(f.pass("now"), "  now");
    EXPECT_EQ(f.pass("! "), "! ");
    EXPECT_EQ(f.finish(), "");
    // Ends in a mark split over two pieces (！ is EF BC 81).
    EXPECT_EQ(follow(rule, {"Done\xef\xbc", "\x81", "  ", ""}), "Done！  ");
    EXPECT_EQ(follow(rule, {"   "}), "   ");  // nothing to mark
}
