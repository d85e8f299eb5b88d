// libFuzzer target for SSML input (engine/ssml_document.h, ssml_prosody.h):
// any UTF-8 as a document must give pieces (expat, or the lenient scanner
// for what is not well-formed) with every prosody factor in its range and
// every silence bounded, never crash or hang; and shape_f0 keeps a voiced
// frame voiced and an unvoiced one at 0 for whatever factors it gets.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "engine/ssml_document.h"
#include "engine/ssml_prosody.h"
#include "engine/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace etude::engine;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    // What is not UTF-8 never reaches the reader: Stream::push_ssml and the
    // speech-dispatcher module refuse it first (engine/utf8.h).
    if (etude::utf8::find_bad_sequence(text)) return 0;
    for (const Piece& p : parse_message(text)) {
        const Prosody& r = p.prosody;
        const bool in_range = r.rate >= 0.1f && r.rate <= 10.0f && r.pitch >= 0.5f &&
                              r.pitch <= 2.0f && r.range >= 0.0f && r.range <= 4.0f &&
                              r.volume >= 0.0f && r.volume <= 4.0f;
        if (!in_range || p.silence_ms < 0 || p.silence_ms > 10000) std::abort();
        if (p.kind == Piece::Kind::Text) {
            std::vector<float> f0{0.0f, 90.0f, 180.0f, 0.0f, 400.0f};
            shape_f0(f0, r);
            for (std::size_t i = 0; i < f0.size(); ++i)
                if ((i == 0 || i == 3) ? f0[i] != 0.0f : !(f0[i] > 0.0f && std::isfinite(f0[i])))
                    std::abort();
        }
    }
    (void)prosody_rate(text);
    (void)prosody_pitch(text);
    (void)prosody_range(text);
    (void)prosody_volume(text);
    return 0;
}
