// Pairing a Piper sentence's written words with its spoken ones.
#include "engine/piper/sentence_words.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "engine/piper/espeak_session.h"
#include "engine/piper/phonemizer.h"
#include "engine/piper/voice_config.h"
#include "support/test_data.h"

using namespace etude::piper;

namespace {

std::vector<std::string> split(const std::string& utf8_phonemes_with_bars) {
    // "h|i| |t|o" -> {"h","i"," ","t","o"}
    std::vector<std::string> out;
    std::string cur;
    for (char c : utf8_phonemes_with_bars) {
        if (c == '|') {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

std::vector<std::string> names(const std::vector<etude::engine::WordStart>& words) {
    std::vector<std::string> out;
    for (const auto& w : words) out.push_back(w.text);
    return out;
}

}  // namespace

TEST(SentenceWords, spoken_words_start_after_spaces_and_punctuation_alone_is_none) {
    EXPECT_EQ(phoneme_word_starts(split("h|ə|l|ˈ|o|ʊ|,| |w|ˈ|ɜ|ː|l|d|!")),
              (std::vector<std::size_t>{0, 8}));
    // A clause mark between spaces, and spaces doubled or at the ends.
    EXPECT_EQ(phoneme_word_starts(split(" |a| |—| | |b|.| ")), (std::vector<std::size_t>{1, 6}));
    EXPECT_TRUE(phoneme_word_starts(split(".|,| |?")).empty());
    EXPECT_TRUE(phoneme_word_starts({}).empty());
}

TEST(SentenceWords, written_words_hold_a_letter_or_digit_and_lose_the_punctuation_around) {
    EXPECT_EQ(written_words("  \"Hello,\" she said -- don't;  it's 42.5% — «très» bien…\n"),
              (std::vector<std::string>{"Hello", "she", "said", "don't", "it's", "42.5", "très",
                                        "bien"}));
    EXPECT_TRUE(written_words(" ... — !? ").empty());
}

TEST(SentenceWords, equal_counts_pair_in_order_and_others_are_counted_word_by_word) {
    const std::vector<std::size_t> starts{0, 5, 9, 14};
    std::map<std::string, std::size_t> spoken{{"It", 1}, {"is", 1}, {"42", 2}, {"$", 0}};
    const auto count = [&](const std::string& w) { return spoken.at(w); };
    auto same = pair_words({"a", "b", "c", "d"}, starts, count);
    ASSERT_EQ(same.size(), 4u);
    EXPECT_EQ(same[2].text, "c");
    EXPECT_EQ(same[2].start, 9u);
    // "42" is spoken as two words; "$" as none.
    auto paired = pair_words({"It", "$", "42", "42"}, {0, 5, 9, 14, 20}, count);
    EXPECT_EQ(names(paired), (std::vector<std::string>{"It", "42", "42"}));
    ASSERT_EQ(paired.size(), 3u);
    EXPECT_EQ(paired[1].start, 5u);
    EXPECT_EQ(paired[2].start, 14u);
    // Counts that still disagree give no words rather than wrong ones.
    // Equal counts with a word that is not letters only are checked word by
    // word: "Well... it's 25 dollars." where espeak-ng joined "Well" and
    // "it's" (no space after the "..." clause) has four spoken words too.
    spoken.insert({{"Well", 1}, {"it's", 1}, {"25", 2}, {"dollars", 1}});
    EXPECT_TRUE(pair_words({"Well", "it's", "25", "dollars"}, starts, count).empty());
    spoken["42"] = 3;
    EXPECT_TRUE(pair_words({"It", "is", "42"}, starts, count).empty());  // too many
    spoken["42"] = 1;
    EXPECT_TRUE(pair_words({"It", "is", "42"}, starts, count).empty());  // too few
    EXPECT_TRUE(pair_words({}, starts, count).empty());
}

TEST(SentenceWords, the_phonemizer_gives_each_sentence_its_words_at_their_ids) {
    if (!EspeakSession::available()) GTEST_SKIP() << "built without espeak-ng";
    VoiceConfig v =
        read_voice_config(etude::test::test_data_dir() + "/piper/en_US-test-medium.onnx.json");
    const Phonemizer p(v);
    const auto sentences = p.phonemize("Hello, world! It costs 42 dollars, Mr Smith.", true);
    EXPECT_TRUE(p.phonemize("Hello, world!")[0].words.empty());  // not asked for
    ASSERT_EQ(sentences.size(), 2u);
    EXPECT_EQ(names(sentences[0].words), (std::vector<std::string>{"Hello", "world"}));
    EXPECT_EQ(names(sentences[1].words),
              (std::vector<std::string>{"It", "costs", "42", "dollars", "Mr", "Smith"}));
    for (const auto& s : sentences) {
        std::size_t previous = 0;
        for (const auto& w : s.words) {
            // Each starts at a phoneme's id, after the "^ _" opening, in order.
            ASSERT_LT(w.start, s.ids.ids.size());
            EXPECT_GE(w.start, 2u);
            EXPECT_GT(w.start, previous);
            EXPECT_NE(std::find(s.ids.phoneme_starts.begin(), s.ids.phoneme_starts.end(), w.start),
                      s.ids.phoneme_starts.end());
            previous = w.start;
        }
    }
    // The id before the second word is the word separator's.
    const auto& s = sentences[0];
    const auto space = v.ids_of(" ").front();
    const auto pad = v.ids_of("_").front();
    EXPECT_EQ(s.ids.ids[s.words[1].start - 1], pad);
    EXPECT_EQ(s.ids.ids[s.words[1].start - 2], space);
}
