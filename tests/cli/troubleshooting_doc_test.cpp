// docs/troubleshooting.md cannot drift from the program: every message it
// quotes is either re-run here, or found in the source that prints it, or
// marked as needing what CI lacks (with the reason). The marker scheme is
// described at the top of the guide; in short, the line before each ```text
// block is one of
//   <!-- check: exit=N [stdout] [needs=opencl|vulkan|no-audio-output] -->
//   <!-- source: PATH -->
//   <!-- not checked: WHY -->
// A checked block is a terminal session: "$ " lines are commands, the others
// what the etude command before them printed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"

namespace fs = std::filesystem;

namespace {

using etude::test::CliRun;
using etude::test::run_etude;
using etude::test::slurp;
using etude::test::tmpdir;

// ETUDE_TEST_DATA is <repository>/tests/data.
fs::path repo_root() {
    return fs::path(ETUDE_TEST_DATA).parent_path().parent_path();
}

struct QuotedBlock {
    enum Kind { Run, Source, Unchecked } kind = Unchecked;
    int line = 0;              // 1-based line of the ```text fence in the guide
    int exit_status = -1;      // Run: the status every etude command must exit with
    bool from_stdout = false;  // Run: the printed lines are on stdout, not stderr
    std::string needs;         // Run: "", "opencl", "vulkan" or "no-audio-output"
    std::string source;        // Source: a path relative to the repository
    std::vector<std::string> lines;
};

struct Guide {
    std::vector<QuotedBlock> blocks;
    std::vector<std::string> problems;  // malformed or missing markers
};

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// Reads the marker above a ```text fence; a malformed one is a problem, so
// a typo fails the test instead of silently skipping the block.
std::optional<QuotedBlock> parse_marker(const std::string& marker, int line,
                                        std::vector<std::string>& problems) {
    static const std::regex check(R"(^<!-- check: (.+) -->$)");
    static const std::regex source(R"(^<!-- source: (\S+) -->$)");
    static const std::regex unchecked(R"(^<!-- not checked: .+ -->$)");
    const std::string where = "line " + std::to_string(line) + ": ";
    QuotedBlock b;
    b.line = line;
    std::smatch m;
    if (std::regex_match(marker, m, check)) {
        b.kind = QuotedBlock::Run;
        std::istringstream words(m[1].str());
        for (std::string w; words >> w;) {
            if (w.rfind("exit=", 0) == 0 && w.size() > 5 &&
                w.find_first_not_of("0123456789", 5) == std::string::npos)
                b.exit_status = std::stoi(w.substr(5));
            else if (w == "stdout")
                b.from_stdout = true;
            else if (w == "needs=opencl" || w == "needs=vulkan" || w == "needs=no-audio-output")
                b.needs = w.substr(6);
            else
                problems.push_back(where + "unknown word '" + w + "' in the check marker");
        }
        if (b.exit_status < 0) problems.push_back(where + "the check marker has no exit=N");
        return b;
    }
    if (std::regex_match(marker, m, source)) {
        b.kind = QuotedBlock::Source;
        b.source = m[1];
        return b;
    }
    if (std::regex_match(marker, unchecked)) return b;
    problems.push_back(where + "a ```text block without a check, source or not-checked marker");
    return std::nullopt;
}

Guide parse_guide(const std::string& markdown) {
    Guide g;
    const auto lines = split_lines(markdown);
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const bool is_marker = lines[i].rfind("<!-- check", 0) == 0 ||
                               lines[i].rfind("<!-- source", 0) == 0 ||
                               lines[i].rfind("<!-- not checked", 0) == 0;
        if (is_marker && (i + 1 >= lines.size() || lines[i + 1] != "```text"))
            g.problems.push_back("line " + std::to_string(i + 1) +
                                 ": a marker not followed by a ```text fence");
        if (lines[i] != "```text") continue;
        const int line = static_cast<int>(i) + 1;
        auto block = parse_marker(i > 0 ? lines[i - 1] : "", line, g.problems);
        std::size_t j = i + 1;
        for (; j < lines.size() && lines[j] != "```"; ++j)
            if (block && !lines[j].empty()) block->lines.push_back(lines[j]);
        if (j == lines.size())
            g.problems.push_back("line " + std::to_string(line) + ": the fence is never closed");
        if (block) g.blocks.push_back(std::move(*block));
        i = j;
    }
    return g;
}

