#include "speechd/symbol_table.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace etude::speechd {

namespace {

std::optional<SymbolLevel> level_named(std::string_view name) {
    if (name == "none") return SymbolLevel::None;
    if (name == "some") return SymbolLevel::Some;
    if (name == "most") return SymbolLevel::Most;
    if (name == "all") return SymbolLevel::All;
    if (name == "char") return SymbolLevel::Char;
    return std::nullopt;
}

// The identifier field's escapes (NVDA's format): \# for a '#', which
// would begin a comment, \\ for a backslash, \t \n \r \f \0 for those.
std::string unescape(std::string_view field) {
    std::string out;
    for (std::size_t i = 0; i < field.size(); ++i) {
        if (field[i] != '\\' || i + 1 == field.size()) {
            out += field[i];
            continue;
        }
        const char c = field[++i];
        out += c == 't'   ? '\t'
               : c == 'n' ? '\n'
               : c == 'r' ? '\r'
               : c == 'f' ? '\f'
               : c == '0' ? '\0'
                          : c;
    }
    return out;
}

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (;;) {
        const std::size_t tab = line.find('\t', start);
        fields.push_back(line.substr(start, tab - start));
        if (tab == std::string::npos) return fields;
        start = tab + 1;
    }
}

// A literal string as a PCRE2 pattern: ASCII punctuation escaped.
std::string quote(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c < 0x80 && !std::isalnum(c) && c != ' ') out += '\\';
        out += static_cast<char>(c);
    }
    return out;
}

}  // namespace

std::optional<SymbolLevel> punctuation_level(std::string_view mode) {
    if (mode == "char") return std::nullopt;  // not a punctuation mode
    return level_named(mode);
}

struct SymbolTable::Pattern {
    pcre2_code* code = nullptr;
    pcre2_match_data* match = nullptr;  // speak() is const: guarded by mu
    std::mutex mu;
    std::vector<int> complex_groups;  // group number of c<i>
    ~Pattern() {
        if (match) pcre2_match_data_free(match);
        if (code) pcre2_code_free(code);
    }
};

SymbolTable::SymbolTable(const std::vector<File>& files) {
    std::vector<std::pair<std::string, std::string>> complex;
    for (const File& f : files) read(f, complex);
    compile(complex);
}

void SymbolTable::read(const File& file,
                       std::vector<std::pair<std::string, std::string>>& complex) {
    std::istringstream in(file.text);
    enum { Outside, Complex, Simple } section = Outside;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line[0] == '#') continue;
        if (line == "complexSymbols:") {
            section = Complex;
            continue;
        }
        if (line == "symbols:") {
            section = Simple;
            continue;
        }
        const std::string where = file.source + ":" + std::to_string(number);
        auto fields = split_tabs(line);
        // A field from '#' on is the display name, a comment.
        for (std::size_t i = 1; i < fields.size(); ++i)
            if (!fields[i].empty() && fields[i][0] == '#') fields.resize(i);
        if (section == Complex) {
            if (fields.size() != 2 || fields[1].empty()) {
                problems_.push_back(where + ": a complex symbol needs a name and a pattern");
                continue;
            }
            const std::string id = unescape(fields[0]);
            const auto same = std::find_if(complex.begin(), complex.end(),
                                           [&](const auto& c) { return c.first == id; });
            if (same != complex.end())
                same->second = fields[1];
            else
                complex.emplace_back(id, fields[1]);
            continue;
        }
        if (section != Simple || fields.size() < 2 || fields[0].empty()) {
            problems_.push_back(where + ": not a symbol line");
            continue;
        }
        Symbol sym;
        if (fields[1] != "-") sym.replacement = fields[1];
        if (fields.size() > 2 && fields[2] != "-" && !fields[2].empty()) {
            const auto level = level_named(fields[2]);
            if (!level) {
                problems_.push_back(where + ": unknown level '" + fields[2] + "'");
                continue;
            }
            sym.level = *level;
        }
        if (fields.size() > 3 && fields[3] != "-" && !fields[3].empty()) {
            const std::string& k = fields[3];
            if (k == "never")
                sym.keep = Keep::Never;
            else if (k == "always")
                sym.keep = Keep::Always;
            else if (k == "norep")
                sym.keep = Keep::NoReplacement;
            else if (k == "literal")
                sym.keep = Keep::Literal;
            else {
                problems_.push_back(where + ": unknown preserve '" + k + "'");
                continue;
            }
        }
        const std::string id = unescape(fields[0]);
        if (id.find('\0') != std::string::npos) continue;  // text never holds a NUL
        symbols_[id] = std::move(sym);
    }
}

SymbolTable::~SymbolTable() = default;

