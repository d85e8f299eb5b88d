// A kernel-3, stride-1, undilated convolution with "same" padding computed
// as Winograd's minimal filtering F(2, 3): each tile of 2 outputs is 4
// products of transformed weights and transformed inputs instead of 6, so
// the convolution is 4 single-precision GEMMs (one per transform point, each
// [out x in] by [in x tiles]) instead of one [out x 3 in] by [3 in x length].
//
// Why: the text encoder's feed-forward convolutions (kernel 3, 192 to 768
// channels and back, every layer) are most of the arithmetic before a Piper
// sentence's first audio, and the encoder cannot start on part of a
// sentence. F(2, 3) cuts their multiplies by a third; on a 2-vCPU EPYC the
// GEMM time of a 370-frame layer drops by about 1.4x.
//
// Why not F(4, 3), which halves them: its transforms weight inputs and
// outputs by up to 8, and its float GEMMs' rounding grew with them. On the
// real en_US-joe-medium over 22 sentences, noise off, the largest
// difference from ONNX Runtime went from 4.3e-5 (direct) to 8.9e-5, too
// near the 1e-4 the parity with Piper allows. F(2, 3)'s transforms only add
// and subtract (and halve the weights), computed in double before the
// operands are rounded to float: its largest difference there was 6.0e-5,
// its median sentence's 2.5e-5 against the direct path's 2.2e-5.
//
// The caller sequences the three steps so it can parallelise each as it
// likes (channels for the transforms, points for the GEMMs) and fuse what
// lies between two convolutions. Layouts: transformed inputs v[point][in]
// [tiles], products m[point][out][tiles]; `point_stride` is channels*tiles.
// Not real-time safe only in that its constructor allocates; the steps
// write caller-owned memory.
#pragma once

#include <cstddef>
#include <vector>

namespace etude::engine {

class WinogradConv3 {
  public:
    static constexpr int kTile = 2;    // outputs per tile
    static constexpr int kPoints = 4;  // transform points (tile + kernel - 1)

    // weights [out][in][3], PyTorch's layout; bias [out] or null.
    WinogradConv3(const float* weights, const float* bias, int out, int in);

    int out_channels() const { return out_; }
    int in_channels() const { return in_; }
    double bias(int o) const { return bias_.empty() ? 0.0 : bias_[std::size_t(o)]; }
    static int tiles(int length) { return (length + kTile - 1) / kTile; }

    // One input channel's row x[0..length) (zero outside it) to its
    // transformed tiles: v[p * point_stride + q] for point p, tile q.
    template <class T>
    static void transform_input(const T* x, int length, float* v, std::size_t point_stride);

    // One transform point's GEMM, on this thread: m[point] = u[point]
    // v[point], where v holds every point's transformed inputs (point
    // stride in*tiles) and m every point's products (out*tiles).
    void multiply(int point, const float* v, int tiles, float* m) const;

    // One output channel's products (m[p * point_stride + q]) to its row
    // y[0..length), without the bias.
    static void transform_output(const float* m, std::size_t point_stride, int length, double* y);

  private:
    int out_ = 0, in_ = 0;
    std::vector<float> u_;  // [point][out][in]
    std::vector<double> bias_;
};

extern template void WinogradConv3::transform_input<float>(const float*, int, float*, std::size_t);
extern template void WinogradConv3::transform_input<double>(const double*, int, float*,
                                                            std::size_t);

}  // namespace etude::engine