const Guide& guide() {
    static const Guide g = parse_guide(slurp(repo_root() / "docs" / "troubleshooting.md"));
    return g;
}

std::vector<QuotedBlock> blocks_of(QuotedBlock::Kind kind) {
    std::vector<QuotedBlock> out;
    for (const auto& b : guide().blocks)
        if (b.kind == kind) out.push_back(b);
    return out;
}

// One command line of a block: environment settings, then the program.
struct Command {
    std::vector<std::pair<std::string, std::string>> env;
    bool is_etude = false;
    std::string args;   // etude: everything after the program name
    std::string input;  // etude: the file named by a trailing "< FILE"
};

Command parse_command(const std::string& text) {
    // Settings (NAME=VALUE, no spaces), the program, its arguments.
    static const std::regex shape(R"(^((?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)(\S+)(.*)$)");
    static const std::regex setting(R"(([A-Za-z_][A-Za-z0-9_]*)=(\S*))");
    static const std::regex redirect(R"(^(.*\S)\s+<\s*(\S+)\s*$)");
    Command c;
    std::smatch m;
    if (!std::regex_match(text, m, shape)) return c;
    c.is_etude = m[2] == "build/cli/etude" || m[2] == "etude";
    if (!c.is_etude) return c;
    const std::string settings = m[1];
    for (std::sregex_iterator it(settings.begin(), settings.end(), setting), end; it != end; ++it)
        c.env.emplace_back((*it)[1], (*it)[2]);
    c.args = m[3];
    if (std::regex_match(c.args, m, redirect)) {
        c.input = slurp(m[2].str());
        c.args = m[1].str();
    }
    return c;
}

// Sets environment variables for one run and puts the old values back.
class ScopedEnvironment {
  public:
    explicit ScopedEnvironment(const std::vector<std::pair<std::string, std::string>>& env) {
        for (const auto& [name, value] : env) {
            const char* old = std::getenv(name.c_str());
            saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
            ::setenv(name.c_str(), value.c_str(), 1);
        }
    }
    ~ScopedEnvironment() {
        for (const auto& [name, old] : saved_) {
            if (old)
                ::setenv(name.c_str(), old->c_str(), 1);
            else
                ::unsetenv(name.c_str());
        }
    }

  private:
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A fresh folder to run a block in, where tests/ is the repository's (the
// guide's commands name tests/data/...), entered for the block's lifetime.
class ScratchFolder {
  public:
    explicit ScratchFolder(int line) : old_(fs::current_path()) {
        const fs::path dir = tmpdir() / ("troubleshooting-line-" + std::to_string(line));
        fs::remove_all(dir);
        fs::create_directories(dir);
        fs::create_directory_symlink(repo_root() / "tests", dir / "tests");
        fs::current_path(dir);
    }
    ~ScratchFolder() { fs::current_path(old_); }

