// engine/utf8.h against the Unicode Standard: the expected values, lengths
// and problems below are written by hand from Table 3-7 (copied in
// support/utf8_table_3_7.h) and the code point ranges of chapter 3.9.
#include "engine/utf8.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/error.h"
#include "support/utf8_table_3_7.h"

using etude::utf8::BadSequence;
using etude::utf8::Decoded;
using etude::utf8::Problem;
namespace utf8 = etude::utf8;

namespace {

struct Boundary {
    char32_t value;
    std::string_view bytes;
};

// The first and last scalar value of each row of Table 3-7 and of each
// length, with their bytes.
constexpr Boundary kBoundaries[] = {
    {0x0000, {"\x00", 1}},          {0x007F, "\x7F"},
    {0x0080, "\xC2\x80"},           {0x07FF, "\xDF\xBF"},
    {0x0800, "\xE0\xA0\x80"},       {0x0FFF, "\xE0\xBF\xBF"},
    {0x1000, "\xE1\x80\x80"},       {0xCFFF, "\xEC\xBF\xBF"},
    {0xD000, "\xED\x80\x80"},       {0xD7FF, "\xED\x9F\xBF"},  // the last before the surrogates
    {0xE000, "\xEE\x80\x80"},                                  // the first after them
    {0xFFFF, "\xEF\xBF\xBF"},       {0x10000, "\xF0\x90\x80\x80"},
    {0x3FFFF, "\xF0\xBF\xBF\xBF"},  {0x40000, "\xF1\x80\x80\x80"},
    {0xFFFFF, "\xF3\xBF\xBF\xBF"},  {0x100000, "\xF4\x80\x80\x80"},
    {0x10FFFF, "\xF4\x8F\xBF\xBF"},
};

struct Bad {
    std::string_view bytes;
    std::size_t offset;
    Problem problem;
    std::size_t skipped;  // Unicode's maximal subpart: the bytes a reader skips
};

constexpr Bad kBad[] = {
    {"\xC0\x80", 0, Problem::Overlong, 1},
    {"\xC1\xBF", 0, Problem::Overlong, 1},
    {"\xE0\x80\x80", 0, Problem::Overlong, 1},
    {"\xE0\x9F\xBF", 0, Problem::Overlong, 1},
    {"\xF0\x80\x80\x80", 0, Problem::Overlong, 1},
    {"\xF0\x8F\xBF\xBF", 0, Problem::Overlong, 1},
    {"\xED\xA0\x80", 0, Problem::Surrogate, 1},
    {"\xED\xBF\xBF", 0, Problem::Surrogate, 1},
    {"\xF4\x90\x80\x80", 0, Problem::AboveUnicode, 1},
    {"\xF4\xBF\xBF\xBF", 0, Problem::AboveUnicode, 1},
    {"\xF5\x80\x80\x80", 0, Problem::AboveUnicode, 1},
    {"\xF7\xBF\xBF\xBF", 0, Problem::AboveUnicode, 1},
    {"\xF8\x88\x80\x80\x80", 0, Problem::NotUtf8Byte, 1},
    {"\xFE", 0, Problem::NotUtf8Byte, 1},
    {"\xFF", 0, Problem::NotUtf8Byte, 1},
    {"\x80", 0, Problem::StrayContinuation, 1},
    {"a\xBF", 1, Problem::StrayContinuation, 1},
    {"\xC3\xA9\xA9", 2, Problem::StrayContinuation, 1},
    {"\xC3(", 0, Problem::CutShort, 1},
    {"\xE2(\xA1", 0, Problem::CutShort, 1},
    {"\xE2\x82(", 0, Problem::CutShort, 2},
    {"\xF0\x9F\x98!", 0, Problem::CutShort, 3},
    {"\xC3", 0, Problem::EndsInside, 1},
    {"\xE2\x82", 0, Problem::EndsInside, 2},
    {"ab\xF0\x9F\x98", 2, Problem::EndsInside, 3},
    {"\xE0", 0, Problem::EndsInside, 1},
};

}  // namespace

TEST(Utf8, each_boundary_of_table_3_7_decodes_to_its_value) {
    for (const Boundary& b : kBoundaries) {
        const Decoded d = utf8::decode_at(b.bytes, 0);
        EXPECT_TRUE(d.ok()) << std::hex << static_cast<unsigned long>(b.value);
        EXPECT_EQ(d.value, b.value);
        EXPECT_EQ(d.bytes, b.bytes.size());
        EXPECT_FALSE(utf8::find_bad_sequence(b.bytes));
    }
}

TEST(Utf8, each_boundary_encodes_to_its_bytes_and_back) {
    for (const Boundary& b : kBoundaries) {
        EXPECT_EQ(utf8::encode(b.value), b.bytes)
            << std::hex << static_cast<unsigned long>(b.value);
        EXPECT_EQ(utf8::decode(utf8::encode(b.value)), std::u32string(1, b.value));
    }
    std::u32string all;
    std::string bytes;
    for (const Boundary& b : kBoundaries) {
        all += b.value;
        bytes += b.bytes;
    }
    EXPECT_EQ(utf8::encode(all), bytes);
    EXPECT_EQ(utf8::decode(bytes), all);
}

