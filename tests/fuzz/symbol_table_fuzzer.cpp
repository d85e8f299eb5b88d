// libFuzzer target for speech-dispatcher's symbol tables as sd_etude reads
// them (speechd/symbol_table.h): the bytes up to the first NUL are a
// symbols.dic, the rest a message. Any table must load (bad lines listed,
// never a crash), and speaking any valid UTF-8 message at every level must
// give valid UTF-8 back and end, whatever patterns the table holds; a
// message that is not UTF-8 is refused (etude::Error). Seeds:
// tests/fuzz/seeds/symbol_table_fuzzer/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/error.h"
#include "engine/utf8.h"
#include "speechd/symbol_table.h"

namespace {

bool valid_utf8(std::string_view s) {
    return !etude::utf8::find_bad_sequence(s);
}

// Invalid bytes dropped: the module refuses a message that is not UTF-8
// before its symbols are spoken.
std::string keep_valid(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const etude::utf8::Decoded c = etude::utf8::decode_at(s, i);
        if (c.ok()) out.append(s.substr(i, c.bytes));
        i += c.bytes;
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace etude::speechd;
    const std::string_view all(reinterpret_cast<const char*>(data), size);
    const std::size_t nul = all.find('\0');
    const std::string_view table = all.substr(0, nul);
    const std::string_view given =
        nul == std::string_view::npos ? "Hello, world!!!! 3.5 (x)  " : all.substr(nul + 1);
    const std::string message = keep_valid(given);
    const SymbolTable t({{std::string(table), "fuzz.dic"}});
    // A message that is not UTF-8 is refused with etude::Error, nothing worse.
    if (message.size() != given.size()) {
        try {
            (void)t.speak(given, SymbolLevel::All);
            std::abort();
        } catch (const etude::Error&) {
        }
    }
    for (SymbolLevel level : {SymbolLevel::None, SymbolLevel::Some, SymbolLevel::Most,
                              SymbolLevel::All, SymbolLevel::Char})
        if (!valid_utf8(t.speak(message, level))) std::abort();
    return 0;
}
