// The CPU backend's convolutions (gpu/cpu/cpu_conv.cpp: im2col/col2im +
// SGEMM, direct loops for depthwise, and gpu/cpu/cpu_direct_conv.cpp's
// register tiles on AArch64, AVX2 and AVX-512 CPUs; each is checked on
// every path and tile set this CPU runs) against a direct double-precision
// evaluation of the definition in gpu/backend.h, over random shapes with
// stride, dilation, padding, groups and batch, plus the vocoders' shapes and
// shapes long enough to cross several chunks of the time axis.
//
// Error: max |got - ref| / max |ref| below 1e-5 (float rounding of sums of
// up to a few thousand products). Every output is pre-filled with a
// sentinel and followed by a guard band, so an element never written, or one
// written past the end, fails the test too. The two tile sets must also give
// the very same floats (each output is bias + one fused multiply-add per
// input channel and tap, in that order, in both).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_backend.h"
#include "gpu/cpu/cpu_direct_conv.h"

namespace etude::gpu {
namespace {

constexpr double kTolerance = 1e-5;
constexpr std::size_t kGuard = 64;  // floats after the output that must stay untouched
constexpr float kSentinel = 1.0e30f;

// y[n][oc][t] = bias[oc] + sum over ic in oc's group and k of
// w[oc][ic][k] * x[n][ic][t*stride - padding + k*dilation].
std::vector<double> conv1d_reference(const Conv1dShape& s, const std::vector<float>& x,
                                     const std::vector<float>& w, const std::vector<float>& bias) {
    const int out_len = s.conv_out_length();
    const int icg = s.in_channels / s.groups, ocg = s.out_channels / s.groups;
    std::vector<double> y(std::size_t(s.batch) * s.out_channels * out_len);
    for (int n = 0; n < s.batch; ++n)
        for (int oc = 0; oc < s.out_channels; ++oc) {
            const int g = oc / ocg;
            for (int t = 0; t < out_len; ++t) {
                double acc = bias.empty() ? 0.0 : bias[oc];
                for (int i = 0; i < icg; ++i)
                    for (int k = 0; k < s.kernel; ++k) {
                        const long ti = long(t) * s.stride - s.padding + long(k) * s.dilation;
                        if (ti < 0 || ti >= s.in_length) continue;
                        const int ic = g * icg + i;
                        acc += double(w[(std::size_t(oc) * icg + i) * s.kernel + k]) *
                               x[(std::size_t(n) * s.in_channels + ic) * s.in_length + ti];
                    }
                y[(std::size_t(n) * s.out_channels + oc) * out_len + t] = acc;
            }
        }
    return y;
}

// The transposed convolution by its definition as a scatter: input ti of
// channel ic adds x[n][ic][ti] * w[ic][o][k] to output o of ic's group at
// ti*stride - padding + k*dilation (dropped outside the output).
std::vector<double> conv_transpose1d_reference(const Conv1dShape& s, const std::vector<float>& x,
                                               const std::vector<float>& w,
                                               const std::vector<float>& bias) {
    const int out_len = s.transpose_out_length();
    const int icg = s.in_channels / s.groups, ocg = s.out_channels / s.groups;
    std::vector<double> y(std::size_t(s.batch) * s.out_channels * out_len);
    for (int n = 0; n < s.batch; ++n) {
        for (int oc = 0; oc < s.out_channels; ++oc)
            for (int t = 0; t < out_len; ++t)
                y[(std::size_t(n) * s.out_channels + oc) * out_len + t] =
                    bias.empty() ? 0.0 : bias[oc];
        for (int ic = 0; ic < s.in_channels; ++ic) {
            const int g = ic / icg;
            for (int ti = 0; ti < s.in_length; ++ti) {
                const double xv = x[(std::size_t(n) * s.in_channels + ic) * s.in_length + ti];
                for (int o = 0; o < ocg; ++o)
                    for (int k = 0; k < s.kernel; ++k) {
                        const long to = long(ti) * s.stride - s.padding + long(k) * s.dilation;
                        if (to < 0 || to >= out_len) continue;
                        y[(std::size_t(n) * s.out_channels + g * ocg + o) * out_len + to] +=
                            xv * w[(std::size_t(ic) * ocg + o) * s.kernel + k];
                    }
            }
        }
    }
    return y;
}

std::vector<float> random_vector(std::size_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& e : v) e = d(rng);
    return v;
}

std::string describe(const char* op, const Conv1dShape& s, bool bias) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s b=%d %d->%d len=%d k=%d s=%d d=%d p=%d g=%d%s", op, s.batch,
                  s.in_channels, s.out_channels, s.in_length, s.kernel, s.stride, s.dilation,
                  s.padding, s.groups, bias ? " +bias" : "");
    return buf;
}

