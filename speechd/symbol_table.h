// Punctuation and symbols spoken as words, from speech-dispatcher's own
// tables (locale/LANG/symbols.dic, NVDA's format), for the messages whose
// punctuation the server left to the module: it sends punctuation_mode
// other than "none" only when it did not verbalize the symbols itself
// (SymbolsPreproc "no", or no table for the language).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace etude::speechd {

/// speech-dispatcher's symbol levels: a symbol is spoken at its level and above.
enum class SymbolLevel { None = 100, Some = 200, Most = 300, All = 400, Char = 500 };

/// "none", "some", "most", "all" (SET punctuation_mode); nullopt otherwise.
std::optional<SymbolLevel> punctuation_level(std::string_view mode);

/// One symbols.dic: its complex symbols (regular expressions) and simple
/// ones (literal strings), each with its words, level and what is kept of it.
class SymbolTable {
  public:
    /// One symbols.dic's text and the name of its file (for problems()).
    struct File {
        std::string text, source;
    };
    /// Reads symbols.dic files, a language's before its region's: a symbol
    /// a later file defines again replaces the earlier one, as the server
    /// merges a locale's tables. Lines it cannot read (a field missing, an
    /// unknown level, a pattern PCRE2 refuses) are left out and listed in
    /// problems().
    explicit SymbolTable(const std::vector<File>& files);
    ~SymbolTable();
    SymbolTable(const SymbolTable&) = delete;
    SymbolTable& operator=(const SymbolTable&) = delete;

    /// `text` with the symbols of `level` and below replaced by their words,
    /// as speech-dispatcher's server does: " comma," for a comma at "all",
    /// which keeps the comma (its pause) after the word.
    std::string speak(std::string_view text, SymbolLevel level) const;
    std::size_t size() const { return symbols_.size(); }
    const std::vector<std::string>& problems() const { return problems_; }

  private:
    enum class Keep { Never, Always, NoReplacement, Literal };
    struct Symbol {
        std::string replacement;
        SymbolLevel level = SymbolLevel::All;
        Keep keep = Keep::Never;
    };
    struct Pattern;  // the compiled PCRE2 expression of all symbols
    void read(const File& file, std::vector<std::pair<std::string, std::string>>& complex);
    void compile(const std::vector<std::pair<std::string, std::string>>& complex);

    std::map<std::string, Symbol> symbols_;  // by identifier
    std::vector<std::string> complex_ids_;   // group c<i> of the pattern
    std::vector<std::string> problems_;
    std::unique_ptr<Pattern> pattern_;
};

/// The tables of a folder laid out as speech-dispatcher's locale folder
/// (/usr/share/speech-dispatcher/locale), read once per language.
class SymbolTables {
  public:
    explicit SymbolTables(std::string folder);
    /// `text` spoken at `level` for a voice of `language` ("en-US"): the
    /// language's table (en) with its region's (en_US) over it. Without
    /// either the text is returned unchanged.
    std::string speak(const std::string& text, const std::string& language, SymbolLevel level);

  private:
    const SymbolTable* table_for(const std::string& language);
    const std::string folder_;
    std::mutex mu_;
    std::map<std::string, std::unique_ptr<SymbolTable>> loaded_;  // null: no file
};

}  // namespace etude::speechd
