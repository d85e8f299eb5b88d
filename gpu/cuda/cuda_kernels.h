// Launchers for the CUDA backend's own kernels (everything that is not a
// cuBLAS GEMM or a cuFFT transform). Internal to the module.
//
// Each launcher queues its kernel on `stream` and returns the launch status
// (cudaGetLastError), so the backend can report it with the op's name. A
// size of zero launches nothing. Pointers are device pointers; sizes are in
// floats, or complex values where the name says so.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "gpu/backend.h"

namespace etude::gpu::kernels {

cudaError_t activation(cudaStream_t stream, Activation f, const float* x, float* y, std::size_t n,
                       float alpha);
cudaError_t fill(cudaStream_t stream, float* y, float value, std::size_t n);
cudaError_t scale(cudaStream_t stream, float* y, float factor, std::size_t n);
// bias may be null.
cudaError_t conv1d(cudaStream_t stream, const Conv1dShape& s, const float* x, const float* w,
                   const float* bias, float* y);
// A convolution as a GEMM (gpu/conv_as_gemm.h): the im2col matrices of
// `items` windows of x, one after another in `col`; and y's `items` blocks
// of rows x cols set to the bias (bias[r] along row r).
cudaError_t im2col(cudaStream_t stream, const Conv1dShape& s, int items, const float* x,
                   float* col);
cudaError_t bias_rows(cudaStream_t stream, int items, int rows, int cols, const float* bias,
                      float* y);
// A transposed convolution's outputs gathered from its taps'
// contributions z (gpu/conv_as_gemm.h) for `items` windows; bias may be null.
cudaError_t col2im(cudaStream_t stream, const Conv1dShape& s, int items, const float* z,
                   const float* bias, float* y);
cudaError_t conv_transpose1d(cudaStream_t stream, const Conv1dShape& s, const float* x,
                             const float* w, const float* bias, float* y);
cudaError_t layer_norm(cudaStream_t stream, int rows, int cols, float eps, const float* x,
                       const float* gamma, const float* beta, float* y);
// x and y may be the same buffer; beta == 0 never reads y.
cudaError_t axpby(cudaStream_t stream, std::size_t n, float alpha, const float* x, float beta,
                  float* y);
// y (cols x rows) = x^T; x and y must not overlap.
cudaError_t transpose(cudaStream_t stream, int rows, int cols, const float* x, float* y);
cudaError_t add_bias(cudaStream_t stream, int rows, int cols, const float* bias, bool per_row,
                     float* y);
// x and y must not overlap.
cudaError_t polar_spectrum(cudaStream_t stream, int frames, int bins, float max_magnitude,
                           const float* x, float* y);
// Clears the imaginary parts of bin 0 and (n even) bin n/2 of each of `batch`
// rows of n/2+1 complex values (interleaved), as a real signal's spectrum
// has them; cuFFT's C2R, unlike FFTW's, does not ignore them.
cudaError_t hermitian_edges(cudaStream_t stream, int batch, int n, float* x);
cudaError_t frame_signal(cudaStream_t stream, const float* signal, int n_fft, int hop, int n_frames,
                         const float* window, float* frames);
cudaError_t overlap_add(cudaStream_t stream, const float* frames, int n_fft, int hop, int n_frames,
                        const float* window, float* out);
cudaError_t complex_multiply(cudaStream_t stream, const float* a, const float* b, float* c,
                             std::size_t n_complex);
cudaError_t complex_exp(cudaStream_t stream, const float* x, float* y, std::size_t n_complex);
cudaError_t minimum_phase_fold(cudaStream_t stream, int n, int batch, const float* x, float* y);
// y[i][c][t] = tanh(x[i][c][t]) * sigmoid(x[i][channels + c][t]) for each
// of `batch` items; x and y distinct.
cudaError_t gated_tanh(cudaStream_t stream, int batch, int channels, int length, const float* x,
                       float* y);
// gpu::Backend's softmax_rows and relative_attention_* (gpu/kernels/attention_bodies.h).
cudaError_t softmax_rows(cudaStream_t stream, int rows, int cols, const float* x, float* y);
cudaError_t relative_attention_scores(cudaStream_t stream, int batch, int heads, int length,
                                      int channels, int window, float scale, const float* q,
                                      const float* k, const float* rel_k, const float* mask,
                                      float* scores);  // mask may be null
cudaError_t relative_attention_values(cudaStream_t stream, int batch, int heads, int length,
                                      int channels, int window, const float* p, const float* v,
                                      const float* rel_v, float* y);
// A strided block of rows (Backend::copy_rows), one element per thread:
// cudaMemcpy2DAsync between device buffers goes row by row.
cudaError_t copy_rows(cudaStream_t stream, int rows, int cols, const float* src, std::size_t src_at,
                      std::size_t src_stride, float* dst, std::size_t dst_at,
                      std::size_t dst_stride);
cudaError_t copy_slot_rows(cudaStream_t stream, const Backend::SlotRows& a, const float* index,
                           bool from_slots, const float* src, float* dst);
cudaError_t broadcast_multiply(cudaStream_t stream, int rows, int cols, const float* factors,
                               bool per_row, float* y);

cudaError_t spline_inverse(cudaStream_t stream, int count, int bins, float bound, float scale,
                           const float* params, const float* x, float* y);

}  // namespace etude::gpu::kernels
