// The CUDA backend's direct kernels. The per-element math of the simple ones
// is gpu/kernels/kernel_bodies.h, the same source the OpenCL program is built
// from, so what PoCL runs in CI (indexing, bounds, summation order) is what
// runs here; this file adds only the launch shape. GEMM and FFT are cuBLAS
// and cuFFT; transpose and layer norm are CUDA's own (shared memory, warp
// shuffles).
//
// Launch shape: 1-D grid-stride loops with 256-thread blocks, the grid capped
// so that huge sizes reuse threads instead of exceeding grid limits.
#include <algorithm>
#include <cstdint>

#include "gpu/cuda/cuda_kernels.h"
#include "gpu/kernels/attention_bodies.h"
#include "gpu/kernels/kernel_bodies.h"
#include "gpu/kernels/spline_bodies.h"

namespace etude::gpu::kernels {
namespace {

constexpr int kBlock = 256;
// Enough blocks to fill any current GPU many times over; beyond that the
// grid-stride loop takes over.
constexpr std::size_t kMaxBlocks = 65535;

unsigned grid_for(std::size_t n) {
    return static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, kMaxBlocks));
}

__device__ inline std::size_t first_index() {
    return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t grid_stride() {
    return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

// ---- element-wise: grid-stride loops around the shared bodies ----

// One kernel per activation (F is an ETUDE_ACT_* code), so the body's switch
// folds away. No __restrict__: x and y may be the same buffer.
template <int F>
__global__ void activation_kernel(const float* x, float* y, std::size_t n, float alpha) {
    for (std::size_t i = first_index(); i < n; i += grid_stride())
        y[i] = bodies::activation_of(F, x[i], alpha);
}

__global__ void fill_kernel(float* __restrict__ y, float value, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) bodies::fill_at(i, value, y);
}

// Only the backend's own bookkeeping uses it (irfft's 1/n), so it has no
// OpenCL twin and no shared body.
__global__ void scale_kernel(float* __restrict__ y, float factor, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) y[i] *= factor;
}

// No __restrict__: x and y may be the same buffer.
__global__ void axpby_kernel(const float* x, float* y, float alpha, float beta, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride())
        bodies::axpby_at(i, alpha, x, beta, y);
}

__global__ void add_bias_kernel(int cols, const float* __restrict__ bias, bool per_row,
                                float* __restrict__ y, std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride())
        bodies::add_bias_at(idx, cols, bias, per_row ? 1 : 0, y);
}

__global__ void polar_spectrum_kernel(int bins, float max_magnitude, const float* __restrict__ x,
                                      float* __restrict__ y, std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride())
        bodies::polar_spectrum_at(idx, bins, max_magnitude, x, y);
}

// ---- transpose: 32 x 32 tiles through shared memory ----

// Each block moves tiles of x into shared memory with row-wise (coalesced)
// reads and writes them out transposed, again row-wise; the padding column
// keeps the column-wise reads of the tile free of bank conflicts. Blocks are
// kTile x kTileRows threads, each thread handling kTile / kTileRows rows.
// gridDim.y is capped (65535), so blocks loop over tile rows.
constexpr int kTile = 32;
constexpr int kTileRows = 8;

__global__ void transpose_kernel(int rows, int cols, const float* __restrict__ x,
                                 float* __restrict__ y) {
    __shared__ float tile[kTile][kTile + 1];
    const int tile_rows = (rows + kTile - 1) / kTile;
    const int c0 = blockIdx.x * kTile;
    for (int tr = blockIdx.y; tr < tile_rows; tr += gridDim.y) {
        const int r0 = tr * kTile;
        for (int i = threadIdx.y; i < kTile; i += kTileRows) {
            const int r = r0 + i, c = c0 + threadIdx.x;
            if (r < rows && c < cols)
                tile[i][threadIdx.x] = x[static_cast<std::size_t>(r) * cols + c];
        }
        __syncthreads();
        // Row c0 + i of y is column c0 + i of x; its columns are x's rows.
        for (int i = threadIdx.y; i < kTile; i += kTileRows) {
            const int yr = c0 + i, yc = r0 + threadIdx.x;
            if (yr < cols && yc < rows)
                y[static_cast<std::size_t>(yr) * rows + yc] = tile[threadIdx.x][i];
        }
        __syncthreads();  // the tile is read out before the next one overwrites it
    }
}

