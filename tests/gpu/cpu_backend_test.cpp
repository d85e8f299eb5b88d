// The CPU reference backend's vocoder helpers (axpby, transpose, add_bias,
// polar_spectrum, the activations, gemm, layer_norm) against values computed
// here from their definitions in gpu/backend.h, at sizes small enough to run
// on one thread and large enough to be split among the workers
// (gpu/cpu/cpu_parallel.h). The OpenCL and CUDA parity tests compare those backends
// with this one, so this is where the reference itself is pinned down.
#include "gpu/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_vector_math.h"
#include "gpu/host_compute.h"

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

// The double-precision GELU and exp (the Piper text-to-latent stage's):
// libmvec's double functions are within 4 ulp, so 1e-14 of the value (or
// of 1, for GELU's tiny negative tail, where 1 + erf cancels) holds with
// room; the lengths cover the vector bodies and every tail.
TEST(CpuVectorMath, double_gelu_and_exp_match_the_scalar_functions) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> wide(-12.0, 12.0), exponent(-700.0, 0.0);
    for (std::size_t n : {1u, 3u, 8u, 17u, 1001u}) {
        std::vector<double> x(n), e(n);
        for (auto& v : x) v = wide(rng);
        for (auto& v : e) v = exponent(rng);
        std::vector<double> g(n), y(e);
        host::gelu(x.data(), g.data(), n);
        host::exp(y.data(), y.data(), n);  // in place, as the softmax calls it
        for (std::size_t i = 0; i < n; ++i) {
            const double want = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
            ASSERT_NEAR(g[i], want, 1e-14 * std::max(1.0, std::fabs(want))) << "x=" << x[i];
            ASSERT_NEAR(y[i], std::exp(e[i]), 1e-14 * std::exp(e[i])) << "x=" << e[i];
        }
    }
}

// Large enough that each op is split among the workers: every element must
// still be computed once, across the split points (n is not a multiple of
// the 16-float range alignment).
TEST_F(CpuBackendOps, elementwise_ops_split_among_workers_match_their_definitions) {
    const std::size_t n = 100003;
    const auto x = random(n, -4.0f, 4.0f), y0 = random(n);
    auto dx = upload(x), dy = upload(y0);
    cpu_.axpby(*q_, n, 1.5f, dx, -0.25f, dy);
    auto y = download(dy, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], 1.5 * x[i] - 0.25 * y0[i], 1e-6) << i;

    auto dl = upload(std::vector<float>(n, 9.0f));
    cpu_.activation(*q_, Activation::LeakyRelu, dx, dl, n, 0.1f);
    y = download(dl, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] > 0 ? x[i] : 0.1f * x[i]) << i;

    auto dg = upload(x);
    cpu_.activation(*q_, Activation::Tanh, dg, dg, n, 0.0f);
    y = download(dg, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], std::tanh(double(x[i])), 1e-6) << i;
}

// A batch of items whose length is not a multiple of 16 (a HiFi-GAN or
// Piper flow batch's first chunk): the tanh and the WaveNet gate give each
// item the bits it gets alone, though the batch puts its values in other
// vector lanes (gpu/cpu/cpu_vector_math.h), as the batched streams' tests
// compare them. Long enough that the batch is split among the workers.
TEST_F(CpuBackendOps, a_batch_gives_each_item_the_bits_it_gets_alone) {
    const int batch = 3, channels = 5, length = 2221;  // 5 x 2221 = 11105 = 694 x 16 + 1
    const std::size_t n = std::size_t(channels) * length;
    const auto x = random(2 * n * batch, -4.0f, 4.0f);
    auto dx = upload(x), dy = upload(std::vector<float>(n * batch));
    cpu_.activation(*q_, Activation::Tanh, dx, dy, n * batch, 0.0f);
    const auto tanh_batch = download(dy, n * batch);
    cpu_.gated_tanh(*q_, batch, channels, length, dx, dy);
    const auto gate_batch = download(dy, n * batch);
    for (int item = 0; item < batch; ++item) {
        const auto tanh_input =
            std::vector<float>(x.begin() + item * n, x.begin() + (item + 1) * n);
        auto one = upload(tanh_input), out = upload(std::vector<float>(n));
        cpu_.activation(*q_, Activation::Tanh, one, out, n, 0.0f);
        const auto tanh_alone = download(out, n);
        // Item i's gate input: its tanh half at 2 i n, its sigmoid half after.
        auto gate_input =
            upload(std::vector<float>(x.begin() + 2 * item * n, x.begin() + 2 * (item + 1) * n));
        cpu_.gated_tanh(*q_, 1, channels, length, gate_input, out);
        const auto gate_alone = download(out, n);
        for (std::size_t i = 0; i < n; ++i) {
            ASSERT_EQ(tanh_batch[item * n + i], tanh_alone[i])
                << "tanh, item " << item << " at " << i;
            ASSERT_EQ(gate_batch[item * n + i], gate_alone[i])
                << "gate, item " << item << " at " << i;
        }
    }
}

