// The OpenCL kernels whose per-element math is shared with CUDA: each is a
// bounds check of its global id around a body from gpu/kernels/kernel_bodies.h.
// 1-D launches are rounded up to the work-group size, hence the checks.
// Names and arguments are what opencl_backend.cpp sets (keep both in step).
#include "gpu/kernels/kernel_bodies.h"
#include "gpu/kernels/attention_bodies.h"
#include "gpu/kernels/spline_bodies.h"

__kernel void fill(__global float* y, ulong n, float value) {
    const size_t i = get_global_id(0);
    if (i < n) fill_at(i, value, y);
}

// x and y may alias: each work-item reads its element before writing it.
__kernel void activation(__global const float* x, __global float* y, ulong n, int op,
                         float alpha) {
    const size_t i = get_global_id(0);
    if (i < n) y[i] = activation_of(op, x[i], alpha);
}

__kernel void axpby(__global const float* x, __global float* y, ulong n, float alpha,
                    float beta) {
    const size_t i = get_global_id(0);
    if (i < n) axpby_at(i, alpha, x, beta, y);
}

__kernel void add_bias(int rows, int cols, __global const float* bias, int per_row,
                       __global float* y) {
    const size_t gid = get_global_id(0);
    if (gid < (size_t)rows * cols) add_bias_at(gid, cols, bias, per_row, y);
}

__kernel void polar_spectrum(int frames, int bins, float max_magnitude, __global const float* x,
                             __global float* y) {
    const size_t gid = get_global_id(0);
    if (gid < (size_t)frames * bins) polar_spectrum_at(gid, bins, max_magnitude, x, y);
}

// One work-item per row.
__kernel void hermitian_edges(int batch, int n, __global float* x) {
    const size_t row = get_global_id(0);
    if (row < (size_t)batch) hermitian_edges_row(row, n, x);
}

__kernel void frame_signal(__global const float* signal, int n_fft, int hop, int n_frames,
                           __global const float* window, __global float* frames) {
    const size_t gid = get_global_id(0);
    if (gid < (size_t)n_fft * n_frames) frame_signal_at(gid, n_fft, hop, signal, window, frames);
}

__kernel void overlap_add(__global const float* frames, int n_fft, int hop, int n_frames,
                          __global const float* window, __global float* out) {
    const size_t t = get_global_id(0);
    if (t < (size_t)(n_frames - 1) * hop + n_fft)
        overlap_add_at(t, frames, n_fft, hop, n_frames, window, out);
}

__kernel void complex_multiply(__global const float* a, __global const float* b,
                               __global float* c, ulong n) {
    const size_t i = get_global_id(0);
    if (i < n) complex_multiply_at(i, a, b, c);
}

__kernel void complex_exp(__global const float* x, __global float* y, ulong n) {
    const size_t i = get_global_id(0);
    if (i < n) complex_exp_at(i, x, y);
}

__kernel void minimum_phase_fold(int n, int batch, __global const float* x, __global float* y) {
    const size_t gid = get_global_id(0);
    if (gid < (size_t)n * batch) minimum_phase_fold_at(gid, n, x, y);
}

// One work-item per output element y[bt][oc][t].
__kernel void conv1d(__global const float* x, __global const float* w,
                     __global const float* bias, int has_bias, __global float* y, int batch,
                     int in_ch, int out_ch, int in_len, int taps, int stride, int dilation,
                     int padding, int groups, int out_len) {
    const size_t gid = get_global_id(0);
    if (gid < (size_t)batch * out_ch * out_len)
        conv1d_at(gid, x, w, bias, has_bias, y, in_ch, out_ch, in_len, taps, stride, dilation,
                  padding, groups, out_len);
}

__kernel void conv_transpose1d(__global const float* x, __global const float* w,
                               __global const float* bias, int has_bias, __global float* y,
                               int batch, int in_ch, int out_ch, int in_len, int taps,
                               int stride, int dilation, int padding, int groups, int out_len) {
    const size_t gid = get_global_id(0);
    if (gid < (size_t)batch * out_ch * out_len)
        conv_transpose1d_at(gid, x, w, bias, has_bias, y, in_ch, out_ch, in_len, taps, stride,
                            dilation, padding, groups, out_len);
}

// Work-item (i, item): the second dimension of the range is the batch.
__kernel void gated_tanh(__global const float* x, __global float* y, ulong item_size) {
    const size_t i = get_global_id(0);
    if (i < item_size) gated_tanh_at(get_global_id(1), i, item_size, x, y);
}

// One work-item per row; x and y may alias (the body reads before it writes).
__kernel void softmax_rows(__global const float* x, __global float* y, int rows, int cols) {
    const size_t r = get_global_id(0);
    if (r < (size_t)rows) softmax_row(r, cols, x, y);
}

__kernel void relative_attention_scores(__global const float* q, __global const float* k,
                                        __global const float* rel_k, __global const float* mask,
                                        __global float* scores, ulong n, int heads, int length,
                                        int channels, int window, float scale, int has_mask) {
    const size_t i = get_global_id(0);
    if (i < n)
        relative_scores_at(i, heads, length, channels, window, scale, q, k, rel_k, has_mask, mask,
                           scores);
}

__kernel void relative_attention_values(__global const float* p, __global const float* v,
                                        __global const float* rel_v, __global float* y, ulong n,
                                        int heads, int length, int channels, int window) {
    const size_t i = get_global_id(0);
    if (i < n) relative_values_at(i, heads, length, channels, window, p, v, rel_v, y);
}

__kernel void copy_slot_rows(__global const float* index, __global const float* src,
                             __global float* dst, ulong n, ulong slot_at, ulong slot_floats,
                             ulong slot_stride, ulong batch_at, ulong batch_stride, int rows,
                             int cols, int slots, int from_slots) {
    const size_t i = get_global_id(0);
    if (i < n)
        copy_slot_rows_at(i, rows, cols, index, slots, slot_at, slot_floats, slot_stride,
                          batch_at, batch_stride, from_slots, src, dst);
}

__kernel void broadcast_multiply(__global const float* factors, __global float* y, ulong n,
                                 int cols, int per_row) {
    const size_t i = get_global_id(0);
    if (i < n) broadcast_multiply_at(i, cols, factors, per_row, y);
}

// x and y may alias: each work-item reads its element before writing it.
__kernel void spline_inverse(__global const float* params, __global const float* x,
                             __global float* y, ulong n, int bins, float bound, float scale) {
    const size_t i = get_global_id(0);
    if (i < n) spline_inverse_at(i, bins, bound, scale, params, x, y);
}
