#include "engine/piper/json_input.h"

#include <gtest/gtest.h>

#include "engine/error.h"

using etude::Error;
using namespace etude::piper;

namespace {
VoiceConfig two_speakers() {
    VoiceConfig v;
    v.path = "v.onnx.json";
    v.num_speakers = 2;
    v.speaker_id_map = {{"alice", 0}, {"bob", 1}};
    return v;
}
}  // namespace

TEST(PiperJsonInput, text_and_phoneme_id_lines_are_read) {
    const auto t = parse_json_input_line(R"({"text": "Hello there."})", "line 1");
    EXPECT_EQ(t.text, "Hello there.");
    EXPECT_FALSE(t.phoneme_ids);
    const auto p = parse_json_input_line(R"({"phoneme_ids": [1, 0, 20, 0, 2]})", "line 2");
    EXPECT_EQ(p.phoneme_ids, (std::vector<std::int64_t>{1, 0, 20, 0, 2}));
    // Piper's other keys (output_file) are ignored.
    EXPECT_NO_THROW(parse_json_input_line(R"({"text": "x", "output_file": "a.wav"})", "l"));
}

TEST(PiperJsonInput, speaker_id_wins_over_speaker_as_in_piper) {
    const VoiceConfig v = two_speakers();
    EXPECT_EQ(speaker_for(parse_json_input_line(R"({"text": "x"})", "l"), v, 0), 0);
    EXPECT_EQ(speaker_for(parse_json_input_line(R"({"text": "x", "speaker": "bob"})", "l"), v, 0),
              1);
    EXPECT_EQ(speaker_for(parse_json_input_line(R"({"text": "x", "speaker": 1})", "l"), v, 0), 1);
    EXPECT_EQ(speaker_for(
                  parse_json_input_line(R"({"text": "x", "speaker": "bob", "speaker_id": 0})", "l"),
                  v, 1),
              0);
    EXPECT_THROW(
        speaker_for(parse_json_input_line(R"({"text": "x", "speaker": "carol"})", "l"), v, 0),
        Error);
    EXPECT_THROW(speaker_for(parse_json_input_line(R"({"text": "x", "speaker_id": 2})", "l"), v, 0),
                 Error);
    EXPECT_THROW(
        speaker_for(parse_json_input_line(R"({"text": "x", "speaker_id": -1})", "l"), v, 0), Error);
}

TEST(PiperJsonInput, malformed_lines_are_one_line_errors_naming_the_line) {
    for (const char* bad : {"", "not json", "{\"text\": \"cut", "[1,2]", "{}", R"({"text": 5})",
                            R"({"text": "a", "phoneme_ids": [1]})", R"({"phoneme_ids": []})",
                            R"({"phoneme_ids": [1, "2"]})", R"({"phoneme_ids": [1.5]})",
                            R"({"text": "a", "speaker": [1]})",
                            R"({"text": "a", "speaker_id": "1"})", "{\"text\": \"\xFF\"}",
                            // past a double's range: nlohmann's out_of_range, not
                            // parse_error (found by tests/fuzz/piper_config_fuzzer.cpp)
                            R"({"text": "a", "speaker_id": 1e99999999})"}) {
        try {
            parse_json_input_line(bad, "stdin:7");
            ADD_FAILURE() << "accepted: " << bad;
        } catch (const Error& e) {
            const std::string what = e.what();
            EXPECT_EQ(what.rfind("stdin:7: ", 0), 0u) << what;
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        }
    }
}
