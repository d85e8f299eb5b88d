// What espeak-ng 1.51 (Debian 12) must not be given. Under valgrind it reads
// and writes memory it should not on some text, and a server that phonemises
// what its clients send must not let a client corrupt its heap:
//  - a word that turns from one script into another ("Ճə": an Armenian,
//    Georgian or Hangul letter, then an IPA, phonetic or Cyrillic one;
//    "Ε^몕", since only white space ends a word), or that joins letters of
//    such a script with a sign ("한'국", "ːՊ");
//  - some codepoints even alone: codepoints that are no character, and the
//    ones in kEspeakMishandled (espeak_text_guard.cpp), found by scanning
//    every codepoint from U+0080 to U+2FFF through the en-us voice under
//    valgrind, alone, inside a word, after a hyphen and between quotes
//    (tools/espeak_scan/ says how; rerun it for another espeak-ng): clause
//    marks of other scripts hurt it only beside punctuation ("}\u0964",
//    the danda after a brace).
//  - a word longer than its fixed buffers: "s'" 68 times aborts the
//    process (a stack overflow; espeak-ng PR #2495 fixes it upstream).
// So before espeak-ng sees a text, such words are split (unicode_text.h:
// separate_scripts, which also cuts words at kEspeakMaxWordBytes), and
// those codepoints become
// spaces, unless the voice's own language is written in their script (a
// Bengali digit stays for a Bengali voice, whose translator reads it without
// switching language; the danda, which Unicode gives to no one script,
// stays for the Devanagari voices, which read it without harm, and goes for
// the Bengali one, which does not). Found by tests/fuzz/piper_text_fuzzer.cpp; checked by
// the ctest piper.espeak_memory (tests/engine/piper/espeak_memory_test.sh).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace etude::piper {

// Valid UTF-8 in; the text to hand espeak-ng voice `espeak_voice` ("en-us",
// "bn", ...). Blanked codepoints become as many spaces as their bytes;
// `inserted` receives the offsets, in the result, of the spaces put between
// scripts (original_offset in unicode_text.h maps positions back).
std::string guard_espeak_text(std::string_view text, const std::string& espeak_voice,
                              std::vector<std::size_t>& inserted);

// Whether espeak-ng 1.51 mishandles codepoint c on its own (the scan's list).
bool espeak_mishandles(char32_t c);

}  // namespace etude::piper
