#include "dsp/mel_cepstrum.h"

#include <cassert>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace etude::dsp {

MelCepstrumEnvelope::MelCepstrumEnvelope(std::size_t n_coefficients, double alpha,
                                         std::size_t n_fft)
    : n_coeffs_(n_coefficients), n_bins_(n_fft / 2 + 1), alpha_(alpha) {
    if (n_coefficients == 0 || n_fft < 2)
        throw std::invalid_argument("mel-cepstrum envelope needs coefficients and n_fft >= 2");
    if (!(std::abs(alpha) < 1.0)) throw std::invalid_argument("warping alpha must be in (-1, 1)");
    basis_.resize(n_bins_ * n_coeffs_);
    for (std::size_t k = 0; k < n_bins_; ++k) {
        const double w =
            std::numbers::pi * static_cast<double>(k) / static_cast<double>(n_bins_ - 1);
        const double warped = w + 2.0 * std::atan2(alpha * std::sin(w), 1.0 - alpha * std::cos(w));
        for (std::size_t m = 0; m < n_coeffs_; ++m)
            basis_[k * n_coeffs_ + m] =
                static_cast<float>(std::cos(static_cast<double>(m) * warped));
    }
}

void MelCepstrumEnvelope::log_amplitude(std::span<const float> mcep, std::span<float> out) const {
    assert(mcep.size() >= n_coeffs_ && out.size() >= n_bins_);
    for (std::size_t k = 0; k < n_bins_; ++k) {
        const float* row = &basis_[k * n_coeffs_];
        float acc = 0.0f;
        for (std::size_t m = 0; m < n_coeffs_; ++m) acc += row[m] * mcep[m];
        out[k] = acc;
    }
}

void MelCepstrumEnvelope::amplitude(std::span<const float> mcep, std::span<float> out) const {
    log_amplitude(mcep, out);
    for (std::size_t k = 0; k < n_bins_; ++k) out[k] = std::exp(out[k]);
}

void warp_cepstrum(std::span<const double> in, double alpha, std::span<double> out) {
    const std::size_t n = out.size();
    std::vector<double> prev(n, 0.0), cur(n, 0.0);
    const double b = 1.0 - alpha * alpha;
    for (std::size_t i = in.size(); i-- > 0;) {
        prev = cur;
        if (n > 0) cur[0] = in[i] + alpha * prev[0];
        if (n > 1) cur[1] = b * prev[0] + alpha * prev[1];
        for (std::size_t j = 2; j < n; ++j) cur[j] = prev[j - 1] + alpha * (prev[j] - cur[j - 1]);
    }
    std::copy(cur.begin(), cur.end(), out.begin());
}

}  // namespace etude::dsp
