// The CPU reference backend's vocoder helpers (axpby, transpose, add_bias,
// polar_spectrum, the activations) against values computed here from their definitions in
// gpu/backend.h. The OpenCL and CUDA parity tests compare those backends
// with this one, so this is where the reference itself is pinned down.
#include "gpu/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace etude::gpu {
namespace {

class CpuBackendOps : public ::testing::Test {
  protected:
    DeviceBuffer upload(const std::vector<float>& v) {
        auto b = cpu_.allocate(v.size(), "test");
        cpu_.copy_to_device(*q_, b, 0, v.data(), v.size());
        return b;
    }
    std::vector<float> download(const DeviceBuffer& b, std::size_t n) {
        std::vector<float> v(n);
        cpu_.copy_to_host(*q_, v.data(), b, 0, n);
        return v;
    }
    std::vector<float> random(std::size_t n, float lo = -1.0f, float hi = 1.0f) {
        std::uniform_real_distribution<float> d(lo, hi);
        std::vector<float> v(n);
        for (auto& e : v) e = d(rng_);
        return v;
    }

    CpuBackend cpu_;
    std::unique_ptr<Queue> q_ = cpu_.create_queue();
    std::mt19937 rng_{77};
};

TEST_F(CpuBackendOps, axpby_scales_and_accumulates) {
    const std::size_t n = 1001;
    const auto x = random(n), y0 = random(n);
    auto dx = upload(x), dy = upload(y0);
    cpu_.axpby(*q_, n - 1, 1.5f, dx, -0.25f, dy);  // the last element stays as it was
    const auto y = download(dy, n);
    for (std::size_t i = 0; i + 1 < n; ++i) EXPECT_NEAR(y[i], 1.5 * x[i] - 0.25 * y0[i], 1e-6) << i;
    EXPECT_EQ(y[n - 1], y0[n - 1]);
}

TEST_F(CpuBackendOps, axpby_with_beta_zero_overwrites_y_even_when_it_holds_nan) {
    const std::size_t n = 257;
    const auto x = random(n);
    auto dx = upload(x);
    auto dy = upload(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
    cpu_.axpby(*q_, n, -2.0f, dx, 0.0f, dy);
    const auto y = download(dy, n);
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(y[i], -2.0f * x[i]) << i;
}

TEST_F(CpuBackendOps, axpby_in_place) {
    const std::size_t n = 100;
    const auto x = random(n);
    auto d = upload(x);
    cpu_.axpby(*q_, n, 2.0f, d, 3.0f, d);  // y = 2y + 3y
    const auto y = download(d, n);
    for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], 5.0 * x[i], 1e-6) << i;
}

TEST_F(CpuBackendOps, transpose_swaps_rows_and_columns) {
    struct Size {
        int rows, cols;
    };
    for (Size s :
         {Size{1, 1}, Size{1, 100}, Size{100, 1}, Size{37, 65}, Size{64, 64}, Size{33, 200}}) {
        // Each value encodes its position, so any misplacement is visible.
        std::vector<float> x(std::size_t(s.rows) * s.cols);
        for (int r = 0; r < s.rows; ++r)
            for (int c = 0; c < s.cols; ++c) x[std::size_t(r) * s.cols + c] = r * 1000.0f + c;
        auto dx = upload(x);
        auto dy = upload(std::vector<float>(x.size(), -1.0f));
        cpu_.transpose(*q_, s.rows, s.cols, dx, dy);
        const auto y = download(dy, x.size());
        for (int c = 0; c < s.cols; ++c)
            for (int r = 0; r < s.rows; ++r)
                ASSERT_EQ(y[std::size_t(c) * s.rows + r], r * 1000.0f + c)
                    << s.rows << "x" << s.cols << " at y[" << c << "][" << r << "]";
    }
}

TEST_F(CpuBackendOps, transpose_in_place_is_rejected) {
    auto d = upload(random(12));
    EXPECT_THROW(cpu_.transpose(*q_, 3, 4, d, d), std::invalid_argument);
}

