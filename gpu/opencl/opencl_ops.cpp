// The OpenCL backend's operations: each sizes its launch (element-wise
// kernels one work-item per element, the tiled ones by tiles or rows) and
// enqueues one kernel of the program (kernels/*.cl) with its arguments in the
// kernel's order; copy_rows is a rectangle copy instead. Arguments were
// checked by gpu::Backend before these run.
#include <algorithm>
#include <cstddef>

#include "gpu/kernels/activation_code.h"
#include "gpu/opencl/opencl_backend_state.h"

namespace etude::gpu {
namespace {

// Must match TS, LN_WG and TT in kernels/tiled_kernels.cl.
constexpr std::size_t kGemmTile = 16;
constexpr std::size_t kLayerNormGroup = 64;
constexpr std::size_t kTransposeTile = 16;
// Work-group size of the 1-D element-wise kernels.
constexpr std::size_t kGroup1d = 64;

std::size_t round_up(std::size_t n, std::size_t m) {
    return (n + m - 1) / m * m;
}

}  // namespace

// Element-wise kernels: one work-item per element, rounded up to whole groups.
OpenClBackend::Range OpenClBackend::range1d(std::size_t n) {
    Range r;
    r.global[0] = round_up(n, kGroup1d);
    r.local[0] = kGroup1d;
    return r;
}

// Enqueues kernel `kernel` of `cq` with `args` as its arguments, in order, and
// records its event for the op's timing.
template <class... Args>
void OpenClBackend::launch(ClQueue& cq, const char* op, int kernel, const Range& r,
                           const Args&... args) {
    cl_event ev = nullptr;
    const ClResult res = enqueue_kernel(cq.queue.get(), cq.kernels[kernel].get(), r.dims, r.global,
                                        r.local, &ev, args...);
    check(res.err, res.function, op);
    cq.pending.push_back({op, Event(), Event(ev)});
    track(cq);
}

void OpenClBackend::fill_impl(Queue& q, DeviceBuffer& dst, float value, std::size_t floats) {
    const char* op = "fill";
    begin(op);
    if (floats == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong n = floats;
    launch(cq, op, kFill, range1d(floats), mem(dst), n, value);
}

void OpenClBackend::activation_impl(Queue& q, Activation f, const DeviceBuffer& x, DeviceBuffer& y,
                                    std::size_t n, float alpha) {
    const char* op = to_string(f);
    begin(op);
    if (n == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong count = n;
    const cl_int code = activation_code(f);
    launch(cq, op, kActivation, range1d(n), mem(x), mem(y), count, code, alpha);
}

void OpenClBackend::gemm_impl(Queue& q, bool trans_a, bool trans_b, int m, int n, int k,
                              float alpha, const DeviceBuffer& a, int lda, const DeviceBuffer& b,
                              int ldb, float beta, DeviceBuffer& c, int ldc) {
    const char* op = "gemm";
    begin(op);
    if (m <= 0 || n <= 0) return;
    auto& cq = queue_of(q, op);
    Range r;
    r.dims = 2;
    r.global[0] = round_up(static_cast<std::size_t>(n), kGemmTile);  // columns
    r.global[1] = round_up(static_cast<std::size_t>(m), kGemmTile);  // rows
    r.local[0] = r.local[1] = kGemmTile;
    const cl_int ta = trans_a, tb = trans_b, mm = m, nn = n, kk = std::max(k, 0);
    const cl_int la = lda, lb = ldb, lc = ldc;
    launch(cq, op, kGemm, r, ta, tb, mm, nn, kk, alpha, mem(a), la, mem(b), lb, beta, mem(c), lc);
}

void OpenClBackend::conv1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                                const DeviceBuffer& w, const DeviceBuffer& bias, DeviceBuffer& y) {
    const char* op = "conv1d";
    begin(op);
    const cl_int out_len = s.conv_out_length();
    const std::size_t total = static_cast<std::size_t>(std::max(s.batch, 0)) *
                              static_cast<std::size_t>(std::max(s.out_channels, 0)) *
                              static_cast<std::size_t>(std::max(out_len, 0));
    if (total == 0) return;
    auto& cq = queue_of(q, op);
    // An empty bias is passed as a null buffer (allowed for __global
    // pointers) and flagged, since the kernel must not read it.
    const cl_mem b = bias ? mem(bias) : nullptr;
    const cl_int has_bias = bias ? 1 : 0;
    launch(cq, op, kConv1d, range1d(total), mem(x), mem(w), b, has_bias, mem(y), cl_int{s.batch},
           cl_int{s.in_channels}, cl_int{s.out_channels}, cl_int{s.in_length}, cl_int{s.kernel},
           cl_int{s.stride}, cl_int{s.dilation}, cl_int{s.padding}, cl_int{s.groups}, out_len);
}

void OpenClBackend::conv_transpose1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                                          const DeviceBuffer& w, const DeviceBuffer& bias,
                                          DeviceBuffer& y) {
    const char* op = "conv_transpose1d";
    begin(op);
    const cl_int out_len = s.transpose_out_length();
    const std::size_t total = static_cast<std::size_t>(std::max(s.batch, 0)) *
                              static_cast<std::size_t>(std::max(s.out_channels, 0)) *
                              static_cast<std::size_t>(std::max(out_len, 0));
    if (total == 0) return;
    auto& cq = queue_of(q, op);
    const cl_mem b = bias ? mem(bias) : nullptr;
    const cl_int has_bias = bias ? 1 : 0;
    launch(cq, op, kConvTranspose1d, range1d(total), mem(x), mem(w), b, has_bias, mem(y),
           cl_int{s.batch}, cl_int{s.in_channels}, cl_int{s.out_channels}, cl_int{s.in_length},
           cl_int{s.kernel}, cl_int{s.stride}, cl_int{s.dilation}, cl_int{s.padding},
           cl_int{s.groups}, out_len);
}

void OpenClBackend::layer_norm_impl(Queue& q, int rows, int cols, float eps, const DeviceBuffer& x,
                                    const DeviceBuffer& gamma, const DeviceBuffer& beta,
                                    DeviceBuffer& y) {
    const char* op = "layer_norm";
    begin(op);
    if (rows <= 0 || cols <= 0) return;
    auto& cq = queue_of(q, op);
    Range r;  // one work-group per row
    r.global[0] = static_cast<std::size_t>(rows) * kLayerNormGroup;
    r.local[0] = kLayerNormGroup;
    launch(cq, op, kLayerNorm, r, cl_int{cols}, eps, mem(x), mem(gamma), mem(beta), mem(y));
}

void OpenClBackend::axpby_impl(Queue& q, std::size_t n, float alpha, const DeviceBuffer& x,
                               float beta, DeviceBuffer& y) {
    const char* op = "axpby";
    begin(op);
    if (n == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong count = n;
    launch(cq, op, kAxpby, range1d(n), mem(x), mem(y), count, alpha, beta);
}

void OpenClBackend::copy_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& src,
                                   std::size_t src_offset, std::size_t src_stride,
                                   DeviceBuffer& dst, std::size_t dst_offset,
                                   std::size_t dst_stride) {
    const char* op = "copy_rows";
    begin(op);
    if (rows <= 0 || cols <= 0) return;
    auto& cq = queue_of(q, op);
    // A rectangle copy: rows are the second dimension, in bytes. Kept over
    // the strided body CUDA and Vulkan launch (kernel_bodies.h's
    // copy_rows_at): on PoCL the rectangle copy gathered 64 streams' held
    // frames 4-8 times faster than that body did (docs/benchmarks.md,
    // twenty-ninth session); no other OpenCL device has been measured.
    const std::size_t src_origin[3] = {src_offset * sizeof(float), 0, 0};
    const std::size_t dst_origin[3] = {dst_offset * sizeof(float), 0, 0};
    const std::size_t region[3] = {static_cast<std::size_t>(cols) * sizeof(float),
                                   static_cast<std::size_t>(rows), 1};
    cl_event ev = nullptr;
    check(clEnqueueCopyBufferRect(cq.queue.get(), mem(src), mem(dst), src_origin, dst_origin,
                                  region, src_stride * sizeof(float), 0, dst_stride * sizeof(float),
                                  0, 0, nullptr, &ev),
          "clEnqueueCopyBufferRect", op);
    cq.pending.push_back({op, Event(), Event(ev)});
    track(cq);
}

void OpenClBackend::transpose_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                   DeviceBuffer& y) {
    const char* op = "transpose";
    begin(op);
    if (rows <= 0 || cols <= 0) return;
    auto& cq = queue_of(q, op);
    Range r;
    r.dims = 2;
    r.global[0] = round_up(static_cast<std::size_t>(cols), kTransposeTile);
    r.global[1] = round_up(static_cast<std::size_t>(rows), kTransposeTile);
    r.local[0] = r.local[1] = kTransposeTile;
    launch(cq, op, kTranspose, r, cl_int{rows}, cl_int{cols}, mem(x), mem(y));
}

