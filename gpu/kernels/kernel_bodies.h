// The per-element math of the simple kernels, written once and compiled
// four times: as OpenCL C (gpu/opencl/kernels/*.cl include it), as CUDA
// (gpu/cuda/cuda_kernels.cu), as GLSL for Vulkan (gpu/vulkan/shaders/*.comp)
// and as host C++ (tests/gpu/kernel_bodies_test.cpp).
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
//  - buffers are read and written only through ETUDE_AT and offset only
//    through ETUDE_OFFSET, and numbers converted only through ETUDE_INDEX,
//    ETUDE_INT, ETUDE_LONG and ETUDE_FLOAT (GLSL has neither pointers nor
//    C casts; see kernel_dialect.h);
//  - OpenCL C reserves `kernel` and `half`, GLSL `in`, `out`,
//    `sample`, `filter`, `input` and `output`: never use them as names.
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
#if defined(VULKAN)
#include "gpu/kernels/device_math.h"
#endif

// Activation codes: the hosts map gpu::Activation onto these explicitly.
#define ETUDE_ACT_LEAKY_RELU 0
#define ETUDE_ACT_GELU 1
#define ETUDE_ACT_TANH 2
#define ETUDE_ACT_EXP 3
#define ETUDE_ACT_SIN 4
#define ETUDE_ACT_COS 5

