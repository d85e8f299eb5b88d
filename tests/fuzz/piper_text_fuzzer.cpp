// libFuzzer target for the Piper text front end: any bytes as text (espeak-ng
// 1.51 included) must give sentences of valid ids, with their written words
// each at one of those ids, or etude::Error (invalid UTF-8), never crash or
// hang. The voice is the en_US test config.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/error.h"
#include "engine/piper/phonemizer.h"

namespace {
const etude::piper::Phonemizer& phonemizer() {
    static const etude::piper::Phonemizer p(
        etude::piper::read_voice_config(ETUDE_TEST_DATA "/piper/en_US-test-medium.onnx.json"));
    return p;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto& p = phonemizer();
    try {
        // With the word pairing too (an espeak-ng call per written word where
        // the counts differ): each word starts at one of the sentence's ids.
        const auto sentences =
            p.phonemize(std::string_view(reinterpret_cast<const char*>(data), size), true);
        for (const auto& s : sentences) {
            etude::piper::check_phoneme_ids(s.ids.ids, p.voice());
            for (const auto& w : s.words)
                if (w.start >= s.ids.ids.size() || w.text.empty()) std::abort();
        }
    } catch (const etude::Error&) {
    }
    return 0;
}