// ---- a convolution as a GEMM: the unfolded windows and the bias ----

__global__ void im2col_kernel(const float* __restrict__ x, float* __restrict__ col, int in_len,
                              int taps, int stride, int dilation, int padding, int out_len,
                              std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride())
        bodies::im2col_at(idx, x, col, in_len, taps, stride, dilation, padding, out_len);
}

__global__ void bias_rows_kernel(int rows, int cols, const float* __restrict__ bias,
                                 float* __restrict__ y, std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride())
        bodies::bias_rows_at(idx, rows, cols, bias, y);
}

__global__ void col2im_kernel(const float* __restrict__ z, const float* __restrict__ bias,
                              float* __restrict__ y, int out_ch, int taps, int in_len, int stride,
                              int dilation, int padding, int out_len, std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride())
        bodies::col2im_at(idx, z, bias, bias != nullptr, y, out_ch, taps, in_len, stride, dilation,
                          padding, out_len);
}

// ---- convolutions: one thread per output element ----

__global__ void conv1d_kernel(Conv1dShape s, int out_len, const float* __restrict__ x,
                              const float* __restrict__ w, const float* __restrict__ bias,
                              float* __restrict__ y, std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride())
        bodies::conv1d_at(idx, x, w, bias, bias != nullptr, y, s.in_channels, s.out_channels,
                          s.in_length, s.kernel, s.stride, s.dilation, s.padding, s.groups,
                          out_len);
}

__global__ void conv_transpose1d_kernel(Conv1dShape s, int out_len, const float* __restrict__ x,
                                        const float* __restrict__ w, const float* __restrict__ bias,
                                        float* __restrict__ y, std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride())
        bodies::conv_transpose1d_at(idx, x, w, bias, bias != nullptr, y, s.in_channels,
                                    s.out_channels, s.in_length, s.kernel, s.stride, s.dilation,
                                    s.padding, s.groups, out_len);
}

// ---- layer norm: one block per row ----

// Sum over the block; every thread gets the result. `scratch` holds one
// float per warp. The trailing barrier lets the caller reuse `scratch`.
__device__ float block_sum(float v, float* scratch) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) / 32;
    v = threadIdx.x < warps ? scratch[threadIdx.x] : 0.0f;
    if (warp == 0)
        for (int offset = 16; offset > 0; offset >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, offset);
    __syncthreads();  // everyone has read scratch before thread 0 overwrites it
    if (threadIdx.x == 0) scratch[0] = v;
    __syncthreads();
    const float total = scratch[0];
    __syncthreads();
    return total;
}

// Two passes (mean, then squared deviations) rather than sum and sum of
// squares: the latter cancels badly for rows with a large mean, and the
// reference computes it the two-pass way. x and y may be the same buffer:
// the whole row is reduced before any of it is written.
__global__ void layer_norm_kernel(int cols, float eps, const float* x,
                                  const float* __restrict__ gamma, const float* __restrict__ beta,
                                  float* y) {
    __shared__ float scratch[32];
    const std::size_t base = static_cast<std::size_t>(blockIdx.x) * cols;
    const float* row = x + base;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    const float mean = block_sum(s, scratch) / static_cast<float>(cols);
    float sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = row[c] - mean;
        sq += d * d;
    }
    const float var = block_sum(sq, scratch) / static_cast<float>(cols);
    // 1/sqrtf rather than rsqrtf: the approximate reciprocal root costs
    // accuracy that the parity tolerance does not leave room for.
    const float inv = 1.0f / sqrtf(var + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        y[base + c] = (row[c] - mean) * inv * gamma[c] + beta[c];
}

// ---- STFT helpers and spectra ----

__global__ void frame_signal_kernel(const float* __restrict__ signal, int n_fft, int hop,
                                    const float* __restrict__ window, float* __restrict__ frames,
                                    std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride())
        bodies::frame_signal_at(idx, n_fft, hop, signal, window, frames);
}

