// The well-formed UTF-8 byte sequences, copied by hand from the Unicode
// Standard (version 15.0, chapter 3.9, Table 3-7), so that the tests of
// engine/utf8.h judge it against the standard and not against itself.
#pragma once

#include <cstddef>
#include <string_view>

namespace etude::test {

// One row: a character of `length` bytes whose byte k lies in [low[k], high[k]].
struct Utf8TableRow {
    std::size_t length;
    unsigned char low[4];
    unsigned char high[4];
};

inline constexpr Utf8TableRow kUtf8Table3_7[] = {
    {1, {0x00}, {0x7F}},
    {2, {0xC2, 0x80}, {0xDF, 0xBF}},
    {3, {0xE0, 0xA0, 0x80}, {0xE0, 0xBF, 0xBF}},
    {3, {0xE1, 0x80, 0x80}, {0xEC, 0xBF, 0xBF}},
    {3, {0xED, 0x80, 0x80}, {0xED, 0x9F, 0xBF}},
    {3, {0xEE, 0x80, 0x80}, {0xEF, 0xBF, 0xBF}},
    {4, {0xF0, 0x90, 0x80, 0x80}, {0xF0, 0xBF, 0xBF, 0xBF}},
    {4, {0xF1, 0x80, 0x80, 0x80}, {0xF3, 0xBF, 0xBF, 0xBF}},
    {4, {0xF4, 0x80, 0x80, 0x80}, {0xF4, 0x8F, 0xBF, 0xBF}},
};

// True when `bytes` is exactly one well-formed character.
inline bool is_one_utf8_character(std::string_view bytes) {
    for (const Utf8TableRow& row : kUtf8Table3_7) {
        if (row.length != bytes.size()) continue;
        bool inside = true;
        for (std::size_t k = 0; k < row.length; ++k) {
            const auto b = static_cast<unsigned char>(bytes[k]);
            inside = inside && b >= row.low[k] && b <= row.high[k];
        }
        if (inside) return true;
    }
    return false;
}

// True when `text` is a sequence of well-formed characters (the table's
// rows never overlap in their first byte, so the first row that matches a
// prefix is the only one).
inline bool is_utf8_by_table(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        std::size_t taken = 0;
        for (std::size_t n = 1; n <= 4 && i + n <= text.size() && taken == 0; ++n)
            if (is_one_utf8_character(text.substr(i, n))) taken = n;
        if (taken == 0) return false;
        i += taken;
    }
    return true;
}

}  // namespace etude::test