class CpuConv : public ::testing::Test {
  protected:
    enum class Op { Conv, Transpose };

    // Runs `op` on the backend and compares with the double reference;
    // returns the relative error (also checked here).
    double check(Op op, const Conv1dShape& s, bool with_bias, bool verbose = false) {
        const bool conv = op == Op::Conv;
        const int out_len = conv ? s.conv_out_length() : s.transpose_out_length();
        const std::size_t x_n = std::size_t(s.batch) * s.in_channels * s.in_length;
        const std::size_t w_n =
            conv ? std::size_t(s.out_channels) * (s.in_channels / s.groups) * s.kernel
                 : std::size_t(s.in_channels) * (s.out_channels / s.groups) * s.kernel;
        const std::size_t y_n = std::size_t(s.batch) * s.out_channels * out_len;
        const auto x = random_vector(x_n, rng_);
        const auto w = random_vector(w_n, rng_);
        const auto bias = with_bias ? random_vector(s.out_channels, rng_) : std::vector<float>{};
        const auto got = run(op, s, x, w, bias);

        const auto ref =
            conv ? conv1d_reference(s, x, w, bias) : conv_transpose1d_reference(s, x, w, bias);
        double peak = 0, err = 0;
        for (std::size_t i = 0; i < y_n; ++i) {
            peak = std::max(peak, std::fabs(ref[i]));
            const double e = std::fabs(double(got[i]) - ref[i]);
            err = std::max(err, std::isfinite(e) ? e : std::numeric_limits<double>::infinity());
        }
        const double rel = peak > 0 ? err / peak : err;
        const std::string what = describe(conv ? "conv1d" : "conv_transpose1d", s, with_bias);
        if (verbose) std::printf("[ cpu conv ] %-70s rel err %.2e\n", what.c_str(), rel);
        EXPECT_LE(rel, kTolerance) << what;
        const auto past = std::find_if(got.begin() + std::ptrdiff_t(y_n), got.end(),
                                       [](float v) { return v != kSentinel; });
        EXPECT_EQ(past, got.end()) << what << ": wrote past the end of y";
        return rel;
    }

    // `op` on the backend: its y_n outputs, then kGuard floats after them.
    std::vector<float> run(Op op, const Conv1dShape& s, const std::vector<float>& x,
                           const std::vector<float>& w, const std::vector<float>& bias) {
        const int out_len = op == Op::Conv ? s.conv_out_length() : s.transpose_out_length();
        const std::size_t y_n = std::size_t(s.batch) * s.out_channels * out_len;
        auto dx = upload(x), dw = upload(w);
        DeviceBuffer db = bias.empty() ? DeviceBuffer{} : upload(bias);
        auto dy = upload(std::vector<float>(y_n + kGuard, kSentinel));
        if (op == Op::Conv)
            cpu_.conv1d(*q_, s, dx, dw, db, dy);
        else
            cpu_.conv_transpose1d(*q_, s, dx, dw, db, dy);
        std::vector<float> got(y_n + kGuard);
        cpu_.copy_to_host(*q_, got.data(), dy, 0, got.size());
        return got;
    }

    DeviceBuffer upload(const std::vector<float>& v) {
        auto b = cpu_.allocate(std::max<std::size_t>(v.size(), 1), "test");
        cpu_.copy_to_device(*q_, b, 0, v.data(), v.size());
        return b;
    }

    CpuBackend cpu_;
    std::unique_ptr<Queue> q_ = cpu_.create_queue();
    std::mt19937 rng_{4242};
};

Conv1dShape make(int batch, int in_ch, int out_ch, int len, int kernel, int stride, int dilation,
                 int padding, int groups) {
    Conv1dShape s;
    s.batch = batch;
    s.in_channels = in_ch;
    s.out_channels = out_ch;
    s.in_length = len;
    s.kernel = kernel;
    s.stride = stride;
    s.dilation = dilation;
    s.padding = padding;
    s.groups = groups;
    return s;
}

