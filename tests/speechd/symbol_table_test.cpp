// speech-dispatcher's symbol tables as sd_etude reads them: a small table
// written here for the rules, and the table Debian installs for English.
#include "speechd/symbol_table.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace etude::speechd {
namespace {

// The format of locale/LANG/symbols.dic: complex symbols (patterns with
// lookbehinds), simple ones with their level and what is kept.
const char* const kTable =
    "# a comment\n"
    "complexSymbols:\n"
    ". sentence ending\t(?<=[^\\s.])\\.(?=[\\\"')\\s]|$)\n"
    "decimal point\t(?<![^\\d -])\\.(?=\\d)\n"
    "\n"
    "symbols:\n"
    ". sentence ending\tdot\tall\talways\n"
    "decimal point\t\tnone\talways\n"
    ",\tcomma\tall\talways\n"
    ".\tdot\tsome\n"
    "\\#\tnumber\tsome\n"
    "$\tdollar\tall\tnorep\n"
    "(\tleft paren\tmost\talways\n"
    "...\tdot dot dot\tall\talways\n"
    "\xE2\x82\xAC\teuro\tall\tnorep\t# display name\n"
    " \tspace\tchar\n";

using Files = std::vector<SymbolTable::File>;

SymbolTable table() {
    return SymbolTable(Files{{kTable, "test.dic"}});
}

TEST(SymbolTable, reads_every_line_of_the_format) {
    const SymbolTable t = table();
    EXPECT_TRUE(t.problems().empty()) << t.problems().front();
    EXPECT_EQ(t.size(), 10u);
}

TEST(SymbolTable, each_level_speaks_its_symbols_and_keeps_what_it_must) {
    const SymbolTable t = table();
    const std::string text = "Pay $5, or #3 (3.5).";
    // none: '#' (some, never kept) becomes a space; '$' (norep) stays as
    // it is, the comma and paren (always) too; 3.5 stays a number.
    EXPECT_EQ(t.speak(text, SymbolLevel::None), "Pay $5, or  3 (3.5).");
    EXPECT_EQ(t.speak(text, SymbolLevel::Some), "Pay $5, or  number 3 (3.5).");
    EXPECT_EQ(t.speak(text, SymbolLevel::Most), "Pay $5, or  number 3  left paren(3.5).");
    EXPECT_EQ(t.speak(text, SymbolLevel::All),
              "Pay  dollar 5 comma, or  number 3  left paren(3.5) dot.");
}

TEST(SymbolTable, the_longest_symbol_wins_and_utf8_symbols_are_found) {
    const SymbolTable t = table();
    EXPECT_EQ(t.speak("Wait...", SymbolLevel::All), "Wait dot dot dot...");
    EXPECT_EQ(t.speak("5\xE2\x82\xAC", SymbolLevel::All), "5 euro ");
    EXPECT_EQ(t.speak("5\xE2\x82\xAC", SymbolLevel::None), "5\xE2\x82\xAC");
}

TEST(SymbolTable, char_level_describes_a_character) {
    const SymbolTable t = table();
    EXPECT_EQ(t.speak(" ", SymbolLevel::Char), " space ");
    EXPECT_EQ(t.speak(" ", SymbolLevel::All), " ");
    EXPECT_EQ(t.speak("a", SymbolLevel::Char), "a");
}

TEST(SymbolTable, a_later_file_replaces_a_symbol_of_an_earlier_one) {
    const SymbolTable t(Files{{kTable, "en"}, {"symbols:\n,\tkomma\tall\talways\n", "en_XX"}});
    EXPECT_EQ(t.speak("a,b", SymbolLevel::All), "a komma,b");
}

TEST(SymbolTable, unreadable_lines_are_listed_and_the_rest_kept) {
    const SymbolTable t(
        Files{{"symbols:\n,\tcomma\tloud\n;\tsemi\tall\tmaybe\n!\tbang\tall\n"
               "complexSymbols:\nbroken\t(unclosed\n",
               "bad.dic"}});
    ASSERT_EQ(t.problems().size(), 2u);  // the broken pattern has no symbol: not compiled
    EXPECT_NE(t.problems()[0].find("bad.dic:2: unknown level 'loud'"), std::string::npos);
    EXPECT_EQ(t.speak("Hi!", SymbolLevel::All), "Hi bang ");
}

TEST(SymbolTable, a_pattern_pcre2_refuses_costs_only_its_own_symbol) {
    const SymbolTable t(
        Files{{"complexSymbols:\nbroken\t(unclosed\n"
               "symbols:\nbroken\tnever\tall\n!\tbang\tall\n",
               "bad.dic"}});
    ASSERT_EQ(t.problems().size(), 1u);
    EXPECT_EQ(t.speak("Hi!", SymbolLevel::All), "Hi bang ");
}

TEST(SymbolTables, the_installed_english_table_speaks_punctuation) {
    const std::string folder = "/usr/share/speech-dispatcher/locale";
    if (!std::filesystem::exists(folder + "/en/symbols.dic"))
        GTEST_SKIP() << "speech-dispatcher's tables are not installed (" << folder << ")";
    SymbolTables tables(folder);
    const std::string some = tables.speak("Mail me @ home, 50% off!", "en-US", SymbolLevel::Some);
    EXPECT_NE(some.find(" at "), std::string::npos) << some;
    EXPECT_NE(some.find(" percent "), std::string::npos) << some;
    EXPECT_EQ(some.find("comma"), std::string::npos) << some;
    const std::string all = tables.speak("Mail me @ home, 50% off!", "en-US", SymbolLevel::All);
    EXPECT_NE(all.find("comma"), std::string::npos) << all;
    EXPECT_NE(all.find("bang"), std::string::npos) << all;
    // A language with no table: unchanged.
    EXPECT_EQ(tables.speak("a, b!", "xx-YY", SymbolLevel::All), "a, b!");
}

TEST(SymbolTables, a_folder_without_tables_changes_nothing) {
    SymbolTables none("/nonexistent");
    EXPECT_EQ(none.speak("a, b!", "en", SymbolLevel::All), "a, b!");
    SymbolTables empty("");
    EXPECT_EQ(empty.speak("a, b!", "en", SymbolLevel::All), "a, b!");
}

}  // namespace
}  // namespace etude::speechd
