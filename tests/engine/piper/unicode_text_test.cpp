// The text clean-up before espeak-ng (engine/piper/unicode_text.h): words
// that change script are split, codepoints that are no character are
// blanked, and positions map back to the text as given.
#include "engine/piper/unicode_text.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/piper/espeak_session.h"
#include "engine/piper/espeak_text_guard.h"
#include "engine/piper/phonemizer.h"
#include "support/test_data.h"

using namespace etude::piper;

TEST(PiperUnicodeText, a_word_that_changes_script_is_split_and_offsets_map_back) {
    std::vector<std::size_t> spaces;
    // Armenian then IPA (the word espeak-ng 1.51 mishandles), Latin then
    // Cyrillic, Hangul jamo then Latin.
    EXPECT_EQ(separate_scripts("x \u0543\u0259 y", spaces), "x \u0543 \u0259 y");
    ASSERT_EQ(spaces, std::vector<std::size_t>{4});
    EXPECT_EQ(original_offset(4, spaces), 4u);  // the space: the letter after it
    EXPECT_EQ(original_offset(5, spaces), 4u);  // the IPA letter
    EXPECT_EQ(original_offset(8, spaces), 7u);  // "y"
    EXPECT_EQ(separate_scripts("iPhone\u0430 \u1190a", spaces), "iPhone \u0430 \u1190 a");
    EXPECT_EQ(spaces, (std::vector<std::size_t>{6, 13}));
    // ASCII punctuation and digits do not end a word for espeak-ng: the
    // third and fourth words it read freed memory on (Greek, "^", Hangul;
    // Hangul, an apostrophe, Hangul).
    EXPECT_EQ(separate_scripts("\u0395^\ubb95'\ubb9e x-1\u0430", spaces),
              "\u0395^ \ubb95 ' \ubb9e x-1 \u0430");
}

// A sign of no script (the IPA length mark) next to an Armenian letter, on
// either side: the second word espeak-ng 1.51 read freed memory on.
TEST(PiperUnicodeText, a_sign_is_split_from_a_letter_of_a_script_other_than_latin) {
    std::vector<std::size_t> spaces;
    EXPECT_EQ(separate_scripts("\u02d0\u054a", spaces), "\u02d0 \u054a");
    EXPECT_EQ(separate_scripts("\u054a\u02d0", spaces), "\u054a \u02d0");
    // Latin, Cyrillic and Greek keep theirs.
    for (const std::string text : {"fo\u02d0r", "don\u2019t", "\u043c\u2019\u044f\u0441\u043e"}) {
        EXPECT_EQ(separate_scripts(text, spaces), text);
        EXPECT_TRUE(spaces.empty()) << text;
    }
}

TEST(PiperUnicodeText, words_of_one_script_are_left_as_they_are) {
    std::vector<std::size_t> spaces;
    for (const std::string text :
         {"Plain English, with digits 42 and don\u2019t.", "caf\u00e9 na\u00efve e\u0301",
          "\u041c\u043e\u0441\u043a\u0432\u0430, London", "\u65e5\u672c\u8a9e\u3067\u3059",
          "\ud55c\uad6d\uc5b4 \u4e2d\u6587", "\u0394\u03b5\u03bb\u03c6\u03bf\u03af 3.5 kg"}) {
        EXPECT_EQ(separate_scripts(text, spaces), text);
        EXPECT_TRUE(spaces.empty()) << text;
    }
}

TEST(PiperUnicodeText, words_too_long_for_espeak_are_cut_between_characters) {
    // "s'" 68 times aborts espeak-ng 1.51 (a stack overflow): no word it is
    // given is longer than kEspeakMaxWordBytes.
    std::string stacked;
    for (int i = 0; i < 220; ++i) stacked += "s'";
    std::vector<std::size_t> inserted;
    const std::string out = separate_scripts("Say " + stacked + " twice", inserted);
    std::size_t longest = 0, run = 0, spaces = 0;
    for (const char c : out) {
        run = c == ' ' ? 0 : run + 1;
        longest = std::max(longest, run);
        spaces += c == ' ';
    }
    EXPECT_EQ(longest, kEspeakMaxWordBytes);
    EXPECT_EQ(spaces, 2 + inserted.size());
    EXPECT_EQ(inserted.size(), 440 / kEspeakMaxWordBytes);
    // Only spaces were put in, and each maps back into the input.
    std::string without;
    for (std::size_t i = 0; i < out.size(); ++i)
        if (std::find(inserted.begin(), inserted.end(), i) == inserted.end()) without += out[i];
    EXPECT_EQ(without, "Say " + stacked + " twice");
    // A word of exactly the limit stays whole.
    const std::string at_limit(kEspeakMaxWordBytes, 'a');
    EXPECT_EQ(separate_scripts(at_limit, inserted), at_limit);
    EXPECT_TRUE(inserted.empty());
    // A combining mark stays with the letter before it: "e" and U+0301
    // (two bytes), 30 times, are cut only before an "e".
    std::string accents;
    for (int i = 0; i < 30; ++i) accents += "e\u0301";
    const std::string cut = separate_scripts(accents, inserted);
    ASSERT_EQ(inserted.size(), 1u);
    EXPECT_EQ(cut[inserted[0] + 1], 'e');
}

