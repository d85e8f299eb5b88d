// The per-element math of the simple kernels, written once and compiled
// three times: as OpenCL C (gpu/opencl/kernels/*.cl include it), as CUDA
// (gpu/cuda/cuda_kernels.cu) and as host C++ (tests/gpu/kernel_bodies_test.cpp).
// Each body computes one output element (or one row) given its index; the
// launch shape (work-items, grid-stride loops), the bounds check of the index
// and the buffer types are the caller's. kernel_dialect.h supplies the words
// that differ between the languages.
//
// Conventions:
//  - buffers are float; complex values are interleaved (re, im) pairs;
//  - element counts and indices that can exceed 2^31 are etude_index,
//    shapes are int;
//  - a body reads every input element it needs before it writes its output,
//    so in-place use (output == an input) is safe where gpu/backend.h allows it;
//  - OpenCL C reserves `kernel` and `half`: never use them as names.
//
// Summation order. The sums here (conv1d, conv_transpose1d, overlap_add) are
// evaluated in one fixed order on every device, so OpenCL (PoCL in CI) checks
// the indexing, bounds and order that CUDA executes:
//  - conv1d:           bias, then input channels ascending, then taps ascending;
//  - conv_transpose1d: bias, then input channels ascending, then input
//                      positions ascending (taps descending);
//  - overlap_add:      frames ascending.
// The CPU backend does not sum in these orders: its convolutions are
// im2col/col2im + SGEMM (gpu/cpu/cpu_conv.cpp), whose blocking and SIMD
// reductions pick their own order, and device compilers may contract a
// multiply and an add into one fused multiply-add. Either way each output is
// the same n = (in_channels/groups) * taps products summed in float, so two
// orders differ by rounding alone: at most about n * 2^-24 of the sum of the
// products' magnitudes in the worst case, and about sqrt(n) * 2^-24 of it
// for the random inputs of the parity suite (tests/gpu/backend_parity_test.cpp).
// Its largest convolution sums n = 448 products (sqrt(n) * 2^-24 = 1.3e-6);
// its tolerance is 1e-5 of the output's largest magnitude (1e-4 on CUDA),
// and PoCL's measured error there is 7.6e-7. A wrong index or a missed tap
// is off by O(1), far outside. tests/gpu/kernel_bodies_test.cpp
// checks the indexing exactly, on inputs whose sums are exact in any order.
#ifndef ETUDE_GPU_KERNELS_KERNEL_BODIES_H
#define ETUDE_GPU_KERNELS_KERNEL_BODIES_H

#include "gpu/kernels/kernel_dialect.h"

// Activation codes: the hosts map gpu::Activation onto these explicitly.
#define ETUDE_ACT_LEAKY_RELU 0
#define ETUDE_ACT_GELU 1
#define ETUDE_ACT_TANH 2
#define ETUDE_ACT_EXP 3
#define ETUDE_ACT_SIN 4
#define ETUDE_ACT_COS 5

