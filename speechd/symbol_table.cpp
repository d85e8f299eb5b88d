#include "speechd/symbol_table.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/error.h"
#include "engine/utf8.h"

namespace etude::speechd {

namespace {

std::optional<SymbolLevel> level_named(std::string_view name) {
    if (name == "none" || name == "-") return SymbolLevel::None;  // "-": as the server reads it
    if (name == "some") return SymbolLevel::Some;
    if (name == "most") return SymbolLevel::Most;
    if (name == "all") return SymbolLevel::All;
    if (name == "char") return SymbolLevel::Char;
    return std::nullopt;
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

// The identifier field: a leading backslash escapes its first character
// (\t \n \r \f \v for those, \# for a '#' that would begin a comment, \\),
// and only that one, as the server reads it. "\0" (NUL) is not supported.
std::optional<std::string> identifier(const std::string& field) {
    if (field.size() < 2 || field[0] != '\\') return field;
    std::string id = field.substr(1);
    switch (id[0]) {
        case '0':
            return std::nullopt;
        case 't':
            id[0] = '\t';
            break;
        case 'n':
            id[0] = '\n';
            break;
        case 'r':
            id[0] = '\r';
            break;
        case 'f':
            id[0] = '\f';
            break;
        case 'v':
            id[0] = '\v';
            break;
        default:
            break;  // '#', '\\' and any other: the character itself
    }
    return id;
}

bool blank(const std::string& line) {
    return std::all_of(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); });
}

// The bytes of the character at text[at] (1 for a byte that begins none).
std::size_t char_bytes(std::string_view text, std::size_t at) {
    return utf8::decode_at(text, at).bytes;
}

std::string pcre2_message(int error) {
    PCRE2_UCHAR text[160];
    return pcre2_get_error_message(error, text, sizeof text) > 0
               ? std::string(reinterpret_cast<const char*>(text))
               : "error " + std::to_string(error);
}

}  // namespace

std::optional<SymbolLevel> punctuation_level(std::string_view mode) {
    if (mode == "char" || mode == "-") return std::nullopt;  // not punctuation modes
    return level_named(mode);
}

struct SymbolTable::Pattern {
    pcre2_code* code = nullptr;
    pcre2_match_data* match = nullptr;  // speak() is const: guarded by mu
    std::mutex mu;
    int strip = -1, repeated = -1, simple = -1;  // group numbers, -1: not in the pattern
    std::vector<int> complex_groups;             // group number of c<i>
    ~Pattern() {
        if (match) pcre2_match_data_free(match);
        if (code) pcre2_code_free(code);
    }
};

struct SymbolTable::Found {
    enum Kind { Strip, Repeated, Complex, Simple } kind = Simple;
    std::size_t start = 0, end = 0;
    std::size_t complex = 0;  // complex_ids_ index
    // A complex symbol's groups from its own (\0) on, for the replacement's \N.
    std::array<std::optional<std::pair<std::size_t, std::size_t>>, 10> groups;
};

SymbolTable::SymbolTable(const std::vector<File>& files) {
    std::vector<std::pair<std::string, std::string>> complex;
    std::map<std::string, Symbol> symbols;
    for (const File& f : files) read(f, complex, symbols);
    // Symbols with no replacement in any file say nothing: left out, as the
    // server leaves them out. The rest get the defaults of fields no file set.
    for (auto& [id, sym] : symbols) {
        if (!sym.replacement) continue;
        if (!sym.level) sym.level = SymbolLevel::All;
        if (sym.keep == Keep::Unset) sym.keep = Keep::Never;
        symbols_.emplace(id, sym);
    }
    compile(complex);
}

SymbolTable::~SymbolTable() = default;

