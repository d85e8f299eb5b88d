// A small command-line parser for the etude subcommands: options with
// values (-o FILE, --rate=HZ or --rate HZ), flags, and positional words.
#pragma once

#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace etude::cli {

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Args {
  public:
    // value_options: names taking a value; flags: names that do not. Names
    // include their dashes ("-o", "--rate"). Throws UsageError.
    Args(int argc, char** argv, int first, const std::set<std::string>& value_options,
         const std::set<std::string>& flags) {
        for (int i = first; i < argc; ++i) {
            std::string a = argv[i];
            if (a == "--") {
                for (++i; i < argc; ++i) positional_.emplace_back(argv[i]);
                break;
            }
            if (a.size() > 1 && a[0] == '-' &&
                !(a.size() > 1 && std::isdigit(static_cast<unsigned char>(a[1])))) {
                std::string name = a, value;
                bool has_value = false;
                if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
                    name = a.substr(0, eq);
                    value = a.substr(eq + 1);
                    has_value = true;
                }
                if (flags.count(name)) {
                    if (has_value) throw UsageError("option " + name + " takes no value");
                    flags_.insert(name);
                } else if (value_options.count(name)) {
                    if (!has_value) {
                        if (i + 1 >= argc) throw UsageError("option " + name + " needs a value");
                        value = argv[++i];
                    }
                    values_[name].push_back(value);
                } else {
                    throw UsageError("unknown option " + name);
                }
            } else {
                positional_.push_back(a);
            }
        }
    }

    bool flag(const std::string& name) const { return flags_.count(name) > 0; }
    std::optional<std::string> value(const std::string& name) const {
        auto it = values_.find(name);
        if (it == values_.end()) return std::nullopt;
        return it->second.back();
    }
    // Every value given for a repeatable option, in order.
    std::vector<std::string> values(const std::string& name) const {
        auto it = values_.find(name);
        return it == values_.end() ? std::vector<std::string>{} : it->second;
    }
    std::string value_or(const std::string& name, const std::string& fallback) const {
        return value(name).value_or(fallback);
    }
    const std::vector<std::string>& positional() const { return positional_; }

  private:
    std::set<std::string> flags_;
    std::map<std::string, std::vector<std::string>> values_;
    std::vector<std::string> positional_;
};

// Parses a whole decimal number; throws UsageError naming the option.
inline double parse_number(const std::string& option, const std::string& text) {
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