#if !defined(__OPENCL_VERSION__)
namespace etude::gpu::bodies {
#endif

ETUDE_BODY void fill_at(etude_index i, float value, ETUDE_GLOBAL float* y) {
    y[i] = value;
}

// `alpha` is the leaky-ReLU slope. With `op` a compile-time constant (CUDA
// instantiates one kernel per activation) the switch folds away.
ETUDE_BODY float activation_of(int op, float v, float alpha) {
    switch (op) {
        case ETUDE_ACT_LEAKY_RELU:
            return v >= 0.0f ? v : alpha * v;
        case ETUDE_ACT_GELU:
            return 0.5f * v * (1.0f + ETUDE_ERF(v * 0.70710678118654752f));
        case ETUDE_ACT_TANH:
            return ETUDE_TANH(v);
        case ETUDE_ACT_EXP:
            return ETUDE_EXP(v);
        case ETUDE_ACT_SIN:
            return ETUDE_SIN(v);
        case ETUDE_ACT_COS:
            return ETUDE_COS(v);
        default:
            return v;
    }
}

// beta == 0 must not read y, which may hold NaN (0 * NaN is NaN), hence the
// branch rather than a multiply by zero; it is uniform across the launch.
ETUDE_BODY void axpby_at(etude_index i, float alpha, ETUDE_GLOBAL const float* x, float beta,
                         ETUDE_GLOBAL float* y) {
    y[i] = beta == 0.0f ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

// Element gid of a row-major matrix with `cols` columns, in place.
ETUDE_BODY void add_bias_at(etude_index gid, int cols, ETUDE_GLOBAL const float* bias, int per_row,
                            ETUDE_GLOBAL float* y) {
    const etude_index r = gid / (etude_index)cols;
    y[gid] += per_row ? bias[r] : bias[gid - r * (etude_index)cols];
}

// Complex output gid = (frame f, bin k); x rows are `bins` log-magnitudes
// then `bins` phases; y is interleaved complex.
ETUDE_BODY void polar_spectrum_at(etude_index gid, int bins, float max_magnitude,
                                  ETUDE_GLOBAL const float* x, ETUDE_GLOBAL float* y) {
    const etude_index f = gid / (etude_index)bins;
    const etude_index k = gid - f * (etude_index)bins;
    ETUDE_GLOBAL const float* row = x + f * 2 * (etude_index)bins;
    const float m = ETUDE_FMIN(ETUDE_EXP(row[k]), max_magnitude);
    const float ph = row[bins + k];
    y[2 * gid] = m * ETUDE_COS(ph);
    y[2 * gid + 1] = m * ETUDE_SIN(ph);
}

// Row `row` of n/2+1 interleaved complex values, before a complex-to-real
// transform: a real signal's spectrum has zero imaginary parts at bins 0 and
// n/2. FFTW (and PyTorch, NumPy) ignore whatever is there; clFFT and cuFFT
// do not, so clear them.
ETUDE_BODY void hermitian_edges_row(etude_index row, int n, ETUDE_GLOBAL float* x) {
    const int bins = n / 2 + 1;
    ETUDE_GLOBAL float* r = x + row * 2 * (etude_index)bins;
    r[1] = 0.0f;
    if (n % 2 == 0) r[2 * (bins - 1) + 1] = 0.0f;  // odd n has no Nyquist bin
}

// frames[f][i] = signal[f*hop + i] * window[i], gid = f*n_fft + i.
ETUDE_BODY void frame_signal_at(etude_index gid, int n_fft, int hop,
                                ETUDE_GLOBAL const float* signal, ETUDE_GLOBAL const float* window,
                                ETUDE_GLOBAL float* frames) {
    const etude_index f = gid / (etude_index)n_fft;
    const int i = (int)(gid - f * (etude_index)n_fft);
    frames[gid] = signal[f * (etude_index)hop + (etude_index)i] * window[i];
}

// Gather form of overlap-add: sample t sums the frames f with
// f*hop <= t < f*hop + n_fft, frames ascending. Every sample is written (the
// output is overwritten, not accumulated into), so no atomics and no clearing.
ETUDE_BODY void overlap_add_at(etude_index t, ETUDE_GLOBAL const float* frames, int n_fft, int hop,
                               int n_frames, ETUDE_GLOBAL const float* window,
                               ETUDE_GLOBAL float* out) {
    const etude_long ti = (etude_long)t;
    const etude_long first = ti < n_fft ? 0 : (ti - n_fft) / hop + 1;
    const etude_long last = ti / hop < n_frames ? ti / hop : (etude_long)n_frames - 1;
    float acc = 0.0f;
    for (etude_long f = first; f <= last; ++f) {
        const etude_long i = ti - f * hop;
        acc += frames[f * n_fft + i] * window[i];
    }
    out[t] = acc;
}

// Complex value i (interleaved): c = a * b.
ETUDE_BODY void complex_multiply_at(etude_index i, ETUDE_GLOBAL const float* a,
                                    ETUDE_GLOBAL const float* b, ETUDE_GLOBAL float* c) {
    const float ar = a[2 * i], ai = a[2 * i + 1];
    const float br = b[2 * i], bi = b[2 * i + 1];
    c[2 * i] = ar * br - ai * bi;
    c[2 * i + 1] = ar * bi + ai * br;
}

// Complex value i (interleaved): y = exp(x).
ETUDE_BODY void complex_exp_at(etude_index i, ETUDE_GLOBAL const float* x, ETUDE_GLOBAL float* y) {
    const float m = ETUDE_EXP(x[2 * i]);
    const float ph = x[2 * i + 1];
    y[2 * i] = m * ETUDE_COS(ph);
    y[2 * i + 1] = m * ETUDE_SIN(ph);
}

// WaveNet's gate, element gid of the first half: tanh of it times the
// logistic sigmoid of its partner `gate_offset` elements on.
ETUDE_BODY void gated_tanh_at(etude_index gid, etude_index gate_offset, ETUDE_GLOBAL const float* x,
                              ETUDE_GLOBAL float* y) {
    const float a = x[gid];
    const float b = x[gid + gate_offset];
    y[gid] = ETUDE_TANH(a) / (1.0f + ETUDE_EXP(-b));
}

// Real cepstrum -> minimum-phase cepstrum, element gid of rows of length n.
ETUDE_BODY void minimum_phase_fold_at(etude_index gid, int n, ETUDE_GLOBAL const float* x,
                                      ETUDE_GLOBAL float* y) {
    const int i = (int)(gid % (etude_index)n);
    const int mid = n / 2;
    float v = 0.0f;
    if (i == 0 || i == mid)
        v = x[gid];
    else if (i < mid)
        v = 2.0f * x[gid];
    y[gid] = v;
}

// Direct convolution (PyTorch cross-correlation), output element
// gid = (bt, oc, t) of y[batch][out_ch][out_len]. Summed as bias, then input
// channels ascending, then taps ascending (see the top of this file).
ETUDE_BODY void conv1d_at(etude_index gid, ETUDE_GLOBAL const float* x, ETUDE_GLOBAL const float* w,
                          ETUDE_GLOBAL const float* bias, int has_bias, ETUDE_GLOBAL float* y,
                          int in_ch, int out_ch, int in_len, int taps, int stride, int dilation,
                          int padding, int groups, int out_len) {
    const int t = (int)(gid % (etude_index)out_len);
    const etude_index row = gid / (etude_index)out_len;
    const int oc = (int)(row % (etude_index)out_ch);
    const etude_index bt = row / (etude_index)out_ch;
    const int icg = in_ch / groups;
    const int ocg = out_ch / groups;
    const int g = oc / ocg;
    const int t0 = t * stride - padding;
    float acc = has_bias ? bias[oc] : 0.0f;
    for (int ic = 0; ic < icg; ++ic) {
        ETUDE_GLOBAL const float* xrow =
            x + (bt * (etude_index)in_ch + (etude_index)(g * icg + ic)) * (etude_index)in_len;
        ETUDE_GLOBAL const float* wrow = w + ((etude_index)oc * icg + ic) * (etude_index)taps;
        for (int kk = 0; kk < taps; ++kk) {
            const int ti = t0 + kk * dilation;
            if (ti >= 0 && ti < in_len) acc += wrow[kk] * xrow[ti];
        }
    }
    y[gid] = acc;
}

// Transposed convolution as a gather (no atomics): output t of channel oc
// receives x[ti] * w[kk] for every ti*stride - padding + kk*dilation == t.
// Summed as bias, then input channels ascending, then input positions ti
// ascending, which is taps descending (see the top of this file). Needs
// padding >= 0, which gpu::Backend checks.
ETUDE_BODY void conv_transpose1d_at(etude_index gid, ETUDE_GLOBAL const float* x,
                                    ETUDE_GLOBAL const float* w, ETUDE_GLOBAL const float* bias,
                                    int has_bias, ETUDE_GLOBAL float* y, int in_ch, int out_ch,
                                    int in_len, int taps, int stride, int dilation, int padding,
                                    int groups, int out_len) {
    const int t = (int)(gid % (etude_index)out_len);
    const etude_index row = gid / (etude_index)out_len;
    const int oc = (int)(row % (etude_index)out_ch);
    const etude_index bt = row / (etude_index)out_ch;
    const int icg = in_ch / groups;
    const int ocg = out_ch / groups;
    const int g = oc / ocg;
    const int o = oc - g * ocg;
    // The highest tap that reaches t from a position ti >= 0; lower taps
    // reach t from later positions, so the loop can stop past the input.
    int k_hi = (t + padding) / dilation;
    if (k_hi > taps - 1) k_hi = taps - 1;
    float acc = has_bias ? bias[oc] : 0.0f;
    for (int i = 0; i < icg; ++i) {
        const int ic = g * icg + i;
        ETUDE_GLOBAL const float* xrow =
            x + (bt * (etude_index)in_ch + (etude_index)ic) * (etude_index)in_len;
        ETUDE_GLOBAL const float* wrow = w + ((etude_index)ic * ocg + o) * (etude_index)taps;
        for (int kk = k_hi; kk >= 0; --kk) {
            const int num = t + padding - kk * dilation;  // >= 0, grows as kk falls
            if (num % stride != 0) continue;
            const int ti = num / stride;
            if (ti >= in_len) break;
            acc += xrow[ti] * wrow[kk];
        }
    }
    y[gid] = acc;
}

#if !defined(__OPENCL_VERSION__)
}  // namespace etude::gpu::bodies
#endif

#endif  // ETUDE_GPU_KERNELS_KERNEL_BODIES_H