void OpenClBackend::add_bias_impl(Queue& q, int rows, int cols, const DeviceBuffer& bias,
                                  bool per_row, DeviceBuffer& y) {
    const char* op = "add_bias";
    begin(op);
    if (rows <= 0 || cols <= 0) return;
    auto& cq = queue_of(q, op);
    const std::size_t total = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    const cl_int row_wise = per_row ? 1 : 0;
    launch(cq, op, kAddBias, range1d(total), cl_int{rows}, cl_int{cols}, mem(bias), row_wise,
           mem(y));
}

void OpenClBackend::polar_spectrum_impl(Queue& q, int frames, int bins, float max_magnitude,
                                        const DeviceBuffer& x, DeviceBuffer& y) {
    const char* op = "polar_spectrum";
    begin(op);
    if (frames <= 0 || bins <= 0) return;
    auto& cq = queue_of(q, op);
    const std::size_t total = static_cast<std::size_t>(frames) * static_cast<std::size_t>(bins);
    launch(cq, op, kPolarSpectrum, range1d(total), cl_int{frames}, cl_int{bins}, max_magnitude,
           mem(x), mem(y));
}

void OpenClBackend::frame_signal_impl(Queue& q, const DeviceBuffer& signal, int n_fft, int hop,
                                      int n_frames, const DeviceBuffer& window,
                                      DeviceBuffer& frames) {
    const char* op = "frame_signal";
    begin(op);
    if (n_fft <= 0 || n_frames <= 0) return;
    auto& cq = queue_of(q, op);
    const std::size_t total = static_cast<std::size_t>(n_fft) * static_cast<std::size_t>(n_frames);
    launch(cq, op, kFrameSignal, range1d(total), mem(signal), cl_int{n_fft}, cl_int{hop},
           cl_int{n_frames}, mem(window), mem(frames));
}

