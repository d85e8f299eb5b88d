// libFuzzer target for the one UTF-8 decoder and encoder (engine/utf8.h):
// any bytes must be judged exactly as the Unicode Standard's Table 3-7
// judges them (support/utf8_table_3_7.h, written from the standard, not
// from the code), and well-formed text must come back byte for byte through
// decode and encode. Seeds: tests/fuzz/seeds/utf8_fuzzer/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/error.h"
#include "engine/utf8.h"
#include "support/utf8_table_3_7.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace utf8 = etude::utf8;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto bad = utf8::find_bad_sequence(text);
    if (bad.has_value() == etude::test::is_utf8_by_table(text)) std::abort();
    // Everything before the bad sequence is UTF-8, and the sequence is not.
    if (bad && (!etude::test::is_utf8_by_table(text.substr(0, bad->offset)) ||
                bad->problem == utf8::Problem::None))
        std::abort();
    // A reader that skips each problem's bytes moves on and ends.
    for (std::size_t i = 0; i < text.size();) {
        const utf8::Decoded c = utf8::decode_at(text, i);
        if (c.bytes < 1 || c.bytes > 4 || i + c.bytes > text.size()) std::abort();
        if (c.ok() && !etude::test::is_one_utf8_character(text.substr(i, c.bytes))) std::abort();
        i += c.bytes;
    }
    try {
        const std::u32string values = utf8::decode(text);
        if (bad || utf8::encode(values) != text) std::abort();
    } catch (const etude::Error&) {
        if (!bad) std::abort();
    }
    const std::size_t tail = utf8::unfinished_tail(text);
    if (tail > 3 || tail > text.size()) std::abort();
    if (tail > 0) {
        // The start of a character that the text ends inside.
        const utf8::Decoded last = utf8::decode_at(text, text.size() - tail);
        if (!bad || last.problem != utf8::Problem::EndsInside || last.bytes != tail) std::abort();
    }
    return 0;
}