// Random shapes: any groups that divide both channel counts (depthwise,
// channel multipliers and plain groups=1 included), any stride, dilation and
// padding for which the output is not empty.
Conv1dShape random_shape(std::mt19937& rng, bool transpose) {
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    for (;;) {
        const int groups = std::vector<int>{1, 1, 1, 2, 3, 4}[pick(0, 5)];
        Conv1dShape s = make(pick(1, 3), groups * pick(1, 6), groups * pick(1, 6), pick(1, 60),
                             pick(1, 9), pick(1, 4), pick(1, 4), 0, groups);
        if (pick(0, 4) == 0) s.in_channels = s.out_channels = s.groups = pick(1, 8);  // depthwise
        s.padding = pick(0, s.dilation * (s.kernel - 1) + 2);
        const int out_len = transpose ? s.transpose_out_length() : s.conv_out_length();
        if (out_len >= 1 && s.in_length >= 1) return s;
    }
}

// Whether the direct path runs here; if not, why (for GTEST_SKIP).
const char* direct_conv_missing() {
    return cpu::direct_conv1d_applies(make(1, 2, 2, 8, 3, 1, 1, 1, 1))
               ? nullptr
               : "the direct conv1d does not run here: an x86-64 CPU without AVX2 or FMA, "
                 "another architecture than x86-64 or AArch64, or ETUDE_CPU_DIRECT_CONV=0";
}
constexpr const char* kNoAvx512 = "this CPU has no AVX-512F: the AVX-512 tiles are not checked";

// Each convolution on each of its paths: the direct register tiles in
// vectors of 8 (NEON on AArch64; on x86-64 where the CPU has AVX2 and FMA)
// and of 16 (where it also has AVX-512F), and im2col/col2im + SGEMM
// (everywhere; the only path elsewhere).
enum class ConvPath { Direct8, Direct16, Im2col };

class CpuConvPaths : public CpuConv, public ::testing::WithParamInterface<ConvPath> {
  protected:
    void SetUp() override {
        if (GetParam() == ConvPath::Im2col) {
            off_.emplace();
            return;
        }
        if (const char* why = direct_conv_missing()) GTEST_SKIP() << why;
        const auto set = GetParam() == ConvPath::Direct8 ? cpu::DirectConvTiles::Lanes8
                                                         : cpu::DirectConvTiles::Avx512;
        if (!cpu::direct_conv_tiles_supported(set)) GTEST_SKIP() << kNoAvx512;
        tiles_.emplace(set);
    }
    std::optional<cpu::DirectConvOff> off_;
    std::optional<cpu::DirectConvTilesOverride> tiles_;
};

TEST_P(CpuConvPaths, conv1d_matches_the_definition_for_random_shapes) {
    std::mt19937 shapes(1);
    for (int i = 0; i < 300; ++i) check(Op::Conv, random_shape(shapes, false), i % 2 == 0);
}

TEST_P(CpuConvPaths, conv_transpose1d_matches_the_definition_for_random_shapes) {
    std::mt19937 shapes(2);
    for (int i = 0; i < 300; ++i) check(Op::Transpose, random_shape(shapes, true), i % 2 == 0);
}

TEST_P(CpuConvPaths, conv1d_matches_the_definition_at_vocoder_shapes_and_across_chunks) {
    const Conv1dShape shapes[] = {
        // HiFi-GAN residual layers ('same' padding), scaled down in length.
        make(1, 128, 128, 2000, 11, 1, 5, 25, 1),
        make(2, 32, 32, 5000, 7, 1, 3, 9, 1),
        make(1, 256, 256, 400, 3, 1, 1, 1, 1),
        // Tall columns (512 x 16 taps): the fewest columns per chunk.
        make(1, 512, 16, 1100, 16, 1, 1, 8, 1),
        // conv_pre / conv_post.
        make(1, 80, 512, 70, 7, 1, 1, 3, 1),
        make(1, 32, 1, 4099, 7, 1, 1, 3, 1),
        // Pointwise (1x1), read in place without im2col, and a strided one.
        make(2, 64, 96, 1500, 1, 1, 1, 0, 1),
        make(1, 16, 8, 301, 1, 3, 1, 0, 1),
        // Vocos depthwise, long enough for several blocks, and strided.
        make(1, 512, 512, 2100, 7, 1, 1, 3, 512),
        make(2, 16, 16, 3001, 7, 2, 2, 6, 16),
        // Grouped, several chunks per group.
        make(1, 64, 32, 4000, 5, 1, 2, 4, 4),
        // Strided and dilated over several chunks, batch 2.
        make(2, 96, 32, 6000, 9, 2, 3, 12, 1),
        // The VITS flow's layers over a push of frames, and a channel
        // count that is a multiple of neither tile's rows.
        make(1, 192, 384, 43, 5, 1, 1, 2, 1),
        make(1, 192, 256, 38, 7, 1, 1, 0, 1),
        make(3, 21, 23, 517, 3, 1, 4, 4, 1),
    };
    for (const auto& s : shapes) check(Op::Conv, s, true, true);
}