__global__ void overlap_add_kernel(const float* __restrict__ frames, int n_fft, int hop,
                                   int n_frames, const float* __restrict__ window,
                                   float* __restrict__ out, std::size_t total) {
    for (std::size_t t = first_index(); t < total; t += grid_stride())
        bodies::overlap_add_at(t, frames, n_fft, hop, n_frames, window, out);
}

// The complex and fold kernels allow in-place use (output == an input): each
// element is read before it is written, by the same thread.
__global__ void complex_multiply_kernel(const float* a, const float* b, float* c, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride())
        bodies::complex_multiply_at(i, a, b, c);
}

__global__ void complex_exp_kernel(const float* x, float* y, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) bodies::complex_exp_at(i, x, y);
}

__global__ void minimum_phase_fold_kernel(int n, const float* x, float* y, std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride())
        bodies::minimum_phase_fold_at(idx, n, x, y);
}

// x blocks over an item's outputs, y blocks over the items.
__global__ void gated_tanh_kernel(const float* x, float* y, std::size_t item_size, int batch) {
    for (std::size_t item = blockIdx.y; item < static_cast<std::size_t>(batch); item += gridDim.y)
        for (std::size_t i = first_index(); i < item_size; i += grid_stride())
            bodies::gated_tanh_at(item, i, item_size, x, y);
}

// No __restrict__: x and y may be the same buffer. One thread per row.
__global__ void softmax_rows_kernel(const float* x, float* y, int rows, int cols) {
    for (std::size_t r = first_index(); r < static_cast<std::size_t>(rows); r += grid_stride())
        bodies::softmax_row(r, cols, x, y);
}

__global__ void relative_scores_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                       const float* __restrict__ rel_k,
                                       const float* __restrict__ mask, float* __restrict__ scores,
                                       std::size_t n, int heads, int length, int channels,
                                       int window, float scale, int has_mask) {
    for (std::size_t i = first_index(); i < n; i += grid_stride())
        bodies::relative_scores_at(i, heads, length, channels, window, scale, q, k, rel_k, has_mask,
                                   mask, scores);
}

__global__ void relative_values_kernel(const float* __restrict__ p, const float* __restrict__ v,
                                       const float* __restrict__ rel_v, float* __restrict__ y,
                                       std::size_t n, int heads, int length, int channels,
                                       int window) {
    for (std::size_t i = first_index(); i < n; i += grid_stride())
        bodies::relative_values_at(i, heads, length, channels, window, p, v, rel_v, y);
}

__global__ void copy_rows_kernel(std::size_t n, int cols, std::size_t src_at,
                                 std::size_t src_stride, std::size_t dst_at, std::size_t dst_stride,
                                 const float* __restrict__ src, float* __restrict__ dst) {
    for (std::size_t i = first_index(); i < n; i += grid_stride())
        bodies::copy_rows_at(i, cols, src_at, src_stride, dst_at, dst_stride, src, dst);
}

__global__ void copy_slot_rows_kernel(std::size_t n, int rows, int cols,
                                      const float* __restrict__ index, int slots,
                                      std::size_t slot_at, std::size_t slot_floats,
                                      std::size_t slot_stride, std::size_t batch_at,
                                      std::size_t batch_stride, int from_slots,
                                      const float* __restrict__ src, float* __restrict__ dst) {
    for (std::size_t i = first_index(); i < n; i += grid_stride())
        bodies::copy_slot_rows_at(i, rows, cols, index, slots, slot_at, slot_floats, slot_stride,
                                  batch_at, batch_stride, from_slots, src, dst);
}

__global__ void broadcast_multiply_kernel(const float* __restrict__ factors, float* __restrict__ y,
                                          std::size_t n, int cols, int per_row) {
    for (std::size_t i = first_index(); i < n; i += grid_stride())
        bodies::broadcast_multiply_at(i, cols, factors, per_row, y);
}

// x and y may alias (each thread reads its element before writing it).
__global__ void spline_inverse_kernel(const float* params, const float* x, float* y, std::size_t n,
                                      int bins, float bound, float scale) {
    for (std::size_t i = first_index(); i < n; i += grid_stride())
        bodies::spline_inverse_at(i, bins, bound, scale, params, x, y);
}

