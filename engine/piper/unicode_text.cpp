#include "engine/piper/unicode_text.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include "engine/error.h"

namespace etude::piper {

std::u32string utf8_to_codepoints(std::string_view text) {
    std::u32string out;
    out.reserve(text.size());
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    for (std::size_t i = 0; i < text.size();) {
        const unsigned char c = s[i];
        const std::size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
        if (i + len > text.size()) throw Error("invalid UTF-8 (a sequence cut short)");
        char32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
        for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
        out.push_back(cp);
        i += len;
    }
    return out;
}

std::string codepoint_to_utf8(char32_t c) {
    std::string out;
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
    return out;
}

std::string codepoints_to_utf8(std::u32string_view codepoints) {
    std::string out;
    out.reserve(codepoints.size());
    for (char32_t c : codepoints) out += codepoint_to_utf8(c);
    return out;
}

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

}  // namespace etude::piper
