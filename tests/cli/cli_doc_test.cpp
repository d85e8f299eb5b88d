// The user documentation cannot drift from the program and the headers:
// docs/cli.md quotes the --help output of `etude` and of every command that
// `etude --help` lists, verbatim; docs/api.md describes every function of the
// C API (engine/etude.h) and names only C and C++ API members that exist.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"

namespace fs = std::filesystem;

namespace {

using etude::test::CliRun;
using etude::test::quote;
using etude::test::run_etude;
using etude::test::slurp;

// ETUDE_TEST_DATA is <repository>/tests/data.
fs::path repo_root() {
    return fs::path(ETUDE_TEST_DATA).parent_path().parent_path();
}

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// The blocks of a Markdown file that a line `<!-- help: NAME -->` marks: the
// ```text fence right after the marker, its content with every line ending
// in '\n', as a program prints it. Malformed markers land in `problems`, so
// a broken section fails the test instead of being skipped.
struct HelpBlocks {
    std::map<std::string, std::string> by_name;
    std::vector<std::string> problems;
};

HelpBlocks find_help_blocks(const std::string& markdown) {
    static const std::regex marker(R"(^<!-- help: (.+?) -->\s*$)");
    HelpBlocks found;
    const auto lines = split_lines(markdown);
    for (std::size_t i = 0; i < lines.size(); ++i) {
        std::smatch m;
        if (!std::regex_match(lines[i], m, marker)) continue;
        const std::string name = m[1];
        if (i + 1 >= lines.size() || lines[i + 1] != "```text") {
            found.problems.push_back("line " + std::to_string(i + 1) + ": the marker for '" + name +
                                     "' is not followed by a ```text fence");
            continue;
        }
        std::string body;
        std::size_t j = i + 2;
        while (j < lines.size() && lines[j] != "```") body += lines[j++] + "\n";
        if (j == lines.size()) {
            found.problems.push_back("line " + std::to_string(i + 2) + ": the ```text block of '" +
                                     name + "' is never closed");
            continue;
        }
        if (!found.by_name.emplace(name, body).second)
            found.problems.push_back("line " + std::to_string(i + 1) + ": a second block for '" +
                                     name + "'");
        i = j;
    }
    return found;
}

// The commands `etude --help` lists: the first word of each indented line
// under "commands:", up to the next blank line.
std::vector<std::string> listed_commands(const std::string& usage) {
    static const std::regex entry(R"(^  ([a-z][a-z0-9-]*)\s{2,}\S.*$)");
    std::vector<std::string> commands;
    bool in_list = false;
    for (const auto& line : split_lines(usage)) {
        if (line == "commands:") {
            in_list = true;
        } else if (in_list && line.empty()) {
            break;
        } else if (std::smatch m; in_list && std::regex_match(line, m, entry)) {
            commands.push_back(m[1]);
        }
    }
    return commands;
}

// A line diff from `expected` to `actual` (longest common subsequence):
// "- " lines are only in `expected`, "+ " lines only in `actual`, with two
// lines of context around each change. Empty when the texts are equal.
std::string line_diff(const std::string& expected, const std::string& actual) {
    const auto a = split_lines(expected), b = split_lines(actual);
    const std::size_t n = a.size(), m = b.size();
    // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
    std::vector<std::vector<std::size_t>> lcs(n + 1, std::vector<std::size_t>(m + 1, 0));
    for (std::size_t i = n; i-- > 0;)
        for (std::size_t j = m; j-- > 0;)
            lcs[i][j] =
                a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    std::vector<std::string> ops;  // "  ", "- " or "+ " followed by the line
    std::size_t i = 0, j = 0;
    while (i < n || j < m) {
        if (i < n && j < m && a[i] == b[j]) {
            ops.push_back("  " + a[i++]);
            ++j;
        } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
            ops.push_back("- " + a[i++]);  // removals first, as diff prints them
        } else {
            ops.push_back("+ " + b[j++]);
        }
    }
    // The texts may also differ only in a final newline, which lines hide.
    const bool newline_differs =
        (expected.empty() || expected.back() == '\n') != (actual.empty() || actual.back() == '\n');
    if (std::none_of(ops.begin(), ops.end(), [](const std::string& op) { return op[0] != ' '; }))
        return newline_differs ? "(the texts differ only in the final newline)\n" : "";
    constexpr std::size_t kContext = 2;
    std::string out;
    std::size_t shown_up_to = 0;  // ops before this index were printed or skipped
    for (std::size_t k = 0; k < ops.size(); ++k) {
        if (ops[k][0] == ' ') continue;
        const std::size_t from = std::max(shown_up_to, k >= kContext ? k - kContext : 0);
        if (from > shown_up_to) out += "  ...\n";
        std::size_t to = k;
        // Extend over following changes that are within the context distance.
        for (std::size_t next = k + 1; next < ops.size() && next <= to + 2 * kContext + 1; ++next)
            if (ops[next][0] != ' ') to = next;
        to = std::min(ops.size() - 1, to + kContext);
        for (std::size_t x = from; x <= to; ++x) out += ops[x] + "\n";
        shown_up_to = to + 1;
        k = to;
    }
    if (shown_up_to < ops.size()) out += "  ...\n";
    if (newline_differs) out += "(and the texts differ in the final newline)\n";
    return out;
}