void OpenClBackend::overlap_add_impl(Queue& q, const DeviceBuffer& frames, int n_fft, int hop,
                                     int n_frames, const DeviceBuffer& window, DeviceBuffer& out) {
    const char* op = "overlap_add";
    begin(op);
    if (n_fft <= 0 || n_frames <= 0 || hop <= 0) return;
    auto& cq = queue_of(q, op);
    const std::size_t len =
        static_cast<std::size_t>(n_frames - 1) * static_cast<std::size_t>(hop) + n_fft;
    launch(cq, op, kOverlapAdd, range1d(len), mem(frames), cl_int{n_fft}, cl_int{hop},
           cl_int{n_frames}, mem(window), mem(out));
}

void OpenClBackend::complex_multiply_impl(Queue& q, const DeviceBuffer& a, const DeviceBuffer& b,
                                          DeviceBuffer& c, std::size_t n) {
    const char* op = "complex_multiply";
    begin(op);
    if (n == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong count = n;
    launch(cq, op, kComplexMultiply, range1d(n), mem(a), mem(b), mem(c), count);
}

void OpenClBackend::complex_exp_impl(Queue& q, const DeviceBuffer& x, DeviceBuffer& y,
                                     std::size_t n) {
    const char* op = "complex_exp";
    begin(op);
    if (n == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong count = n;
    launch(cq, op, kComplexExp, range1d(n), mem(x), mem(y), count);
}

void OpenClBackend::minimum_phase_fold_impl(Queue& q, int n, int batch, const DeviceBuffer& x,
                                            DeviceBuffer& y) {
    const char* op = "minimum_phase_fold";
    begin(op);
    if (n <= 0 || batch <= 0) return;
    auto& cq = queue_of(q, op);
    const std::size_t total = static_cast<std::size_t>(n) * static_cast<std::size_t>(batch);
    launch(cq, op, kMinimumPhaseFold, range1d(total), cl_int{n}, cl_int{batch}, mem(x), mem(y));
}

void OpenClBackend::gated_tanh_impl(Queue& q, int batch, int channels, int length,
                                    const DeviceBuffer& x, DeviceBuffer& y) {
    const char* op = "gated_tanh";
    begin(op);
    const cl_ulong item_size =
        static_cast<cl_ulong>(std::max(channels, 0)) * static_cast<cl_ulong>(std::max(length, 0));
    if (item_size == 0 || batch <= 0) return;
    auto& cq = queue_of(q, op);
    Range r = range1d(std::size_t(item_size));  // an item's outputs, then the items
    r.dims = 2;
    r.global[1] = static_cast<std::size_t>(batch);
    r.local[1] = 1;
    launch(cq, op, kGatedTanh, r, mem(x), mem(y), item_size);
}

void OpenClBackend::softmax_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                      DeviceBuffer& y) {
    const char* op = "softmax_rows";
    begin(op);
    auto& cq = queue_of(q, op);
    launch(cq, op, kSoftmaxRows, range1d(std::size_t(rows)), mem(x), mem(y), cl_int{rows},
           cl_int{cols});
}

void OpenClBackend::relative_attention_scores_impl(
    Queue& q, int batch, int heads, int length, int channels, int window, float scale,
    const DeviceBuffer& queries, const DeviceBuffer& keys, const DeviceBuffer& rel_k,
    const DeviceBuffer& key_mask, DeviceBuffer& scores) {
    const char* op = "relative_attention_scores";
    begin(op);
    auto& cq = queue_of(q, op);
    const cl_ulong n = cl_ulong(batch) * heads * length * length;
    // Without a mask the kernel still gets a valid buffer, never read.
    const cl_mem mask = key_mask ? mem(key_mask) : mem(keys);
    launch(cq, op, kRelativeAttentionScores, range1d(n), mem(queries), mem(keys), mem(rel_k), mask,
           mem(scores), n, cl_int{heads}, cl_int{length}, cl_int{channels}, cl_int{window},
           cl_float{scale}, cl_int{key_mask ? 1 : 0});
}

void OpenClBackend::relative_attention_values_impl(Queue& q, int batch, int heads, int length,
                                                   int channels, int window, const DeviceBuffer& p,
                                                   const DeviceBuffer& values,
                                                   const DeviceBuffer& rel_v, DeviceBuffer& y) {
    const char* op = "relative_attention_values";
    begin(op);
    auto& cq = queue_of(q, op);
    const cl_ulong n = cl_ulong(batch) * length * heads * channels;
    launch(cq, op, kRelativeAttentionValues, range1d(n), mem(p), mem(values), mem(rel_v), mem(y), n,
           cl_int{heads}, cl_int{length}, cl_int{channels}, cl_int{window});
}

void OpenClBackend::copy_slot_rows_impl(Queue& q, const SlotRows& s, const DeviceBuffer& index,
                                        bool from_slots, const DeviceBuffer& src,
                                        DeviceBuffer& dst) {
    const char* op = from_slots ? "gather_slot_rows" : "scatter_slot_rows";
    begin(op);
    auto& cq = queue_of(q, op);
    const cl_ulong n = cl_ulong(s.items) * cl_ulong(s.rows) * cl_ulong(s.cols);
    launch(cq, op, kCopySlotRows, range1d(n), mem(index), mem(src), mem(dst), n,
           cl_ulong{s.slot_at}, cl_ulong{s.slot_floats}, cl_ulong{s.slot_stride},
           cl_ulong{s.batch_at}, cl_ulong{s.batch_stride}, cl_int{s.rows}, cl_int{s.cols},
           cl_int{s.slots}, cl_int{from_slots ? 1 : 0});
}

void OpenClBackend::broadcast_multiply_impl(Queue& q, int rows, int cols,
                                            const DeviceBuffer& factors, bool per_row,
                                            DeviceBuffer& y) {
    const char* op = "broadcast_multiply";
    begin(op);
    auto& cq = queue_of(q, op);
    const cl_ulong n = cl_ulong(rows) * cols;
    launch(cq, op, kBroadcastMultiply, range1d(n), mem(factors), mem(y), n, cl_int{cols},
           cl_int{per_row ? 1 : 0});
}

void OpenClBackend::spline_inverse_impl(Queue& q, int count, int bins, float bound, float scale,
                                        const DeviceBuffer& params, const DeviceBuffer& x,
                                        DeviceBuffer& y) {
    const char* op = "spline_inverse";
    begin(op);
    auto& cq = queue_of(q, op);
    const cl_ulong n = cl_ulong(count);
    launch(cq, op, kSplineInverse, range1d(n), mem(params), mem(x), mem(y), n, cl_int{bins},
           cl_float{bound}, cl_float{scale});
}

}  // namespace etude::gpu