// One thread per row (grid-stride, like the rest: the grid is capped).
__global__ void hermitian_edges_kernel(int batch, int n, float* x) {
    for (std::size_t row = first_index(); row < static_cast<std::size_t>(batch);
         row += grid_stride())
        bodies::hermitian_edges_row(row, n, x);
}

}  // namespace

cudaError_t activation(cudaStream_t stream, Activation f, const float* x, float* y, std::size_t n,
                       float alpha) {
    if (n == 0) return cudaSuccess;
    const unsigned grid = grid_for(n);
    switch (f) {
        case Activation::LeakyRelu:
            activation_kernel<ETUDE_ACT_LEAKY_RELU><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
        case Activation::Gelu:
            activation_kernel<ETUDE_ACT_GELU><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
        case Activation::Tanh:
            activation_kernel<ETUDE_ACT_TANH><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
        case Activation::Exp:
            activation_kernel<ETUDE_ACT_EXP><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
        case Activation::Sin:
            activation_kernel<ETUDE_ACT_SIN><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
        case Activation::Cos:
            activation_kernel<ETUDE_ACT_COS><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
    }
    return cudaGetLastError();
}

cudaError_t fill(cudaStream_t stream, float* y, float value, std::size_t n) {
    if (n == 0) return cudaSuccess;
    fill_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, value, n);
    return cudaGetLastError();
}

cudaError_t scale(cudaStream_t stream, float* y, float factor, std::size_t n) {
    if (n == 0) return cudaSuccess;
    scale_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, factor, n);
    return cudaGetLastError();
}

cudaError_t conv1d(cudaStream_t stream, const Conv1dShape& s, const float* x, const float* w,
                   const float* bias, float* y) {
    const int out_len = s.conv_out_length();
    if (out_len <= 0 || s.batch <= 0 || s.out_channels <= 0) return cudaSuccess;
    const std::size_t total = static_cast<std::size_t>(s.batch) * s.out_channels * out_len;
    conv1d_kernel<<<grid_for(total), kBlock, 0, stream>>>(s, out_len, x, w, bias, y, total);
    return cudaGetLastError();
}

cudaError_t im2col(cudaStream_t stream, const Conv1dShape& s, int items, const float* x,
                   float* col) {
    const int out_len = s.conv_out_length();
    if (out_len <= 0 || items <= 0) return cudaSuccess;
    const std::size_t total = static_cast<std::size_t>(items) * s.in_channels * s.kernel *
                              static_cast<std::size_t>(out_len);
    im2col_kernel<<<grid_for(total), kBlock, 0, stream>>>(x, col, s.in_length, s.kernel, s.stride,
                                                          s.dilation, s.padding, out_len, total);
    return cudaGetLastError();
}

cudaError_t bias_rows(cudaStream_t stream, int items, int rows, int cols, const float* bias,
                      float* y) {
    const std::size_t total =
        static_cast<std::size_t>(items) * rows * static_cast<std::size_t>(cols);
    if (total == 0) return cudaSuccess;
    bias_rows_kernel<<<grid_for(total), kBlock, 0, stream>>>(rows, cols, bias, y, total);
    return cudaGetLastError();
}

cudaError_t col2im(cudaStream_t stream, const Conv1dShape& s, int items, const float* z,
                   const float* bias, float* y) {
    const int out_len = s.transpose_out_length();
    if (out_len <= 0 || items <= 0) return cudaSuccess;
    const std::size_t total =
        static_cast<std::size_t>(items) * s.out_channels * static_cast<std::size_t>(out_len);
    col2im_kernel<<<grid_for(total), kBlock, 0, stream>>>(z, bias, y, s.out_channels, s.kernel,
                                                          s.in_length, s.stride, s.dilation,
                                                          s.padding, out_len, total);
    return cudaGetLastError();
}

cudaError_t conv_transpose1d(cudaStream_t stream, const Conv1dShape& s, const float* x,
                             const float* w, const float* bias, float* y) {
    const int out_len = s.transpose_out_length();
    if (out_len <= 0 || s.batch <= 0 || s.out_channels <= 0) return cudaSuccess;
    const std::size_t total = static_cast<std::size_t>(s.batch) * s.out_channels * out_len;
    conv_transpose1d_kernel<<<grid_for(total), kBlock, 0, stream>>>(s, out_len, x, w, bias, y,
                                                                    total);
    return cudaGetLastError();
}

