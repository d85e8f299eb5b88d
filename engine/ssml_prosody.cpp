#include "engine/ssml_prosody.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace etude::engine {
namespace {

// A number at the start of `value` and what follows it ("+6dB" -> 6, "dB").
struct Number {
    double value = 0;
    bool signed_ = false;  // written with + or -: a change, not a level
    std::string unit;
};

std::optional<Number> read_number(std::string_view value) {
    const std::string s(value);
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || !std::isfinite(v)) return std::nullopt;
    Number n;
    n.value = v;
    n.signed_ = s[0] == '+' || s[0] == '-';
    n.unit = end;
    return n;
}

std::optional<float> label(std::string_view value, const char* const (&names)[6],
                           const float (&factors)[6]) {
    for (int i = 0; i < 6; ++i)
        if (value == names[i]) return factors[i];
    return std::nullopt;
}

// A relative change of an F0 (pitch) or of its spread (range): "+10%",
// "-2st". An absolute value in Hz needs the voice's own F0: none.
std::optional<float> f0_change(std::string_view value, double lowest, double highest) {
    auto n = read_number(value);
    if (!n || !n->signed_) return std::nullopt;
    double f;
    if (n->unit == "%")
        f = 1.0 + n->value / 100.0;
    else if (n->unit == "st")
        f = std::pow(2.0, n->value / 12.0);
    else
        return std::nullopt;
    if (!(f >= 0)) return std::nullopt;
    return static_cast<float>(std::clamp(f, lowest, highest));
}

}  // namespace

Prosody Prosody::within(const Prosody& outer) const {
    Prosody p;
    p.rate = std::clamp(rate * outer.rate, 0.1f, 10.0f);
    p.pitch = std::clamp(pitch * outer.pitch, 0.5f, 2.0f);
    p.range = std::clamp(range * outer.range, 0.0f, 4.0f);
    p.volume = std::clamp(volume * outer.volume, 0.0f, 4.0f);
    return p;
}

std::optional<float> prosody_rate(std::string_view value) {
    static const char* const names[6] = {"x-slow", "slow", "medium", "fast", "x-fast", "default"};
    static const float factors[6] = {0.5f, 0.75f, 1.0f, 1.5f, 2.0f, 1.0f};
    if (auto f = label(value, names, factors)) return f;
    auto n = read_number(value);
    if (!n) return std::nullopt;
    double f;
    if (n->unit == "%")
        f = n->signed_ ? 1.0 + n->value / 100.0 : n->value / 100.0;
    else if (n->unit.empty() && !n->signed_)
        f = n->value;
    else
        return std::nullopt;
    if (!(f > 0)) return std::nullopt;
    return static_cast<float>(std::clamp(f, 0.1, 10.0));
}

std::optional<float> prosody_pitch(std::string_view value) {
    static const char* const names[6] = {"x-low", "low", "medium", "high", "x-high", "default"};
    static const float factors[6] = {0.8f, 0.9f, 1.0f, 1.1f, 1.2f, 1.0f};
    if (auto f = label(value, names, factors)) return f;
    return f0_change(value, 0.5, 2.0);
}

std::optional<float> prosody_volume(std::string_view value) {
    static const char* const names[6] = {"silent", "x-soft", "soft", "medium", "loud", "x-loud"};
    static const float factors[6] = {0.0f, 0.25f, 0.5f, 1.0f, 1.5f, 2.0f};
    if (auto f = label(value, names, factors)) return f;
    if (value == "default") return 1.0f;
    auto n = read_number(value);
    if (!n) return std::nullopt;
    double f;
    if (n->unit == "dB")
        f = std::pow(10.0, n->value / 20.0);
    else if (n->unit == "%" && n->signed_)
        f = 1.0 + n->value / 100.0;
    else if (n->unit.empty() && !n->signed_ && n->value <= 100.0)
        f = n->value / 100.0;
    else
        return std::nullopt;
    if (!(f >= 0)) return std::nullopt;
    return static_cast<float>(std::clamp(f, 0.0, 4.0));
}

std::optional<float> prosody_range(std::string_view value) {
    static const char* const names[6] = {"x-low", "low", "medium", "high", "x-high", "default"};
    static const float factors[6] = {0.25f, 0.5f, 1.0f, 1.5f, 2.0f, 1.0f};
    if (auto f = label(value, names, factors)) return f;
    return f0_change(value, 0.0, 4.0);
}

void shape_f0(std::span<float> f0, const Prosody& p) {
    if (p.range != 1.0f) {
        double sum = 0;
        std::size_t voiced = 0;
        for (float v : f0)
            if (v > 0) sum += v, ++voiced;
        if (voiced > 0) {
            const auto mean = static_cast<float>(sum / static_cast<double>(voiced));
            // Kept voiced: a wide range must not push a low frame to 0 Hz.
            for (float& v : f0)
                if (v > 0) v = std::max(mean + (v - mean) * p.range, 0.25f * mean);
        }
    }
    if (p.pitch != 1.0f)
        for (float& v : f0) v *= p.pitch;  // 0 (unvoiced) stays 0
}

}  // namespace etude::engine