// Checks the block `name` of docs/cli.md against the output of
// `etude [CMD] --help` (`cmd` empty: the top-level usage).
void expect_help_quoted(const HelpBlocks& doc, const std::string& name, const std::string& cmd) {
    const std::string command = "etude " + (cmd.empty() ? "" : cmd + " ") + "--help";
    const CliRun run = run_etude((cmd.empty() ? "" : quote(cmd) + " ") + "--help");
    ASSERT_EQ(run.status, 0) << command << " failed: " << run.err;
    ASSERT_FALSE(run.out.empty()) << command << " printed nothing";
    const auto it = doc.by_name.find(name);
    ASSERT_TRUE(it != doc.by_name.end())
        << "docs/cli.md has no section for '" << name << "': add a line '<!-- help: " << name
        << " -->' followed by a ```text block holding the output of '" << command << "'";
    // EXPECT_TRUE, not EXPECT_EQ: the diff says more than two whole help texts.
    EXPECT_TRUE(it->second == run.out)
        << "docs/cli.md: the help of '" << name << "' drifted from '" << command
        << "'. Diff (- docs/cli.md, + the program):\n"
        << line_diff(it->second, run.out) << "Paste the output of '" << command
        << "' into the block after '<!-- help: " << name << " -->'.";
}

// `text` without its /* */ and // comments, so that a name mentioned in a
// comment does not count as declared. (A scan, not a regex: libstdc++'s
// regex recurses per character and long comments could exhaust the stack.)
std::string without_comments(const std::string& text) {
    std::string code;
    for (std::size_t i = 0; i < text.size();) {
        if (text.compare(i, 2, "//") == 0) {
            i = text.find('\n', i);
            if (i == std::string::npos) break;
        } else if (text.compare(i, 2, "/*") == 0) {
            const std::size_t end = text.find("*/", i + 2);
            i = end == std::string::npos ? text.size() : end + 2;
            code += ' ';
        } else {
            code += text[i++];
        }
    }
    return code;
}

// Every match of `pattern`'s first group in `text`.
std::set<std::string> names_matching(const std::string& text, const std::string& pattern) {
    const std::regex re(pattern);
    std::set<std::string> names;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
         ++it)
        names.insert((*it)[1]);
    return names;
}

}  // namespace

TEST(CliDoc, help_blocks_and_line_diff_report_a_drift) {
    const auto doc = find_help_blocks(
        "# Title\n<!-- help: etude x -->\n```text\nusage: etude x\n\n  -a   all\n```\n"
        "<!-- help: etude y -->\nno fence\n<!-- help: etude z -->\n```text\nnever closed\n");
    ASSERT_EQ(doc.by_name.count("etude x"), 1u);
    EXPECT_EQ(doc.by_name.at("etude x"), "usage: etude x\n\n  -a   all\n");
    EXPECT_EQ(doc.by_name.count("etude y") + doc.by_name.count("etude z"), 0u);
    ASSERT_EQ(doc.problems.size(), 2u);
    EXPECT_NE(doc.problems[0].find("'etude y' is not followed"), std::string::npos);
    EXPECT_NE(doc.problems[1].find("'etude z' is never closed"), std::string::npos);

    EXPECT_EQ(line_diff("a\nb\n", "a\nb\n"), "");
    EXPECT_EQ(line_diff("a\nold\nc\n", "a\nnew\nc\nd\n"), "  a\n- old\n+ new\n  c\n+ d\n");
    EXPECT_NE(line_diff("a\n", "a").find("final newline"), std::string::npos);
    EXPECT_EQ(listed_commands("usage\n\ncommands:\n  say   speak\n  x-y   z\n\n  no   more\n"),
              (std::vector<std::string>{"say", "x-y"}));
}

