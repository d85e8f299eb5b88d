// The OpenCL C source of every kernel of the OpenCL backend, in one program
// so that it is compiled once per device (in open_opencl_device, never on an
// audio thread). The FFTs are not here: clFFT generates its own kernels.
//
// Conventions shared with opencl_backend.cpp (keep both in step):
//  - buffers are float; complex values are interleaved (re, im) pairs;
//  - element counts that can exceed 2^31 are ulong, shapes are int;
//  - 1-D kernels are launched on a global size rounded up to the work-group
//    size, so every kernel bounds-checks its global id;
//  - OpenCL C reserves `kernel` and `half`: never use them as names;
//  - results must match gpu/cpu/cpu_backend.cpp, so loops accumulate in the
//    same order as the reference where that is cheap to do.
#include "gpu/opencl/opencl_backend.h"

namespace etude::gpu {

const char* opencl_kernel_source() {
    return R"CLC(
// Activation codes: the host maps gpu::Activation onto these explicitly.
#define ACT_LEAKY_RELU 0
#define ACT_GELU 1
#define ACT_TANH 2
#define ACT_EXP 3
#define ACT_SIN 4
#define ACT_COS 5

// GEMM tile edge; the host launches 16x16 work-groups (see kGemmTile).
#define TS 16
// Work-group size of layer_norm (a power of two for the tree reduction).
#define LN_WG 64
// Transpose tile edge; the host launches TT x TT work-groups (see kTransposeTile).
#define TT 16

__kernel void fill(__global float* y, ulong n, float value) {
    const size_t i = get_global_id(0);
    if (i < n) y[i] = value;
}

// x and y may alias: each work-item reads its element before writing it.
__kernel void activation(__global const float* x, __global float* y, ulong n, int op,
                         float alpha) {
    const size_t i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    float r;
    switch (op) {
        case ACT_LEAKY_RELU: r = v >= 0.0f ? v : alpha * v; break;
        case ACT_GELU: r = 0.5f * v * (1.0f + erf(v * 0.70710678118654752f)); break;
        case ACT_TANH: r = tanh(v); break;
        case ACT_EXP: r = exp(v); break;
        case ACT_SIN: r = sin(v); break;
        case ACT_COS: r = cos(v); break;
        default: r = v; break;
    }
    y[i] = r;
}

// C = alpha * op(A) * op(B) + beta * C, row-major. One work-item per element
// of C; each work-group stages a TS x TS tile of op(A) and of op(B) in local
// memory per step along k. Out-of-range tile entries are loaded as zero so
// sizes need not be multiples of TS. With beta == 0, C is not read (BLAS
// semantics: C may hold garbage, even NaN).
__kernel __attribute__((reqd_work_group_size(TS, TS, 1))) void gemm(
    int trans_a, int trans_b, int m, int n, int k, float alpha, __global const float* a, int lda,
    __global const float* b, int ldb, float beta, __global float* c, int ldc) {
    const int col = get_global_id(0);
    const int row = get_global_id(1);
    const int lc = get_local_id(0);
    const int lr = get_local_id(1);
    __local float as[TS][TS];
    // One column of padding keeps the column-wise reads of bs free of bank
    // conflicts on GPUs.
    __local float bs[TS][TS + 1];
    float acc = 0.0f;
    for (int t = 0; t < k; t += TS) {
        const int ka = t + lc;  // op(A)[row][ka]
        float av = 0.0f;
        if (row < m && ka < k)
            av = trans_a ? a[(size_t)ka * lda + row] : a[(size_t)row * lda + ka];
        as[lr][lc] = av;
        const int kb = t + lr;  // op(B)[kb][col]
        float bv = 0.0f;
        if (kb < k && col < n)
            bv = trans_b ? b[(size_t)col * ldb + kb] : b[(size_t)kb * ldb + col];
        bs[lr][lc] = bv;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < TS; ++i) acc += as[lr][i] * bs[i][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < m && col < n) {
        const size_t idx = (size_t)row * ldc + col;
        c[idx] = beta == 0.0f ? alpha * acc : alpha * acc + beta * c[idx];
    }
}

// Direct convolution (PyTorch cross-correlation), one work-item per output
// element y[bt][oc][t]. Accumulates bias, then input channels, then taps:
// the reference's order.
__kernel void conv1d(__global const float* x, __global const float* w,
                     __global const float* bias, int has_bias, __global float* y, int batch,
                     int in_ch, int out_ch, int in_len, int taps, int stride, int dilation,
                     int padding, int groups, int out_len) {
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)batch * out_ch * out_len) return;
    const int t = gid % out_len;
    const int oc = (gid / out_len) % out_ch;
    const int bt = gid / ((size_t)out_len * out_ch);
    const int icg = in_ch / groups;
    const int ocg = out_ch / groups;
    const int g = oc / ocg;
    float acc = has_bias ? bias[oc] : 0.0f;
    const int t0 = t * stride - padding;
    for (int ic = 0; ic < icg; ++ic) {
        __global const float* xrow = x + ((size_t)bt * in_ch + g * icg + ic) * in_len;
        __global const float* wrow = w + ((size_t)oc * icg + ic) * taps;
        for (int kk = 0; kk < taps; ++kk) {
            const int ti = t0 + kk * dilation;
            if (ti >= 0 && ti < in_len) acc += wrow[kk] * xrow[ti];
        }
    }
    y[gid] = acc;
}