TEST(PiperUnicodeText, non_characters_become_spaces_of_the_same_length) {
    // Unassigned (U+0378, U+0558), private use (U+E000), a noncharacter
    // (U+FFFE), each in a word; real letters stay.
    std::string text = "a\u0378b \u0558 \ue000c \ufffe \u00e9\u0543";
    blank_non_characters(text);
    EXPECT_EQ(text,
              "a  b    " + std::string(3, ' ') + "c " + std::string(3, ' ') + " \u00e9\u0543");
}

TEST(PiperUnicodeText, the_phonemizer_keeps_the_text_as_given) {
    if (!EspeakSession::available()) GTEST_SKIP() << "built without espeak-ng";
    const Phonemizer p(
        read_voice_config(etude::test::test_data_dir() + "/piper/en_US-test-medium.onnx.json"));
    const std::string text = "Say \u0543\u0259 twice. Then stop.";
    const auto sentences = p.phonemize(text);
    ASSERT_EQ(sentences.size(), 2u);
    EXPECT_EQ(sentences[0].text, "Say \u0543\u0259 twice.");
    EXPECT_EQ(sentences[1].text, "Then stop.");
    EXPECT_FALSE(sentences[0].phonemes.empty());
}

TEST(PiperEspeakTextGuard, what_espeak_mishandles_is_blanked_unless_it_is_the_voices_script) {
    EXPECT_TRUE(espeak_mishandles(0x09E6));   // BENGALI DIGIT ZERO
    EXPECT_TRUE(espeak_mishandles(0x1190));   // an archaic Hangul jamo
    EXPECT_FALSE(espeak_mishandles(U'a'));    // ordinary letters
    EXPECT_FALSE(espeak_mishandles(0x00E9));  // é
    EXPECT_FALSE(espeak_mishandles(0x0915));  // DEVANAGARI LETTER KA
    std::vector<std::size_t> spaces;
    // Three bytes each, so three spaces each: offsets hold.
    EXPECT_EQ(guard_espeak_text("a\u09E6b \u1190", "en-us", spaces), "a   b    ");
    EXPECT_TRUE(spaces.empty());
    // A Bengali voice reads Bengali digits itself.
    EXPECT_EQ(guard_espeak_text("\u09E6\u09E7", "bn", spaces), "\u09E6\u09E7");
    // Non-characters go whatever the voice; scripts are split.
    EXPECT_EQ(guard_espeak_text("x\ue000 \u0543\u0259", "hy", spaces), "x    \u0543 \u0259");
    EXPECT_EQ(spaces, std::vector<std::size_t>{7});
}

TEST(PiperEspeakTextGuard, clause_marks_of_other_scripts_are_blanked_beside_punctuation_too) {
    // The danda hurts espeak-ng's memory beside punctuation ("}\u0964",
    // "-\u0964": the scan's "dash" and "quoted" contexts), though not alone.
    EXPECT_TRUE(espeak_mishandles(0x0964));  // DEVANAGARI DANDA
    EXPECT_TRUE(espeak_mishandles(0x0965));  // DEVANAGARI DOUBLE DANDA
    std::vector<std::size_t> spaces;
    EXPECT_EQ(guard_espeak_text("}\u0964", "en-us", spaces), "}   ");
    // Unicode gives it to no one script (Common). espeak-ng's Devanagari
    // voices read it without harm and keep it; its Bengali voice is hurt
    // by "}\u0964" as the English one is.
    spaces.clear();
    EXPECT_NE(guard_espeak_text("\u0928\u0964", "hi", spaces).find("\u0964"), std::string::npos);
    spaces.clear();
    EXPECT_EQ(guard_espeak_text("}\u0964", "bn", spaces), "}   ");
    // The Armenian full stop: kept for Armenian, not for Georgian.
    spaces.clear();
    EXPECT_NE(guard_espeak_text("\"\u0589\"", "hy", spaces).find("\u0589"), std::string::npos);
    spaces.clear();
    EXPECT_EQ(guard_espeak_text("\"\u0589\"", "ka", spaces), "\"  \"");
}
