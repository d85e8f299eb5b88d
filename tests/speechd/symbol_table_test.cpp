// speech-dispatcher's symbol tables as sd_etude reads them: small tables
// written here for the rules (those of the server's src/server/symbols.c),
// and the tables Debian installs.
#include "speechd/symbol_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/error.h"
#include "support/bad_utf8_cases.h"

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
    // it is, the comma and paren (always) too. The decimal point's empty
    // replacement is still one, as the server reads it: " " before the point.
    EXPECT_EQ(t.speak(text, SymbolLevel::None), "Pay $5, or  3 (3 .5).");
    EXPECT_EQ(t.speak(text, SymbolLevel::Some), "Pay $5, or  number 3 (3 .5).");
    EXPECT_EQ(t.speak(text, SymbolLevel::Most), "Pay $5, or  number 3  left paren(3 .5).");
    EXPECT_EQ(t.speak(text, SymbolLevel::All),
              "Pay  dollar 5 comma, or  number 3  left paren(3 .5) dot.");
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

TEST(SymbolTable, the_language_wins_over_the_base_which_fills_what_it_leaves_out) {
    // The language's comma has words and nothing else: level and preserve
    // come from the base table (all, always).
    const SymbolTable t(Files{{"symbols:\n,\tkomma\n", "de"}, {kTable, "base"}});
    EXPECT_EQ(t.speak("a,b", SymbolLevel::All), "a komma,b");
    EXPECT_EQ(t.speak("a,b", SymbolLevel::Some), "a,b");
    EXPECT_EQ(t.speak("Wait...", SymbolLevel::All), "Wait dot dot dot...");  // the base's
}

TEST(SymbolTable, repeats_and_trailing_spaces_as_the_server_reads_them) {
    const SymbolTable t(Files{{"symbols:\n!\tbang\tall\n", "t"}});
    EXPECT_EQ(t.speak("No!!!! ok", SymbolLevel::All), "No 4 bang  ok");
    EXPECT_EQ(t.speak("No!!!! ok", SymbolLevel::Some), "No  ok");
    EXPECT_EQ(t.speak("Hi!!!", SymbolLevel::All), "Hi bang  bang  bang ");  // three: one by one
    EXPECT_EQ(t.speak("end   ", SymbolLevel::All), "end");
}

