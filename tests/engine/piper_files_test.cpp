// engine/piper_files.h: Piper's --json-input read against a real voice's
// config into one run per speaker, and the voice folders' summaries. The
// expected speakers and summaries are the test data's configs as written
// (tests/data/piper/test_medium_multi.onnx.json names speaker_0..3).
#include "engine/piper_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "engine/error.h"
#include "support/scoped_env.h"
#include "support/test_data.h"

namespace {

using etude::engine::read_piper_json_input;
using etude::test::ScopedEnv;
namespace fs = std::filesystem;

const std::string kData = etude::test::test_data_dir() + "/piper/";
const std::string kMulti = kData + "test_medium_multi.onnx";

}  // namespace

TEST(PiperFiles, json_lines_of_one_speaker_share_a_run_and_keep_their_order) {
    const std::string input =
        "{\"text\": \"One.\"}\n"
        "\n"
        "{\"phoneme_ids\": [1, 0, 2]}\n"
        "{\"text\": \"Two.\", \"speaker_id\": 2}\n"
        "{\"text\": \"Three.\", \"speaker\": \"speaker_2\"}\n"
        "{\"text\": \"Four.\"}";  // no newline at the end
    const auto runs = read_piper_json_input(input, kMulti, "speaker_1");
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_EQ(runs[0].speaker, "speaker_1");
    ASSERT_EQ(runs[0].items.size(), 2u);
    EXPECT_EQ(std::get<std::string>(runs[0].items[0]), "One.");
    EXPECT_EQ(std::get<std::vector<std::int64_t>>(runs[0].items[1]),
              (std::vector<std::int64_t>{1, 0, 2}));
    EXPECT_EQ(runs[1].speaker, "speaker_2");
    ASSERT_EQ(runs[1].items.size(), 2u);
    EXPECT_EQ(std::get<std::string>(runs[1].items[1]), "Three.");
    EXPECT_EQ(runs[2].speaker, "speaker_1");
}

TEST(PiperFiles, a_bad_line_is_named_by_source_and_number_a_bad_speaker_by_the_voice) {
    try {
        read_piper_json_input("{\"text\": \"a\"}\n{\"text\": 5}\n", kMulti, "", "input.jsonl");
        FAIL() << "a line without text was accepted";
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("input.jsonl:2"), std::string::npos) << e.what();
    }
    try {
        read_piper_json_input("{\"text\": \"b\", \"speaker_id\": 9}", kMulti, "");
        FAIL() << "a speaker the voice lacks was accepted";
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("test_medium_multi.onnx.json"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(read_piper_json_input("{\"text\": \"a\"}", "no-such-voice", ""),
                 etude::VoiceNotFound);
}

TEST(PiperFiles, voices_in_the_folders_are_summarised_from_their_configs) {
    ScopedEnv path("ETUDE_VOICE_PATH", kData);
    ScopedEnv xdg("XDG_DATA_HOME", (fs::path(ETUDE_TEST_TMP) / "no-voices").string());
    bool multi = false, broken = false;
    for (const auto& v : etude::engine::summarize_piper_voices()) {
        if (v.name == "test_medium_multi") {
            multi = true;
            EXPECT_TRUE(v.model_present);
            EXPECT_EQ(v.summary,
                      "English (United States), en_US, medium, 22050 Hz, 4 speakers "
                      "(speaker_0, speaker_1, speaker_2, speaker_3)");
        }
        if (v.name == "bad-sample-rate") {
            broken = true;
            EXPECT_TRUE(v.summary.empty());
            EXPECT_NE(v.problem.find("sample_rate"), std::string::npos) << v.problem;
        }
    }
    EXPECT_TRUE(multi);
    EXPECT_TRUE(broken);
}