void SymbolTable::read(const File& file, std::vector<std::pair<std::string, std::string>>& complex,
                       std::map<std::string, Symbol>& symbols) {
    std::string text = file.text;
    if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a UTF-8 BOM
    std::istringstream in(text);
    enum { Outside, Complex, Simple } section = Outside;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line[0] == '#' || blank(line)) continue;
        if (line == "complexSymbols:") {
            section = Complex;
            continue;
        }
        if (line == "symbols:") {
            section = Simple;
            continue;
        }
        const std::string where = file.source + ":" + std::to_string(number);
        // Its words go to the engine, which takes UTF-8 only.
        if (auto bad = utf8::find_bad_sequence(line)) {
            problems_.push_back(where + ": not UTF-8 (" + utf8::describe(*bad) + ")");
            continue;
        }
        if (section == Complex) {
            const std::size_t tab = line.find('\t');
            if (tab == std::string::npos) {
                problems_.push_back(where + ": a complex symbol needs a name and a pattern");
                continue;
            }
            const std::string id = line.substr(0, tab);
            if (std::none_of(complex.begin(), complex.end(),
                             [&](const auto& c) { return c.first == id; }))
                complex.emplace_back(id, line.substr(tab + 1));  // the first file's wins
            continue;
        }
        auto fields = split_tabs(line);
        // The last field, if it begins with '#', is the display name.
        if (!fields.empty() && !fields.back().empty() && fields.back()[0] == '#') fields.pop_back();
        Symbol sym;
        if (section != Simple || fields.size() < 2 || fields[0].empty()) {
            problems_.push_back(where + ": not a symbol line");
            continue;
        }
        if (fields.size() > 2) {
            sym.level = level_named(fields[2]);
            if (!sym.level) {
                problems_.push_back(where + ": unknown level '" + fields[2] + "'");
                continue;
            }
        }
        if (fields.size() > 3) {
            const std::string& k = fields[3];
            sym.keep = k == "never" || k == "-" ? Keep::Never
                       : k == "always"          ? Keep::Always
                       : k == "norep"           ? Keep::NoReplacement
                       : k == "literal"         ? Keep::Literal
                                                : Keep::Unset;
            if (sym.keep == Keep::Unset) {
                problems_.push_back(where + ": unknown preserve '" + k + "'");
                continue;
            }
        }
        if (fields[1] != "-") sym.replacement = fields[1];
        const auto id = identifier(fields[0]);
        if (!id) continue;  // NUL: text never holds one
        auto [it, fresh] = symbols.try_emplace(*id, sym);
        if (fresh) continue;
        // Defined by an earlier file: what it left out comes from this one.
        Symbol& first = it->second;
        if (!first.replacement) first.replacement = sym.replacement;
        if (!first.level) first.level = sym.level;
        if (first.keep == Keep::Unset) first.keep = sym.keep;
    }
}

// One alternation, as the server builds it: trailing spaces, a character
// repeated more than three times, the complex symbols (named c0, c1, ...),
// and the one-byte simple symbols. Longer simple symbols are looked up
// (multi_), and win over a one-byte symbol found at the same place, as they
// come first in the server's alternation.
void SymbolTable::compile(const std::vector<std::pair<std::string, std::string>>& complex) {
    std::set<std::string> complex_names;
    std::string pattern = "(?<rstripSpace>  +$)";
    for (const auto& [id, regex] : complex) {
        complex_names.insert(id);
        if (!symbols_.count(id)) continue;  // no words for it: left alone
        // Each alone first, so that one bad pattern costs only itself.
        int error = 0;
        PCRE2_SIZE at = 0;
        pcre2_code* alone = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.c_str()), regex.size(),
                                          PCRE2_UTF | PCRE2_UCP, &error, &at, nullptr);
        if (!alone) {
            problems_.push_back("complex symbol '" + id + "': " + pcre2_message(error) +
                                " at offset " + std::to_string(at));
            continue;
        }
        pcre2_code_free(alone);
        pattern += "|(?<c" + std::to_string(complex_ids_.size()) + ">" + regex + ")";
        complex_ids_.push_back(id);
    }
    std::string chars;
    for (const auto& [id, sym] : symbols_) {
        if (complex_names.count(id)) continue;
        if (id.size() == 1) {
            if (!std::isalnum(static_cast<unsigned char>(id[0]))) chars += '\\';
            chars += id;
        } else {
            const std::string first = id.substr(0, char_bytes(id, 0));
            multi_[first].push_back(id);
        }
    }
    for (auto& [first, ids] : multi_)
        std::stable_sort(ids.begin(), ids.end(), [](const std::string& a, const std::string& b) {
            return a.size() > b.size();
        });
    if (!chars.empty()) {
        pattern += "|(?<repeated>(?<repTmp>[" + chars + "])\\k<repTmp>{3,})";
        pattern += "|(?<simple>[" + chars + "])";
    }
    auto p = std::make_unique<Pattern>();
    int error = 0;
    PCRE2_SIZE at = 0;
    p->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                            PCRE2_UTF | PCRE2_UCP, &error, &at, nullptr);
    if (!p->code) {
        problems_.push_back("the symbols together make a pattern PCRE2 refuses: " +
                            pcre2_message(error));
        return;
    }
    pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE);  // faster where it can; fine without
    p->match = pcre2_match_data_create_from_pattern(p->code, nullptr);
    const auto group = [&](const std::string& name) {
        const int n =
            pcre2_substring_number_from_name(p->code, reinterpret_cast<PCRE2_SPTR>(name.c_str()));
        return n > 0 ? n : -1;
    };
    p->strip = group("rstripSpace");
    p->repeated = group("repeated");
    p->simple = group("simple");
    for (std::size_t i = 0; i < complex_ids_.size(); ++i)
        p->complex_groups.push_back(group("c" + std::to_string(i)));
    pattern_ = std::move(p);
}

