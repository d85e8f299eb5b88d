// Invalid UTF-8 of every kind, with what every way in must say about it:
// the engine's text and SSML input (tests/engine/engine_test.cpp) and the
// speech-dispatcher module's symbol tables (tests/speechd/) share these
// cases, so that they refuse the same bytes with the same words. The
// expected words are written by hand, not made by engine/utf8.h.
#pragma once

#include <string_view>

namespace etude::test {

struct BadUtf8Case {
    std::string_view name;
    std::string_view text;
    std::string_view where_and_what;  // after "... is not valid UTF-8 ("
    bool ends_inside = false;         // the text ends inside a character
};

inline constexpr BadUtf8Case kBadUtf8Cases[] = {
    {"0xFF", "bad \xFF byte", "at byte offset 4: a byte that UTF-8 never uses"},
    {"0xFE", "\xFE", "at byte offset 0: a byte that UTF-8 never uses"},
    {"overlong '/' (C0 AF)", "slash \xC0\xAF", "at byte offset 6: an overlong form"},
    {"overlong NUL (C0 80)", "nul \xC0\x80.", "at byte offset 4: an overlong form"},
    {"overlong 3 bytes (E0 80 80)", "x\xE0\x80\x80", "at byte offset 1: an overlong form"},
    {"overlong 4 bytes (F0 80 80 80)", "\xF0\x80\x80\x80", "at byte offset 0: an overlong form"},
    {"first surrogate (ED A0 80)", "half \xED\xA0\x80 pair",
     "at byte offset 5: a UTF-16 surrogate"},
    {"last surrogate (ED BF BF)", "\xED\xBF\xBF", "at byte offset 0: a UTF-16 surrogate"},
    {"U+110000 (F4 90 80 80)", "big \xF4\x90\x80\x80", "at byte offset 4: a value above U+10FFFF"},
    {"lead byte F5", "\xF5\x80\x80\x80", "at byte offset 0: a value above U+10FFFF"},
    {"stray continuation byte", "a\x80z",
     "at byte offset 1: a continuation byte where a character should begin"},
    {"truncated, then ASCII", "caf\xC3(", "at byte offset 3: a character cut short"},
    {"truncated 4 bytes, then ASCII", "\xF0\x9F\x98!", "at byte offset 0: a character cut short"},
    {"truncated at the end", "caf\xE2\x82", "at byte offset 3: the text ends inside a character",
     true},
};

}  // namespace etude::test