// One alternation, as the server builds it: the complex symbols' patterns
// (named c0, c1, ...), then every simple symbol, longest first so that
// "..." wins over ".".
void SymbolTable::compile(const std::vector<std::pair<std::string, std::string>>& complex) {
    std::string pattern;
    for (const auto& [id, regex] : complex) {
        if (!symbols_.count(id)) continue;  // no words for it: it is left alone
        // Each alone first, so that one bad pattern costs only itself.
        int error = 0;
        PCRE2_SIZE at = 0;
        pcre2_code* alone = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.c_str()), regex.size(),
                                          PCRE2_UTF | PCRE2_UCP, &error, &at, nullptr);
        if (!alone) {
            problems_.push_back("complex symbol '" + id + "': PCRE2 refuses its pattern");
            continue;
        }
        pcre2_code_free(alone);
        if (!pattern.empty()) pattern += '|';
        pattern += "(?<c" + std::to_string(complex_ids_.size()) + ">" + regex + ")";
        complex_ids_.push_back(id);
    }
    std::vector<std::string> simple;
    for (const auto& [id, sym] : symbols_)
        if (std::none_of(complex_ids_.begin(), complex_ids_.end(),
                         [&](const std::string& c) { return c == id; }))
            simple.push_back(id);
    std::stable_sort(simple.begin(), simple.end(), [](const std::string& a, const std::string& b) {
        return a.size() > b.size();
    });
    if (!simple.empty()) {
        if (!pattern.empty()) pattern += '|';
        pattern += "(?<simple>";
        for (std::size_t i = 0; i < simple.size(); ++i) {
            if (i > 0) pattern += '|';
            pattern += quote(simple[i]);
        }
        pattern += ")";
    }
    if (pattern.empty()) return;
    auto p = std::make_unique<Pattern>();
    int error = 0;
    PCRE2_SIZE at = 0;
    p->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                            PCRE2_UTF | PCRE2_UCP, &error, &at, nullptr);
    if (!p->code) {
        problems_.push_back("the symbols together make a pattern PCRE2 refuses");
        return;
    }
    p->match = pcre2_match_data_create_from_pattern(p->code, nullptr);
    for (std::size_t i = 0; i < complex_ids_.size(); ++i)
        p->complex_groups.push_back(pcre2_substring_number_from_name(
            p->code, reinterpret_cast<PCRE2_SPTR>(("c" + std::to_string(i)).c_str())));
    pattern_ = std::move(p);
}

std::string SymbolTable::speak(std::string_view text, SymbolLevel level) const {
    if (!pattern_) return std::string(text);
    std::lock_guard lock(pattern_->mu);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::string out;
    std::size_t done = 0;  // bytes of `text` copied or replaced
    for (std::size_t from = 0; from <= text.size();) {
        const int rc =
            pcre2_match(pattern_->code, subject, text.size(), from, 0, pattern_->match, nullptr);
        if (rc < 0) break;  // no more matches (or an error: the rest stays as it is)
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(pattern_->match);
        const std::size_t start = ov[0], end = ov[1];
        if (end == start) {  // an empty match: step over one character
            from = end + 1;
            while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80)
                ++from;
            continue;
        }
        out.append(text.substr(done, start - done));
        const std::string capture(text.substr(start, end - start));
        const Symbol* sym = nullptr;
        int group = -1;
        for (std::size_t i = 0; i < complex_ids_.size() && !sym; ++i) {
            const int g = pattern_->complex_groups[i];
            if (g > 0 && ov[2 * g] != PCRE2_UNSET) {
                sym = &symbols_.at(complex_ids_[i]);
                group = g;
            }
        }
        if (!sym) {
            const auto it = symbols_.find(capture);
            if (it != symbols_.end()) sym = &it->second;
        }
        if (!sym) {
            out += capture;
        } else {
            const bool spoken = level >= sym->level && !sym->replacement.empty();
            const std::string prefix = sym->keep == Keep::Literal ? "" : " ";
            std::string suffix = " ";
            if (sym->keep == Keep::Always || (sym->keep == Keep::NoReplacement && !spoken))
                suffix = capture;
            else if (sym->keep == Keep::Literal)
                suffix = "";
            if (spoken) {
                out += prefix;
                // \1, \2 ...: the complex symbol's own groups.
                const std::string& r = sym->replacement;
                for (std::size_t i = 0; i < r.size(); ++i) {
                    if (r[i] == '\\' && i + 1 < r.size() && std::isdigit((unsigned char)r[i + 1]) &&
                        group > 0) {
                        const int g = group + (r[++i] - '0');
                        if (g < rc && ov[2 * g] != PCRE2_UNSET)
                            out.append(text.substr(ov[2 * g], ov[2 * g + 1] - ov[2 * g]));
                    } else {
                        out += r[i];
                    }
                }
            }
            out += suffix;
        }
        done = from = end;
    }
    out.append(text.substr(done));
    return out;
}

SymbolTables::SymbolTables(std::string folder) : folder_(std::move(folder)) {}

const SymbolTable* SymbolTables::table_for(const std::string& language) {
    // "en-US" -> en, then en_US over it: the folder's names.
    std::string locale = language;
    std::replace(locale.begin(), locale.end(), '-', '_');
    std::lock_guard lock(mu_);
    auto [it, fresh] = loaded_.try_emplace(locale);
    if (!fresh) return it->second.get();
    std::vector<std::string> names;
    if (const auto cut = locale.find('_'); cut != std::string::npos)
        names.push_back(locale.substr(0, cut));
    names.push_back(locale);
    std::vector<SymbolTable::File> files;
    for (const std::string& name : names) {
        if (folder_.empty() || name.empty() || name.find('/') != std::string::npos ||
            name[0] == '.')
            continue;
        const std::string path = folder_ + "/" + name + "/symbols.dic";
        std::ifstream file(path, std::ios::binary);
        if (!file) continue;
        std::ostringstream text;
        text << file.rdbuf();
        files.push_back({text.str(), path});
    }
    if (!files.empty()) it->second = std::make_unique<SymbolTable>(files);
    return it->second.get();
}

std::string SymbolTables::speak(const std::string& text, const std::string& language,
                                SymbolLevel level) {
    const SymbolTable* table = table_for(language);
    return table ? table->speak(text, level) : text;
}

}  // namespace etude::speechd