TEST_F(CpuBackendOps, add_bias_per_row_and_per_column) {
    const int rows = 7, cols = 13;
    const auto y0 = random(std::size_t(rows) * cols);
    const auto row_bias = random(rows), col_bias = random(cols);
    for (bool per_row : {true, false}) {
        auto dy = upload(y0);
        auto db = upload(per_row ? row_bias : col_bias);
        cpu_.add_bias(*q_, rows, cols, db, per_row, dy);
        const auto y = download(dy, y0.size());
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) {
                const std::size_t i = std::size_t(r) * cols + c;
                EXPECT_EQ(y[i], y0[i] + (per_row ? row_bias[r] : col_bias[c]))
                    << (per_row ? "per row" : "per column") << " at " << r << "," << c;
            }
    }
}

TEST_F(CpuBackendOps, polar_spectrum_clamps_the_magnitude_and_rotates_by_the_phase) {
    const int frames = 5, bins = 33;
    const float max_magnitude = 100.0f;  // log 100 = 4.6: values above it are clamped
    std::vector<float> x(std::size_t(frames) * 2 * bins);
    for (int f = 0; f < frames; ++f)
        for (int k = 0; k < bins; ++k) {
            x[std::size_t(f) * 2 * bins + k] = -6.0f + 12.0f * k / (bins - 1);  // [-6, 6]
            x[std::size_t(f) * 2 * bins + bins + k] = 0.37f * (k + 1) * (f + 1) - 20.0f;
        }
    auto dx = upload(x);
    auto dy = upload(std::vector<float>(x.size(), 12345.0f));
    cpu_.polar_spectrum(*q_, frames, bins, max_magnitude, dx, dy);
    const auto y = download(dy, x.size());
    int clamped = 0;
    for (int f = 0; f < frames; ++f)
        for (int k = 0; k < bins; ++k) {
            const double logmag = x[std::size_t(f) * 2 * bins + k];
            const double phase = x[std::size_t(f) * 2 * bins + bins + k];
            const double m = std::min(std::exp(logmag), double(max_magnitude));
            clamped += std::exp(logmag) > max_magnitude;
            const std::size_t i = (std::size_t(f) * bins + k) * 2;
            // Relative to the magnitude: float exp/cos/sin are within a few ulp.
            EXPECT_NEAR(y[i], m * std::cos(phase), 1e-5 * m) << f << "," << k;
            EXPECT_NEAR(y[i + 1], m * std::sin(phase), 1e-5 * m) << f << "," << k;
        }
    EXPECT_GT(clamped, 0) << "the test should exercise the clamp";
    EXPECT_THROW(cpu_.polar_spectrum(*q_, frames, bins, max_magnitude, dx, dx),
                 std::invalid_argument);
}

// The activations run as libmvec SIMD loops (gpu/cpu/cpu_vector_math.h);
// compare each with the double-precision function, over lengths that cover
// the vector body and every tail, and in place as the vocoders call them.
TEST_F(CpuBackendOps, activations_match_double_precision_definitions) {
    struct Case {
        Activation fn;
        float lo, hi;  // input range
        double (*reference)(double);
        double tolerance;  // relative to max(1, |reference|)
    };
    const Case cases[] = {
        {Activation::Gelu, -12.0f, 12.0f,
         [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, 1e-6},
        {Activation::Tanh, -12.0f, 12.0f, [](double x) { return std::tanh(x); }, 1e-6},
        {Activation::Exp, -80.0f, 80.0f, [](double x) { return std::exp(x); }, 1e-6},
        // Vocos' phases are unbounded: keep large arguments in range.
        {Activation::Sin, -300.0f, 300.0f, [](double x) { return std::sin(x); }, 1e-6},
        {Activation::Cos, -300.0f, 300.0f, [](double x) { return std::cos(x); }, 1e-6},
    };
    for (const Case& c : cases)
        for (std::size_t n : {1u, 7u, 16u, 31u, 1000u, 4099u}) {
            const auto x = random(n, c.lo, c.hi);
            auto buf = upload(x);
            cpu_.activation(*q_, c.fn, buf, buf, n, 0.0f);
            const auto y = download(buf, n);
            for (std::size_t i = 0; i < n; ++i) {
                const double want = c.reference(x[i]);
                ASSERT_NEAR(y[i], want, c.tolerance * std::max(1.0, std::fabs(want)))
                    << to_string(c.fn) << " n=" << n << " x=" << x[i];
            }
        }
}

}  // namespace
}  // namespace etude::gpu