// What a streamed layer relies on: the outputs of a window of the input are
// the same floats as those outputs of the whole signal, wherever the window
// falls (chunks, tiles and worker splits differ between the two calls).
// (The transposed convolutions' streamed layers are checked whole against
// chunked in the vocoder tests.)
TEST_P(CpuConvPaths, a_window_of_the_input_gives_the_same_floats_as_the_whole) {
    if (GetParam() == ConvPath::Im2col)
        GTEST_SKIP() << "SGEMM promises no summation order; the direct path does";
    const Conv1dShape whole = make(1, 32, 40, 3000, 7, 1, 3, 0, 1);
    const auto x = random_vector(std::size_t(whole.in_channels) * whole.in_length, rng_);
    const auto w = random_vector(std::size_t(whole.out_channels) * whole.in_channels * 7, rng_);
    const auto bias = random_vector(whole.out_channels, rng_);
    const auto run = [&](int first, int length) {
        Conv1dShape s = whole;
        s.in_length = length;
        std::vector<float> part(std::size_t(s.in_channels) * length);
        for (int c = 0; c < s.in_channels; ++c)
            std::copy_n(x.begin() + std::ptrdiff_t(c) * whole.in_length + first, length,
                        part.begin() + std::ptrdiff_t(c) * length);
        auto dx = upload(part), dw = upload(w), db = upload(bias);
        auto dy = cpu_.allocate(std::size_t(s.out_channels) * s.conv_out_length(), "test");
        cpu_.conv1d(*q_, s, dx, dw, db, dy);
        std::vector<float> y(std::size_t(s.out_channels) * s.conv_out_length());
        cpu_.copy_to_host(*q_, y.data(), dy, 0, y.size());
        return y;
    };
    const int whole_out = whole.conv_out_length();
    const auto all = run(0, whole.in_length);
    const int reach = 6 * 3;
    for (auto [first, outputs] : std::initializer_list<std::pair<int, int>>{
             {0, 1}, {5, 17}, {100, 24}, {1000, 333}, {2961, 21}, {7, 1500}}) {
        const auto part = run(first, outputs + reach);
        for (int c = 0; c < whole.out_channels; ++c)
            for (int t = 0; t < outputs; ++t)
                ASSERT_EQ(part[std::size_t(c) * outputs + t],
                          all[std::size_t(c) * whole_out + first + t])
                    << "channel " << c << ", output " << first + t << " of a window of " << outputs
                    << " from " << first;
    }
}

TEST_P(CpuConvPaths, conv_transpose1d_matches_the_definition_at_vocoder_shapes_and_across_chunks) {
    const Conv1dShape shapes[] = {
        // HiFi-GAN V1 upsamplers: x8 (kernel 16, padding 4), x2 (kernel 4, padding 1).
        make(1, 512, 256, 40, 16, 8, 1, 4, 1),
        make(1, 256, 128, 300, 16, 8, 1, 4, 1),
        make(1, 128, 32, 1100, 16, 8, 1, 4, 1),
        make(2, 64, 32, 2500, 4, 2, 1, 1, 1),
        make(1, 32, 16, 9000, 4, 2, 1, 1, 1),
        // Stride above the kernel: outputs between taps get only the bias.
        make(1, 8, 6, 100, 3, 5, 1, 0, 1),
        // Grouped, dilated and batched: over several chunks, and in one.
        make(2, 64, 64, 1200, 16, 4, 2, 5, 2),
        make(2, 16, 24, 700, 6, 3, 2, 2, 4),
        // Depthwise.
        make(1, 12, 12, 500, 4, 2, 1, 1, 12),
    };
    for (const auto& s : shapes) check(Op::Transpose, s, true, true);
}

INSTANTIATE_TEST_SUITE_P(EveryPath, CpuConvPaths,
                         ::testing::Values(ConvPath::Direct8, ConvPath::Direct16, ConvPath::Im2col),
                         [](const auto& info) {
                             return std::string(info.param == ConvPath::Direct8    ? "direct8"
                                                : info.param == ConvPath::Direct16 ? "direct16"
                                                                                   : "im2col");
                         });

