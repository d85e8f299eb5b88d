// Punctuation and symbols spoken as words, from speech-dispatcher's own
// tables (locale/LANG/symbols.dic, NVDA's format), for the messages whose
// punctuation the server left to the module: it sends punctuation_mode
// other than "none" only when it did not verbalize the symbols itself
// (SymbolsPreproc "no", or no table for the language). The rules are the
// server's (src/server/symbols.c in 0.11): the same table merge, the same
// patterns, the same replacement, so a message reads the same whichever of
// the two speaks its punctuation.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace etude::speechd {

/// speech-dispatcher's symbol levels: a symbol is spoken at its level and above.
enum class SymbolLevel { None = 100, Some = 200, Most = 300, All = 400, Char = 500 };

/// "none", "some", "most", "all" (SET punctuation_mode); nullopt otherwise.
std::optional<SymbolLevel> punctuation_level(std::string_view mode);

/// The symbols of one language: its table merged over the base table.
class SymbolTable {
  public:
    /// One symbols.dic's text and the name of its file (for problems()).
    struct File {
        std::string text, source;
    };
    /// Reads symbols.dic files, the language's first and the base table
    /// last, as the server merges them: a complex symbol or a symbol is
    /// defined by the first file that has it, and a field it leaves out
    /// (level, preserve; "-" for the replacement) comes from a later file.
    /// Lines that cannot be read (a field missing, an unknown level, a
    /// pattern PCRE2 refuses) are left out and listed in problems().
    explicit SymbolTable(const std::vector<File>& files);
    ~SymbolTable();
    SymbolTable(const SymbolTable&) = delete;
    SymbolTable& operator=(const SymbolTable&) = delete;

    /// `text` with the symbols of `level` and below replaced by their words
    /// as the server does: " comma," for a comma at "all", which keeps the
    /// comma (its pause) after the word; "!!!!" as " 4 bang ". Text that is
    /// not UTF-8 throws etude::Error, in the words the engine uses.
    std::string speak(std::string_view text, SymbolLevel level) const;
    std::size_t size() const { return symbols_.size(); }
    const std::vector<std::string>& problems() const { return problems_; }

  private:
    enum class Keep { Unset, Never, Always, NoReplacement, Literal };
    struct Symbol {
        std::optional<std::string> replacement;  // unset: from a later file
        std::optional<SymbolLevel> level;
        Keep keep = Keep::Unset;
    };
    struct Pattern;  // the compiled PCRE2 expression (symbol_table.cpp)
    struct Found;    // one match of either kind

    void read(const File& file, std::vector<std::pair<std::string, std::string>>& complex,
              std::map<std::string, Symbol>& symbols);
    void compile(const std::vector<std::pair<std::string, std::string>>& complex);
    // The next symbol at or after byte `from`; nothing when none is left.
    std::optional<Found> find(std::string_view text, std::size_t from, bool& checked) const;
    // The longest multi-byte simple symbol starting exactly at `at`.
    const std::string* simple_at(std::string_view text, std::size_t at) const;
    void replace(std::string_view text, const Found& f, SymbolLevel level, std::string& out) const;

    std::map<std::string, Symbol> symbols_;  // by identifier, every field set
    std::vector<std::string> complex_ids_;   // group c<i> of the pattern
    // Simple symbols longer than one byte, by their first character, each
    // list longest first: found by lookup rather than in one alternation,
    // which for a table of thousands (Korean) is more than PCRE2 compiles.
    std::unordered_map<std::string, std::vector<std::string>> multi_;
    std::vector<std::string> problems_;
    std::unique_ptr<Pattern> pattern_;
};

/// The tables of a folder laid out as speech-dispatcher's locale folder
/// (/usr/share/speech-dispatcher/locale), read once per language.
class SymbolTables {
  public:
    explicit SymbolTables(std::string folder);
    /// `text` spoken at `level` for a voice of `language` ("en-US"): the
    /// region's table (en_US), or else the language's (en), over the base
    /// table (base/). Without either the text is returned unchanged.
    std::string speak(const std::string& text, const std::string& language, SymbolLevel level);

  private:
    const SymbolTable* table_for(const std::string& language);
    std::optional<std::string> read_file(const std::string& locale) const;
    const std::string folder_;
    std::mutex mu_;
    std::map<std::string, std::unique_ptr<SymbolTable>> loaded_;  // null: no table
    static constexpr int kMostUnknownLanguages = 64;              // null entries kept in loaded_
    int unknown_languages_ = 0;
};

}  // namespace etude::speechd
