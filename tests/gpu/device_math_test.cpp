// The device functions that the GLSL dialect uses instead of the driver's
// (gpu/kernels/device_math.h) and the FFT pass the Vulkan backend runs
// (gpu/kernels/fft_bodies.h), compiled as host C++ and checked against
// double precision. What a Vulkan device computes is these same functions,
// so their error here is their error on every vendor's driver (up to a fused
// multiply-add, which only makes a step more exact).
#include "gpu/kernels/device_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

#include "gpu/kernels/fft_bodies.h"

namespace etude::gpu {
namespace {

using namespace device_math;

// |got - want| in units of the float spacing at want.
double ulps(double want, float got) {
    const float w = static_cast<float>(std::fabs(want));
    const double spacing = std::nextafter(w, INFINITY) - w;
    return std::fabs(got - want) / spacing;
}

TEST(DeviceMath, exp_is_within_two_ulp_and_overflows_like_the_cpu) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-100.0f, 88.0f);
    double worst = 0;
    for (int i = 0; i < 200000; ++i) {
        const float x = d(rng);
        worst = std::max(worst, ulps(std::exp(double(x)), etude_exp(x)));
    }
    std::printf("[ math ] exp: worst %.2f ulp\n", worst);
    EXPECT_LE(worst, 2.0);
    EXPECT_EQ(etude_exp(0.0f), 1.0f);
    EXPECT_TRUE(std::isinf(etude_exp(89.0f)));
    EXPECT_EQ(etude_exp(-104.0f), 0.0f);
    EXPECT_GT(etude_exp(88.7f), 3e38f);  // 2^128 is never formed on the way
}

TEST(DeviceMath, sin_and_cos_are_within_2e7_absolute_far_from_zero_too) {
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> d(-8192.0f, 8192.0f);
    double worst = 0;
    for (int i = 0; i < 200000; ++i) {
        const float x = i % 2 ? d(rng) : d(rng) * 1e-3f;
        worst = std::max(worst, std::fabs(etude_sin(x) - std::sin(double(x))));
        worst = std::max(worst, std::fabs(etude_cos(x) - std::cos(double(x))));
    }
    std::printf("[ math ] sin, cos: worst %.3g absolute\n", worst);
    EXPECT_LE(worst, 2e-7);
    EXPECT_EQ(etude_sin(0.0f), 0.0f);
    EXPECT_EQ(etude_cos(0.0f), 1.0f);
}

TEST(DeviceMath, tanh_is_within_three_ulp_and_saturates_without_nan) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> d(-12.0f, 12.0f);
    double worst = 0;
    for (int i = 0; i < 200000; ++i) {
        const float x = i % 3 ? d(rng) : d(rng) * 0.05f;
        worst = std::max(worst, ulps(std::tanh(double(x)), etude_tanh(x)));
    }
    std::printf("[ math ] tanh: worst %.2f ulp\n", worst);
    EXPECT_LE(worst, 3.0);
    EXPECT_EQ(etude_tanh(100.0f), 1.0f);
    EXPECT_EQ(etude_tanh(-1e30f), -1.0f);
}

TEST(DeviceMath, erf_is_within_3e7_absolute) {
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> d(-6.0f, 6.0f);
    double worst = 0;
    for (int i = 0; i < 200000; ++i) {
        const float x = i % 3 ? d(rng) : d(rng) * 0.05f;
        worst = std::max(worst, std::fabs(etude_erf(x) - std::erf(double(x))));
    }
    std::printf("[ math ] erf: worst %.3g absolute\n", worst);
    EXPECT_LE(worst, 3e-7);
    EXPECT_EQ(etude_erf(0.0f), 0.0f);
    EXPECT_EQ(etude_erf(10.0f), 1.0f);
}

// The passes as the Vulkan backend runs them (gpu/vulkan/vulkan_fft.cpp),
// element by element on the host.
void run_fft(int n, int batch, bool forward, const float* in, float* out) {
    std::vector<float> twiddles(2 * std::size_t(n));
    for (int e = 0; e < n; ++e) {
        twiddles[2 * e] = float(std::cos(2 * std::numbers::pi * e / n));
        twiddles[2 * e + 1] = float(-std::sin(2 * std::numbers::pi * e / n));
    }
    const auto passes = bodies::fft_passes(n, forward);
    std::vector<float> scratch[2] = {std::vector<float>(2 * std::size_t(n) * batch),
                                     std::vector<float>(2 * std::size_t(n) * batch)};
    for (std::size_t i = 0; i < passes.size(); ++i) {
        const float* src = i == 0 ? in : scratch[(i - 1) % 2].data();
        float* dst = i + 1 == passes.size() ? out : scratch[i % 2].data();
        const auto& p = passes[i];
        for (int row = 0; row < batch; ++row)
            for (int idx = 0; idx < n; ++idx)
                bodies::fft_pass_at(row, idx, n, p.radix, p.span, p.load, p.store, forward ? 0 : 1,
                                    1.0f / n, twiddles.data(), src, dst);
    }
}

TEST(FftBodies, every_length_matches_a_double_precision_dft_and_inverts) {
    // Powers of two, mixed radices, primes, and the lengths of one pass.
    for (int n : {1, 2, 3, 4, 8, 12, 96, 97, 256, 1000, 1001, 1024}) {
        const int batch = 3, bins = n / 2 + 1;
        std::mt19937 rng{static_cast<unsigned>(n)};
        std::uniform_real_distribution<float> d(-1.0f, 1.0f);
        std::vector<float> x(std::size_t(n) * batch);
        for (auto& v : x) v = d(rng);
        std::vector<float> spectrum(2 * std::size_t(bins) * batch, 999.0f);
        run_fft(n, batch, true, x.data(), spectrum.data());
        double err = 0, peak = 0;
        for (int r = 0; r < batch; ++r)
            for (int k = 0; k < bins; ++k) {
                std::complex<double> want = 0;
                for (int t = 0; t < n; ++t)
                    want += double(x[r * n + t]) *
                            std::polar(1.0, -2 * std::numbers::pi * double(k) * t / n);
                const std::complex<double> got(spectrum[2 * (r * bins + k)],
                                               spectrum[2 * (r * bins + k) + 1]);
                err = std::max(err, std::abs(want - got));
                peak = std::max(peak, std::abs(want));
            }
        // Error grows with the passes: log2(n) roundings of sums of size ~sqrt(n).
        EXPECT_LE(err / peak, 1e-6) << "n=" << n;
        // The inverse ignores imag(DC) and imag(Nyquist), as FFTW does.
        for (int r = 0; r < batch; ++r) {
            spectrum[2 * (r * bins) + 1] = 0.5f;
            if (n % 2 == 0) spectrum[2 * (r * bins + bins - 1) + 1] = -0.75f;
        }
        std::vector<float> back(x.size(), 999.0f);
        run_fft(n, batch, false, spectrum.data(), back.data());
        double round = 0;
        for (std::size_t i = 0; i < x.size(); ++i)
            round = std::max(round, double(std::fabs(back[i] - x[i])));
        EXPECT_LE(round, 1e-6) << "n=" << n;
    }
}

}  // namespace
}  // namespace etude::gpu
