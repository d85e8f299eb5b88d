// `etude say --ssml` and `--timings`: SSML spoken with its marks and words written as
// JSON lines at the output's sample positions; bad combinations and paths
// refused before any work.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "support/cli_runner.h"
#include "support/wav_file.h"

namespace fs = std::filesystem;

namespace {

using etude::test::CliRun;
using etude::test::quote;
using etude::test::run_etude;
using etude::test::slurp;
using etude::test::tmpdir;

const auto read_wav = etude::test::read_wav<short>;

}  // namespace

TEST(CliSaySsml, marks_are_written_at_their_samples_and_breaks_are_silence) {
    const fs::path wav = tmpdir() / "ssml.wav", timings = tmpdir() / "ssml.jsonl";
    const fs::path first = tmpdir() / "ssml_first.wav";
    ASSERT_EQ(run_etude("say " + quote("The lights are off.") + " -o " + first.string()).status, 0);
    const std::string doc =
        "<speak>The lights are off.<mark name=\"a\"/><break time=\"500ms\"/>"
        "<mark name=\"b\"/>The door &amp; the gate are <say-as "
        "interpret-as=\"characters\">ok</say-as>.<mark name=\"end\"/></speak>";
    const CliRun r = run_etude("say --ssml " + quote(doc) + " -o " + wav.string() + " --timings " +
                               timings.string());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto audio = read_wav(wav).samples;
    const auto one = read_wav(first).samples.size();
    std::istringstream lines(slurp(timings));
    std::vector<nlohmann::json> marks;
    std::vector<std::string> words;
    std::uint64_t previous = 0;
    for (std::string line; std::getline(lines, line);) {
        auto j = nlohmann::json::parse(line);
        EXPECT_GE(j["sample"].get<std::uint64_t>(), previous) << line;  // in the order heard
        previous = j["sample"].get<std::uint64_t>();
        if (j["type"] == "word") {
            // Each word's start: the first sentence's before mark "a", the
            // second's after mark "b".
            EXPECT_EQ(j["sample"].get<std::uint64_t>() < one, words.size() < 4) << line;
            words.push_back(j["name"]);
        } else {
            marks.push_back(j);
        }
    }
    EXPECT_EQ(words, (std::vector<std::string>{"The", "lights", "are", "off", "The", "door", "the",
                                               "gate", "are", "o", "k"}));
    ASSERT_EQ(marks.size(), 3u);
    EXPECT_EQ(marks[0]["type"], "mark");
    EXPECT_EQ(marks[0]["name"], "a");
    EXPECT_EQ(marks[0]["sample"], one);
    EXPECT_DOUBLE_EQ(marks[0]["seconds"].get<double>(), static_cast<double>(one) / 16000.0);
    EXPECT_EQ(marks[1]["name"], "b");
    EXPECT_EQ(marks[1]["sample"], one + 8000);
    EXPECT_EQ(marks[2]["name"], "end");
    EXPECT_EQ(marks[2]["sample"], audio.size());
    for (std::size_t i = one; i < one + 8000; ++i) ASSERT_EQ(audio[i], 0) << i;
}

TEST(CliSaySsml, bad_combinations_and_paths_are_refused_before_speaking) {
    const fs::path wav = tmpdir() / "ssml_bad.wav";
    fs::remove(wav);
    CliRun r = run_etude("say --ssml --json-input -o " + wav.string() + " < /dev/null");
    EXPECT_EQ(r.status, 2) << r.err;
    r = run_etude("say --ssml " + quote("<speak>Hi.<mark name=\"m\"/></speak>") +
                  " --timings /nonexistent-dir/t.jsonl -o " + wav.string());
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("cannot write timings file '/nonexistent-dir/t.jsonl'"), std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(wav));
    const std::string long_name(64, 'x');
    const fs::path timings = tmpdir() / "ssml_bad.jsonl";
    r = run_etude("say --ssml " + quote("<speak>Hi.<mark name=\"" + long_name + "\"/></speak>") +
                  " --timings " + timings.string() + " -o " + wav.string());
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("mark name longer than 63 bytes"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(wav));
    EXPECT_FALSE(fs::exists(timings));
    EXPECT_FALSE(fs::exists(timings.string() + ".partial"));
}

TEST(CliSaySsml, malformed_ssml_is_spoken_as_text) {
    const fs::path a = tmpdir() / "ssml_malformed.wav", b = tmpdir() / "ssml_plain.wav";
    ASSERT_EQ(
        run_etude("say --ssml " + quote("<speak>Hello <b>world") + " -o " + a.string()).status, 0);
    ASSERT_EQ(run_etude("say " + quote("Hello world") + " -o " + b.string()).status, 0);
    EXPECT_EQ(read_wav(a).samples, read_wav(b).samples);
}
