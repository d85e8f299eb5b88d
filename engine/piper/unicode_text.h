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
std::string codepoints_to_utf8(std::u32string_view codepoints);
std::string codepoint_to_utf8(char32_t c);
// Canonical decomposition (Unicode NFD).
std::u32string nfd(std::u32string_view codepoints);

// Valid UTF-8 in; the same text with a space put wherever a word changes
// script (ICU's script property; Han, Hiragana, Katakana, Bopomofo and
// Hangul count as one, so Japanese stays whole; combining marks go with
// the letter before them; spaces, digits and ASCII punctuation end a
// word). A non-ASCII sign of no script ("ː", "’", "»") stays inside a
// Latin, Cyrillic or Greek word and is split from a letter of any other
// script on either side. `inserted` receives the byte offsets, in the
// returned text, of the spaces put in (ascending), so positions can be
// mapped back (original_offset). Text with one script per word comes back
// unchanged. (espeak_text_guard.h says why espeak-ng needs it.)
std::string separate_scripts(std::string_view text, std::vector<std::size_t>& inserted);
// Valid UTF-8 in place: each codepoint that is no character (unassigned in
// ICU's Unicode, private use, a noncharacter) becomes as many spaces as its
// bytes, so offsets into the text still hold.
void blank_non_characters(std::string& text);
// A byte offset in separate_scripts' result to the same place in its
// input (a space it put in maps to the character after it).
std::size_t original_offset(std::size_t offset, const std::vector<std::size_t>& inserted);

}  // namespace etude::piper
