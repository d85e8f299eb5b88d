// etude voices: the built-in voices, then the Piper voices of the voice
// folders with language, quality, rate and speakers, a broken one named as
// unusable with its reason, and where voices are looked for.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"

namespace fs = std::filesystem;
using etude::test::quote;
using etude::test::run_etude;
using etude::test::tmpdir;

TEST(VoicesCommand, lists_piper_voices_from_the_voice_folders_and_says_where_it_looked) {
    const fs::path a = tmpdir() / "voices-a", b = tmpdir() / "voices-b";
    fs::remove_all(a);
    fs::remove_all(b);
    fs::create_directories(a);
    fs::create_directories(b / "de_DE-multi-low");
    {
        std::ifstream in(std::string(ETUDE_TEST_DATA) + "/piper/en_US-test-medium.onnx.json");
        nlohmann::json j = nlohmann::json::parse(in);
        std::ofstream(a / "en_US-test-medium.onnx.json") << j.dump();
        std::ofstream(a / "en_US-test-medium.onnx") << "not checked here";
        j["num_speakers"] = 3;
        j["speaker_id_map"] = {{"anna", 0}, {"ben", 1}, {"carl", 2}};
        j["audio"] = {{"sample_rate", 16000}, {"quality", "low"}};
        j["language"] = {
            {"code", "de_DE"}, {"name_english", "German"}, {"country_english", "Germany"}};
        std::ofstream(b / "de_DE-multi-low" / "de_DE-multi-low.onnx.json") << j.dump();
        std::ofstream(b / "broken.onnx.json") << "{\"audio\": ";
    }
    const auto r = run_etude("voices", "");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("slt  US English female"), std::string::npos) << r.out;

    const std::string env = "ETUDE_VOICE_PATH=" + quote(a.string() + ":" + b.string()) +
                            " XDG_DATA_HOME=" + quote((tmpdir() / "xdg").string()) + " ";
    const std::string cmd = "sh -c " + quote(env + ETUDE_CLI_PATH + " voices");
    const fs::path out = tmpdir() / "voices.out";
    ASSERT_EQ(std::system((cmd + " > " + out.string()).c_str()), 0);
    std::ifstream in(out);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(text.find("  en_US-test-medium  English (United States), en_US, medium, 22050 Hz, "
                        "1 speaker\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("  de_DE-multi-low  German (Germany), de_DE, low, 16000 Hz, 3 speakers "
                        "(anna, ben, carl) [no .onnx beside the .json]\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("  broken  unusable: "), std::string::npos) << text;
    EXPECT_NE(text.find("not valid JSON"), std::string::npos) << text;
    EXPECT_NE(text.find("  " + a.string() + "\n  " + b.string() + "\n  " +
                        (tmpdir() / "xdg").string() + "/libetude/voices\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("To add one"), std::string::npos) << text;
}