cudaError_t layer_norm(cudaStream_t stream, int rows, int cols, float eps, const float* x,
                       const float* gamma, const float* beta, float* y) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    // Rows are one block each; grids may have up to 2^31-1 blocks in x.
    layer_norm_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(cols, eps, x, gamma, beta,
                                                                          y);
    return cudaGetLastError();
}

cudaError_t axpby(cudaStream_t stream, std::size_t n, float alpha, const float* x, float beta,
                  float* y) {
    if (n == 0) return cudaSuccess;
    axpby_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, y, alpha, beta, n);
    return cudaGetLastError();
}

cudaError_t transpose(cudaStream_t stream, int rows, int cols, const float* x, float* y) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    const unsigned tile_cols = static_cast<unsigned>((cols + kTile - 1) / kTile);
    const unsigned tile_rows = static_cast<unsigned>(
        std::min<std::size_t>((static_cast<std::size_t>(rows) + kTile - 1) / kTile, kMaxBlocks));
    transpose_kernel<<<dim3(tile_cols, tile_rows), dim3(kTile, kTileRows), 0, stream>>>(rows, cols,
                                                                                        x, y);
    return cudaGetLastError();
}

cudaError_t add_bias(cudaStream_t stream, int rows, int cols, const float* bias, bool per_row,
                     float* y) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    const std::size_t total = static_cast<std::size_t>(rows) * cols;
    add_bias_kernel<<<grid_for(total), kBlock, 0, stream>>>(cols, bias, per_row, y, total);
    return cudaGetLastError();
}

cudaError_t polar_spectrum(cudaStream_t stream, int frames, int bins, float max_magnitude,
                           const float* x, float* y) {
    if (frames <= 0 || bins <= 0) return cudaSuccess;
    const std::size_t total = static_cast<std::size_t>(frames) * bins;
    polar_spectrum_kernel<<<grid_for(total), kBlock, 0, stream>>>(bins, max_magnitude, x, y, total);
    return cudaGetLastError();
}

cudaError_t hermitian_edges(cudaStream_t stream, int batch, int n, float* x) {
    if (batch <= 0 || n <= 0) return cudaSuccess;
    hermitian_edges_kernel<<<grid_for(static_cast<std::size_t>(batch)), kBlock, 0, stream>>>(batch,
                                                                                             n, x);
    return cudaGetLastError();
}

cudaError_t frame_signal(cudaStream_t stream, const float* signal, int n_fft, int hop, int n_frames,
                         const float* window, float* frames) {
    if (n_fft <= 0 || n_frames <= 0) return cudaSuccess;
    const std::size_t total = static_cast<std::size_t>(n_frames) * n_fft;
    frame_signal_kernel<<<grid_for(total), kBlock, 0, stream>>>(signal, n_fft, hop, window, frames,
                                                                total);
    return cudaGetLastError();
}

cudaError_t overlap_add(cudaStream_t stream, const float* frames, int n_fft, int hop, int n_frames,
                        const float* window, float* out) {
    if (n_fft <= 0 || n_frames <= 0) return cudaSuccess;
    const std::size_t total = static_cast<std::size_t>(n_frames - 1) * hop + n_fft;
    overlap_add_kernel<<<grid_for(total), kBlock, 0, stream>>>(frames, n_fft, hop, n_frames, window,
                                                               out, total);
    return cudaGetLastError();
}

cudaError_t complex_multiply(cudaStream_t stream, const float* a, const float* b, float* c,
                             std::size_t n_complex) {
    if (n_complex == 0) return cudaSuccess;
    complex_multiply_kernel<<<grid_for(n_complex), kBlock, 0, stream>>>(a, b, c, n_complex);
    return cudaGetLastError();
}

cudaError_t complex_exp(cudaStream_t stream, const float* x, float* y, std::size_t n_complex) {
    if (n_complex == 0) return cudaSuccess;
    complex_exp_kernel<<<grid_for(n_complex), kBlock, 0, stream>>>(x, y, n_complex);
    return cudaGetLastError();
}