  private:
    fs::path old_;
};

// What `etude devices` says about this build and machine, asked once.
const std::string& devices_report() {
    static const std::string report = run_etude("devices").out;
    return report;
}

bool opencl_built() {
    return devices_report().find("ETUDE_WITH_OPENCL=OFF") == std::string::npos;
}

bool vulkan_built() {
    return devices_report().find("this build has no Vulkan backend") == std::string::npos;
}

bool has_audio_output() {
    return devices_report().find("audio output devices:\n  (none)") == std::string::npos;
}

// Finds `line` as a whole line of `text` at or after `from`; returns the
// position after it, or npos.
std::size_t find_whole_line(const std::string& text, const std::string& line, std::size_t from) {
    const std::string padded = "\n" + text + (text.empty() || text.back() != '\n' ? "\n" : "");
    const std::size_t at = padded.find("\n" + line + "\n", from);
    return at == std::string::npos ? at : at + line.size() + 1;
}

const std::vector<QuotedBlock>& run_blocks() {
    static const std::vector<QuotedBlock> blocks = blocks_of(QuotedBlock::Run);
    return blocks;
}

std::vector<std::size_t> run_block_indices() {
    std::vector<std::size_t> indices(run_blocks().size());
    for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = i;
    return indices;
}

// The parameter is the block's position among the checked blocks: names and
// parameters that ctest lists when the tests are built stay the same when
// the text above a block changes.
class TroubleshootingGuide : public ::testing::TestWithParam<std::size_t> {};

TEST_P(TroubleshootingGuide, quoted_messages_are_what_etude_prints) {
    const QuotedBlock& b = run_blocks().at(GetParam());
    SCOPED_TRACE("the block at docs/troubleshooting.md line " + std::to_string(b.line));
    if (b.needs == "opencl" && !opencl_built()) GTEST_SKIP() << "this build has no OpenCL backend";
    if (b.needs == "vulkan" && !vulkan_built()) GTEST_SKIP() << "this build has no Vulkan backend";
    if (b.needs == "no-audio-output" && has_audio_output())
        GTEST_SKIP() << "this machine has an audio output device";

    ScratchFolder folder(b.line);
    int etude_runs = 0;
    std::string command, printed;
    std::size_t position = 0;  // printed lines must appear in order
    for (const std::string& line : b.lines) {
        if (line.rfind("$ ", 0) == 0) {
            command = line.substr(2);
            const Command c = parse_command(command);
            if (!c.is_etude) {
                ASSERT_EQ(std::system(command.c_str()), 0) << "setup command failed: " << command;
                continue;
            }
            ScopedEnvironment env(c.env);
            const CliRun r = run_etude(c.args, c.input);
            ++etude_runs;
            EXPECT_EQ(r.status, b.exit_status) << command << "\nstderr:\n" << r.err;
            printed = b.from_stdout ? r.out : r.err;
            position = 0;
            continue;
        }
        ASSERT_GT(etude_runs, 0) << "a printed line before any etude command: " << line;
        const std::size_t next = find_whole_line(printed, line, position);
        EXPECT_NE(next, std::string::npos)
            << "`" << command << "` did not print this line (in this order):\n  " << line
            << "\nit printed:\n"
            << printed;
        if (next != std::string::npos) position = next;
    }
    EXPECT_GT(etude_runs, 0) << "a checked block runs no etude command";
}

INSTANTIATE_TEST_SUITE_P(Guide, TroubleshootingGuide, ::testing::ValuesIn(run_block_indices()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                             return "block_" + std::to_string(info.param);
                         });

// The text of a source file's C++ string literals, one per line, adjacent
// literals joined as the compiler joins them ("a " "b" is "a b"). A quoted
// message must be one whole literal: it matches only what the program can
// print, not a comment or a fragment. Whole-line comments are dropped first,
// since a quote in one would pair wrongly.
std::string string_literal_text(const std::string& source) {
    static const std::regex adjacent(R"("\s*")");
    static const std::regex literal(R"re("((?:[^"\\\n]|\\.)*)")re");
    std::string code;
    for (const auto& line : split_lines(source)) {
        const auto first = line.find_first_not_of(" \t");
        if (first == std::string::npos || line.compare(first, 2, "//") != 0) code += line + "\n";
    }
    const std::string joined = std::regex_replace(code, adjacent, "");
    std::string text;
    for (std::sregex_iterator it(joined.begin(), joined.end(), literal), end; it != end; ++it)
        text += (*it)[1].str() + "\n";
    return text;
}

TEST(TroubleshootingGuideSource, messages_that_need_other_hardware_are_in_the_code) {
    const auto blocks = blocks_of(QuotedBlock::Source);
    ASSERT_FALSE(blocks.empty());
    for (const auto& b : blocks) {
        const fs::path path = repo_root() / b.source;
        ASSERT_TRUE(fs::exists(path)) << "line " << b.line << ": no file " << b.source;
        const std::string text = string_literal_text(slurp(path));
        for (const auto& line : b.lines)
            EXPECT_NE(find_whole_line(text, line, 0), std::string::npos)
                << "line " << b.line << ": " << b.source << " no longer says:\n  " << line;
    }
}

TEST(TroubleshootingGuideStructure, every_quoted_block_is_checked_or_says_why_not) {
    const Guide& g = guide();
    for (const auto& p : g.problems) ADD_FAILURE() << "docs/troubleshooting.md " << p;
    // A guide that fails to parse must not pass by checking nothing.
    EXPECT_GE(run_blocks().size(), 15u);
}

}  // namespace