TEST(Utf8, every_scalar_value_round_trips_with_its_length) {
    for (char32_t v = 0; v <= 0x10FFFF; ++v) {
        if (v == 0xD800) v = 0xE000;  // the surrogates are no scalar values
        const std::string bytes = utf8::encode(v);
        const std::size_t length = v < 0x80 ? 1 : v < 0x800 ? 2 : v < 0x10000 ? 3 : 4;
        ASSERT_EQ(bytes.size(), length) << std::hex << static_cast<unsigned long>(v);
        ASSERT_TRUE(etude::test::is_one_utf8_character(bytes))
            << std::hex << static_cast<unsigned long>(v);
        const Decoded d = utf8::decode_at(bytes, 0);
        ASSERT_TRUE(d.ok() && d.value == v && d.bytes == length)
            << std::hex << static_cast<unsigned long>(v);
    }
}

TEST(Utf8, ill_formed_sequences_name_their_problem_and_offset) {
    for (const Bad& b : kBad) {
        const auto found = utf8::find_bad_sequence(b.bytes);
        ASSERT_TRUE(found) << testing::PrintToString(b.bytes);
        EXPECT_EQ(found->offset, b.offset) << testing::PrintToString(b.bytes);
        EXPECT_EQ(found->problem, b.problem) << testing::PrintToString(b.bytes);
        const Decoded d = utf8::decode_at(b.bytes, b.offset);
        EXPECT_FALSE(d.ok());
        EXPECT_EQ(d.bytes, b.skipped) << testing::PrintToString(b.bytes);
        EXPECT_THROW(utf8::decode(b.bytes), etude::Error);
    }
}

// Every sequence of one to three bytes, and every four-byte one whose last
// two bytes lie at the edges of the continuation range: one character by
// the decoder exactly when Table 3-7 says so.
TEST(Utf8, the_decoder_accepts_exactly_the_sequences_of_table_3_7) {
    const auto agree = [](const std::string& s) {
        const Decoded d = utf8::decode_at(s, 0);
        return (d.ok() && d.bytes == s.size()) == etude::test::is_one_utf8_character(s);
    };
    std::string s;
    for (int a = 0; a < 256; ++a) {
        s.assign(1, static_cast<char>(a));
        ASSERT_TRUE(agree(s)) << a;
        for (int b = 0; b < 256; ++b) {
            s.assign({static_cast<char>(a), static_cast<char>(b)});
            ASSERT_TRUE(agree(s)) << a << " " << b;
            if (a < 0xE0) continue;  // three bytes and more need a lead of E0 or above
            for (int c = 0; c < 256; ++c) {
                s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
                ASSERT_TRUE(agree(s)) << a << " " << b << " " << c;
            }
            if (a < 0xF0) continue;
            for (int c : {0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xFF})
                for (int d : {0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xFF}) {
                    s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c),
                              static_cast<char>(d)});
                    ASSERT_TRUE(agree(s)) << a << " " << b << " " << c << " " << d;
                }
        }
    }
}

TEST(Utf8, the_encoder_refuses_what_is_no_scalar_value) {
    for (char32_t v : {0xD800u, 0xDBFFu, 0xDC00u, 0xDFFFu, 0x110000u, 0xFFFFFFFFu}) {
        try {
            (void)utf8::encode(v);
            ADD_FAILURE() << std::hex << static_cast<unsigned long>(v) << " encoded";
        } catch (const etude::Error& e) {
            EXPECT_NE(std::string(e.what()).find("is not a Unicode scalar value"),
                      std::string::npos)
                << e.what();
        }
    }
    try {
        (void)utf8::encode(U'\xD800');
    } catch (const etude::Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "U+D800 is not a Unicode scalar value: UTF-8 cannot hold it");
    }
}

TEST(Utf8, a_message_says_where_and_what) {
    EXPECT_EQ(utf8::describe(BadSequence{3, Problem::CutShort}),
              "at byte offset 3: a character cut short");
    try {
        (void)utf8::decode("caf\xE9 au lait");
        FAIL() << "Latin-1 decoded";
    } catch (const etude::Error& e) {
        EXPECT_STREQ(e.what(), "text is not valid UTF-8 (at byte offset 3: a character cut short)");
    }
}

TEST(Utf8, a_cut_moves_back_to_the_start_of_its_character) {
    const std::string_view text = "a\xC3\xA9\xF0\x9F\x98\x80z";  // a é 😀 z
    const std::size_t expected[] = {0, 1, 1, 3, 3, 3, 3, 7, 8};
    for (std::size_t at = 0; at <= text.size(); ++at)
        EXPECT_EQ(utf8::char_start_at_or_before(text, at), expected[at]) << at;
}

TEST(Utf8, an_unfinished_tail_is_a_well_formed_start_of_a_character) {
    EXPECT_EQ(utf8::unfinished_tail(""), 0u);
    EXPECT_EQ(utf8::unfinished_tail("abc"), 0u);
    EXPECT_EQ(utf8::unfinished_tail("caf\xC3\xA9"), 0u);
    EXPECT_EQ(utf8::unfinished_tail("caf\xC3"), 1u);
    EXPECT_EQ(utf8::unfinished_tail("x\xE2\x82"), 2u);
    EXPECT_EQ(utf8::unfinished_tail("\xF0\x9F\x98"), 3u);
    // Not the start of any character: left for the check to refuse.
    EXPECT_EQ(utf8::unfinished_tail("x\xE0\x80"), 0u);  // overlong
    EXPECT_EQ(utf8::unfinished_tail("x\xED\xA0"), 0u);  // surrogate
    EXPECT_EQ(utf8::unfinished_tail("x\xF4\x90"), 0u);  // above U+10FFFF
    EXPECT_EQ(utf8::unfinished_tail("x\xFF"), 0u);
    EXPECT_EQ(utf8::unfinished_tail("\x80\x80\x80"), 0u);
}