const std::string* SymbolTable::simple_at(std::string_view text, std::size_t at) const {
    const auto it = multi_.find(std::string(text.substr(at, char_bytes(text, at))));
    if (it == multi_.end()) return nullptr;
    for (const std::string& id : it->second)
        if (text.compare(at, id.size(), id) == 0) return &id;
    return nullptr;
}

std::optional<SymbolTable::Found> SymbolTable::find(std::string_view text, std::size_t from,
                                                    bool& checked) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::uint32_t options = checked ? PCRE2_NO_UTF_CHECK : 0;
    for (;;) {
        const int rc = pcre2_match(pattern_->code, subject, text.size(), from, options,
                                   pattern_->match, nullptr);
        checked = true;  // valid UTF-8 (or refused whole, below): not checked again
        if (rc < 0) return std::nullopt;  // no more (or an error: the rest stays as it is)
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(pattern_->match);
        const auto matched = [&](int g) { return g > 0 && g < rc && ov[2 * g] != PCRE2_UNSET; };
        if (ov[1] == ov[0]) {  // an empty match: a non-empty one from the same place, if any
            from = ov[0];
            options |= PCRE2_NOTEMPTY_ATSTART;
            continue;
        }
        Found f;
        f.start = ov[0];
        f.end = ov[1];
        if (matched(pattern_->strip)) {
            f.kind = Found::Strip;
        } else if (matched(pattern_->repeated)) {
            f.kind = Found::Repeated;
        } else if (matched(pattern_->simple)) {
            f.kind = Found::Simple;
        } else {
            f.kind = Found::Complex;
            for (std::size_t i = 0; i < complex_ids_.size(); ++i) {
                const int g = pattern_->complex_groups[i];
                if (!matched(g)) continue;
                f.complex = i;
                for (int n = 0; n < 10; ++n)
                    if (matched(g + n)) f.groups[n] = {ov[2 * (g + n)], ov[2 * (g + n) + 1]};
                break;
            }
        }
        return f;
    }
}

std::string SymbolTable::speak(std::string_view text, SymbolLevel level) const {
    // What the engine would refuse is refused here, in its words.
    if (auto bad = utf8::find_bad_sequence(text))
        throw Error("text is not valid UTF-8 (" + utf8::describe(*bad) + ")");
    if (!pattern_) return std::string(text);
    std::lock_guard lock(pattern_->mu);
    std::string out;
    std::size_t done = 0;  // bytes of `text` copied or replaced
    bool checked = false;
    std::optional<Found> ahead = find(text, 0, checked);  // the pattern's next match
    for (std::size_t from = 0; from < text.size();) {
        if (ahead && ahead->start < from) ahead = find(text, from, checked);
        // A longer simple symbol before the pattern's match, or at its place
        // when that is a one-byte symbol, comes first.
        const std::size_t limit = ahead ? ahead->start : text.size();
        std::optional<Found> next;
        for (std::size_t at = from; at <= limit && at < text.size(); at += char_bytes(text, at)) {
            if (at == limit && ahead->kind != Found::Simple) break;
            if (const std::string* id = simple_at(text, at)) {
                next = Found{Found::Simple, at, at + id->size()};
                break;
            }
        }
        if (!next) next = ahead;
        if (!next) break;
        out.append(text.substr(done, next->start - done));
        replace(text, *next, level, out);
        done = from = next->end;
    }
    out.append(text.substr(done));
    return out;
}

