#include "engine/piper/phoneme_ids.h"

#include <gtest/gtest.h>

#include "engine/error.h"

using namespace etude::piper;

namespace {
VoiceConfig small_voice() {
    VoiceConfig v;
    v.path = "v.onnx.json";
    v.num_symbols = 30;
    v.phoneme_id_map = {{"_", {0}},  {"^", {1}},  {"$", {2}},       {" ", {3}},
                        {"a", {14}}, {"ɪ", {20}}, {"aɪ", {25, 26}}, {"h", {7}}};
    return v;
}
}  // namespace

TEST(PiperPhonemeIds, sentences_are_laid_out_bos_pad_phoneme_pad_eos) {
    const PhonemeIds p = phonemes_to_ids({"h", "a", " ", "ɪ"}, small_voice());
    EXPECT_EQ(p.ids, (std::vector<std::int64_t>{1, 0, 7, 0, 14, 0, 3, 0, 20, 0, 2}));
    EXPECT_EQ(p.missing, 0u);
    EXPECT_EQ(phonemes_to_ids({}, small_voice()).ids, (std::vector<std::int64_t>{1, 0, 2}));
}

TEST(PiperPhonemeIds, a_phoneme_with_several_ids_gives_them_all_then_one_pad) {
    EXPECT_EQ(phonemes_to_ids({"aɪ"}, small_voice()).ids,
              (std::vector<std::int64_t>{1, 0, 25, 26, 0, 2}));
}

TEST(PiperPhonemeIds, phonemes_missing_from_the_map_are_skipped_and_counted) {
    const PhonemeIds p = phonemes_to_ids({"h", "ʒ", "a", "ʒ", "q"}, small_voice());
    EXPECT_EQ(p.ids, (std::vector<std::int64_t>{1, 0, 7, 0, 14, 0, 2}));
    EXPECT_EQ(p.missing, 3u);
    EXPECT_EQ(p.missing_phonemes, (std::vector<std::string>{"ʒ", "q"}));
}

TEST(PiperPhonemeIds, every_id_is_checked_against_num_symbols) {
    VoiceConfig v = small_voice();
    EXPECT_NO_THROW(check_phoneme_ids({0, 29}, v));
    EXPECT_THROW(check_phoneme_ids({0, 30}, v), etude::Error);
    EXPECT_THROW(check_phoneme_ids({-1}, v), etude::Error);
    v.phoneme_id_map["a"] = {99};  // a map built in code, past num_symbols
    EXPECT_THROW(phonemes_to_ids({"a"}, v), etude::Error);
}

TEST(PiperPhonemeIds, vowel_clusters_merge_the_longest_first) {
    VoiceConfig v = small_voice();
    v.vowel_clusters = {{"a", "ɪ"}};
    EXPECT_EQ(merge_vowel_clusters({"h", "a", "ɪ", "a", " ", "ɪ"}, v),
              (std::vector<std::string>{"h", "aɪ", "a", " ", "ɪ"}));
    v.vowel_clusters.clear();
    EXPECT_EQ(merge_vowel_clusters({"a", "ɪ"}, v), (std::vector<std::string>{"a", "ɪ"}));
}
