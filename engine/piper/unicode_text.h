// UTF-8 and codepoints, and Unicode NFD (ICU): Piper decomposes phonemes
// with NFD and then takes one codepoint per phoneme, so "ç" becomes "c" and
// the combining cedilla, two phonemes with two ids.
#pragma once

#include <string>
#include <string_view>

namespace etude::piper {

// Valid UTF-8 in (check with engine::find_invalid_utf8 first); codepoints out.
std::u32string utf8_to_codepoints(std::string_view text);
std::string codepoints_to_utf8(std::u32string_view codepoints);
std::string codepoint_to_utf8(char32_t c);
// Canonical decomposition (Unicode NFD).
std::u32string nfd(std::u32string_view codepoints);

}  // namespace etude::piper
