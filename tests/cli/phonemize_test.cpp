// etude phonemize: one JSON line per sentence, and every bad voice file or
// text a one-line error with exit status 1, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/piper/espeak_session.h"
#include "support/cli_runner.h"

namespace fs = std::filesystem;
using etude::test::quote;
using etude::test::run_etude;
using etude::test::tmpdir;
using Json = nlohmann::json;

namespace {

const std::string kVoice = std::string(ETUDE_TEST_DATA) + "/piper/en_US-test-medium.onnx.json";

// A copy of the test voice's config with one change, written to a file.
std::string voice_with(const std::function<void(Json&)>& change, const std::string& name) {
    std::ifstream in(kVoice);
    Json j = Json::parse(in);
    change(j);
    const fs::path p = tmpdir() / (name + ".onnx.json");
    std::ofstream(p) << j.dump();
    return p.string();
}

std::vector<Json> lines_of(const std::string& out) {
    std::vector<Json> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line));
    return lines;
}

void expect_one_line_error(const etude::test::CliRun& r, const std::string& part) {
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err.rfind("etude phonemize: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
}

#define REQUIRE_ESPEAK()                           \
    if (!etude::piper::EspeakSession::available()) \
    GTEST_SKIP() << "built without espeak-ng (ETUDE_WITH_ESPEAK=OFF)"

}  // namespace

TEST(PhonemizeCommand, prints_one_json_line_per_sentence_in_pipers_keys) {
    REQUIRE_ESPEAK();
    const auto r = run_etude("phonemize --voice " + quote(kVoice) + " 'Hi there. Ready?'");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto lines = lines_of(r.out);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0]["text"], "Hi there.");
    EXPECT_EQ(lines[1]["text"], "Ready?");
    EXPECT_EQ(lines[1]["phonemes"], Json::parse(R"(["ɹ","ˈ","ɛ","d","i","?"])"));
    EXPECT_EQ(lines[1]["phoneme_ids"], Json::parse("[1,0,88,0,120,0,61,0,17,0,21,0,13,0,2]"));
    // Keys in the order of Piper's phonemizer.
    EXPECT_EQ(r.out.rfind("{\"text\":\"Hi there.\",\"phonemes\":[", 0), 0u) << r.out;
}

// A whole word in brackets is text, commas and all: CLI11 2.1 took it for a
// list and split it at the commas (docs/cli.md), in any position, after
// "--" too, and not an option's value.
TEST(PhonemizeCommand, a_bracketed_word_keeps_its_commas) {
    REQUIRE_ESPEAK();
    for (const auto& [args, text] : std::vector<std::pair<std::string, std::string>>{
             {"'[Hello, world]'", "[Hello, world]"},
             {"Say '[one, two]' now.", "Say [one, two] now."},
             {"-- '[a, b]'", "[a, b]"}}) {
        const auto r = run_etude("phonemize --voice " + quote(kVoice) + " " + args);
        ASSERT_EQ(r.status, 0) << args << ": " << r.err;
        const auto lines = lines_of(r.out);
        ASSERT_EQ(lines.size(), 1u) << args << ": " << r.out;
        EXPECT_EQ(lines[0]["text"], text) << args;
    }
}

TEST(PhonemizeCommand, standard_input_is_read_line_by_line_and_blank_lines_print_nothing) {
    REQUIRE_ESPEAK();
    const auto r = run_etude("phonemize --voice " + quote(kVoice), "One.\n\n   \nTwo, three\n");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto lines = lines_of(r.out);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[1]["text"], "Two, three");
    EXPECT_TRUE(run_etude("phonemize --voice " + quote(kVoice), "").out.empty());
}

