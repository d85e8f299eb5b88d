#include "engine/piper/espeak_text_guard.h"

#include <unicode/uscript.h>

#include <algorithm>
#include <iterator>

#include "engine/piper/unicode_text.h"
#include "engine/utf8.h"

namespace etude::piper {
namespace {

struct Range {
    char32_t first, last;
};

// Codepoints that make espeak-ng 1.51+dfsg-10+deb12u2 read or write memory
// it should not when the en-us voice is given them alone, inside an English
// word, after a hyphen or between double quotes: `valgrind
// --undef-value-errors=no tools/espeak_scan`, each codepoint from U+0080
// (U+0021 beside punctuation) to U+2FFF in a fresh fork of one initialised
// espeak-ng (2026-11-25). Mostly digits and signs of Indic scripts,
// unassigned codepoints inside script blocks, archaic Hangul jamo, and
// clause marks (the dandas, the Armenian full stop and comma) beside
// punctuation.
constexpr Range kEspeakMishandled[] = {
#include "engine/piper/espeak_mishandled.inc"
};

// The scripts the language of an espeak-ng voice is written in, by ICU
// ("en-us" -> Latin, "bn" -> Bengali); none when ICU does not know it.
std::vector<UScriptCode> voice_scripts(const std::string& espeak_voice) {
    std::string language = espeak_voice.substr(espeak_voice.rfind('/') + 1);
    language = language.substr(0, language.find_first_of("-_"));
    UScriptCode codes[8];
    UErrorCode status = U_ZERO_ERROR;
    const int n = uscript_getCode(language.c_str(), codes, 8, &status);
    if (U_FAILURE(status) || n <= 0) return {};
    return {codes, codes + n};
}

// The script whose voices read mishandled codepoint c without harm: its
// Script property, except for clause marks that Unicode gives to no one
// script (Common) but that only one script's espeak-ng voices read safely
// (valgrind, "}\u0964" and "\"\u0589\""): the dandas, which the Hindi,
// Marathi and Nepali voices read and the Bengali and Tamil ones do not,
// and the Armenian full stop, which the Armenian voice reads and the
// Georgian one does not.
UScriptCode harmless_in(char32_t c) {
    switch (c) {
        case 0x0964:
        case 0x0965:
            return USCRIPT_DEVANAGARI;
        case 0x0589:
            return USCRIPT_ARMENIAN;
        default: {
            UErrorCode status = U_ZERO_ERROR;
            return uscript_getScript(static_cast<UChar32>(c), &status);
        }
    }
}

}  // namespace

bool espeak_mishandles(char32_t c) {
    const auto* end = std::end(kEspeakMishandled);
    const auto* r = std::upper_bound(std::begin(kEspeakMishandled), end, c,
                                     [](char32_t v, const Range& x) { return v < x.first; });
    return r != std::begin(kEspeakMishandled) && c <= std::prev(r)->last;
}

std::string guard_espeak_text(std::string_view text, const std::string& espeak_voice,
                              std::vector<std::size_t>& inserted) {
    std::string blanked(text);
    blank_non_characters(blanked);
    const std::vector<UScriptCode> own = voice_scripts(espeak_voice);
    for (std::size_t i = 0; i < blanked.size();) {
        const utf8::Decoded c = utf8::decode_at(blanked, i);
        if (espeak_mishandles(c.value) &&
            std::find(own.begin(), own.end(), harmless_in(c.value)) == own.end())
            std::fill_n(blanked.begin() + static_cast<std::ptrdiff_t>(i), c.bytes, ' ');
        i += c.bytes;
    }
    return separate_scripts(blanked, inserted);
}

}  // namespace etude::piper