// The AVX-512 tiles against the 8-lane ones, float for float, at shapes
// that reach every tile: partial tiles of 1 to 3 vectors and the two-tile
// tail, row counts that are a multiple of neither set's rows, dilation,
// batch, several chunks, the VITS flow's pushes, and every phase of the
// transposed layers (strides 2 to 8, and one above the kernel).
TEST_F(CpuConv, avx512_tiles_give_the_same_floats_as_the_8_lane_tiles) {
    if (const char* why = direct_conv_missing()) GTEST_SKIP() << why;
    if (!cpu::direct_conv_tiles_supported(cpu::DirectConvTiles::Avx512)) GTEST_SKIP() << kNoAvx512;
    struct Case {
        Op op;
        Conv1dShape s;
    };
    std::vector<Case> cases;
    for (int len : {1, 7, 16, 17, 33, 47, 48, 49, 64, 65, 97, 500})
        cases.push_back({Op::Conv, make(1, 19, 13, len + 4, 5, 1, 1, 0, 1)});
    for (int out : {1, 3, 8, 9, 23, 40})
        cases.push_back({Op::Conv, make(2, 24, out, 300, 3, 1, 3, 3, 1)});
    cases.push_back({Op::Conv, make(1, 192, 384, 43, 5, 1, 1, 2, 1)});
    cases.push_back({Op::Conv, make(1, 192, 192, 38, 7, 1, 1, 3, 1)});
    cases.push_back({Op::Conv, make(1, 128, 128, 3000, 11, 1, 5, 25, 1)});
    cases.push_back({Op::Conv, make(1, 512, 16, 1100, 16, 1, 1, 8, 1)});
    cases.push_back({Op::Transpose, make(1, 64, 27, 301, 16, 8, 1, 4, 1)});
    cases.push_back({Op::Transpose, make(2, 64, 13, 700, 4, 2, 1, 1, 1)});
    cases.push_back({Op::Transpose, make(1, 20, 11, 59, 7, 3, 1, 2, 1)});
    cases.push_back({Op::Transpose, make(1, 8, 6, 100, 3, 5, 1, 0, 1)});
    for (const auto& [op, s] : cases) {
        const bool conv = op == Op::Conv;
        const std::size_t w_n = std::size_t(s.out_channels) * s.in_channels * s.kernel;
        const auto x = random_vector(std::size_t(s.batch) * s.in_channels * s.in_length, rng_);
        const auto w = random_vector(w_n, rng_), bias = random_vector(s.out_channels, rng_);
        const std::string what = describe(conv ? "conv1d" : "conv_transpose1d", s, true);
        ASSERT_TRUE(conv ? cpu::direct_conv1d_applies(s) : cpu::direct_conv_transpose1d_applies(s))
            << what << " does not take the direct path";
        std::vector<float> by_set[2];
        for (auto set : {cpu::DirectConvTiles::Lanes8, cpu::DirectConvTiles::Avx512}) {
            cpu::DirectConvTilesOverride use(set);
            by_set[static_cast<int>(set)] = run(op, s, x, w, bias);
        }
        const auto& a = by_set[0];
        const auto& b = by_set[1];
        const auto differ = std::mismatch(a.begin(), a.end(), b.begin(), [](float p, float q) {
            return std::memcmp(&p, &q, sizeof p) == 0;
        });
        EXPECT_EQ(differ.first, a.end())
            << what << ": element " << differ.first - a.begin() << " is " << *differ.first
            << " with 8-lane tiles, " << *differ.second << " with AVX-512";
    }
}

TEST_F(CpuConv, shapes_without_a_definition_are_rejected) {
    auto x = cpu_.allocate(64, "test"), w = cpu_.allocate(64, "test"),
         y = cpu_.allocate(64, "test");
    const Conv1dShape bad[] = {make(1, 3, 4, 8, 1, 1, 1, 0, 2),   // groups do not divide
                               make(1, 2, 2, 8, 1, 0, 1, 0, 1),   // stride 0
                               make(1, 2, 2, 8, 2, 1, 0, 0, 1)};  // dilation 0
    for (const auto& s : bad) {
        EXPECT_THROW(cpu_.conv1d(*q_, s, x, w, DeviceBuffer{}, y), std::invalid_argument)
            << describe("conv1d", s, false);
        EXPECT_THROW(cpu_.conv_transpose1d(*q_, s, x, w, DeviceBuffer{}, y), std::invalid_argument)
            << describe("conv_transpose1d", s, false);
    }
}

}  // namespace
}  // namespace etude::gpu
