#include "engine/models/vits/winograd_conv3.h"

#include <cblas.h>

#include <stdexcept>

namespace etude::engine {

// The transforms are F(2, 3) (points 0, 1, -1 and infinity) for a
// correlation, which is what PyTorch's conv1d computes:
//   y[i] = sum_k g[k] d[i + k],  y = A^T ((G g) * (B^T d)),
// with d the tile's 4 inputs starting one before its first output:
//   B^T d = (d0 - d2, d1 + d2, d2 - d1, d1 - d3)
//   G g   = (g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2)
//   A^T m = (m0 + m1 + m2, m1 - m2 - m3)

WinogradConv3::WinogradConv3(const float* weights, const float* bias, int out, int in)
    : out_(out), in_(in), u_(std::size_t(kPoints) * out * in) {
    if (out <= 0 || in <= 0) throw std::invalid_argument("WinogradConv3: no channels");
    const std::size_t plane = std::size_t(out) * in;
    for (std::size_t oi = 0; oi < plane; ++oi) {
        const double g0 = weights[oi * 3], g1 = weights[oi * 3 + 1], g2 = weights[oi * 3 + 2];
        const double u[kPoints] = {g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2};
        for (int p = 0; p < kPoints; ++p) u_[p * plane + oi] = static_cast<float>(u[p]);
    }
    if (bias) bias_.assign(bias, bias + out);
}

template <class T>
void WinogradConv3::transform_input(const T* x, int length, float* v, std::size_t ps) {
    const int count = tiles(length);
    for (int q = 0; q < count; ++q) {
        const int t0 = q * kTile - 1;
        double d[kPoints];
        if (t0 >= 0 && t0 + kPoints <= length) {
            for (int j = 0; j < kPoints; ++j) d[j] = static_cast<double>(x[t0 + j]);
        } else {
            for (int j = 0; j < kPoints; ++j) {
                const int t = t0 + j;
                d[j] = t >= 0 && t < length ? static_cast<double>(x[t]) : 0.0;
            }
        }
        v[q] = static_cast<float>(d[0] - d[2]);
        v[ps + q] = static_cast<float>(d[1] + d[2]);
        v[2 * ps + q] = static_cast<float>(d[2] - d[1]);
        v[3 * ps + q] = static_cast<float>(d[1] - d[3]);
    }
}

template void WinogradConv3::transform_input<float>(const float*, int, float*, std::size_t);
template void WinogradConv3::transform_input<double>(const double*, int, float*, std::size_t);

void WinogradConv3::multiply(int point, const float* v, int tiles, float* m) const {
    const std::size_t p = std::size_t(point);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out_, tiles, in_, 1.0f,
                u_.data() + p * out_ * in_, in_, v + p * in_ * tiles, tiles, 0.0f,
                m + p * out_ * tiles, tiles);
}

void WinogradConv3::transform_output(const float* m, std::size_t ps, int length, double* y) {
    const int count = tiles(length);
    for (int q = 0; q < count; ++q) {
        const double m0 = m[q], m1 = m[ps + q], m2 = m[2 * ps + q], m3 = m[3 * ps + q];
        const double tile[kTile] = {m0 + m1 + m2, m1 - m2 - m3};
        const int t0 = q * kTile;
        for (int j = 0; j < kTile && t0 + j < length; ++j) y[t0 + j] = tile[j];
    }
}

}  // namespace etude::engine
