#include "server/speech_events.h"

#include <cstdint>

namespace etude::server {

std::string base64(std::string_view bytes) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    const auto byte = [&](std::size_t at) {
        return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at]));
    };
    for (; i + 3 <= bytes.size(); i += 3) {
        const std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
        for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(v >> shift) & 63];
    }
    // One or two bytes left: two or three characters, and padding to four.
    if (const std::size_t left = bytes.size() - i; left > 0) {
        const std::uint32_t v = byte(i) << 16 | (left == 2 ? byte(i + 1) << 8 : 0);
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::string speech_audio_delta_event(std::string_view bytes) {
    // (Base64 needs no JSON escaping.)
    return "data: {\"type\":\"speech.audio.delta\",\"audio\":\"" + base64(bytes) + "\"}\n\n";
}

std::string speech_audio_done_event() {
    return "data: {\"type\":\"speech.audio.done\",\"usage\":"
           "{\"input_tokens\":0,\"output_tokens\":0,\"total_tokens\":0}}\n\n";
}

}  // namespace etude::server
