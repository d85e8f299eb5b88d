#include "engine/utf8.h"

#include <cstdio>

#include "engine/error.h"

namespace etude::utf8 {

namespace {

bool is_continuation(unsigned char c) {
    return (c & 0xC0) == 0x80;
}

Decoded bad(Problem problem, std::size_t bytes) {
    return {0, bytes, problem};
}

}  // namespace

Decoded decode_at(std::string_view text, std::size_t offset) noexcept {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[offset + k]); };
    const unsigned char lead = byte(0);
    if (lead < 0x80) return {lead, 1, Problem::None};
    if (lead < 0xC0) return bad(Problem::StrayContinuation, 1);
    if (lead < 0xC2) return bad(Problem::Overlong, 1);  // C0, C1: two bytes for a value < 0x80
    if (lead >= 0xF8) return bad(Problem::NotUtf8Byte, 1);
    if (lead >= 0xF5) return bad(Problem::AboveUnicode, 1);
    const std::size_t length = lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    // Table 3-7: four lead bytes narrow their second byte's range; a
    // continuation byte outside it says what the sequence would have been.
    unsigned char low = 0x80, high = 0xBF;
    Problem below = Problem::CutShort, above = Problem::CutShort;
    switch (lead) {
        case 0xE0:
            low = 0xA0, below = Problem::Overlong;
            break;
        case 0xED:
            high = 0x9F, above = Problem::Surrogate;
            break;
        case 0xF0:
            low = 0x90, below = Problem::Overlong;
            break;
        case 0xF4:
            high = 0x8F, above = Problem::AboveUnicode;
            break;
        default:
            break;
    }
    char32_t value = lead & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
    for (std::size_t k = 1; k < length; ++k) {
        if (offset + k >= text.size()) return bad(Problem::EndsInside, k);
        const unsigned char c = byte(k);
        if (k == 1 && is_continuation(c) && (c < low || c > high))
            return bad(c < low ? below : above, 1);
        if (!is_continuation(c)) return bad(Problem::CutShort, k);
        value = (value << 6) | (c & 0x3F);
    }
    return {value, length, Problem::None};
}

std::optional<BadSequence> find_bad_sequence(std::string_view text) noexcept {
    for (std::size_t i = 0; i < text.size();) {
        const Decoded c = decode_at(text, i);
        if (!c.ok()) return BadSequence{i, c.problem};
        i += c.bytes;
    }
    return std::nullopt;
}

std::string_view describe(Problem problem) noexcept {
    switch (problem) {
        case Problem::None:
            return "well-formed";
        case Problem::StrayContinuation:
            return "a continuation byte where a character should begin";
        case Problem::Overlong:
            return "an overlong form";
        case Problem::Surrogate:
            return "a UTF-16 surrogate";
        case Problem::AboveUnicode:
            return "a value above U+10FFFF";
        case Problem::NotUtf8Byte:
            return "a byte that UTF-8 never uses";
        case Problem::CutShort:
            return "a character cut short";
        case Problem::EndsInside:
            return "the text ends inside a character";
    }
    return "unknown";
}

std::string describe(const BadSequence& bad) {
    return "at byte offset " + std::to_string(bad.offset) + ": " +
           std::string(describe(bad.problem));
}

bool is_scalar_value(char32_t value) noexcept {
    return value <= 0x10FFFF && !(value >= 0xD800 && value <= 0xDFFF);
}

std::u32string decode(std::string_view text) {
    std::u32string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const Decoded c = decode_at(text, i);
        if (!c.ok())
            throw Error("text is not valid UTF-8 (" + describe(BadSequence{i, c.problem}) + ")");
        out.push_back(c.value);
        i += c.bytes;
    }
    return out;
}

void append(std::string& out, char32_t value) {
    if (!is_scalar_value(value)) {
        char name[16];
        std::snprintf(name, sizeof name, "U+%04lX", static_cast<unsigned long>(value));
        throw Error(std::string(name) + " is not a Unicode scalar value: UTF-8 cannot hold it");
    }
    const auto put = [&](unsigned bits) { out += static_cast<char>(bits); };
    if (value < 0x80) {
        put(value);
    } else if (value < 0x800) {
        put(0xC0 | (value >> 6));
        put(0x80 | (value & 0x3F));
    } else if (value < 0x10000) {
        put(0xE0 | (value >> 12));
        put(0x80 | ((value >> 6) & 0x3F));
        put(0x80 | (value & 0x3F));
    } else {
        put(0xF0 | (value >> 18));
        put(0x80 | ((value >> 12) & 0x3F));
        put(0x80 | ((value >> 6) & 0x3F));
        put(0x80 | (value & 0x3F));
    }
}

std::string encode(char32_t value) {
    std::string out;
    append(out, value);
    return out;
}

std::string encode(std::u32string_view values) {
    std::string out;
    out.reserve(values.size());
    for (char32_t v : values) append(out, v);
    return out;
}

std::size_t char_start_at_or_before(std::string_view text, std::size_t offset) noexcept {
    if (offset >= text.size()) return offset;
    while (offset > 0 && is_continuation(static_cast<unsigned char>(text[offset]))) --offset;
    return offset;
}

std::size_t unfinished_tail(std::string_view text) noexcept {
    // A character is at most 4 bytes: its start is among the last 3.
    for (std::size_t back = 1; back <= 3 && back <= text.size(); ++back) {
        const std::size_t start = text.size() - back;
        if (is_continuation(static_cast<unsigned char>(text[start]))) continue;
        return decode_at(text, start).problem == Problem::EndsInside ? back : 0;
    }
    return 0;
}

}  // namespace etude::utf8