// Transposed convolution as a gather (no atomics): output t receives
// x[ti] * w[kk] for every ti*stride - padding + kk*dilation == t. Taps run
// from the last down so that ti ascends, as in the reference's scatter.
__kernel void conv_transpose1d(__global const float* x, __global const float* w,
                               __global const float* bias, int has_bias, __global float* y,
                               int batch, int in_ch, int out_ch, int in_len, int taps,
                               int stride, int dilation, int padding, int groups, int out_len) {
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)batch * out_ch * out_len) return;
    const int t = gid % out_len;
    const int oc = (gid / out_len) % out_ch;
    const int bt = gid / ((size_t)out_len * out_ch);
    const int icg = in_ch / groups;
    const int ocg = out_ch / groups;
    const int g = oc / ocg;
    const int o = oc - g * ocg;
    float acc = has_bias ? bias[oc] : 0.0f;
    for (int i = 0; i < icg; ++i) {
        const int ic = g * icg + i;
        __global const float* xrow = x + ((size_t)bt * in_ch + ic) * in_len;
        __global const float* wrow = w + ((size_t)ic * ocg + o) * taps;
        for (int kk = taps - 1; kk >= 0; --kk) {
            const int num = t + padding - kk * dilation;
            if (num < 0 || num % stride != 0) continue;
            const int ti = num / stride;
            if (ti < in_len) acc += xrow[ti] * wrow[kk];
        }
    }
    y[gid] = acc;
}

// One work-group of LN_WG work-items per row: a strided partial sum per
// work-item, then a tree reduction in local memory; two passes (mean, then
// the biased variance around it) as the reference does, which is more
// accurate than sum-of-squares in float.
__kernel __attribute__((reqd_work_group_size(LN_WG, 1, 1))) void layer_norm(
    int cols, float eps, __global const float* x, __global const float* gamma,
    __global const float* beta, __global float* y) {
    const int r = get_group_id(0);
    const int l = get_local_id(0);
    __local float part[LN_WG];
    __global const float* row = x + (size_t)r * cols;
    float s = 0.0f;
    for (int c = l; c < cols; c += LN_WG) s += row[c];
    part[l] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = LN_WG / 2; h > 0; h >>= 1) {
        if (l < h) part[l] += part[l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mean = part[0] / cols;
    barrier(CLK_LOCAL_MEM_FENCE);  // everyone has read part[0] before it is reused
    float v = 0.0f;
    for (int c = l; c < cols; c += LN_WG) {
        const float d = row[c] - mean;
        v += d * d;
    }
    part[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = LN_WG / 2; h > 0; h >>= 1) {
        if (l < h) part[l] += part[l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = rsqrt(part[0] / cols + eps);
    __global float* out = y + (size_t)r * cols;
    for (int c = l; c < cols; c += LN_WG) out[c] = (row[c] - mean) * inv * gamma[c] + beta[c];
}

// x and y may alias (each work-item reads its element before writing it).
// beta == 0 must not read y, which may hold NaN: 0 * NaN is NaN.
__kernel void axpby(__global const float* x, __global float* y, ulong n, float alpha,
                    float beta) {
    const size_t i = get_global_id(0);
    if (i >= n) return;
    y[i] = beta == 0.0f ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

// y (cols x rows) = x^T (x is rows x cols). Each work-group moves one TT x TT
// tile through local memory so that both the reads of x and the writes of y
// are along rows; the padding column avoids bank conflicts on GPUs.
__kernel __attribute__((reqd_work_group_size(TT, TT, 1))) void transpose(
    int rows, int cols, __global const float* x, __global float* y) {
    __local float tile[TT][TT + 1];
    const int lc = get_local_id(0);
    const int lr = get_local_id(1);
    const int c = get_group_id(0) * TT + lc;
    const int r = get_group_id(1) * TT + lr;
    if (r < rows && c < cols) tile[lr][lc] = x[(size_t)r * cols + c];
    barrier(CLK_LOCAL_MEM_FENCE);
    // Written as row (group column base + lr) of y, column (group row base + lc).
    const int yr = get_group_id(0) * TT + lr;
    const int yc = get_group_id(1) * TT + lc;
    if (yr < cols && yc < rows) y[(size_t)yr * rows + yc] = tile[lc][lr];
}

__kernel void add_bias(int rows, int cols, __global const float* bias, int per_row,
                       __global float* y) {
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)rows * cols) return;
    const size_t r = gid / cols;
    y[gid] += per_row ? bias[r] : bias[gid - r * cols];
}

// One work-item per complex output value (frame f, bin k).
__kernel void polar_spectrum(int frames, int bins, float max_magnitude, __global const float* x,
                             __global float2* y) {
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)frames * bins) return;
    const size_t f = gid / bins;
    const size_t k = gid - f * bins;
    __global const float* row = x + f * 2 * bins;
    const float m = fmin(exp(row[k]), max_magnitude);
    const float ph = row[bins + k];
    y[gid] = (float2)(m * cos(ph), m * sin(ph));
}

