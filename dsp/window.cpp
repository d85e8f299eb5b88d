#include "dsp/window.h"

#include <cctype>
#include <cmath>
#include <numbers>
#include <string>

namespace etude::dsp {

std::vector<float> make_window(WindowType type, std::size_t n, bool periodic) {
    std::vector<float> w(n, 1.0f);
    if (n <= 1 || type == WindowType::Rectangular) return w;

    // Generalised cosine window sum_k (-1)^k a_k cos(2 pi k i / denom); computed in double so
    // the float result is correctly rounded and symmetric.
    double a0 = 0.5, a1 = 0.5, a2 = 0.0;
    switch (type) {
        case WindowType::Hann:
            break;
        case WindowType::Hamming:
            a0 = 0.54;
            a1 = 0.46;
            break;
        case WindowType::Blackman:
            a0 = 0.42;
            a1 = 0.5;
            a2 = 0.08;
            break;
        case WindowType::Rectangular:
            break;
    }
    const double denom = static_cast<double>(periodic ? n : n - 1);
    for (std::size_t i = 0; i < n; ++i) {
        const double phase = 2.0 * std::numbers::pi * static_cast<double>(i) / denom;
        w[i] = static_cast<float>(a0 - a1 * std::cos(phase) + a2 * std::cos(2.0 * phase));
    }
    return w;
}

std::optional<WindowType> parse_window(std::string_view name) {
    std::string lower(name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "hann" || lower == "hanning") return WindowType::Hann;
    if (lower == "hamming") return WindowType::Hamming;
    if (lower == "blackman") return WindowType::Blackman;
    if (lower == "rectangular" || lower == "rect" || lower == "boxcar" || lower == "ones") {
        return WindowType::Rectangular;
    }
    return std::nullopt;
}

}  // namespace etude::dsp
