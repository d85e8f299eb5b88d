#include "dsp/mel_filterbank.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

namespace etude::dsp {
namespace {

// Reference formulas written out again, independently of the library: librosa's
// hz_to_mel/mel_to_hz (htk=False) and the HTK formula.
double ref_mel(double hz, bool htk) {
    if (htk) return 2595.0 * std::log10(1.0 + hz / 700.0);
    const double logstep = std::log(6.4) / 27.0;
    return hz >= 1000.0 ? 15.0 + std::log(hz / 1000.0) / logstep : 3.0 * hz / 200.0;
}

double ref_hz(double mel, bool htk) {
    if (htk) return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    const double logstep = std::log(6.4) / 27.0;
    return mel >= 15.0 ? 1000.0 * std::exp(logstep * (mel - 15.0)) : 200.0 * mel / 3.0;
}

// Weight of FFT bin `k` in filter `m`, computed on its own from the definitions: the triangle
// over the Hz values of mel points m, m+1, m+2 of n_mels+2 equally spaced ones.
double ref_weight(std::size_t m, std::size_t k, double sr, std::size_t n_fft, std::size_t n_mels,
                  double fmin, double fmax, bool htk, bool slaney_norm) {
    const double lo_mel = ref_mel(fmin, htk), hi_mel = ref_mel(fmax, htk);
    const double step = (hi_mel - lo_mel) / static_cast<double>(n_mels + 1);
    const double left = ref_hz(lo_mel + step * static_cast<double>(m), htk);
    const double centre = ref_hz(lo_mel + step * static_cast<double>(m + 1), htk);
    const double right = ref_hz(lo_mel + step * static_cast<double>(m + 2), htk);
    const double f = static_cast<double>(k) * sr / static_cast<double>(n_fft);
    double w = 0.0;
    if (f > left && f <= centre) {
        w = (f - left) / (centre - left);
    } else if (f > centre && f < right) {
        w = (right - f) / (right - centre);
    }
    return slaney_norm ? w * 2.0 / (right - left) : w;
}

TEST(MelScale, slaney_literal_values) {
    EXPECT_DOUBLE_EQ(hz_to_mel(0.0, MelScale::Slaney), 0.0);
    EXPECT_DOUBLE_EQ(hz_to_mel(500.0, MelScale::Slaney), 7.5);
    EXPECT_DOUBLE_EQ(hz_to_mel(1000.0, MelScale::Slaney), 15.0);
    // One full log step of 6.4x above 1 kHz spans 27 mels.
    EXPECT_NEAR(hz_to_mel(6400.0, MelScale::Slaney), 42.0, 1e-12);
    EXPECT_NEAR(mel_to_hz(42.0, MelScale::Slaney), 6400.0, 1e-9);
    EXPECT_DOUBLE_EQ(mel_to_hz(3.0, MelScale::Slaney), 200.0);
}

TEST(MelScale, htk_literal_values) {
    EXPECT_NEAR(hz_to_mel(1000.0, MelScale::Htk), 999.9855, 1e-4);
    EXPECT_NEAR(hz_to_mel(700.0, MelScale::Htk), 2595.0 * std::log10(2.0), 1e-12);
    EXPECT_NEAR(mel_to_hz(2595.0, MelScale::Htk), 6300.0, 1e-9);
    EXPECT_DOUBLE_EQ(mel_to_hz(0.0, MelScale::Htk), 0.0);
}

TEST(MelScale, mel_to_hz_inverts_hz_to_mel) {
    for (MelScale scale : {MelScale::Slaney, MelScale::Htk}) {
        for (double hz : {0.0, 20.0, 440.0, 999.0, 1000.0, 1001.0, 4000.0, 8000.0, 12000.0}) {
            EXPECT_NEAR(mel_to_hz(hz_to_mel(hz, scale), scale), hz, 1e-9 * (1.0 + hz));
        }
    }
}

TEST(MelFilterbank, tiny_bank_matches_hand_derived_weights) {
    // Bins at 0, 1000, 2000, 3000, 4000 Hz; one HTK filter from 0 to 4000 Hz. Its centre is
    // half way in mel, i.e. 1 + f/700 is the geometric mean of 1 and 1 + 4000/700.
    const double c = 700.0 * (std::sqrt(1.0 + 4000.0 / 700.0) - 1.0);  // ~1113.8 Hz
    MelFilterbank htk(8000.0, 8, 1, 0.0, 4000.0, MelScale::Htk, MelNorm::None);
    ASSERT_EQ(htk.n_bins(), 5u);
    const std::vector<double> want = {0.0, 1000.0 / c, 2000.0 / (4000.0 - c), 1000.0 / (4000.0 - c),
                                      0.0};
    for (std::size_t k = 0; k < 5; ++k) EXPECT_NEAR(htk.weights()[k], want[k], 1e-6) << k;

    // Slaney filter from 0 to 2000 Hz: mel(2000) = 15 + 27 log2 / log 6.4, centre below 1 kHz.
    const double top_mel = 15.0 + 27.0 * std::log(2.0) / std::log(6.4);
    const double cs = top_mel / 2.0 * 200.0 / 3.0;  // ~836 Hz
    MelFilterbank slaney(8000.0, 8, 1, 0.0, 2000.0, MelScale::Slaney, MelNorm::Slaney);
    EXPECT_NEAR(slaney.weights()[0], 0.0, 1e-9);
    EXPECT_NEAR(slaney.weights()[1], (2000.0 - 1000.0) / (2000.0 - cs) * 2.0 / 2000.0, 1e-8);
    EXPECT_NEAR(slaney.weights()[2], 0.0, 1e-9);
}

struct BankConfig {
    double sr;
    std::size_t n_fft;
    std::size_t n_mels;
    double fmin;
    double fmax;
    bool htk;
};

void PrintTo(const BankConfig& c, std::ostream* os) {
    *os << "sr " << c.sr << " n_fft " << c.n_fft << " n_mels " << c.n_mels << " fmax " << c.fmax
        << (c.htk ? " htk/none" : " slaney/slaney");
}

class MelBank : public ::testing::TestWithParam<BankConfig> {
  protected:
    MelFilterbank make() const {
        const auto& c = GetParam();
        return MelFilterbank(c.sr, c.n_fft, c.n_mels, c.fmin, c.fmax,
                             c.htk ? MelScale::Htk : MelScale::Slaney,
                             c.htk ? MelNorm::None : MelNorm::Slaney);
    }
};

TEST_P(MelBank, weights_match_reference_formulas) {
    const auto& c = GetParam();
    const MelFilterbank bank = make();
    ASSERT_EQ(bank.n_mels(), c.n_mels);
    ASSERT_EQ(bank.n_bins(), c.n_fft / 2 + 1);
    ASSERT_EQ(bank.weights().size(), c.n_mels * (c.n_fft / 2 + 1));
    for (std::size_t m = 0; m < c.n_mels; ++m) {
        for (std::size_t k = 0; k < bank.n_bins(); ++k) {
            const double want =
                ref_weight(m, k, c.sr, c.n_fft, c.n_mels, c.fmin, c.fmax, c.htk, !c.htk);
            // Relative to the filter's scale: float storage of double weights.
            const double scale = c.htk ? 1.0 : 2.0 / 100.0;
            ASSERT_NEAR(bank.weights()[m * bank.n_bins() + k], want, 1e-6 * scale)
                << "mel " << m << " bin " << k;
        }
    }
}

TEST_P(MelBank, filters_peak_at_their_centre_frequencies) {
    const auto& c = GetParam();
    const MelFilterbank bank = make();
    const double bin_hz = c.sr / static_cast<double>(c.n_fft);
    const double lo = ref_mel(c.fmin, c.htk), hi = ref_mel(c.fmax, c.htk);
    for (std::size_t m = 0; m < c.n_mels; ++m) {
        const auto row = bank.weights().subspan(m * bank.n_bins(), bank.n_bins());
        const auto peak =
            static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
        const double centre =
            ref_hz(lo + (hi - lo) * static_cast<double>(m + 1) / (c.n_mels + 1.0), c.htk);
        EXPECT_LE(std::abs(static_cast<double>(peak) * bin_hz - centre), bin_hz) << "mel " << m;
        // Every filter is nonnegative and nonempty in these configurations.
        EXPECT_GT(row[peak], 0.0f) << "mel " << m;
        for (float w : row) EXPECT_GE(w, 0.0f);
    }
}

TEST_P(MelBank, slaney_filters_have_unit_area_and_htk_filters_unit_peak) {
    const auto& c = GetParam();
    const MelFilterbank bank = make();
    const double bin_hz = c.sr / static_cast<double>(c.n_fft);
    const double lo = ref_mel(c.fmin, c.htk), hi = ref_mel(c.fmax, c.htk);
    std::size_t checked = 0;
    for (std::size_t m = 0; m < c.n_mels; ++m) {
        const auto row = bank.weights().subspan(m * bank.n_bins(), bank.n_bins());
        const double left =
            ref_hz(lo + (hi - lo) * static_cast<double>(m) / (c.n_mels + 1.0), c.htk);
        const double right =
            ref_hz(lo + (hi - lo) * static_cast<double>(m + 2) / (c.n_mels + 1.0), c.htk);
        // Sampling a triangle on the bin grid only approximates its area and peak; judge
        // filters spanning at least 8 bins.
        if (right - left < 8.0 * bin_hz) continue;
        ++checked;
        double area = 0.0;
        for (float w : row) area += static_cast<double>(w) * bin_hz;
        const float peak = *std::max_element(row.begin(), row.end());
        if (c.htk) {
            EXPECT_NEAR(peak, 1.0f, 2.0 * bin_hz / (right - left)) << "mel " << m;
            EXPECT_NEAR(area, (right - left) / 2.0, 0.05 * (right - left) / 2.0) << "mel " << m;
        } else {
            EXPECT_NEAR(area, 1.0, 0.03) << "mel " << m;
        }
    }
    EXPECT_GT(checked, c.n_mels / 3);
}

TEST_P(MelBank, apply_equals_matrix_product) {
    const MelFilterbank bank = make();
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(0.0f, 2.0f);
    std::vector<float> spectrum(bank.n_bins());
    for (auto& v : spectrum) v = dist(rng);
    std::vector<float> mel(bank.n_mels(), -1.0f);
    bank.apply(spectrum, mel);
    for (std::size_t m = 0; m < bank.n_mels(); ++m) {
        double want = 0.0;
        for (std::size_t k = 0; k < bank.n_bins(); ++k) {
            want += static_cast<double>(bank.weights()[m * bank.n_bins() + k]) * spectrum[k];
        }
        EXPECT_NEAR(mel[m], want, 1e-5 * (1.0 + std::abs(want))) << "mel " << m;
    }
}

INSTANTIATE_TEST_SUITE_P(MelFilterbank, MelBank,
                         ::testing::Values(BankConfig{22050, 1024, 80, 0, 8000, false},
                                           BankConfig{22050, 1024, 80, 0, 8000, true},
                                           BankConfig{24000, 1024, 100, 0, 12000, false},
                                           BankConfig{24000, 1024, 100, 0, 12000, true}));

TEST(MelFilterbank, invalid_arguments_throw) {
    EXPECT_THROW(MelFilterbank(0.0, 1024, 80, 0, 8000), std::invalid_argument);
    EXPECT_THROW(MelFilterbank(22050, 1, 80, 0, 8000), std::invalid_argument);
    EXPECT_THROW(MelFilterbank(22050, 1024, 0, 0, 8000), std::invalid_argument);
    EXPECT_THROW(MelFilterbank(22050, 1024, 80, 8000, 8000), std::invalid_argument);
    EXPECT_THROW(MelFilterbank(22050, 1024, 80, -1, 8000), std::invalid_argument);
}

}  // namespace
}  // namespace etude::dsp
