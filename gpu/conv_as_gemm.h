// A convolution as one strided-batched SGEMM, for backends whose fastest
// path is a vendor GEMM (CUDA's cuBLAS): the plan, in plain C++, so that the
// host tests it against the direct convolution with OpenBLAS's column-major
// SGEMM under exactly the arguments the device gets
// (tests/gpu/conv_as_gemm_test.cpp), on a machine without the device.
//
// The matrices. A window of a stream (batch item b) is unfolded into its
// im2col matrix X_b, rows (input channel, tap) and columns the outputs:
// X_b[c * taps + k][t] = x[b][c][t * stride - padding + k * dilation], zero
// outside the signal (kernel_bodies.h's im2col_at). The weights W
// ([out][in][taps], as every backend stores them) are an out x (in * taps)
// row-major matrix, so the output Y_b = W X_b is the out x outputs
// row-major block [b][out][t] of conv1d's output. A 1x1 convolution without
// stride or padding needs no unfolding: X_b is the window itself.
//
// In column-major terms (cuBLAS's, and cblas' CblasColMajor), a row-major
// matrix is its transpose with the same leading dimension, so the call is
// Y_b^T = X_b^T W^T: m = outputs, n = out channels, k = in * taps, A = X_b
// (lda = outputs, a stride of in * taps * outputs between items), B = W
// (ldb = in * taps, stride 0: every item shares it), C = Y_b (ldc =
// outputs, stride out * outputs). The bias is written into Y first and the
// GEMM adds to it (beta = 1), so no pass follows the GEMM.
//
// The unfolded matrices take taps times the window's size; a batch whose
// matrices would pass `max_columns_floats` runs as several GEMMs over parts
// of the batch (`items_per_call`), so the scratch stays bounded whatever
// the batch.
//
// A transposed convolution (an upsampler) is the same idea the other way
// round: one GEMM makes every tap's contribution, Z_b = W^T X_b with W the
// in x (out * taps) row-major matrix its weights ([in][out][taps]) already
// are, so Z_b[o * taps + k][ti] = sum_c w[c][o][k] x[b][c][ti]; then a
// gather (kernel_bodies.h's col2im_at) sums into output t the taps k and
// positions ti with ti * stride - padding + k * dilation == t, after the
// bias. Column-major: Z_b^T = X_b^T W, m = inputs, n = out * taps, k = in,
// A = X_b (lda = inputs), B = W transposed (ldb = out * taps, stride 0),
// C = Z_b (ldc = inputs).
//
// Only ungrouped convolutions (groups == 1): a grouped one is a GEMM per
// group with its own strides, and the networks here use groups only in
// layers the host runs (the duration predictor's depthwise convolutions).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "gpu/backend.h"

namespace etude::gpu {

struct ConvAsGemm {
    bool unfold = true;  // false: the window is X_b as it is (1x1, stride 1, no padding)
    int m = 0, n = 0, k = 0;
    std::int64_t lda = 0, ldb = 0, ldc = 0;
    std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
    int batch = 0;                             // items in all
    int items_per_call = 0;                    // items per GEMM (the last call takes the rest)
    std::size_t unfolded_floats_per_item = 0;  // 0 when !unfold
    std::size_t x_floats_per_item = 0;         // stride between the windows of x
};

// 64 Mi floats (256 MB): a Piper medium decoder's largest unfolded window
// (32 channels x 11 taps x ~8,200 outputs in a 32-frame chunk) is about
// 2.9 M floats, so 22 streams' windows go to one GEMM.
inline constexpr std::size_t kMaxUnfoldedFloats = std::size_t(64) << 20;

inline std::optional<ConvAsGemm> conv_as_gemm(
    const Conv1dShape& s, std::size_t max_unfolded_floats = kMaxUnfoldedFloats) {
    const int outputs = s.conv_out_length();
    if (s.groups != 1 || s.batch <= 0 || outputs <= 0 || s.out_channels <= 0) return std::nullopt;
    ConvAsGemm g;
    g.unfold = !(s.kernel == 1 && s.stride == 1 && s.padding == 0);
    g.m = outputs;
    g.n = s.out_channels;
    g.k = s.in_channels * s.kernel;
    g.lda = outputs;
    g.ldb = g.k;
    g.ldc = outputs;
    g.x_floats_per_item = std::size_t(s.in_channels) * std::size_t(s.in_length);
    g.unfolded_floats_per_item = g.unfold ? std::size_t(g.k) * std::size_t(outputs) : 0;
    // Unfolded: the items' matrices lie one after another in the scratch.
    // Not: each item's window is X_b, one window of x after another.
    g.stride_a =
        g.unfold ? std::int64_t(g.unfolded_floats_per_item) : std::int64_t(g.x_floats_per_item);
    g.stride_b = 0;
    g.stride_c = std::int64_t(s.out_channels) * outputs;
    g.batch = s.batch;
    g.items_per_call =
        g.unfold ? int(std::clamp<std::size_t>(max_unfolded_floats / g.unfolded_floats_per_item, 1,
                                               std::size_t(s.batch)))
                 : s.batch;
    return g;
}

// A transposed convolution as a GEMM into the taps' contributions Z and a
// gather (above). Only ungrouped, as conv_as_gemm().
struct ConvTransposeAsGemm {
    int m = 0, n = 0, k = 0;  // B is transposed (CUBLAS_OP_T, CblasTrans)
    std::int64_t lda = 0, ldb = 0, ldc = 0;
    std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
    int batch = 0, items_per_call = 0;
    std::size_t z_floats_per_item = 0;  // a window's contributions, in the scratch
    std::size_t x_floats_per_item = 0;  // stride between the windows of x
    std::size_t y_floats_per_item = 0;  // stride between the outputs in y
};

inline std::optional<ConvTransposeAsGemm> conv_transpose_as_gemm(
    const Conv1dShape& s, std::size_t max_z_floats = kMaxUnfoldedFloats) {
    const int outputs = s.transpose_out_length();
    if (s.groups != 1 || s.batch <= 0 || outputs <= 0 || s.out_channels <= 0 || s.in_length <= 0 ||
        s.padding < 0)
        return std::nullopt;
    ConvTransposeAsGemm g;
    g.m = s.in_length;
    g.n = s.out_channels * s.kernel;
    g.k = s.in_channels;
    g.lda = s.in_length;
    g.ldb = g.n;
    g.ldc = s.in_length;
    g.x_floats_per_item = std::size_t(s.in_channels) * std::size_t(s.in_length);
    g.z_floats_per_item = std::size_t(g.n) * std::size_t(s.in_length);
    g.y_floats_per_item = std::size_t(s.out_channels) * std::size_t(outputs);
    g.stride_a = std::int64_t(g.x_floats_per_item);
    g.stride_b = 0;
    g.stride_c = std::int64_t(g.z_floats_per_item);
    g.batch = s.batch;
    g.items_per_call =
        int(std::clamp<std::size_t>(max_z_floats / g.z_floats_per_item, 1, std::size_t(s.batch)));
    return g;
}

}  // namespace etude::gpu