void SymbolTable::replace(std::string_view text, const Found& f, SymbolLevel level,
                          std::string& out) const {
    const std::string capture(text.substr(f.start, f.end - f.start));
    if (f.kind == Found::Strip) return;  // trailing spaces go
    if (f.kind == Found::Repeated) {
        const Symbol& sym = symbols_.at(capture.substr(0, 1));
        if (level >= *sym.level)
            out += " " + std::to_string(capture.size()) + " " + *sym.replacement + " ";
        else
            out += ' ';
        return;
    }
    const auto it = symbols_.find(f.kind == Found::Complex ? complex_ids_[f.complex] : capture);
    if (it == symbols_.end()) {
        out += capture;
        return;
    }
    const Symbol& sym = it->second;
    const bool spoken = level >= *sym.level;
    const std::string prefix = sym.keep == Keep::Literal ? "" : " ";
    std::string suffix = " ";
    if (sym.keep == Keep::Always || (sym.keep == Keep::NoReplacement && !spoken))
        suffix = capture;
    else if (sym.keep == Keep::Literal)
        suffix = "";
    if (spoken) {
        out += prefix;
        // \0 .. \9: the complex symbol's groups; "\\": a backslash.
        const std::string& r = *sym.replacement;
        for (std::size_t i = 0; i < r.size(); ++i) {
            if (r[i] != '\\' || i + 1 == r.size()) {
                out += r[i];
            } else if (std::isdigit(static_cast<unsigned char>(r[++i]))) {
                if (const auto& g = f.groups[r[i] - '0'])
                    out.append(text.substr(g->first, g->second - g->first));
            } else {
                out += r[i];
            }
        }
    }
    out += suffix;
}

SymbolTables::SymbolTables(std::string folder) : folder_(std::move(folder)) {}

std::optional<std::string> SymbolTables::read_file(const std::string& locale) const {
    if (folder_.empty() || locale.empty() || locale.find('/') != std::string::npos ||
        locale[0] == '.')
        return std::nullopt;
    std::ifstream file(folder_ + "/" + locale + "/symbols.dic", std::ios::binary);
    if (!file) return std::nullopt;
    std::ostringstream text;
    text << file.rdbuf();
    return text.str();
}

const SymbolTable* SymbolTables::table_for(const std::string& language) {
    // "en-us" -> en_US, else en; the base table under it.
    std::string locale = language;
    std::replace(locale.begin(), locale.end(), '-', '_');
    const std::size_t cut = locale.find('_');
    if (cut != std::string::npos)
        std::transform(locale.begin() + cut, locale.end(), locale.begin() + cut,
                       [](unsigned char c) { return std::toupper(c); });
    std::lock_guard lock(mu_);
    const auto known = loaded_.find(locale);
    if (known != loaded_.end()) return known->second.get();
    std::vector<SymbolTable::File> files;
    std::string name = locale;
    auto text = read_file(name);
    if (!text && cut != std::string::npos) text = read_file(name = locale.substr(0, cut));
    std::unique_ptr<SymbolTable> table;
    if (text) {
        files.push_back({std::move(*text), folder_ + "/" + name + "/symbols.dic"});
        if (auto base = read_file("base"))
            files.push_back({std::move(*base), folder_ + "/base/symbols.dic"});
        table = std::make_unique<SymbolTable>(files);
    }
    // A table found is kept: there are only as many as the folder holds.
    // Languages without one are remembered up to a bound, so that a client
    // naming odd languages keeps the map small; past it they are looked up
    // again each time (a miss reads no file twice). Before, the bound
    // counted tables too, and a real language named after 64 odd ones went
    // without its table.
    if (!table) {
        if (unknown_languages_ >= kMostUnknownLanguages) return nullptr;
        ++unknown_languages_;
    }
    return loaded_.emplace(locale, std::move(table)).first->second.get();
}

std::string SymbolTables::speak(const std::string& text, const std::string& language,
                                SymbolLevel level) {
    const SymbolTable* table = table_for(language);
    return table ? table->speak(text, level) : text;
}

}  // namespace etude::speechd