TEST(CliDoc, cli_md_quotes_the_top_level_help_verbatim) {
    const auto doc = find_help_blocks(slurp(repo_root() / "docs/cli.md"));
    EXPECT_TRUE(doc.problems.empty()) << ::testing::PrintToString(doc.problems);
    expect_help_quoted(doc, "etude", "");
}

TEST(CliDoc, cli_md_quotes_the_help_of_every_listed_command_verbatim) {
    const CliRun usage = run_etude("--help");
    ASSERT_EQ(usage.status, 0) << usage.err;
    const auto commands = listed_commands(usage.out);
    // Guards the parser: the list cannot silently come back empty.
    ASSERT_TRUE(std::find(commands.begin(), commands.end(), "say") != commands.end())
        << "no 'say' among the commands parsed from etude --help:\n"
        << usage.out;
    const auto doc = find_help_blocks(slurp(repo_root() / "docs/cli.md"));
    EXPECT_TRUE(doc.problems.empty()) << ::testing::PrintToString(doc.problems);
    for (const auto& cmd : commands) {
        SCOPED_TRACE("etude " + cmd);
        expect_help_quoted(doc, "etude " + cmd, cmd);
    }
}

TEST(CliDoc, cli_md_documents_no_command_the_program_lacks) {
    const CliRun usage = run_etude("--help");
    ASSERT_EQ(usage.status, 0) << usage.err;
    const auto listed = listed_commands(usage.out);
    const auto doc = find_help_blocks(slurp(repo_root() / "docs/cli.md"));
    ASSERT_FALSE(doc.by_name.empty()) << "docs/cli.md has no <!-- help: ... --> blocks";
    for (const auto& [name, body] : doc.by_name) {
        if (name == "etude") continue;
        const std::string cmd = name.rfind("etude ", 0) == 0 ? name.substr(6) : name;
        EXPECT_TRUE(std::find(listed.begin(), listed.end(), cmd) != listed.end())
            << "docs/cli.md has a section '" << name
            << "' but 'etude --help' lists no such command";
    }
}

TEST(ApiDoc, api_md_describes_every_function_of_the_c_api) {
    const auto functions = names_matching(without_comments(slurp(repo_root() / "engine/etude.h")),
                                          R"(\b(etude_[a-z0-9_]+)\s*\()");
    ASSERT_TRUE(functions.count("etude_stream_pull"))
        << "the declarations of engine/etude.h were not found";
    const auto mentioned = names_matching(slurp(repo_root() / "docs/api.md"),
                                          R"((?:^|[^A-Za-z0-9_])(etude_[a-z0-9_]+))");
    for (const auto& f : functions)
        EXPECT_TRUE(mentioned.count(f)) << "docs/api.md does not mention " << f << "() of etude.h";
}

TEST(ApiDoc, api_md_names_only_c_api_names_that_exist) {
    const auto declared = names_matching(without_comments(slurp(repo_root() / "engine/etude.h")),
                                         R"(\b((?:etude|ETUDE)_[A-Za-z0-9_]+))");
    const auto named = names_matching(slurp(repo_root() / "docs/api.md"),
                                      R"((?:^|[^A-Za-z0-9_])((?:etude|ETUDE)_[A-Za-z0-9_]+))");
    ASSERT_FALSE(named.empty()) << "docs/api.md names nothing of the C API";
    for (const auto& name : named)
        EXPECT_TRUE(declared.count(name))
            << "docs/api.md names " << name << ", which engine/etude.h does not declare";
}

TEST(ApiDoc, api_md_names_only_cpp_members_that_exist) {
    // StreamOptions lives in a header of its own, which engine.h includes.
    const std::string header = without_comments(slurp(repo_root() / "engine/engine.h")) +
                               without_comments(slurp(repo_root() / "engine/stream_options.h"));
    const auto named =
        names_matching(slurp(repo_root() / "docs/api.md"),
                       R"(\b((?:Engine|Stream|StreamOptions|BuiltinVoiceOptions|PiperVoiceOptions|)"
                       R"(MelVoiceOptions|StreamStats|BlockRecord)::\w+))");
    ASSERT_FALSE(named.empty()) << "docs/api.md names no Engine:: or Stream:: member";
    for (const auto& qualified : named) {
        const std::string member = qualified.substr(qualified.find("::") + 2);
        // Declared: a function `name(`, a field `name =`/`name;`/`name,`, or a nested type.
        const std::regex declaration("\\b" + member + "\\s*[(=;,{]|\\b(struct|enum|class)\\s+" +
                                     member + "\\b");
        EXPECT_TRUE(std::regex_search(header, declaration))
            << "docs/api.md names " << qualified
            << ", which engine/engine.h and engine/stream_options.h do not declare";
    }
}