TEST(PhonemizeCommand, bad_voice_files_are_one_line_errors_naming_file_and_field) {
    const std::string cut = (tmpdir() / "cut.onnx.json").string();
    {
        std::ifstream in(kVoice);
        std::stringstream all;
        all << in.rdbuf();
        std::ofstream(cut) << all.str().substr(0, all.str().size() / 2);
    }
    expect_one_line_error(run_etude("phonemize --voice " + quote(cut) + " hi"),
                          cut + ": not valid JSON");
    expect_one_line_error(
        run_etude("phonemize --voice " +
                  quote(voice_with([](Json& j) { j.erase("num_symbols"); }, "nosym")) + " hi"),
        "nosym.onnx.json: num_symbols: is missing");
    expect_one_line_error(
        run_etude("phonemize --voice " +
                  quote(voice_with([](Json& j) { j["audio"]["sample_rate"] = "22050"; }, "rate")) +
                  " hi"),
        "rate.onnx.json: audio.sample_rate: must be a whole number");
    expect_one_line_error(
        run_etude("phonemize --voice " +
                  quote(voice_with([](Json& j) { j["phoneme_id_map"]["a"] = {300}; }, "ids")) +
                  " hi"),
        "ids.onnx.json: phoneme_id_map[\"a\"]: is 300, expected 0..255");
    expect_one_line_error(
        run_etude("phonemize --voice " +
                  quote(voice_with([](Json& j) { j["num_speakers"] = 1000000000; }, "spk")) +
                  " hi"),
        "spk.onnx.json: num_speakers: is 1000000000");
    expect_one_line_error(
        run_etude("phonemize --voice " + quote((tmpdir() / "absent.onnx").string()) + " hi"),
        "absent.onnx.json: no such file");
    expect_one_line_error(run_etude("phonemize --voice no-such-voice-name hi"),
                          "no Piper voice 'no-such-voice-name'");
}

TEST(PhonemizeCommand, an_espeak_voice_that_does_not_exist_is_named) {
    REQUIRE_ESPEAK();
    expect_one_line_error(
        run_etude("phonemize --voice " +
                  quote(voice_with([](Json& j) { j["espeak"]["voice"] = "zz-nowhere"; }, "esp")) +
                  " hi"),
        "esp.onnx.json: espeak.voice: 'zz-nowhere' is not an espeak-ng voice");
}

TEST(PhonemizeCommand, invalid_utf8_names_the_line_and_byte) {
    REQUIRE_ESPEAK();
    const auto r = run_etude("phonemize --voice " + quote(kVoice), "Fine.\nab\xFF\n");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(
        r.err.find(
            "stdin:2: text is not valid UTF-8 (at byte offset 2: a byte that UTF-8 never uses)"),
        std::string::npos)
        << r.err;
    EXPECT_EQ(lines_of(r.out).size(), 1u) << "the good line before it was printed";
}

TEST(PhonemizeCommand, a_megabyte_line_is_phonemized_without_crashing) {
    REQUIRE_ESPEAK();
    std::string text;
    while (text.size() < (1u << 20)) text += "Is this long enough, or not? ";
    const auto r = run_etude("phonemize --voice " + quote(kVoice), text);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_GT(lines_of(r.out).size(), 30000u);
}

TEST(PhonemizeCommand, phoneme_blocks_in_brackets_are_pipers) {
    REQUIRE_ESPEAK();
    // Piper's [[ phoneme ]] blocks: the block's characters are the phonemes.
    // (On standard input: CLI11 2.1 splits an argument in brackets at its
    // commas, so "[[a]] b" as an argument would not arrive as written.)
    const auto r = run_etude("phonemize --voice " + quote(kVoice), "[[a]] b. c[[d]]\n");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto lines = lines_of(r.out);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0]["text"], "[[a]] b. c[[d]]");
    EXPECT_EQ(lines[0]["phonemes"].front(), "a");
    EXPECT_EQ(lines[0]["phonemes"].back(), "d");
}

TEST(PhonemizeCommand, voice_is_required) {
    const auto r = run_etude("phonemize hi");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("--voice is required"), std::string::npos) << r.err;
}
