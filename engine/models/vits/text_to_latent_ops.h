// The host ops VITS' text-to-latent network is built from (text_encoder.cpp,
// duration_predictor.cpp, text_to_latent.cpp): a signal in double, and
// PyTorch's conv1d as single-precision GEMMs over time slices on the CPU
// backend's workers, layer norm and the small element-wise helpers.
// Internal to engine/models/vits/; not part of any API.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <vector>

#include "engine/models/vits/vits_weights.h"
#include "gpu/host_compute.h"

namespace etude::engine::vits_host {

// A [channels][length] signal in double precision. One sentence, batch 1,
// no padding: every mask of Piper's code is all ones here.
struct Signal {
    int c = 0, t = 0;
    std::vector<double> v;
    Signal() = default;
    Signal(int channels, int length)
        : c(channels), t(length), v(std::size_t(channels) * length, 0.0) {}
    double* row(int i) { return v.data() + std::size_t(i) * t; }
    const double* row(int i) const { return v.data() + std::size_t(i) * t; }
};

struct Conv {
    const VitsTensor* w = nullptr;
    const VitsTensor* b = nullptr;  // may be null
};

// Single-precision scratch that is written before it is read (no zeroing).
inline std::unique_ptr<float[]> float_scratch(std::size_t n) {
    return std::unique_ptr<float[]>(new float[n]);
}

// One time slice's im2col, as floats: columns[i*k + kk][j] is input channel i
// at time t_begin + j + kk*dilation - pad_left, or 0 where the source has no
// such time. The source holds times [src_begin, src_end): channel i's time t
// at src[i*stride + t - src_begin].
template <class T>
void gather_columns(const T* src, std::size_t stride, int src_begin, int src_end, int channels,
                    int k, int dilation, int pad_left, int t_begin, int len, float* columns) {
    for (int i = 0; i < channels; ++i)
        for (int kk = 0; kk < k; ++kk) {
            float* cr = columns + (std::size_t(i) * k + kk) * len;
            const T* row = src + std::size_t(i) * stride;
            // Column j reads time j + shift.
            const int shift = kk * dilation - pad_left + t_begin;
            const int j0 = std::clamp(src_begin - shift, 0, len);
            const int j1 = std::clamp(src_end - shift, j0, len);
            std::fill(cr, cr + j0, 0.0f);
            for (int j = j0; j < j1; ++j) cr[j] = static_cast<float>(row[j + shift - src_begin]);
            std::fill(cr + j1, cr + len, 0.0f);
        }
}

// product[out][len] = w[out][rows] columns[rows][len], on this thread.
void slice_product(const Conv& conv, int rows, const float* columns, int len, float* product);

inline double bias_of(const Conv& conv, int o) {
    return conv.b ? conv.b->values[std::size_t(o)] : 0.0;
}

// y[o][t_begin + j] = b[o] + product[o][j] for one time slice, in double.
void write_slice(const Conv& conv, const float* product, int len, Signal& y, int t_begin);

// Time slices of a convolution's output over the CPU backend's workers,
// one per 512 Ki multiply-adds (the worker pool's loop costs microseconds):
// at 4 Mi, as when each loop was an OpenMP fork, a 125-phoneme sentence's
// 1x1 convolutions and duration predictor ran on one thread.
template <class Body>
void over_time_slices(int length, std::size_t macs, Body&& body) {
    gpu::host::parallel_ranges(
        std::size_t(length), gpu::host::jobs_for(macs, std::size_t(1) << 19), 16,
        [&](std::size_t begin, std::size_t end) { body(int(begin), int(end - begin)); });
}

// PyTorch's conv1d (one group); how it is computed: text_to_latent_ops.cpp.
Signal conv1d(const Signal& x, const Conv& conv, int dilation, int pad_left, int pad_right);

// Over the channels at each time of columns [t0, t0 + len).
void layer_norm_columns(Signal& x, int t0, int len, const VitsTensor& gamma,
                        const VitsTensor& beta);
void layer_norm(Signal& x, const VitsTensor& gamma, const VitsTensor& beta);

void add(Signal& x, const Signal& y);

inline double softplus(double x) {
    return x > 20 ? x : std::log1p(std::exp(x));
}

}  // namespace etude::engine::vits_host
