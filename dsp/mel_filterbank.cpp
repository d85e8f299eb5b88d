#include "dsp/mel_filterbank.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

namespace etude::dsp {

namespace {

// Slaney's Auditory Toolbox constants, as librosa uses them.
constexpr double kSlaneyHzPerMel = 200.0 / 3.0;
constexpr double kSlaneyBreakHz = 1000.0;
constexpr double kSlaneyBreakMel = kSlaneyBreakHz / kSlaneyHzPerMel;  // 15
const double kSlaneyLogStep = std::log(6.4) / 27.0;

}  // namespace

double hz_to_mel(double hz, MelScale scale) {
    if (scale == MelScale::Htk) return 2595.0 * std::log10(1.0 + hz / 700.0);
    if (hz < kSlaneyBreakHz) return hz / kSlaneyHzPerMel;
    return kSlaneyBreakMel + std::log(hz / kSlaneyBreakHz) / kSlaneyLogStep;
}

double mel_to_hz(double mel, MelScale scale) {
    if (scale == MelScale::Htk) return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    if (mel < kSlaneyBreakMel) return mel * kSlaneyHzPerMel;
    return kSlaneyBreakHz * std::exp(kSlaneyLogStep * (mel - kSlaneyBreakMel));
}

MelFilterbank::MelFilterbank(double sample_rate, std::size_t n_fft, std::size_t n_mels, double fmin,
                             double fmax, MelScale scale, MelNorm norm)
    : n_mels_(n_mels), n_bins_(n_fft / 2 + 1) {
    if (!(sample_rate > 0.0)) throw std::invalid_argument("MelFilterbank: sample_rate must be > 0");
    if (n_fft < 2) throw std::invalid_argument("MelFilterbank: n_fft must be >= 2");
    if (n_mels < 1) throw std::invalid_argument("MelFilterbank: n_mels must be >= 1");
    if (!(fmin >= 0.0) || !(fmax > fmin)) {
        throw std::invalid_argument("MelFilterbank: need 0 <= fmin < fmax");
    }

    // Edge frequencies of all triangles: filter m rises from edge m to m+1, falls to m+2.
    const double mel_lo = hz_to_mel(fmin, scale);
    const double mel_hi = hz_to_mel(fmax, scale);
    std::vector<double> edges(n_mels + 2);
    for (std::size_t i = 0; i < edges.size(); ++i) {
        const double mel =
            mel_lo + (mel_hi - mel_lo) * static_cast<double>(i) / static_cast<double>(n_mels + 1);
        edges[i] = mel_to_hz(mel, scale);
    }

    const double bin_hz = sample_rate / 2.0 / static_cast<double>(n_bins_ - 1);
    weights_.assign(n_mels * n_bins_, 0.0f);
    first_.assign(n_mels, 0);
    last_.assign(n_mels, 0);
    for (std::size_t m = 0; m < n_mels; ++m) {
        const double lo = edges[m], centre = edges[m + 1], hi = edges[m + 2];
        const double gain = norm == MelNorm::Slaney ? 2.0 / (hi - lo) : 1.0;
        std::size_t first = n_bins_, last = 0;
        for (std::size_t k = 0; k < n_bins_; ++k) {
            const double f = static_cast<double>(k) * bin_hz;
            const double rising = (f - lo) / (centre - lo);
            const double falling = (hi - f) / (hi - centre);
            const double w = std::max(0.0, std::min(rising, falling));
            if (w > 0.0) {
                weights_[m * n_bins_ + k] = static_cast<float>(w * gain);
                first = std::min(first, k);
                last = k + 1;
            }
        }
        if (first < last) {
            first_[m] = first;
            last_[m] = last;
        }
    }
}

void MelFilterbank::apply(std::span<const float> spectrum, std::span<float> mel_out) const {
    assert(spectrum.size() == n_bins_ && mel_out.size() == n_mels_);
    for (std::size_t m = 0; m < n_mels_; ++m) {
        const float* row = weights_.data() + m * n_bins_;
        float sum = 0.0f;
        for (std::size_t k = first_[m]; k < last_[m]; ++k) sum += row[k] * spectrum[k];
        mel_out[m] = sum;
    }
}

}  // namespace etude::dsp
