// Unicode beyond UTF-8 (which engine/utf8.h reads and writes), through ICU:
// NFD (Piper decomposes phonemes with NFD and then takes one codepoint per
// phoneme, so "ç" becomes "c" and the combining cedilla, two phonemes with
// two ids), scripts and character categories.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace etude::piper {

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