TEST(SymbolTable, only_a_leading_backslash_escapes_and_a_bom_and_blank_lines_are_skipped) {
    const SymbolTable t(
        Files{{"\xEF\xBB\xBFsymbols:\n  \t \n\\v\tvertical tab\tchar\n"
               "\\#\tnumber\tsome\n\\\\\tbackslash\tall\n"
               "a\\b\tab\tall\n@\tat\t-\n",
               "t"}});
    EXPECT_TRUE(t.problems().empty()) << t.problems().front();
    EXPECT_EQ(t.speak("avec vous", SymbolLevel::Char), "avec vous");  // \v is a vertical tab
    EXPECT_EQ(t.speak("\v", SymbolLevel::Char), " vertical tab ");
    EXPECT_EQ(t.speak("#1 a\\b c\\d", SymbolLevel::All), " number 1  ab  c backslash d");
    EXPECT_EQ(t.speak("me@home", SymbolLevel::None), "me at home");  // level "-" is none
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

TEST(SymbolTable, a_line_that_is_not_utf8_is_left_out) {
    const SymbolTable t(Files{{"symbols:\n,\tcom\xFFma\tall\n!\tbang\tall\n", "bad.dic"}});
    ASSERT_EQ(t.problems().size(), 1u);
    EXPECT_NE(t.problems()[0].find("bad.dic:2: not UTF-8"), std::string::npos) << t.problems()[0];
    EXPECT_EQ(t.speak("a, b!", SymbolLevel::All), "a, b bang ");
}

// The bytes the engine refuses (support/bad_utf8_cases.h, the cases of
// tests/engine/bad_utf8_input_test.cpp), refused here with the same words:
// in a table's line (overlong forms and surrogates among them, which an
// earlier check let through to PCRE2) and in the text to speak.
TEST(SymbolTable, invalid_utf8_of_every_kind_is_refused_as_the_engine_refuses_it) {
    for (const etude::test::BadUtf8Case& c : etude::test::kBadUtf8Cases) {
        // The text ends the line (as its display name), so that a character
        // cut off at the text's end is cut off at the line's too.
        const std::string before = ",\tcomma\tall\t#";
        const SymbolTable t(
            Files{{"symbols:\n" + before + std::string(c.text) + "\n!\tbang\tall\n", "bad.dic"}});
        ASSERT_EQ(t.problems().size(), 1u) << c.name;
        // The offset is the line's: the text's, plus the bytes before it.
        const std::string where(c.where_and_what);
        const std::string prefix = "at byte offset ";
        const std::size_t colon = where.find(": ");
        const std::size_t offset =
            std::stoul(where.substr(prefix.size(), colon - prefix.size())) + before.size();
        EXPECT_EQ(t.problems()[0], "bad.dic:2: not UTF-8 (" + prefix + std::to_string(offset) +
                                       where.substr(colon) + ")")
            << c.name;
        EXPECT_EQ(t.speak("a, b!", SymbolLevel::All), "a, b bang ") << c.name;
        try {
            (void)t.speak(c.text, SymbolLevel::All);
            ADD_FAILURE() << c.name << ": spoken";
        } catch (const etude::Error& e) {
            EXPECT_EQ(e.what(), "text is not valid UTF-8 (" + where + ")") << c.name;
        }
    }
}

TEST(SymbolTable, a_pattern_pcre2_refuses_costs_only_its_own_symbol) {
    const SymbolTable t(
        Files{{"complexSymbols:\nbroken\t(unclosed\n"
               "symbols:\nbroken\tnever\tall\n!\tbang\tall\n",
               "bad.dic"}});
    ASSERT_EQ(t.problems().size(), 1u);
    EXPECT_NE(t.problems()[0].find("missing closing parenthesis"), std::string::npos)
        << t.problems()[0];
    EXPECT_EQ(t.speak("Hi!", SymbolLevel::All), "Hi bang ");
    EXPECT_EQ(t.speak("a broken thing", SymbolLevel::All),
              "a broken thing");  // not a simple symbol
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

TEST(SymbolTables, every_installed_table_reads_and_keeps_letters) {
    const std::string folder = "/usr/share/speech-dispatcher/locale";
    if (!std::filesystem::exists(folder + "/base/symbols.dic"))
        GTEST_SKIP() << "speech-dispatcher's tables are not installed (" << folder << ")";
    SymbolTables tables(folder);
    int read = 0;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
        if (!std::filesystem::exists(entry.path() / "symbols.dic")) continue;
        const std::string lang = entry.path().filename().string();
        SCOPED_TRACE(lang);
        // Letters and digits are never symbols (the French table's \v once read as "v").
        EXPECT_EQ(tables.speak("avec vous 42", lang, SymbolLevel::All), "avec vous 42");
        ++read;
    }
    EXPECT_GT(read, 20);
    // Sweden's table has no complex symbols: the base's sentence ending and
    // decimal point apply, so "3.14" keeps its point.
    const std::string sv = tables.speak("Pi är 3.14.", "sv", SymbolLevel::Some);
    EXPECT_EQ(sv.find("3 punkt"), std::string::npos) << sv;
}

TEST(SymbolTables, a_long_message_takes_linear_time) {
    const std::string folder = "/usr/share/speech-dispatcher/locale";
    if (!std::filesystem::exists(folder + "/en/symbols.dic"))
        GTEST_SKIP() << "speech-dispatcher's tables are not installed (" << folder << ")";
    SymbolTables tables(folder);
    std::string text;
    while (text.size() < 1'000'000) text += "Hello, world! 50% of 3.5 items (each) cost $2. ";
    // Counted in output, not timed: every comma is spoken.
    const std::string out = tables.speak(text, "en", SymbolLevel::All);
    std::size_t commas = 0;
    for (std::size_t at = 0; (at = out.find("comma", at)) != std::string::npos; ++at) ++commas;
    EXPECT_EQ(commas, text.size() / 47);
}

// A client that names many languages without tables (or odd names) does
// not crowd out a language that has one.
TEST(SymbolTables, many_unknown_languages_leave_a_real_ones_table_in_use) {
    const auto folder =
        std::filesystem::temp_directory_path() / ("etude-symbols-" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder / "en");
    std::ofstream(folder / "en" / "symbols.dic") << kTable;
    SymbolTables tables(folder.string());
    for (int i = 0; i < 200; ++i) {
        const std::string odd = std::to_string(i) + "x";  // no such folder
        EXPECT_EQ(tables.speak("a, b", odd, SymbolLevel::All), "a, b");
    }
    EXPECT_EQ(tables.speak("a, b", "en", SymbolLevel::All), "a comma, b");
    EXPECT_EQ(tables.speak("a, b", "en-GB", SymbolLevel::All), "a comma, b");
    std::filesystem::remove_all(folder);
}

TEST(SymbolTables, a_folder_without_tables_changes_nothing) {
    SymbolTables none("/nonexistent");
    EXPECT_EQ(none.speak("a, b!", "en", SymbolLevel::All), "a, b!");
    SymbolTables empty("");
    EXPECT_EQ(empty.speak("a, b!", "en", SymbolLevel::All), "a, b!");
}

}  // namespace
}  // namespace etude::speechd
