// The etude subcommands' command lines: each command declares its options
// with a description (CLI11 parses them), reads the values back by any of an
// option's names, and gets its --help text generated from the same
// declarations, so help and parser cannot disagree. Also the errors and exit
// statuses every command shares.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace etude::cli {

// A mistake on the command line: exit status 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class CommandLine {
  public:
    // usage: the first help line without "usage: " ("etude say [TEXT...]
    // [options]"); description: the paragraph under it.
    CommandLine(std::string usage, std::string description);
    CommandLine(const CommandLine&) = delete;
    CommandLine& operator=(const CommandLine&) = delete;

    // Options declared after this are listed under "name:" in the help.
    CommandLine& group(std::string name);
    // An option with a value. names: "-o,--output" or "--rate"; value_name:
    // "FILE", "HZ"; help: what it does and its default. May be repeated;
    // value() gives the last, values() all.
    CommandLine& option(const std::string& names, const std::string& value_name,
                        const std::string& help);
    CommandLine& flag(const std::string& names, const std::string& help);
    // Every word that is not an option (all words after "--" too). Without
    // this declaration such a word is a usage error.
    CommandLine& positionals(const std::string& value_name, const std::string& help);
    // Text after the options (exit status, examples); ends with a newline.
    CommandLine& footer(std::string text);

    // Parses argv[first..]. Returns false when -h/--help was given: the help
    // is then printed to standard output (the rest of the line was parsed
    // first, so a bad option beside --help is still an error). Throws
    // UsageError.
    bool parse(int argc, char** argv, int first = 2);
    std::string help() const;

    // By any name of an option ("-o" or "--output"); a name that was never
    // declared is a programming error (std::logic_error).
    bool flag(const std::string& name) const;
    std::optional<std::string> value(const std::string& name) const;
    std::vector<std::string> values(const std::string& name) const;
    std::string value_or(const std::string& name, const std::string& fallback) const;
    const std::vector<std::string>& positional() const { return positional_; }

  private:
    struct Entry {
        std::string names;  // as declared, "-o,--output"
        std::string value_name;
        std::string help;
        std::string group;
        std::vector<std::string> values;
        bool is_flag = false;
        int count = 0;  // flags: how often given
    };
    Entry& declare(const std::string& names, std::string value_name, const std::string& help);
    const Entry& find(const std::string& name) const;

    CLI::App app_;
    std::string usage_, description_, footer_, group_ = "options";
    std::vector<std::unique_ptr<Entry>> entries_;  // in declaration order
    std::map<std::string, Entry*> by_name_;
    std::vector<std::string> positional_;
    Entry* positional_entry_ = nullptr;
    int help_ = 0;
};

// Parses a whole decimal number; throws UsageError naming the option.
double parse_number(const std::string& option, const std::string& text);

// Runs a subcommand body, turning exceptions into one line on stderr and the
// documented exit status: 2 for usage errors, 1 for everything else.
template <typename Body>
int run_command(const char* name, Body&& body) {
    try {
        return body();
    } catch (const UsageError& e) {
        std::fprintf(stderr, "etude %s: %s (see 'etude %s --help')\n", name, e.what(), name);
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "etude %s: %s\n", name, e.what());
        return 1;
    }
}

}  // namespace etude::cli
