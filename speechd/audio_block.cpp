#include "speechd/audio_block.h"

#include <algorithm>
#include <cmath>

namespace etude::speechd {

namespace {

// Above this share of full scale, audio raised by a gain past 1 is eased
// towards full scale rather than clipped.
constexpr float kKnee = 0.7f;

// |v| up to kKnee as it is; above, kKnee + (1 - kKnee) tanh((|v| - kKnee) /
// (1 - kKnee)): the same value and slope at the knee, and below full scale
// however loud. A limiter with no memory: a gain that would clip a peak
// rounds it off instead, and leaves everything softer exact.
float eased(float v) {
    const float a = std::fabs(v);
    if (a <= kKnee) return v;
    return std::copysign(kKnee + (1.0f - kKnee) * std::tanh((a - kKnee) / (1.0f - kKnee)), v);
}

short to_short(float v) {
    return static_cast<short>(std::clamp(std::lrint(v * 32768.0f), -32768L, 32767L));
}

}  // namespace

void to_pcm16(std::span<const float> in, float gain, std::vector<short>& out) {
    out.resize(in.size());
    if (gain <= 1.0f) {
        for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_short(in[i] * gain);
        return;
    }
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = to_short(eased(in[i] * gain));
}

std::string encode_audio_event(std::span<const short> samples, int rate) {
    std::string m;
    m.reserve(samples.size() * 2 + samples.size() / 64 + 128);
    m += "705-bits=16\n705-num_channels=1\n705-sample_rate=";
    m += std::to_string(rate);
    m += "\n705-num_samples=";
    m += std::to_string(samples.size());
    m += "\n705-big_endian=0\n705-AUDIO";
    m += '\0';
    for (const short s : samples) {
        const auto u = static_cast<unsigned short>(s);
        // Little-endian whatever the host: the header says big_endian=0.
        for (const unsigned char byte :
             {static_cast<unsigned char>(u & 0xFF), static_cast<unsigned char>(u >> 8)}) {
            if (byte == 0x0A || byte == 0x7D) {
                m += static_cast<char>(0x7D);
                m += static_cast<char>(byte ^ 0x20);
            } else {
                m += static_cast<char>(byte);
            }
        }
    }
    m += "\n705 AUDIO\n";
    return m;
}

}  // namespace etude::speechd
