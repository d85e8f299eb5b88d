// UTF-8 and codepoints, and Unicode NFD (ICU): Piper decomposes phonemes
// with NFD and then takes one codepoint per phoneme, so "ç" becomes "c" and
// the combining cedilla, two phonemes with two ids.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace etude::piper {

// Valid UTF-8 in (check with engine::find_invalid_utf8 first); codepoints out.
std::u32string utf8_to_codepoints(std::string_view text);
// The codepoint of valid UTF-8 that starts at text[offset], and how many
// bytes it takes; throws etude::Error for a sequence cut short.
struct Utf8Codepoint {
    char32_t value = 0;
    std::size_t bytes = 1;
};
Utf8Codepoint utf8_codepoint_at(std::string_view text, std::size_t offset);
std::string codepoints_to_utf8(std::u32string_view codepoints);
std::string codepoint_to_utf8(char32_t c);
// Canonical decomposition (Unicode NFD).
std::u32string nfd(std::u32string_view codepoints);

// Valid UTF-8 in; the same text with spaces put where espeak-ng 1.51 would
// read one word across scripts (espeak_text_guard.h says why): between
// letters of two scripts ("Ճə", and "Ε^몕": only white space ends a word
// for espeak-ng), and between a letter of a script other than Latin,
// Cyrillic and Greek and any digit, punctuation or symbol beside it
// ("한'국", "ːՊ"). Latin, Cyrillic and Greek words keep theirs ("don’t",
// "м’ясо", "fɔːr"). Scripts are ICU's; Han, Hiragana, Katakana, Bopomofo
// and Hangul count as one, so Japanese words stay whole; combining marks
// go with what is before them. `inserted` receives the byte offsets, in
// the returned text, of the spaces put in (ascending), so positions can be
// mapped back (original_offset). Words longer than kEspeakMaxWordBytes
// are cut too, before a codepoint that is not a combining mark. Text whose
// words are each of Latin, Cyrillic or Greek letters, and no longer than
// that, comes back unchanged.
std::string separate_scripts(std::string_view text, std::vector<std::size_t>& inserted);
// The longest word espeak-ng 1.51 is given, in UTF-8 bytes. Its per-word
// buffers are fixed (160 bytes of text, 200 of phonemes) and a long word can
// write past them: "s'" 68 times (136 bytes: 's is a suffix that may stack)
// smashes its stack and aborts the process, and so does "日." before 166
// ampersands and at signs. The longest English word in dictionaries is 45
// letters; a German compound of 64 bytes is rare.
inline constexpr std::size_t kEspeakMaxWordBytes = 64;
// Valid UTF-8 in place: each codepoint that is no character (unassigned in
// ICU's Unicode, private use, a noncharacter) becomes as many spaces as its
// bytes, so offsets into the text still hold.
void blank_non_characters(std::string& text);
// A byte offset in separate_scripts' result to the same place in its
// input (a space it put in maps to the character after it).
std::size_t original_offset(std::size_t offset, const std::vector<std::size_t>& inserted);

}  // namespace etude::piper
