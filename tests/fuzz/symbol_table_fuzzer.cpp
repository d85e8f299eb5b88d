// libFuzzer target for speech-dispatcher's symbol tables as sd_etude reads
// them (speechd/symbol_table.h): the bytes up to the first NUL are a
// symbols.dic, the rest a message. Any table must load (bad lines listed,
// never a crash), and speaking any valid UTF-8 message at every level must
// give valid UTF-8 back and end, whatever patterns the table holds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "speechd/symbol_table.h"

namespace {

bool valid_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const std::size_t n = c < 0x80         ? 1
                              : (c >> 5) == 6  ? 2
                              : (c >> 4) == 14 ? 3
                              : (c >> 3) == 30 ? 4
                                               : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (std::size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

// Invalid bytes dropped: the module speaks sanitized text only.
std::string keep_valid(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        for (std::size_t n = 4; n >= 1; --n)
            if (i + n <= s.size() && valid_utf8(s.substr(i, n))) {
                out.append(s.substr(i, n));
                i += n - 1;
                break;
            }
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace etude::speechd;
    const std::string_view all(reinterpret_cast<const char*>(data), size);
    const std::size_t nul = all.find('\0');
    const std::string_view table = all.substr(0, nul);
    const std::string message = keep_valid(
        nul == std::string_view::npos ? "Hello, world!!!! 3.5 (x)  " : all.substr(nul + 1));
    const SymbolTable t({{std::string(table), "fuzz.dic"}});
    for (SymbolLevel level : {SymbolLevel::None, SymbolLevel::Some, SymbolLevel::Most,
                              SymbolLevel::All, SymbolLevel::Char})
        if (!valid_utf8(t.speak(message, level))) std::abort();
    return 0;
}
