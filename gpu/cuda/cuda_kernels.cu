// The CUDA backend's direct kernels. Each mirrors the CPU reference loop in
// gpu/cpu/cpu_backend.cpp; where the order of a sum matters for rounding it
// is kept the same (ascending channel, tap, frame), so the results agree to
// float rounding (fused multiply-adds aside).
//
// Launch shape: 1-D grid-stride loops with 256-thread blocks, the grid capped
// so that huge sizes reuse threads instead of exceeding grid limits.
#include <algorithm>
#include <cstdint>

#include "gpu/cuda/cuda_kernels.h"

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

// ---- element-wise ----

template <Activation F>
__device__ inline float apply(float v, float alpha) {
    if constexpr (F == Activation::LeakyRelu) return v >= 0.0f ? v : alpha * v;
    if constexpr (F == Activation::Gelu) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    if constexpr (F == Activation::Tanh) return tanhf(v);
    if constexpr (F == Activation::Exp) return expf(v);
    if constexpr (F == Activation::Sin) return sinf(v);
    if constexpr (F == Activation::Cos) return cosf(v);
    return v;
}

// No __restrict__: x and y may be the same buffer (in-place activation).
template <Activation F>
__global__ void activation_kernel(const float* x, float* y, std::size_t n, float alpha) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) y[i] = apply<F>(x[i], alpha);
}

__global__ void fill_kernel(float* __restrict__ y, float value, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) y[i] = value;
}

__global__ void scale_kernel(float* __restrict__ y, float factor, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) y[i] *= factor;
}

// No __restrict__: x and y may be the same buffer. beta == 0 must not read
// y, which may hold NaN (0 * NaN is NaN), hence the branch rather than a
// multiply by zero; it is uniform across the grid.
__global__ void axpby_kernel(const float* x, float* y, float alpha, float beta, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride())
        y[i] = beta == 0.0f ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

__global__ void add_bias_kernel(int cols, const float* __restrict__ bias, bool per_row,
                                float* __restrict__ y, std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride()) {
        const std::size_t r = idx / cols;
        y[idx] += per_row ? bias[r] : bias[idx - r * cols];
    }
}

// One thread per complex output (frame f, bin k); x rows are `bins`
// log-magnitudes then `bins` phases.
__global__ void polar_spectrum_kernel(int bins, float max_magnitude, const float* __restrict__ x,
                                      float2* __restrict__ y, std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride()) {
        const std::size_t f = idx / bins;
        const std::size_t k = idx - f * bins;
        const float* row = x + f * 2 * bins;
        const float m = fminf(expf(row[k]), max_magnitude);
        float s, c;
        sincosf(row[bins + k], &s, &c);
        y[idx] = make_float2(m * c, m * s);
    }
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

// ---- convolutions: one thread per output element ----

__global__ void conv1d_kernel(Conv1dShape s, int out_len, const float* __restrict__ x,
                              const float* __restrict__ w, const float* __restrict__ bias,
                              float* __restrict__ y, std::size_t total) {
    const int icg = s.in_channels / s.groups, ocg = s.out_channels / s.groups;
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride()) {
        const int t = static_cast<int>(idx % out_len);
        const std::size_t row = idx / out_len;
        const int oc = static_cast<int>(row % s.out_channels);
        const std::size_t n = row / s.out_channels;
        const int g = oc / ocg;
        const float* xg = x + (n * s.in_channels + static_cast<std::size_t>(g) * icg) * s.in_length;
        const float* wo = w + static_cast<std::size_t>(oc) * icg * s.kernel;
        const int t0 = t * s.stride - s.padding;
        float acc = bias ? bias[oc] : 0.0f;
        for (int ic = 0; ic < icg; ++ic) {
            const float* xr = xg + static_cast<std::size_t>(ic) * s.in_length;
            const float* wr = wo + static_cast<std::size_t>(ic) * s.kernel;
            for (int k = 0; k < s.kernel; ++k) {
                const int ti = t0 + k * s.dilation;
                if (ti >= 0 && ti < s.in_length) acc += wr[k] * xr[ti];
            }
        }
        y[idx] = acc;
    }
}

// Gather form of the transposed convolution: output t of channel oc takes
// input ti through tap k where ti*stride - padding + k*dilation == t. Each
// output is written by exactly one thread, so no atomics are needed.
__global__ void conv_transpose1d_kernel(Conv1dShape s, int out_len, const float* __restrict__ x,
                                        const float* __restrict__ w, const float* __restrict__ bias,
                                        float* __restrict__ y, std::size_t total) {
    const int icg = s.in_channels / s.groups, ocg = s.out_channels / s.groups;
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride()) {
        const int t = static_cast<int>(idx % out_len);
        const std::size_t row = idx / out_len;
        const int oc = static_cast<int>(row % s.out_channels);
        const std::size_t n = row / s.out_channels;
        const int g = oc / ocg, o = oc % ocg;
        float acc = bias ? bias[oc] : 0.0f;
        for (int j = 0; j < icg; ++j) {
            const std::size_t ic = static_cast<std::size_t>(g) * icg + j;
            const float* xr = x + (n * s.in_channels + ic) * s.in_length;
            const float* wr = w + (ic * ocg + o) * s.kernel;
            for (int k = 0; k < s.kernel; ++k) {
                // Decreases with k: once negative, no later tap reaches t.
                const int num = t + s.padding - k * s.dilation;
                if (num < 0) break;
                if (num % s.stride != 0) continue;
                const int ti = num / s.stride;
                if (ti < s.in_length) acc += xr[ti] * wr[k];
            }
        }
        y[idx] = acc;
    }
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

