// WinogradConv3 (F(2, 3)) against the exact convolution, in double, with a
// bound derived from float rounding rather than from what one machine gave.
#include "engine/models/vits/winograd_conv3.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <stdexcept>
#include <vector>

using etude::engine::WinogradConv3;

namespace {

constexpr int P = WinogradConv3::kPoints;

struct Conv {
    int out, in, length;
    std::vector<float> w, b, x;  // [out][in][3], [out], [in][length]
};

Conv random_conv(int out, int in, int length, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    Conv c{out, in, length, {}, {}, {}};
    c.w.resize(std::size_t(out) * in * 3);
    c.b.resize(std::size_t(out));
    c.x.resize(std::size_t(in) * length);
    for (auto* v : {&c.w, &c.b, &c.x})
        for (float& e : *v) e = u(gen);
    return c;
}

// y[o][t] = b[o] + sum_{i,k} w[o][i][k] x[i][t + k - 1], x zero outside.
std::vector<double> exact(const Conv& c) {
    std::vector<double> y(std::size_t(c.out) * c.length);
    for (int o = 0; o < c.out; ++o)
        for (int t = 0; t < c.length; ++t) {
            double s = c.b[std::size_t(o)];
            for (int i = 0; i < c.in; ++i)
                for (int k = 0; k < 3; ++k) {
                    const int s_t = t + k - 1;
                    if (s_t >= 0 && s_t < c.length)
                        s += double(c.w[(std::size_t(o) * c.in + i) * 3 + k]) *
                             c.x[std::size_t(i) * c.length + s_t];
                }
            y[std::size_t(o) * c.length + t] = s;
        }
    return y;
}

// The three steps of the header, one after another.
std::vector<double> winograd(const WinogradConv3& conv, const std::vector<float>& x, int length) {
    const int in = conv.in_channels(), out = conv.out_channels();
    const int tiles = WinogradConv3::tiles(length);
    const std::size_t in_plane = std::size_t(in) * tiles, out_plane = std::size_t(out) * tiles;
    std::vector<float> v(P * in_plane), m(P * out_plane);
    for (int i = 0; i < in; ++i)
        WinogradConv3::transform_input(x.data() + std::size_t(i) * length, length,
                                       v.data() + std::size_t(i) * tiles, in_plane);
    for (int p = 0; p < P; ++p) conv.multiply(p, v.data(), tiles, m.data());
    std::vector<double> y(std::size_t(out) * length);
    for (int o = 0; o < out; ++o) {
        double* yr = y.data() + std::size_t(o) * length;
        WinogradConv3::transform_output(m.data() + std::size_t(o) * tiles, out_plane, length, yr);
        for (int t = 0; t < length; ++t) yr[t] += conv.bias(o);
    }
    return y;
}

// The error bound of one output. The operands U = G g and V = B^T d are
// computed in double and rounded to float (relative error u = 2^-24 each);
// a float dot product of `in` terms errs by at most gamma_in = in u / (1 -
// in u) times the sum of its terms' magnitudes; the output transform runs
// in double. So |error| <= (gamma_in + 2u + u^2) * sum over the points of
// |A^T| |U| |V|, summed in double here from the same transforms with
// every coefficient and operand made non-negative; a few units of double
// rounding (2^-53, per input term) cover the double steps of both sides.
std::vector<double> error_bound(const Conv& c) {
    const double u = std::ldexp(1.0, -24), gamma = c.in * u / (1 - c.in * u);
    const double factor = gamma + 2 * u + u * u + 4.0 * (3 * c.in + 8) * std::ldexp(1.0, -53);
    std::vector<double> bound(std::size_t(c.out) * c.length, 0.0);
    const auto x = [&](int i, int t) {
        return t >= 0 && t < c.length ? std::fabs(double(c.x[std::size_t(i) * c.length + t])) : 0.0;
    };
    for (int o = 0; o < c.out; ++o)
        for (int q = 0; q < WinogradConv3::tiles(c.length); ++q) {
            double point_sum[P] = {0, 0, 0, 0};
            for (int i = 0; i < c.in; ++i) {
                const float* g = &c.w[(std::size_t(o) * c.in + i) * 3];
                const double g0 = std::fabs(g[0]), g1 = std::fabs(g[1]), g2 = std::fabs(g[2]);
                const int t0 = 2 * q - 1;
                const double d0 = x(i, t0), d1 = x(i, t0 + 1), d2 = x(i, t0 + 2), d3 = x(i, t0 + 3);
                const double uu[P] = {g0, (g0 + g1 + g2) / 2, (g0 + g1 + g2) / 2, g2};
                const double vv[P] = {d0 + d2, d1 + d2, d1 + d2, d1 + d3};
                for (int p = 0; p < P; ++p) point_sum[p] += uu[p] * vv[p];
            }
            const double first = point_sum[0] + point_sum[1] + point_sum[2];
            const double second = point_sum[1] + point_sum[2] + point_sum[3];
            for (int j = 0; j < 2 && 2 * q + j < c.length; ++j)
                bound[std::size_t(o) * c.length + 2 * q + j] = factor * (j == 0 ? first : second);
        }
    return bound;
}

TEST(WinogradConv3, equals_the_exact_convolution_within_its_float_rounding_bound) {
    // Odd and even lengths (a last tile half outside), one frame, and the
    // encoder's own channel counts.
    struct Shape {
        int out, in, length;
    };
    for (const Shape s : {Shape{7, 5, 1}, Shape{7, 5, 2}, Shape{3, 4, 3}, Shape{9, 6, 17},
                          Shape{768, 192, 64}, Shape{192, 768, 37}}) {
        const Conv c = random_conv(s.out, s.in, s.length, unsigned(s.length * 31 + s.in));
        const WinogradConv3 conv(c.w.data(), c.b.data(), c.out, c.in);
        const std::vector<double> ours = winograd(conv, c.x, c.length), want = exact(c),
                                  bound = error_bound(c);
        // A wrong coefficient anywhere errs by the size of the outputs,
        // thousands of times this bound.
        for (std::size_t i = 0; i < want.size(); ++i)
            ASSERT_LE(std::fabs(ours[i] - want[i]), bound[i])
                << s.out << "x" << s.in << " over " << s.length << " frames, output " << i;
    }
}

TEST(WinogradConv3, without_a_bias_adds_none) {
    const Conv c = random_conv(2, 3, 5, 7);
    const WinogradConv3 conv(c.w.data(), nullptr, 2, 3);
    EXPECT_EQ(conv.bias(0), 0.0);
    EXPECT_EQ(conv.bias(1), 0.0);
    const WinogradConv3 with_bias(c.w.data(), c.b.data(), 2, 3);
    EXPECT_EQ(with_bias.bias(1), double(c.b[1]));
}

TEST(WinogradConv3, refuses_no_channels) {
    const std::vector<float> w(3, 1.0f);
    EXPECT_THROW(WinogradConv3(w.data(), nullptr, 0, 1), std::invalid_argument);
    EXPECT_THROW(WinogradConv3(w.data(), nullptr, 1, 0), std::invalid_argument);
}

}  // namespace
