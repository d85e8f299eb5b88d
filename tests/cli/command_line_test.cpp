// The conventions docs/cli.md promises for every command's options, through
// the etude program: how values are given, what counts when an option is
// repeated, what "--" does, and that each kind of mistake is a one-line usage
// error (exit status 2) naming the word and pointing to the command's help.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_runner.h"

namespace fs = std::filesystem;

namespace {

using etude::test::CliRun;
using etude::test::run_etude;
using etude::test::tmpdir;

void expect_usage_error(const std::string& args, const std::string& message,
                        const std::string& command) {
    const CliRun r = run_etude(args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_EQ(r.err,
              "etude " + command + ": " + message + " (see 'etude " + command + " --help')\n")
        << args;
    EXPECT_TRUE(r.out.empty()) << args << ": " << r.out;
}

std::string wav(const std::string& name) {
    return (tmpdir() / name).string();
}

}  // namespace

TEST(CliOptions, each_kind_of_mistake_is_a_one_line_usage_error) {
    expect_usage_error("say hi --bogus", "unknown option --bogus", "say");
    expect_usage_error("say hi --bogus=3", "unknown option --bogus", "say");
    expect_usage_error("say hi -o", "option --output needs a value", "say");
    expect_usage_error("say hi --raw=1", "option --raw takes no value", "say");
    expect_usage_error("voices extra", "unexpected argument 'extra'", "voices");
    expect_usage_error("vocode stray.npy", "unexpected argument 'stray.npy'", "vocode");
    // The whole line is checked before help is printed.
    expect_usage_error("say --bogus --help", "unknown option --bogus", "say");
}

TEST(CliOptions, values_follow_as_a_word_after_equals_or_attached_to_a_short_name) {
    for (const std::string& form : {"-o " + wav("a.wav"), "--output " + wav("b.wav"),
                                    "--output=" + wav("c.wav"), "-o" + wav("d.wav")}) {
        const CliRun r = run_etude("say Hi. " + form);
        EXPECT_EQ(r.status, 0) << form << ": " << r.err;
    }
    for (const char* name : {"a.wav", "b.wav", "c.wav", "d.wav"})
        EXPECT_GT(fs::file_size(tmpdir() / name), 1000u) << name;
}

TEST(CliOptions, the_last_of_a_repeated_option_counts) {
    EXPECT_EQ(run_etude("say Hi. --voice nobody --voice rms -o " + wav("e.wav")).status, 0);
    const CliRun r = run_etude("say Hi. --voice rms --voice nobody -o " + wav("f.wav"));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("nobody"), std::string::npos) << r.err;
}

TEST(CliOptions, words_after_a_double_dash_and_negative_numbers_are_text) {
    // Were "-o" after "--" an option, the WAV would go to "late.wav".
    const CliRun r = run_etude("say -o " + wav("g.wav") + " -- -dash-first -o " + wav("late.wav"));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(fs::exists(tmpdir() / "g.wav"));
    EXPECT_FALSE(fs::exists(tmpdir() / "late.wav"));
    EXPECT_EQ(run_etude("say -3 degrees -o " + wav("h.wav")).status, 0);
}

TEST(CliOptions, help_lists_every_option_with_what_it_does) {
    const CliRun r = run_etude("say --help");
    ASSERT_EQ(r.status, 0) << r.err;
    for (const char* line :
         {"  -o, --output FILE      write a WAV file", "      --raw              ",
          "      --latency-ms MS    ", "(default 100)", "  -h, --help  "})
        EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
}