// Before a complex-to-real transform: the imaginary parts of bins 0 and n/2
// of a real signal's spectrum are zero; FFTW (and PyTorch, NumPy) ignore
// whatever is there, clFFT does not, so clear them. One work-item per row.
__kernel void hermitian_edges(int batch, int n, __global float* x) {
    const size_t row = get_global_id(0);
    if (row >= (size_t)batch) return;
    const int bins = n / 2 + 1;
    __global float* r = x + row * 2 * bins;
    r[1] = 0.0f;
    if (n % 2 == 0) r[2 * (bins - 1) + 1] = 0.0f;  // odd n has no Nyquist bin
}

__kernel void frame_signal(__global const float* signal, int n_fft, int hop, int n_frames,
                           __global const float* window, __global float* frames) {
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)n_fft * n_frames) return;
    const int f = gid / n_fft;
    const int i = gid - (size_t)f * n_fft;
    frames[gid] = signal[(size_t)f * hop + i] * window[i];
}

// Gather form of overlap-add: output t sums the frames f with
// f*hop <= t < f*hop + n_fft, in ascending f like the reference. No atomics,
// and the output is overwritten rather than accumulated into.
__kernel void overlap_add(__global const float* frames, int n_fft, int hop, int n_frames,
                          __global const float* window, __global float* out) {
    const size_t t = get_global_id(0);
    const size_t len = (size_t)(n_frames - 1) * hop + n_fft;
    if (t >= len) return;
    const long first = t < (size_t)n_fft ? 0 : ((long)t - n_fft) / hop + 1;
    const long last = min((long)(t / hop), (long)n_frames - 1);
    float acc = 0.0f;
    for (long f = first; f <= last; ++f) {
        const int i = t - f * hop;
        acc += frames[f * n_fft + i] * window[i];
    }
    out[t] = acc;
}

__kernel void complex_multiply(__global const float2* a, __global const float2* b,
                               __global float2* c, ulong n) {
    const size_t i = get_global_id(0);
    if (i >= n) return;
    const float2 x = a[i];
    const float2 z = b[i];
    c[i] = (float2)(x.x * z.x - x.y * z.y, x.x * z.y + x.y * z.x);
}

__kernel void complex_exp(__global const float2* x, __global float2* y, ulong n) {
    const size_t i = get_global_id(0);
    if (i >= n) return;
    const float2 v = x[i];
    const float m = exp(v.x);
    y[i] = (float2)(m * cos(v.y), m * sin(v.y));
}

__kernel void minimum_phase_fold(int n, int batch, __global const float* x, __global float* y) {
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)n * batch) return;
    const int i = gid % n;
    const int mid = n / 2;
    float v;
    if (i == 0 || i == mid)
        v = x[gid];
    else if (i < mid)
        v = 2.0f * x[gid];
    else
        v = 0.0f;
    y[gid] = v;
}
)CLC";
}

}  // namespace etude::gpu
