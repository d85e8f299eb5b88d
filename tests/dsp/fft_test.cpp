#include "dsp/fft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

namespace etude::dsp {
namespace {

std::vector<float> random_signal(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    return x;
}

// Textbook DFT in double, bins 0..n/2.
std::vector<std::complex<double>> direct_dft(const std::vector<float>& x) {
    const std::size_t n = x.size();
    std::vector<std::complex<double>> out(n / 2 + 1);
    for (std::size_t k = 0; k < out.size(); ++k) {
        std::complex<double> sum = 0.0;
        for (std::size_t t = 0; t < n; ++t) {
            // Reduce k*t mod n first so the angle stays small and accurate for large n.
            const double angle =
                -2.0 * std::numbers::pi * static_cast<double>((k * t) % n) / static_cast<double>(n);
            sum += static_cast<double>(x[t]) * std::polar(1.0, angle);
        }
        out[k] = sum;
    }
    return out;
}

class RealFftSizes : public ::testing::TestWithParam<std::size_t> {};

TEST_P(RealFftSizes, forward_matches_direct_dft) {
    const std::size_t n = GetParam();
    RealFft fft(n);
    ASSERT_EQ(fft.size(), n);
    ASSERT_EQ(fft.bins(), n / 2 + 1);
    const auto x = random_signal(n, static_cast<unsigned>(n));
    std::vector<std::complex<float>> got(fft.bins());
    fft.forward(x, got);
    const auto want = direct_dft(x);
    // Float FFT error grows like sqrt(n) * log(n) * eps relative to the signal energy.
    const double tol = 1e-5 * std::sqrt(static_cast<double>(n)) * std::log2(static_cast<double>(n));
    for (std::size_t k = 0; k < want.size(); ++k) {
        EXPECT_NEAR(got[k].real(), want[k].real(), tol) << "bin " << k;
        EXPECT_NEAR(got[k].imag(), want[k].imag(), tol) << "bin " << k;
    }
}

TEST_P(RealFftSizes, inverse_of_forward_is_identity) {
    const std::size_t n = GetParam();
    RealFft fft(n);
    const auto x = random_signal(n, static_cast<unsigned>(n) + 1000);
    std::vector<std::complex<float>> spectrum(fft.bins());
    std::vector<float> back(n);
    fft.forward(x, spectrum);
    fft.inverse(spectrum, back);
    for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(back[i], x[i], 1e-5) << "sample " << i;
}

INSTANTIATE_TEST_SUITE_P(Fft, RealFftSizes,
                         ::testing::Values(2, 3, 5, 8, 15, 64, 100, 257, 400, 512, 1000, 1024));

TEST(Fft, impulse_gives_flat_spectrum_and_cosine_gives_single_bin) {
    const std::size_t n = 48;
    RealFft fft(n);
    std::vector<float> x(n, 0.0f);
    x[0] = 1.0f;
    std::vector<std::complex<float>> spectrum(fft.bins());
    fft.forward(x, spectrum);
    for (const auto& c : spectrum) {
        EXPECT_NEAR(c.real(), 1.0f, 1e-6);
        EXPECT_NEAR(c.imag(), 0.0f, 1e-6);
    }
    for (std::size_t i = 0; i < n; ++i) {
        x[i] = static_cast<float>(std::cos(2.0 * std::numbers::pi * 5.0 * i / n));
    }
    fft.forward(x, spectrum);
    for (std::size_t k = 0; k < spectrum.size(); ++k) {
        EXPECT_NEAR(std::abs(spectrum[k]), k == 5 ? n / 2.0 : 0.0, 1e-4) << "bin " << k;
    }
}

TEST(Fft, moved_fft_still_transforms_and_source_is_empty) {
    RealFft a(16);
    RealFft b(std::move(a));
    EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): documented moved-from state
    EXPECT_EQ(b.size(), 16u);
    RealFft c(8);
    c = std::move(b);
    EXPECT_EQ(c.size(), 16u);
    const auto x = random_signal(16, 7);
    std::vector<std::complex<float>> spectrum(c.bins());
    std::vector<float> back(16);
    c.forward(x, spectrum);
    c.inverse(spectrum, back);
    for (std::size_t i = 0; i < 16; ++i) EXPECT_NEAR(back[i], x[i], 1e-6);
}

TEST(Fft, sizes_below_two_throw) {
    EXPECT_THROW(RealFft(0), std::invalid_argument);
    EXPECT_THROW(RealFft(1), std::invalid_argument);
}

}  // namespace
}  // namespace etude::dsp