#if !defined(__OPENCL_VERSION__) && !defined(VULKAN)
namespace etude::gpu::bodies {
#endif

ETUDE_BODY void fill_at(etude_index i, float value, ETUDE_PTR y) {
    ETUDE_AT(y, i) = value;
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

// Element i of an activation over a buffer; x and y may be the same buffer.
ETUDE_BODY void activation_at(etude_index i, int op, float alpha, ETUDE_CPTR x, ETUDE_PTR y) {
    ETUDE_AT(y, i) = activation_of(op, ETUDE_AT(x, i), alpha);
}

// beta == 0 must not read y, which may hold NaN (0 * NaN is NaN), hence the
// branch rather than a multiply by zero; it is uniform across the launch.
ETUDE_BODY void axpby_at(etude_index i, float alpha, ETUDE_CPTR x, float beta, ETUDE_PTR y) {
    if (beta == 0.0f)
        ETUDE_AT(y, i) = alpha * ETUDE_AT(x, i);
    else
        ETUDE_AT(y, i) = alpha * ETUDE_AT(x, i) + beta * ETUDE_AT(y, i);
}

// Element gid of a row-major matrix with `cols` columns, in place.
ETUDE_BODY void add_bias_at(etude_index gid, int cols, ETUDE_CPTR bias, int per_row, ETUDE_PTR y) {
    const etude_index r = gid / ETUDE_INDEX(cols);
    const etude_index b = per_row != 0 ? r : gid - r * ETUDE_INDEX(cols);
    ETUDE_AT(y, gid) += ETUDE_AT(bias, b);
}

// Complex output gid = (frame f, bin k); x rows are `bins` log-magnitudes
// then `bins` phases; y is interleaved complex.
ETUDE_BODY void polar_spectrum_at(etude_index gid, int bins, float max_magnitude, ETUDE_CPTR x,
                                  ETUDE_PTR y) {
    const etude_index f = gid / ETUDE_INDEX(bins);
    const etude_index k = gid - f * ETUDE_INDEX(bins);
    ETUDE_CPTR row = ETUDE_OFFSET(x, f * 2 * ETUDE_INDEX(bins));
    const float m = ETUDE_FMIN(ETUDE_EXP(ETUDE_AT(row, k)), max_magnitude);
    const float ph = ETUDE_AT(row, ETUDE_INDEX(bins) + k);
    ETUDE_AT(y, 2 * gid) = m * ETUDE_COS(ph);
    ETUDE_AT(y, 2 * gid + 1) = m * ETUDE_SIN(ph);
}

// Row `row` of n/2+1 interleaved complex values, before a complex-to-real
// transform: a real signal's spectrum has zero imaginary parts at bins 0 and
// n/2. FFTW (and PyTorch, NumPy) ignore whatever is there; clFFT and cuFFT
// do not, so clear them.
ETUDE_BODY void hermitian_edges_row(etude_index row, int n, ETUDE_PTR x) {
    const int bins = n / 2 + 1;
    ETUDE_PTR r = ETUDE_OFFSET(x, row * 2 * ETUDE_INDEX(bins));
    ETUDE_AT(r, 1) = 0.0f;
    if (n % 2 == 0) ETUDE_AT(r, 2 * (bins - 1) + 1) = 0.0f;  // odd n has no Nyquist bin
}

// frames[f][i] = signal[f*hop + i] * window[i], gid = f*n_fft + i.
ETUDE_BODY void frame_signal_at(etude_index gid, int n_fft, int hop, ETUDE_CPTR signal,
                                ETUDE_CPTR window, ETUDE_PTR frames) {
    const etude_index f = gid / ETUDE_INDEX(n_fft);
    const int i = ETUDE_INT(gid - f * ETUDE_INDEX(n_fft));
    ETUDE_AT(frames, gid) =
        ETUDE_AT(signal, f * ETUDE_INDEX(hop) + ETUDE_INDEX(i)) * ETUDE_AT(window, i);
}

// Gather form of overlap-add: sample t sums the frames f with
// f*hop <= t < f*hop + n_fft, frames ascending. Every sample is written (the
// output is overwritten, not accumulated into), so no atomics and no clearing.
ETUDE_BODY void overlap_add_at(etude_index t, ETUDE_CPTR frames, int n_fft, int hop, int n_frames,
                               ETUDE_CPTR window, ETUDE_PTR dst) {
    const etude_long ti = ETUDE_LONG(t);
    const etude_long first = ti < ETUDE_LONG(n_fft) ? ETUDE_LONG(0) : (ti - n_fft) / hop + 1;
    const etude_long last = ti / hop < ETUDE_LONG(n_frames) ? ti / hop : ETUDE_LONG(n_frames) - 1;
    float acc = 0.0f;
    for (etude_long f = first; f <= last; ++f) {
        const etude_long i = ti - f * hop;
        acc += ETUDE_AT(frames, f * n_fft + i) * ETUDE_AT(window, i);
    }
    ETUDE_AT(dst, t) = acc;
}

// Complex value i (interleaved): c = a * b.
ETUDE_BODY void complex_multiply_at(etude_index i, ETUDE_CPTR a, ETUDE_CPTR b, ETUDE_PTR c) {
    const float ar = ETUDE_AT(a, 2 * i), ai = ETUDE_AT(a, 2 * i + 1);
    const float br = ETUDE_AT(b, 2 * i), bi = ETUDE_AT(b, 2 * i + 1);
    ETUDE_AT(c, 2 * i) = ar * br - ai * bi;
    ETUDE_AT(c, 2 * i + 1) = ar * bi + ai * br;
}

// Complex value i (interleaved): y = exp(x).
ETUDE_BODY void complex_exp_at(etude_index i, ETUDE_CPTR x, ETUDE_PTR y) {
    const float m = ETUDE_EXP(ETUDE_AT(x, 2 * i));
    const float ph = ETUDE_AT(x, 2 * i + 1);
    ETUDE_AT(y, 2 * i) = m * ETUDE_COS(ph);
    ETUDE_AT(y, 2 * i + 1) = m * ETUDE_SIN(ph);
}

// WaveNet's gate, output i of item `item` of y[batch][channels][length]
// (item_size = channels * length outputs an item): tanh of element i of
// the item's first half of x ([batch][2 * channels][length]) times the
// logistic sigmoid of element i of its second half. Launched over
// (i, item), so that no index is divided (a 64-bit division per element
// doubled the kernel's time on PoCL, which cannot vectorise it).
ETUDE_BODY void gated_tanh_at(etude_index item, etude_index i, etude_index item_size, ETUDE_CPTR x,
                              ETUDE_PTR y) {
    const etude_index at = 2 * item * item_size + i;
    const float a = ETUDE_AT(x, at);
    const float b = ETUDE_AT(x, at + item_size);
    ETUDE_AT(y, item * item_size + i) = ETUDE_TANH(a) / (1.0f + ETUDE_EXP(-b));
}

// Real cepstrum -> minimum-phase cepstrum, element gid of rows of length n.
ETUDE_BODY void minimum_phase_fold_at(etude_index gid, int n, ETUDE_CPTR x, ETUDE_PTR y) {
    const int i = ETUDE_INT(gid % ETUDE_INDEX(n));
    const int mid = n / 2;
    float v = 0.0f;
    if (i == 0 || i == mid)
        v = ETUDE_AT(x, gid);
    else if (i < mid)
        v = 2.0f * ETUDE_AT(x, gid);
    ETUDE_AT(y, gid) = v;
}

// Direct convolution (PyTorch cross-correlation), output element
// gid = (bt, oc, t) of y[batch][out_ch][out_len]. Summed as bias, then input
// channels ascending, then taps ascending (see the top of this file). The
// bias is read only when has_bias is set, but it must be a valid buffer
// either way: GLSL compilers may read both sides of a select.
ETUDE_BODY void conv1d_at(etude_index gid, ETUDE_CPTR x, ETUDE_CPTR w, ETUDE_CPTR bias,
                          int has_bias, ETUDE_PTR y, int in_ch, int out_ch, int in_len, int taps,
                          int stride, int dilation, int padding, int groups, int out_len) {
    const int t = ETUDE_INT(gid % ETUDE_INDEX(out_len));
    const etude_index row = gid / ETUDE_INDEX(out_len);
    const int oc = ETUDE_INT(row % ETUDE_INDEX(out_ch));
    const etude_index bt = row / ETUDE_INDEX(out_ch);
    const int icg = in_ch / groups;
    const int ocg = out_ch / groups;
    const int g = oc / ocg;
    const int t0 = t * stride - padding;
    float acc = 0.0f;
    if (has_bias != 0) acc = ETUDE_AT(bias, oc);
    for (int ic = 0; ic < icg; ++ic) {
        ETUDE_CPTR xrow = ETUDE_OFFSET(
            x, (bt * ETUDE_INDEX(in_ch) + ETUDE_INDEX(g * icg + ic)) * ETUDE_INDEX(in_len));
        ETUDE_CPTR wrow = ETUDE_OFFSET(w, (ETUDE_INDEX(oc) * icg + ic) * ETUDE_INDEX(taps));
        for (int kk = 0; kk < taps; ++kk) {
            const int ti = t0 + kk * dilation;
            if (ti >= 0 && ti < in_len) acc += ETUDE_AT(wrow, kk) * ETUDE_AT(xrow, ti);
        }
    }
    ETUDE_AT(y, gid) = acc;
}

// One element of a window's im2col matrix (gpu/conv_as_gemm.h), for a
// convolution run as a GEMM: gid = ((b * in_ch + c) * taps + k) * out_len + t
// takes x[b][c][t * stride - padding + k * dilation], zero outside the
// signal. The matrices of the batch's windows lie one after another.
ETUDE_BODY void im2col_at(etude_index gid, ETUDE_CPTR x, ETUDE_PTR col, int in_len, int taps,
                          int stride, int dilation, int padding, int out_len) {
    const int t = ETUDE_INT(gid % ETUDE_INDEX(out_len));
    const etude_index row = gid / ETUDE_INDEX(out_len);
    const int kk = ETUDE_INT(row % ETUDE_INDEX(taps));
    const etude_index bc = row / ETUDE_INDEX(taps);  // b * in_ch + c
    const int ti = t * stride - padding + kk * dilation;
    float v = 0.0f;
    if (ti >= 0 && ti < in_len) v = ETUDE_AT(x, bc * ETUDE_INDEX(in_len) + ETUDE_INDEX(ti));
    ETUDE_AT(col, gid) = v;
}

// y[b][r][t] = bias[r] for rows r of `rows` and columns of `cols`: a
// convolution's output before the GEMM adds the products to it.
ETUDE_BODY void bias_rows_at(etude_index gid, int rows, int cols, ETUDE_CPTR bias, ETUDE_PTR y) {
    const etude_index r = (gid / ETUDE_INDEX(cols)) % ETUDE_INDEX(rows);
    ETUDE_AT(y, gid) = ETUDE_AT(bias, r);
}

// Output gid = ((b * out_ch + o) * out_len + t) of a transposed
// convolution run as a GEMM (gpu/conv_as_gemm.h): the bias, then the taps'
// contributions z[b][o * taps + k][ti] with ti * stride - padding +
// k * dilation == t, taps descending (input positions ascending, as
// conv_transpose1d_at). Needs padding >= 0.
ETUDE_BODY void col2im_at(etude_index gid, ETUDE_CPTR z, ETUDE_CPTR bias, int has_bias, ETUDE_PTR y,
                          int out_ch, int taps, int in_len, int stride, int dilation, int padding,
                          int out_len) {
    const int t = ETUDE_INT(gid % ETUDE_INDEX(out_len));
    const etude_index row = gid / ETUDE_INDEX(out_len);  // b * out_ch + o
    const int oc = ETUDE_INT(row % ETUDE_INDEX(out_ch));
    ETUDE_CPTR zrow = ETUDE_OFFSET(z, row * ETUDE_INDEX(taps) * ETUDE_INDEX(in_len));
    int k_hi = (t + padding) / dilation;
    if (k_hi > taps - 1) k_hi = taps - 1;
    float acc = 0.0f;
    if (has_bias != 0) acc = ETUDE_AT(bias, oc);
    for (int kk = k_hi; kk >= 0; --kk) {
        const int num = t + padding - kk * dilation;
        if (num % stride != 0) continue;
        const int ti = num / stride;
        if (ti >= in_len) break;
        acc += ETUDE_AT(zrow, ETUDE_INDEX(kk) * ETUDE_INDEX(in_len) + ETUDE_INDEX(ti));
    }
    ETUDE_AT(y, gid) = acc;
}

// Transposed convolution as a gather (no atomics): output t of channel oc
// receives x[ti] * w[kk] for every ti*stride - padding + kk*dilation == t.
// Summed as bias, then input channels ascending, then input positions ti
// ascending, which is taps descending (see the top of this file). Needs
// padding >= 0, which gpu::Backend checks.
ETUDE_BODY void conv_transpose1d_at(etude_index gid, ETUDE_CPTR x, ETUDE_CPTR w, ETUDE_CPTR bias,
                                    int has_bias, ETUDE_PTR y, int in_ch, int out_ch, int in_len,
                                    int taps, int stride, int dilation, int padding, int groups,
                                    int out_len) {
    const int t = ETUDE_INT(gid % ETUDE_INDEX(out_len));
    const etude_index row = gid / ETUDE_INDEX(out_len);
    const int oc = ETUDE_INT(row % ETUDE_INDEX(out_ch));
    const etude_index bt = row / ETUDE_INDEX(out_ch);
    const int icg = in_ch / groups;
    const int ocg = out_ch / groups;
    const int g = oc / ocg;
    const int o = oc - g * ocg;
    // The highest tap that reaches t from a position ti >= 0; lower taps
    // reach t from later positions, so the loop can stop past the input.
    int k_hi = (t + padding) / dilation;
    if (k_hi > taps - 1) k_hi = taps - 1;
    float acc = 0.0f;
    if (has_bias != 0) acc = ETUDE_AT(bias, oc);
    for (int i = 0; i < icg; ++i) {
        const int ic = g * icg + i;
        ETUDE_CPTR xrow =
            ETUDE_OFFSET(x, (bt * ETUDE_INDEX(in_ch) + ETUDE_INDEX(ic)) * ETUDE_INDEX(in_len));
        ETUDE_CPTR wrow = ETUDE_OFFSET(w, (ETUDE_INDEX(ic) * ocg + o) * ETUDE_INDEX(taps));
        for (int kk = k_hi; kk >= 0; --kk) {
            const int num = t + padding - kk * dilation;  // >= 0, grows as kk falls
            if (num % stride != 0) continue;
            const int ti = num / stride;
            if (ti >= in_len) break;
            acc += ETUDE_AT(xrow, ti) * ETUDE_AT(wrow, kk);
        }
    }
    ETUDE_AT(y, gid) = acc;
}

// Element gid of copy_rows (gpu/backend.h), strided: element c of row r of
// a block of rows x cols, dst[dst_at + r * dst_stride + c] =
// src[src_at + r * src_stride + c]. A batch's gathers and scatters copy a
// few frames of hundreds of channel rows at a time; one launch of this
// body does it on CUDA and Vulkan, where cudaMemcpy2DAsync and a Vulkan copy
// region per row go row by row. OpenCL keeps clEnqueueCopyBufferRect,
// measured faster on PoCL (gpu/opencl/opencl_ops.cpp).
ETUDE_BODY void copy_rows_at(etude_index gid, int cols, etude_index src_at, etude_index src_stride,
                             etude_index dst_at, etude_index dst_stride, ETUDE_CPTR src,
                             ETUDE_PTR dst) {
    const etude_index r = gid / ETUDE_INDEX(cols);
    const etude_index c = gid - r * ETUDE_INDEX(cols);
    ETUDE_AT(dst, dst_at + r * dst_stride + c) = ETUDE_AT(src, src_at + r * src_stride + c);
}

// Element gid of copy_slot_rows (gpu/backend.h): item b's block of rows x
// cols between item b of a batch and the slot index[b] names, the index a
// whole number held as a float. from_slots != 0: slot to batch (src is the
// slots' buffer, dst the batch's); else batch to slot. An index outside
// [0, slots) (NaN too) copies nothing for its item: a stale or corrupt
// index never writes past the slots.
ETUDE_BODY void copy_slot_rows_at(etude_index gid, int rows, int cols, ETUDE_CPTR index, int slots,
                                  etude_index slot_at, etude_index slot_floats,
                                  etude_index slot_stride, etude_index batch_at,
                                  etude_index batch_stride, int from_slots, ETUDE_CPTR src,
                                  ETUDE_PTR dst) {
    const etude_index block = ETUDE_INDEX(rows) * ETUDE_INDEX(cols);
    const etude_index b = gid / block;
    const etude_index r = (gid - b * block) / ETUDE_INDEX(cols);
    const etude_index c = gid - b * block - r * ETUDE_INDEX(cols);
    const float where = ETUDE_AT(index, b);
    if (!(where >= 0.0f && where < ETUDE_FLOAT(slots))) return;
    // Checked again as an integer: Vulkan lets a compiler assume no NaN,
    // and the float test above may then pass one, whose conversion gives
    // any integer.
    const int slot_number = ETUDE_INT(where);
    if (slot_number < 0 || slot_number >= slots) return;
    const etude_index slot = ETUDE_INDEX(slot_number);
    const etude_index in_slot = slot_at + slot * slot_floats + r * slot_stride + c;
    const etude_index in_batch = batch_at + (b * ETUDE_INDEX(rows) + r) * batch_stride + c;
    if (from_slots != 0)
        ETUDE_AT(dst, in_batch) = ETUDE_AT(src, in_slot);
    else
        ETUDE_AT(dst, in_slot) = ETUDE_AT(src, in_batch);
}

// y[r][c] *= factors[r] (per_row) or factors[c], element gid of a
// [rows][cols] matrix: the multiplying twin of add_bias (a mask over time).
ETUDE_BODY void broadcast_multiply_at(etude_index gid, int cols, ETUDE_CPTR factors, int per_row,
                                      ETUDE_PTR y) {
    const etude_index row = gid / ETUDE_INDEX(cols);
    const etude_index col = gid - row * ETUDE_INDEX(cols);
    float f = 0.0f;
    if (per_row != 0)
        f = ETUDE_AT(factors, row);
    else
        f = ETUDE_AT(factors, col);
    ETUDE_AT(y, gid) = ETUDE_AT(y, gid) * f;
}

#if !defined(__OPENCL_VERSION__) && !defined(VULKAN)
}  // namespace etude::gpu::bodies
#endif

#endif  // ETUDE_GPU_KERNELS_KERNEL_BODIES_H