cudaError_t minimum_phase_fold(cudaStream_t stream, int n, int batch, const float* x, float* y) {
    if (n <= 0 || batch <= 0) return cudaSuccess;
    const std::size_t total = static_cast<std::size_t>(n) * batch;
    minimum_phase_fold_kernel<<<grid_for(total), kBlock, 0, stream>>>(n, x, y, total);
    return cudaGetLastError();
}

cudaError_t gated_tanh(cudaStream_t stream, int batch, int channels, int length, const float* x,
                       float* y) {
    if (batch <= 0 || channels <= 0 || length <= 0) return cudaSuccess;
    const std::size_t item_size = static_cast<std::size_t>(channels) * length;
    const dim3 grid(grid_for(item_size), static_cast<unsigned>(std::min(batch, 65535)));
    gated_tanh_kernel<<<grid, kBlock, 0, stream>>>(x, y, item_size, batch);
    return cudaGetLastError();
}

cudaError_t softmax_rows(cudaStream_t stream, int rows, int cols, const float* x, float* y) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    softmax_rows_kernel<<<grid_for(std::size_t(rows)), kBlock, 0, stream>>>(x, y, rows, cols);
    return cudaGetLastError();
}

cudaError_t relative_attention_scores(cudaStream_t stream, int batch, int heads, int length,
                                      int channels, int window, float scale, const float* q,
                                      const float* k, const float* rel_k, const float* mask,
                                      float* scores) {
    const std::size_t n = static_cast<std::size_t>(batch) * heads * length * length;
    if (n == 0) return cudaSuccess;
    // Without a mask the kernel still gets a valid pointer, never read.
    relative_scores_kernel<<<grid_for(n), kBlock, 0, stream>>>(q, k, rel_k, mask ? mask : k, scores,
                                                               n, heads, length, channels, window,
                                                               scale, mask ? 1 : 0);
    return cudaGetLastError();
}

cudaError_t relative_attention_values(cudaStream_t stream, int batch, int heads, int length,
                                      int channels, int window, const float* p, const float* v,
                                      const float* rel_v, float* y) {
    const std::size_t n = static_cast<std::size_t>(batch) * length * heads * channels;
    if (n == 0) return cudaSuccess;
    relative_values_kernel<<<grid_for(n), kBlock, 0, stream>>>(p, v, rel_v, y, n, heads, length,
                                                               channels, window);
    return cudaGetLastError();
}

cudaError_t copy_rows(cudaStream_t stream, int rows, int cols, const float* src, std::size_t src_at,
                      std::size_t src_stride, float* dst, std::size_t dst_at,
                      std::size_t dst_stride) {
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    if (n == 0) return cudaSuccess;
    copy_rows_kernel<<<grid_for(n), kBlock, 0, stream>>>(n, cols, src_at, src_stride, dst_at,
                                                         dst_stride, src, dst);
    return cudaGetLastError();
}

cudaError_t copy_slot_rows(cudaStream_t stream, const Backend::SlotRows& a, const float* index,
                           bool from_slots, const float* src, float* dst) {
    const std::size_t n = static_cast<std::size_t>(a.items) * a.rows * a.cols;
    if (n == 0) return cudaSuccess;
    copy_slot_rows_kernel<<<grid_for(n), kBlock, 0, stream>>>(
        n, a.rows, a.cols, index, a.slots, a.slot_at, a.slot_floats, a.slot_stride, a.batch_at,
        a.batch_stride, from_slots ? 1 : 0, src, dst);
    return cudaGetLastError();
}

cudaError_t broadcast_multiply(cudaStream_t stream, int rows, int cols, const float* factors,
                               bool per_row, float* y) {
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    if (n == 0) return cudaSuccess;
    broadcast_multiply_kernel<<<grid_for(n), kBlock, 0, stream>>>(factors, y, n, cols,
                                                                  per_row ? 1 : 0);
    return cudaGetLastError();
}

cudaError_t spline_inverse(cudaStream_t stream, int count, int bins, float bound, float scale,
                           const float* params, const float* x, float* y) {
    const std::size_t n = static_cast<std::size_t>(count);
    if (n == 0) return cudaSuccess;
    spline_inverse_kernel<<<grid_for(n), kBlock, 0, stream>>>(params, x, y, n, bins, bound, scale);
    return cudaGetLastError();
}

}  // namespace etude::gpu::kernels