// ---- STFT helpers ----

__global__ void frame_signal_kernel(const float* __restrict__ signal, int n_fft, int hop,
                                    const float* __restrict__ window, float* __restrict__ frames,
                                    std::size_t total) {
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride()) {
        const std::size_t f = idx / n_fft;
        const int i = static_cast<int>(idx % n_fft);
        frames[idx] = signal[f * hop + i] * window[i];
    }
}

// Gather: sample t sums the frames f with f*hop <= t < f*hop + n_fft, in
// ascending f like the reference; every sample is written, so `out` needs no
// clearing and no atomics are involved.
__global__ void overlap_add_kernel(const float* __restrict__ frames, int n_fft, int hop,
                                   int n_frames, const float* __restrict__ window,
                                   float* __restrict__ out, std::size_t total) {
    for (std::size_t t = first_index(); t < total; t += grid_stride()) {
        const std::int64_t ti = static_cast<std::int64_t>(t);
        const std::int64_t last = ti / hop < n_frames ? ti / hop : n_frames - 1;
        const std::int64_t first = ti >= n_fft ? (ti - n_fft) / hop + 1 : 0;
        float acc = 0.0f;
        for (std::int64_t f = first; f <= last; ++f) {
            const std::int64_t i = ti - f * hop;
            acc += frames[f * n_fft + i] * window[i];
        }
        out[t] = acc;
    }
}

// The complex and fold kernels allow in-place use (output == an input): each
// element is read before it is written, by the same thread.
__global__ void complex_multiply_kernel(const float2* a, const float2* b, float2* c,
                                        std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        const float2 u = a[i], v = b[i];
        c[i] = make_float2(u.x * v.x - u.y * v.y, u.x * v.y + u.y * v.x);
    }
}

__global__ void complex_exp_kernel(const float2* x, float2* y, std::size_t n) {
    for (std::size_t i = first_index(); i < n; i += grid_stride()) {
        const float2 v = x[i];
        const float m = expf(v.x);
        float s, c;
        sincosf(v.y, &s, &c);
        y[i] = make_float2(m * c, m * s);
    }
}

__global__ void minimum_phase_fold_kernel(int n, const float* x, float* y, std::size_t total) {
    const int half = n / 2;
    for (std::size_t idx = first_index(); idx < total; idx += grid_stride()) {
        const int i = static_cast<int>(idx % n);
        float v = 0.0f;
        if (i == 0 || i == half)
            v = x[idx];
        else if (i < half)
            v = 2.0f * x[idx];
        y[idx] = v;
    }
}

}  // namespace

cudaError_t activation(cudaStream_t stream, Activation f, const float* x, float* y, std::size_t n,
                       float alpha) {
    if (n == 0) return cudaSuccess;
    const unsigned grid = grid_for(n);
    switch (f) {
        case Activation::LeakyRelu:
            activation_kernel<Activation::LeakyRelu><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
        case Activation::Gelu:
            activation_kernel<Activation::Gelu><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
        case Activation::Tanh:
            activation_kernel<Activation::Tanh><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
        case Activation::Exp:
            activation_kernel<Activation::Exp><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
        case Activation::Sin:
            activation_kernel<Activation::Sin><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
            break;
        case Activation::Cos:
            activation_kernel<Activation::Cos><<<grid, kBlock, 0, stream>>>(x, y, n, alpha);
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
    // cudaMalloc'd buffers are 256-byte aligned, so viewing y as float2 is safe.
    polar_spectrum_kernel<<<grid_for(total), kBlock, 0, stream>>>(
        bins, max_magnitude, x, reinterpret_cast<float2*>(y), total);
    return cudaGetLastError();
}

__global__ void hermitian_edges_kernel(int batch, int n, float* x) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= batch) return;
    const int bins = n / 2 + 1;
    float* r = x + static_cast<std::size_t>(row) * 2 * bins;
    r[1] = 0.0f;
    if (n % 2 == 0) r[2 * (bins - 1) + 1] = 0.0f;  // odd n has no Nyquist bin
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
    // cudaMalloc'd buffers are 256-byte aligned, so viewing them as float2 is safe.
    complex_multiply_kernel<<<grid_for(n_complex), kBlock, 0, stream>>>(
        reinterpret_cast<const float2*>(a), reinterpret_cast<const float2*>(b),
        reinterpret_cast<float2*>(c), n_complex);
    return cudaGetLastError();
}

cudaError_t complex_exp(cudaStream_t stream, const float* x, float* y, std::size_t n_complex) {
    if (n_complex == 0) return cudaSuccess;
    complex_exp_kernel<<<grid_for(n_complex), kBlock, 0, stream>>>(
        reinterpret_cast<const float2*>(x), reinterpret_cast<float2*>(y), n_complex);
    return cudaGetLastError();
}

cudaError_t minimum_phase_fold(cudaStream_t stream, int n, int batch, const float* x, float* y) {
    if (n <= 0 || batch <= 0) return cudaSuccess;
    const std::size_t total = static_cast<std::size_t>(n) * batch;
    minimum_phase_fold_kernel<<<grid_for(total), kBlock, 0, stream>>>(n, x, y, total);
    return cudaGetLastError();
}

}  // namespace etude::gpu::kernels
