#include "cli/command_line.h"

#include <algorithm>
#include <sstream>

namespace etude::cli {
namespace {

constexpr std::size_t kWidth = 80;          // help lines stay narrower than this
constexpr std::size_t kMaxNameColumn = 24;  // longer option names push their text down a line

std::vector<std::string> split_names(const std::string& names) {
    std::vector<std::string> out;
    std::stringstream in(names);
    for (std::string n; std::getline(in, n, ',');) out.push_back(n);
    return out;
}

// "  -o, --output FILE" or "      --raw": short name first, long names aligned.
std::string name_column(const std::string& names, const std::string& value_name) {
    std::string shorts, longs;
    for (const auto& n : split_names(names)) {
        if (n.rfind("--", 0) == 0)
            longs += (longs.empty() ? "" : ", ") + n;
        else if (n[0] == '-')
            shorts += (shorts.empty() ? "" : ", ") + n;
        else
            longs += n;  // a positional's name
    }
    std::string col = "  " + (shorts.empty() ? std::string(names[0] == '-' ? "    " : "")
                                             : shorts + (longs.empty() ? "" : ", "));
    col += longs;
    if (!value_name.empty()) col += (longs.empty() && shorts.empty() ? "" : " ") + value_name;
    return col;
}

// Words of `text` wrapped before kWidth columns, starting at `first_column`; each
// line after the first indented by `indent`.
std::string wrap(const std::string& text, std::size_t indent, std::size_t first_column) {
    std::string out;
    std::size_t column = first_column;
    std::stringstream in(text);
    bool first = true;
    for (std::string word; in >> word;) {
        if (!first && column + 1 + word.size() >= kWidth) {
            out += "\n" + std::string(indent, ' ');
            column = indent;
        } else if (!first) {
            out += ' ';
            ++column;
        }
        out += word;
        column += word.size();
        first = false;
    }
    return out;
}

}  // namespace

CommandLine::CommandLine(std::string usage, std::string description)
    : app_(description, usage), usage_(std::move(usage)), description_(std::move(description)) {
    // Our own -h/--help flag: CLI11's would answer before the rest of the
    // line is checked, and docs/cli.md promises that a bad option beside
    // --help is still a usage error.
    app_.set_help_flag();
    app_.add_flag("-h,--help", help_);
}

CommandLine& CommandLine::group(std::string name) {
    group_ = std::move(name);
    return *this;
}

CommandLine::Entry& CommandLine::declare(const std::string& names, std::string value_name,
                                         const std::string& help) {
    auto entry = std::make_unique<Entry>();
    entry->names = names;
    entry->value_name = std::move(value_name);
    entry->help = help;
    entry->group = group_;
    for (const auto& n : split_names(names)) by_name_[n] = entry.get();
    entries_.push_back(std::move(entry));
    return *entries_.back();
}

CommandLine& CommandLine::option(const std::string& names, const std::string& value_name,
                                 const std::string& help) {
    Entry& e = declare(names, value_name, help);
    // One value per occurrence; every occurrence kept (the last one counts).
    app_.add_option(names, e.values, help)
        ->type_name(value_name)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    return *this;
}

CommandLine& CommandLine::flag(const std::string& names, const std::string& help) {
    Entry& e = declare(names, "", help);
    e.is_flag = true;
    app_.add_flag(names, e.count, help);
    return *this;
}

CommandLine& CommandLine::positionals(const std::string& value_name, const std::string& help) {
    positional_entry_ = &declare(value_name, "", help);
    app_.add_option("positional", positional_, help)->type_name(value_name);
    return *this;
}

CommandLine& CommandLine::footer(std::string text) {
    footer_ = std::move(text);
    return *this;
}

namespace {
// Put before a bracketed positional word so that CLI11 does not split it
// (parse()); a control character no text starts with.
constexpr char kBracketMark = '\x1f';
}  // namespace

bool CommandLine::parse(int argc, char** argv, int first) {
    // CLI11 would take "--raw=1" as a flag's count: a flag takes no value.
    for (int i = first; i < argc && std::string(argv[i]) != "--"; ++i) {
        const std::string word = argv[i];
        const auto eq = word.find('=');
        if (word.rfind("--", 0) != 0 || eq == std::string::npos) continue;
        const auto it = by_name_.find(word.substr(0, eq));
        if (word.substr(0, eq) == "--help" || (it != by_name_.end() && it->second->is_flag))
            throw UsageError("option " + word.substr(0, eq) + " takes no value");
    }
    // CLI11 2.1 takes a whole word in brackets, "[Hello, world]", given to a
    // list option (the positionals) for a list literal, and splits it at its
    // commas, which are lost. Such a word among the positionals is handed
    // over with a mark before its bracket, taken off after.
    std::vector<std::string> words(argv + first - 1, argv + argc);
    bool options_done = false;
    for (std::size_t i = 1; i < words.size(); ++i) {
        const std::string& word = words[i];
        if (!options_done && word == "--") {
            options_done = true;
        } else if (!options_done && word.size() > 1 && word[0] == '-') {
            const auto it = by_name_.find(word);  // "--rate 8000": the value is no positional
            if (it != by_name_.end() && !it->second->is_flag) ++i;
        } else if (word.size() >= 2 && word.front() == '[' && word.back() == ']') {
            words[i].insert(0, 1, kBracketMark);
        }
    }
    std::vector<char*> marked;
    for (auto& w : words) marked.push_back(w.data());
    // CLI11 skips argv[0] as the program's name: hand it the word before `first`.
    try {
        app_.parse(static_cast<int>(marked.size()), marked.data());
    } catch (const CLI::ExtrasError&) {
        const auto extra = app_.remaining();
        std::string word = extra.empty() ? "?" : extra.front();
        if (!word.empty() && word.front() == kBracketMark) word.erase(0, 1);
        if (word.size() > 1 && word[0] == '-')
            throw UsageError("unknown option " + word.substr(0, word.find('=')));
        throw UsageError("unexpected argument '" + word + "'");
    } catch (const CLI::ArgumentMismatch& e) {
        // "--rate: 1 required HZ missing": the value after the option is absent.
        const std::string what = e.what();
        throw UsageError("option " + what.substr(0, what.find(':')) + " needs a value");
    } catch (const CLI::ParseError& e) {
        throw UsageError(e.what());
    }
    for (auto& p : positional_)
        if (!p.empty() && p.front() == kBracketMark) p.erase(0, 1);
    if (help_ == 0) return true;
    std::fputs(help().c_str(), stdout);
    return false;
}

std::string CommandLine::help() const {
    std::vector<std::string> groups;
    for (const auto& e : entries_)
        if (e.get() != positional_entry_ &&
            std::find(groups.begin(), groups.end(), e->group) == groups.end())
            groups.push_back(e->group);
    if (std::find(groups.begin(), groups.end(), "options") == groups.end())
        groups.push_back("options");

    std::size_t column = 0;
    auto names_of = [](const Entry& e) { return name_column(e.names, e.value_name); };
    for (const auto& e : entries_)
        if (names_of(*e).size() <= kMaxNameColumn) column = std::max(column, names_of(*e).size());
    column = std::max(column, std::string("  -h, --help").size()) + 2;

    auto line = [&](const std::string& names, const std::string& text) {
        std::string out = names;
        if (names.size() + 2 > column) {
            out += "\n" + std::string(column, ' ');
        } else {
            out += std::string(column - names.size(), ' ');
        }
        return out + wrap(text, column, column) + "\n";
    };

    std::string out = "usage: " + usage_ + "\n\n" + description_ + "\n";
    if (positional_entry_) {
        out += "\narguments:\n";
        out += line("  " + positional_entry_->names, positional_entry_->help);
    }
    for (const auto& g : groups) {
        out += "\n" + g + ":\n";
        for (const auto& e : entries_)
            if (e.get() != positional_entry_ && e->group == g) out += line(names_of(*e), e->help);
        if (g == "options") out += line("  -h, --help", "print this help and exit");
    }
    if (!footer_.empty()) out += "\n" + footer_;
    return out;
}

const CommandLine::Entry& CommandLine::find(const std::string& name) const {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) throw std::logic_error("option " + name + " was never declared");
    return *it->second;
}

bool CommandLine::flag(const std::string& name) const {
    if (name == "-h" || name == "--help") return help_ > 0;
    return find(name).count > 0;
}

std::optional<std::string> CommandLine::value(const std::string& name) const {
    const auto& v = find(name).values;
    if (v.empty()) return std::nullopt;
    return v.back();
}

std::vector<std::string> CommandLine::values(const std::string& name) const {
    return find(name).values;
}

std::string CommandLine::value_or(const std::string& name, const std::string& fallback) const {
    return value(name).value_or(fallback);
}

double parse_number(const std::string& option, const std::string& text) {
    std::size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || text.empty())
        throw UsageError("option " + option + " expects a number, got '" + text + "'");
    return v;
}

}  // namespace etude::cli