TEST_F(CpuBackendOps, gemm_matches_the_definition_for_every_transpose_and_split) {
    struct Size {
        int m, n, k;
    };
    // Small (one job), tall (split by rows of C) and wide (split by columns).
    const Size sizes[] = {{5, 7, 3}, {301, 67, 130}, {37, 509, 120}};
    for (const Size& z : sizes)
        for (bool ta : {false, true})
            for (bool tb : {false, true}) {
                // Padded leading dimensions, as the vocoders' sub-matrices have.
                const int lda = (ta ? z.m : z.k) + 3, ldb = (tb ? z.k : z.n) + 5, ldc = z.n + 2;
                const auto a = random(std::size_t(ta ? z.k : z.m) * lda);
                const auto b = random(std::size_t(tb ? z.n : z.k) * ldb);
                const auto c0 = random(std::size_t(z.m) * ldc);
                auto da = upload(a), db = upload(b), dc = upload(c0);
                cpu_.gemm(*q_, ta, tb, z.m, z.n, z.k, 0.75f, da, lda, db, ldb, -0.5f, dc, ldc);
                const auto c = download(dc, c0.size());
                for (int i = 0; i < z.m; ++i)
                    for (int j = 0; j < ldc; ++j) {
                        const std::size_t at = std::size_t(i) * ldc + j;
                        if (j >= z.n) {  // padding between rows: untouched
                            ASSERT_EQ(c[at], c0[at]);
                            continue;
                        }
                        double acc = 0;
                        for (int p = 0; p < z.k; ++p)
                            acc += double(ta ? a[std::size_t(p) * lda + i]
                                             : a[std::size_t(i) * lda + p]) *
                                   (tb ? b[std::size_t(j) * ldb + p] : b[std::size_t(p) * ldb + j]);
                        ASSERT_NEAR(c[at], 0.75 * acc - 0.5 * c0[at], 1e-4)
                            << z.m << "x" << z.n << "x" << z.k << " ta=" << ta << " tb=" << tb
                            << " at " << i << "," << j;
                    }
            }
}

TEST_F(CpuBackendOps, layer_norm_over_many_rows_matches_its_definition) {
    const int rows = 700, cols = 96;
    const auto x = random(std::size_t(rows) * cols, -3.0f, 5.0f);
    const auto gamma = random(cols), beta = random(cols);
    auto dx = upload(x), dg = upload(gamma), db = upload(beta);
    auto dy = upload(std::vector<float>(x.size(), 9.0f));
    cpu_.layer_norm(*q_, rows, cols, 1e-6f, dx, dg, db, dy);
    const auto y = download(dy, x.size());
    for (int r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int c = 0; c < cols; ++c) mean += x[std::size_t(r) * cols + c];
        mean /= cols;
        for (int c = 0; c < cols; ++c) {
            const double d = x[std::size_t(r) * cols + c] - mean;
            var += d * d;
        }
        var /= cols;
        for (int c = 0; c < cols; ++c) {
            const std::size_t at = std::size_t(r) * cols + c;
            const double want = (x[at] - mean) / std::sqrt(var + 1e-6) * gamma[c] + beta[c];
            ASSERT_NEAR(y[at], want, 1e-5) << r << "," << c;
        }
    }
}

}  // namespace
}  // namespace etude::gpu
