#include "engine/piper/voice_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/error.h"

using etude::Error;
using namespace etude::piper;
using Json = nlohmann::json;

namespace {

// A small but complete config in the layout of Piper's VOICE.onnx.json.
Json valid_config() {
    return Json::parse(R"({
      "audio": {"sample_rate": 22050, "quality": "medium"},
      "espeak": {"voice": "en-us"},
      "inference": {"noise_scale": 0.667, "length_scale": 1, "noise_w": 0.8},
      "phoneme_type": "espeak",
      "phoneme_map": {},
      "phoneme_id_map": {"_": [0], "^": [1], "$": [2], " ": [3], ".": [10], "a": [14],
                         "aɪ": [20, 21]},
      "num_symbols": 256,
      "num_speakers": 3,
      "speaker_id_map": {"alice": 0, "bob": 2},
      "piper_version": "1.0.0",
      "language": {"code": "en_US", "family": "en", "region": "US", "name_native": "English",
                   "name_english": "English", "country_english": "United States"},
      "dataset": "test"
    })");
}

// The one-line error parsing text gives; empty when it parses.
std::string error_of(const std::string& text) {
    try {
        parse_voice_config(text, "v.onnx.json");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

std::string error_of(const Json& j) {
    return error_of(j.dump());
}

// Expects an error naming the file and the field.
void expect_field_error(const Json& j, const std::string& field) {
    const std::string e = error_of(j);
    EXPECT_EQ(e.rfind("v.onnx.json: " + field + ":", 0), 0u) << "got: " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace

TEST(PiperVoiceConfig, reads_every_field_piper_writes) {
    const VoiceConfig c = parse_voice_config(valid_config().dump(), "v.onnx.json");
    EXPECT_EQ(c.sample_rate, 22050);
    EXPECT_EQ(c.quality, VoiceQuality::Medium);
    EXPECT_EQ(c.espeak_voice, "en-us");
    EXPECT_EQ(c.phoneme_type, PhonemeType::Espeak);
    EXPECT_EQ(c.num_symbols, 256);
    EXPECT_EQ(c.num_speakers, 3);
    EXPECT_EQ(c.phoneme_id_map.at("aɪ"), (std::vector<std::int64_t>{20, 21}));
    EXPECT_EQ(c.ids_of("^"), std::vector<std::int64_t>{1});
    EXPECT_EQ(c.speaker_id_map.at("bob"), 2);
    EXPECT_FLOAT_EQ(c.inference.noise_scale, 0.667f);
    EXPECT_FLOAT_EQ(c.inference.length_scale, 1.0f);
    EXPECT_FLOAT_EQ(c.inference.noise_w, 0.8f);
    EXPECT_EQ(c.language.code, "en_US");
    EXPECT_EQ(c.language.country_english, "United States");
    EXPECT_EQ(c.dataset, "test");
    EXPECT_EQ(c.piper_version, "1.0.0");
    EXPECT_EQ(c.hop_length, 256);
}

TEST(PiperVoiceConfig, optional_fields_take_pipers_defaults) {
    Json j = valid_config();
    j.erase("inference");
    j.erase("language");
    j.erase("speaker_id_map");
    j.erase("phoneme_type");
    j["audio"].erase("quality");
    const VoiceConfig c = parse_voice_config(j.dump(), "v.onnx.json");
    EXPECT_FLOAT_EQ(c.inference.noise_scale, 0.667f);
    EXPECT_FLOAT_EQ(c.inference.noise_w, 0.8f);
    EXPECT_EQ(c.phoneme_type, PhonemeType::Espeak);
    EXPECT_EQ(c.quality, VoiceQuality::Unknown);
    EXPECT_TRUE(c.speaker_id_map.empty());
}

TEST(PiperVoiceConfig, a_file_cut_short_is_refused_naming_the_file) {
    const std::string text = valid_config().dump(2);
    for (std::size_t cut : {std::size_t{0}, std::size_t{1}, text.size() / 3, text.size() - 1}) {
        const std::string e = error_of(text.substr(0, cut));
        EXPECT_EQ(e.rfind("v.onnx.json: not valid JSON", 0), 0u) << "cut at " << cut << ": " << e;
    }
}

// nlohmann reports a number past a double's range as out_of_range, not as
// a parse_error; it was an uncaught exception (tests/fuzz/piper_config_fuzzer).
TEST(PiperVoiceConfig, a_number_too_large_for_a_double_is_refused_naming_the_file) {
    const std::string e =
        error_of(std::string(R"({"audio": {"sample_rate": 999000e99999999999}})"));
    EXPECT_EQ(e.rfind("v.onnx.json: not valid JSON (number overflow", 0), 0u) << e;
}

TEST(PiperVoiceConfig, each_missing_required_field_is_named) {
    for (const char* field : {"audio", "espeak", "num_symbols", "num_speakers", "phoneme_id_map"}) {
        Json j = valid_config();
        j.erase(field);
        expect_field_error(j, field);
    }
    Json j = valid_config();
    j["audio"].erase("sample_rate");
    expect_field_error(j, "audio.sample_rate");
    j = valid_config();
    j["espeak"].erase("voice");
    expect_field_error(j, "espeak.voice");
    for (const char* marker : {"^", "_", "$"}) {
        j = valid_config();
        j["phoneme_id_map"].erase(marker);
        expect_field_error(j, "phoneme_id_map");
    }
}

TEST(PiperVoiceConfig, a_bad_sample_rate_is_refused) {
    for (const Json& bad : {Json(0), Json(-22050), Json("22050"), Json(22050.5), Json(1),
                            Json(10000000), Json::array()}) {
        Json j = valid_config();
        j["audio"]["sample_rate"] = bad;
        expect_field_error(j, "audio.sample_rate");
    }
}

TEST(PiperVoiceConfig, ids_out_of_range_are_refused) {
    Json j = valid_config();
    j["phoneme_id_map"]["a"] = {256};  // == num_symbols
    expect_field_error(j, "phoneme_id_map[\"a\"]");
    j["phoneme_id_map"]["a"] = {-1};
    expect_field_error(j, "phoneme_id_map[\"a\"]");
    j["phoneme_id_map"]["a"] = Json::array();
    expect_field_error(j, "phoneme_id_map[\"a\"]");
    j["phoneme_id_map"]["a"] = "14";
    expect_field_error(j, "phoneme_id_map[\"a\"]");
    j = valid_config();
    j["num_symbols"] = 11;  // "a" is 14
    expect_field_error(j, "phoneme_id_map[\"a\"]");
}

TEST(PiperVoiceConfig, an_absurd_speaker_count_is_refused) {
    for (const Json& bad : {Json(0), Json(-1), Json(kMaxSpeakers + 1), Json(1e12), Json("3")}) {
        Json j = valid_config();
        j["num_speakers"] = bad;
        expect_field_error(j, "num_speakers");
    }
    Json j = valid_config();
    j["speaker_id_map"]["carol"] = 3;  // num_speakers is 3
    expect_field_error(j, "speaker_id_map[\"carol\"]");
    j = valid_config();
    j["num_speakers"] = 1;  // two names, one speaker
    expect_field_error(j, "speaker_id_map");
}

TEST(PiperVoiceConfig, bad_scales_types_and_names_are_refused) {
    Json j = valid_config();
    j["inference"]["length_scale"] = 0;
    expect_field_error(j, "inference.length_scale");
    j = valid_config();
    j["inference"]["noise_w"] = "0.8";
    expect_field_error(j, "inference.noise_w");
    j = valid_config();
    j["inference"]["noise_scale"] = -1;
    expect_field_error(j, "inference.noise_scale");
    j = valid_config();
    j["phoneme_type"] = "klingon";
    expect_field_error(j, "phoneme_type");
    j = valid_config();
    j["audio"]["quality"] = "ultra";
    expect_field_error(j, "audio.quality");
    j = valid_config();
    j["espeak"]["voice"] = "";
    expect_field_error(j, "espeak.voice");
    j = valid_config();
    j["espeak"]["voice"] = 7;
    expect_field_error(j, "espeak.voice");
    j = valid_config();
    j["language"]["code"] = 7;
    expect_field_error(j, "language.code");
    j = valid_config();
    j["vowel_clusters"] = {{"o", "ʊ"}};  // "oʊ" is not in the map
    expect_field_error(j, "vowel_clusters");
    EXPECT_EQ(
        error_of(std::string("[1, 2]")).rfind("v.onnx.json: (top level): must be a JSON object", 0),
        0u);
}

TEST(PiperVoiceConfig, speakers_are_found_by_name_or_id) {
    const VoiceConfig c = parse_voice_config(valid_config().dump(), "v.onnx.json");
    EXPECT_EQ(c.speaker_id("bob"), 2);
    EXPECT_EQ(c.speaker_id("1"), 1);
    EXPECT_THROW(c.speaker_id("3"), Error);
    EXPECT_THROW(c.speaker_id("carol"), Error);
    EXPECT_THROW(c.speaker_id("-1"), Error);
    try {
        c.speaker_id("carol");
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("speakers: alice, bob"), std::string::npos);
    }
}

TEST(PiperVoiceConfig, a_missing_file_or_a_folder_is_refused_naming_it) {
    const std::string dir = std::string(ETUDE_TEST_TMP) + "/piper_config_test";
    std::filesystem::create_directories(dir);
    EXPECT_THROW(read_voice_config(dir + "/absent.onnx.json"), Error);
    EXPECT_THROW(read_voice_config(dir), Error);
    std::ofstream(dir + "/v.onnx.json") << valid_config().dump();
    EXPECT_EQ(read_voice_config(dir + "/v.onnx.json").sample_rate, 22050);
}
