#include "engine/piper/unicode_text.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/uscript.h>

#include <algorithm>

#include "engine/error.h"
#include "engine/utf8.h"

namespace etude::piper {

std::u32string nfd(std::u32string_view codepoints) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* normalizer = icu::Normalizer2::getNFDInstance(status);
    if (U_FAILURE(status))
        throw Error(std::string("ICU: no NFD normaliser: ") + u_errorName(status));
    const icu::UnicodeString in =
        icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(codepoints.data()),
                                      static_cast<int32_t>(codepoints.size()));
    const icu::UnicodeString out = normalizer->normalize(in, status);
    if (U_FAILURE(status)) throw Error(std::string("ICU: NFD failed: ") + u_errorName(status));
    std::u32string result(static_cast<std::size_t>(out.countChar32()), U'\0');
    out.toUTF32(reinterpret_cast<UChar32*>(result.data()), static_cast<int32_t>(result.size()),
                status);
    if (U_FAILURE(status)) throw Error(std::string("ICU: NFD failed: ") + u_errorName(status));
    return result;
}

namespace {

// The script a letter belongs to for separate_scripts: its ICU script, with
// the East Asian scripts that mix within a Japanese word as one. -1 for a
// codepoint of no script of its own (spaces, digits, punctuation: Common)
// and -2 for one that takes the script of the letter before it (combining
// marks: Inherited).
int script_group(char32_t c) {
    UErrorCode status = U_ZERO_ERROR;
    const UScriptCode script = uscript_getScript(static_cast<UChar32>(c), &status);
    if (U_FAILURE(status) || script == USCRIPT_COMMON || script == USCRIPT_UNKNOWN) return -1;
    if (script == USCRIPT_INHERITED) return -2;
    switch (script) {
        case USCRIPT_HAN:
        case USCRIPT_HIRAGANA:
        case USCRIPT_KATAKANA:
        case USCRIPT_BOPOMOFO:
        case USCRIPT_HANGUL:
            return USCRIPT_HAN;
        default:
            return script;
    }
}

}  // namespace

std::string separate_scripts(std::string_view text, std::vector<std::size_t>& inserted) {
    inserted.clear();
    std::string out;
    out.reserve(text.size());
    // Latin, Cyrillic and Greek words take signs inside them (don't,
    // Ukrainian м’ясо, IPA's length mark, e-mail): those stay.
    const auto takes_signs = [](int group) {
        return group == USCRIPT_LATIN || group == USCRIPT_CYRILLIC || group == USCRIPT_GREEK;
    };
    constexpr int kSpace = -1, kSign = -2;  // what came before, besides a letter's script
    int word_script = -1;        // the script of the word's letters so far; -1 outside a word
    int before = kSpace;         // the script of the letter just before, or kSpace or kSign
    std::size_t word_bytes = 0;  // bytes since the last white space or inserted space
    const auto space = [&] {
        inserted.push_back(out.size());
        out += ' ';
        word_bytes = 0;
    };
    // After white space, or where a word too long for espeak-ng is cut.
    const auto new_word = [&] {
        word_script = -1;
        before = kSpace;
        word_bytes = 0;
    };
    for (std::size_t i = 0; i < text.size();) {
        const utf8::Decoded c = utf8::decode_at(text, i);
        const std::string_view bytes = text.substr(i, c.bytes);
        const int group = script_group(c.value);
        const bool white = c.value == ' ' || (c.value >= '\t' && c.value <= '\r');
        if (!white && group != -2 && word_bytes > 0 && word_bytes + c.bytes > kEspeakMaxWordBytes) {
            space();  // a word too long for espeak-ng's buffers
            new_word();
        }
        if (white) {
            new_word();
        } else if (group >= 0) {
            // A letter: apart from a letter of another script, and, unless
            // its script takes signs and the word so far is its own, from a
            // sign before it ("ːՊ", "한'국", "Ε^몕").
            if ((before >= 0 && before != group) ||
                (before == kSign &&
                 (!takes_signs(group) || (word_script >= 0 && word_script != group))))
                space();
            word_script = before = group;
        } else if (group == -1) {
            // A sign (digit, punctuation, symbol: no script of its own):
            // apart from a letter of a script that takes no signs ("Պː").
            if (before >= 0 && !takes_signs(before)) space();
            before = kSign;
        }
        // (A combining mark, group -2, goes with what is before it.)
        out += bytes;
        if (!white) word_bytes += c.bytes;
        i += c.bytes;
    }
    return out;
}

void blank_non_characters(std::string& text) {
    for (std::size_t i = 0; i < text.size();) {
        const utf8::Decoded c = utf8::decode_at(text, i);
        const auto cp = static_cast<UChar32>(c.value);
        const auto type = static_cast<UCharCategory>(u_charType(cp));
        if (c.bytes > 1 &&
            (type == U_UNASSIGNED || type == U_PRIVATE_USE_CHAR || type == U_SURROGATE ||
             u_hasBinaryProperty(cp, UCHAR_NONCHARACTER_CODE_POINT)))
            std::fill_n(text.begin() + static_cast<std::ptrdiff_t>(i), c.bytes, ' ');
        i += c.bytes;
    }
}

std::size_t original_offset(std::size_t offset, const std::vector<std::size_t>& inserted) {
    const auto before = std::lower_bound(inserted.begin(), inserted.end(), offset);
    return offset - static_cast<std::size_t>(before - inserted.begin());
}

}  // namespace etude::piper
