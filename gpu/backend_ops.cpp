// The public operations of gpu::Backend: the argument checks, written once
// for every backend, then the backend's *_impl hook (see backend.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "gpu/backend.h"
#include "gpu/op_log.h"

namespace etude::gpu {
namespace {

[[noreturn]] void reject(const char* op, const std::string& what) {
    throw std::invalid_argument(std::string(op) + ": " + what);
}

// `b` must hold at least `floats` floats (nothing is needed when floats is 0).
void need(const DeviceBuffer& b, std::size_t floats, const char* what, const char* op) {
    if (floats > 0 && (!b || b.floats() < floats))
        reject(op, std::string(what) + " holds " + std::to_string(b.floats()) + " floats, needs " +
                       std::to_string(floats));
}

void distinct(const DeviceBuffer& a, const DeviceBuffer& b, const char* what, const char* op) {
    if (a && a.handle() == b.handle()) reject(op, std::string(what) + " must be distinct buffers");
}

// A non-owning view of `b`'s allocation: what a logged operation keeps
// (the recording's contract keeps the allocation alive, while the
// DeviceBuffer object may move).
DeviceBuffer view(const DeviceBuffer& b) {
    return DeviceBuffer(nullptr, b.handle(), b.bytes(), b.tag());
}

// Host memory is not part of a recording (backend.h says why).
void refuse_host_copy(const Queue& q, const char* op) {
    if (q.recording())
        reject(op,
               "copies to or from host memory cannot be recorded: copy before or after replay()");
}

std::size_t count(int v) {
    return static_cast<std::size_t>(std::max(v, 0));
}

// Extent of a row-major matrix of `rows` rows of `cols` used columns, row
// stride `ld` (which BLAS requires to be at least `cols`).
std::size_t matrix_floats(int rows, int cols, int ld, const char* what, const char* op) {
    if (rows <= 0 || cols <= 0) return 0;
    if (ld < cols)
        reject(op, std::string("the row stride of ") + what + " (" + std::to_string(ld) +
                       ") is less than its row length (" + std::to_string(cols) + ")");
    return static_cast<std::size_t>(rows - 1) * ld + cols;
}

// Shapes a convolution must have whatever its size: the bodies and the
// CPU's im2col index with these without further checks.
void check_conv_shape(const Conv1dShape& s, const char* op) {
    if (s.groups <= 0 || s.in_channels <= 0 || s.out_channels <= 0 ||
        s.in_channels % s.groups != 0 || s.out_channels % s.groups != 0)
        reject(op, "in_channels (" + std::to_string(s.in_channels) + ") and out_channels (" +
                       std::to_string(s.out_channels) + ") must be positive multiples of groups (" +
                       std::to_string(s.groups) + ")");
    if (s.stride <= 0 || s.dilation <= 0 || s.kernel <= 0 || s.padding < 0)
        reject(op, "stride, dilation and kernel must be positive and padding not negative");
}

// copy_rows: distinct buffers, rows of dst that do not overlap (a device
// writes them from several threads at once, so the result would depend on
// the device), and a block that stays inside both.
void check_copy_rows(int rows, int cols, const DeviceBuffer& src, std::size_t src_offset,
                     std::size_t src_stride, const DeviceBuffer& dst, std::size_t dst_offset,
                     std::size_t dst_stride) {
    if (rows <= 0 || cols <= 0) return;
    distinct(src, dst, "src and dst", "copy_rows");
    if (rows > 1 && dst_stride < static_cast<std::size_t>(cols))
        reject("copy_rows", "rows of dst overlap (dst_stride below cols)");
    const std::size_t last = static_cast<std::size_t>(rows - 1);
    if (src_offset + last * src_stride + cols > src.floats() ||
        dst_offset + last * dst_stride + cols > dst.floats())
        reject("copy_rows", "the block reaches past a buffer");
}

// gather_slot_rows / scatter_slot_rows: shapes that make sense, every slot
// and every item inside its buffer (whatever the device's index says), an
// index per item, and three distinct buffers.
void check_slot_rows(const Backend::SlotRows& s, const DeviceBuffer& index,
                     const DeviceBuffer& slots, const DeviceBuffer& batch, const char* op) {
    if (s.items <= 0 || s.rows <= 0 || s.cols <= 0) return;
    const std::size_t cols = count(s.cols), last_row = count(s.rows - 1);
    if (s.slots <= 0) reject(op, "no slots");
    // (Overlapping rows would be written by several threads at once.)
    const bool batch_rows = count(s.items) * count(s.rows) > 1;
    if ((s.rows > 1 && s.slot_stride < cols) || (batch_rows && s.batch_stride < cols) ||
        (s.slots > 1 && s.slot_floats / std::max<std::size_t>(s.slot_stride, 1) < last_row) ||
        (s.slots > 1 && s.slot_floats - last_row * s.slot_stride < cols))
        reject(op, "rows of a slot or of the batch, or slots, overlap");
    need(index, count(s.items), "index", op);
    // (Sums and products that would wrap around std::size_t, and so pass
    // need(), saturate instead: no buffer holds SIZE_MAX floats.)
    const auto add = [](std::size_t a, std::size_t b) {
        std::size_t r = 0;
        return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
    };
    const auto mul = [](std::size_t a, std::size_t b) {
        std::size_t r = 0;
        return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
    };
    need(slots,
         add(add(s.slot_at, mul(count(s.slots - 1), s.slot_floats)),
             add(mul(last_row, s.slot_stride), cols)),
         "slots", op);
    need(batch, add(add(s.batch_at, mul(count(s.items) * count(s.rows) - 1, s.batch_stride)), cols),
         "batch", op);
    distinct(index, slots, "index and slots", op);
    distinct(index, batch, "index and batch", op);
    distinct(slots, batch, "slots and batch", op);
}

}  // namespace

template <class Call>
void Backend::issue(Queue& q, Call&& call) {
    if (q.recording_) ++q.recorded_ops_;
    if (!q.op_log_) return call(q);
    // The call holds its buffers' views, which are move-only; std::function
    // wants a copyable target.
    auto shared = std::make_shared<std::decay_t<Call>>(std::forward<Call>(call));
    q.op_log_->ops.emplace_back([shared](Queue& on) { (*shared)(on); });
}

void Backend::copy_to_device(Queue& q, DeviceBuffer& dst, std::size_t dst_offset, const float* src,
                             std::size_t floats) {
    if (floats > 0 && !src) reject("h2d", "the host pointer is null");
    need(dst, floats > 0 ? dst_offset + floats : 0, "dst", "h2d");
    if (floats == 0) return;
    refuse_host_copy(q, "h2d");
    copy_to_device_impl(q, dst, dst_offset, src, floats);
}

void Backend::copy_to_host(Queue& q, float* dst, const DeviceBuffer& src, std::size_t src_offset,
                           std::size_t floats) {
    if (floats > 0 && !dst) reject("d2h", "the host pointer is null");
    need(src, floats > 0 ? src_offset + floats : 0, "src", "d2h");
    if (floats == 0) return;
    refuse_host_copy(q, "d2h");
    copy_to_host_impl(q, dst, src, src_offset, floats);
}

void Backend::fill(Queue& q, DeviceBuffer& dst, float value, std::size_t floats) {
    need(dst, floats, "dst", "fill");
    if (floats == 0) return;
    issue(q, [=, this, dst = view(dst)](Queue& on) mutable { fill_impl(on, dst, value, floats); });
}

void Backend::activation(Queue& q, Activation f, const DeviceBuffer& x, DeviceBuffer& y,
                         std::size_t n, float alpha) {
    need(x, n, "x", to_string(f));
    need(y, n, "y", to_string(f));
    if (n == 0) return;
    issue(q, [=, this, x = view(x), y = view(y)](Queue& on) mutable {
        activation_impl(on, f, x, y, n, alpha);
    });
}

void Backend::gemm(Queue& q, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const DeviceBuffer& a, int lda, const DeviceBuffer& b, int ldb, float beta,
                   DeviceBuffer& c, int ldc) {
    const char* op = "gemm";
    if (m > 0 && n > 0) {
        need(a, trans_a ? matrix_floats(k, m, lda, "a", op) : matrix_floats(m, k, lda, "a", op),
             "a", op);
        need(b, trans_b ? matrix_floats(n, k, ldb, "b", op) : matrix_floats(k, n, ldb, "b", op),
             "b", op);
        need(c, matrix_floats(m, n, ldc, "c", op), "c", op);
    }
    if (m <= 0 || n <= 0) return;  // k == 0 still scales C by beta
    issue(q, [=, this, a = view(a), b = view(b), c = view(c)](Queue& on) mutable {
        gemm_impl(on, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    });
}

void Backend::conv1d(Queue& q, const Conv1dShape& s, const DeviceBuffer& x, const DeviceBuffer& w,
                     const DeviceBuffer& bias, DeviceBuffer& y) {
    const char* op = "conv1d";
    check_conv_shape(s, op);
    const std::size_t batch = count(s.batch);
    need(x, batch * s.in_channels * count(s.in_length), "x", op);
    need(w, static_cast<std::size_t>(s.out_channels) * (s.in_channels / s.groups) * s.kernel, "w",
         op);
    if (bias) need(bias, s.out_channels, "bias", op);
    need(y, batch * s.out_channels * count(s.conv_out_length()), "y", op);
    distinct(x, y, "x and y", op);
    if (s.batch <= 0 || s.conv_out_length() <= 0) return;
    issue(q, [=, this, x = view(x), w = view(w), bias = view(bias),
              y = view(y)](Queue& on) mutable { conv1d_impl(on, s, x, w, bias, y); });
}

void Backend::conv_transpose1d(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                               const DeviceBuffer& w, const DeviceBuffer& bias, DeviceBuffer& y) {
    const char* op = "conv_transpose1d";
    check_conv_shape(s, op);
    const std::size_t batch = count(s.batch);
    need(x, batch * s.in_channels * count(s.in_length), "x", op);
    need(w, static_cast<std::size_t>(s.in_channels) * (s.out_channels / s.groups) * s.kernel, "w",
         op);
    if (bias) need(bias, s.out_channels, "bias", op);
    need(y, batch * s.out_channels * count(s.transpose_out_length()), "y", op);
    distinct(x, y, "x and y", op);
    if (s.batch <= 0 || s.transpose_out_length() <= 0) return;
    issue(q, [=, this, x = view(x), w = view(w), bias = view(bias),
              y = view(y)](Queue& on) mutable { conv_transpose1d_impl(on, s, x, w, bias, y); });
}

void Backend::layer_norm(Queue& q, int rows, int cols, float eps, const DeviceBuffer& x,
                         const DeviceBuffer& gamma, const DeviceBuffer& beta, DeviceBuffer& y) {
    const char* op = "layer_norm";
    const std::size_t total = count(rows) * count(cols);
    need(x, total, "x", op);
    need(y, total, "y", op);
    need(gamma, total > 0 ? count(cols) : 0, "gamma", op);
    need(beta, total > 0 ? count(cols) : 0, "beta", op);
    if (total == 0) return;
    issue(q, [=, this, x = view(x), gamma = view(gamma), beta = view(beta), y = view(y)](
                 Queue& on) mutable { layer_norm_impl(on, rows, cols, eps, x, gamma, beta, y); });
}

void Backend::axpby(Queue& q, std::size_t n, float alpha, const DeviceBuffer& x, float beta,
                    DeviceBuffer& y) {
    need(x, n, "x", "axpby");
    need(y, n, "y", "axpby");
    if (n == 0) return;
    issue(q, [=, this, x = view(x), y = view(y)](Queue& on) mutable {
        axpby_impl(on, n, alpha, x, beta, y);
    });
}

void Backend::copy_rows(Queue& q, int rows, int cols, const DeviceBuffer& src,
                        std::size_t src_offset, std::size_t src_stride, DeviceBuffer& dst,
                        std::size_t dst_offset, std::size_t dst_stride) {
    check_copy_rows(rows, cols, src, src_offset, src_stride, dst, dst_offset, dst_stride);
    if (rows <= 0 || cols <= 0) return;
    issue(q, [=, this, src = view(src), dst = view(dst)](Queue& on) mutable {
        copy_rows_impl(on, rows, cols, src, src_offset, src_stride, dst, dst_offset, dst_stride);
    });
}

void Backend::gather_slot_rows(Queue& q, const SlotRows& s, const DeviceBuffer& index,
                               const DeviceBuffer& slots, DeviceBuffer& batch) {
    check_slot_rows(s, index, slots, batch, "gather_slot_rows");
    if (s.items <= 0 || s.rows <= 0 || s.cols <= 0) return;
    issue(q, [=, this, index = view(index), slots = view(slots), batch = view(batch)](
                 Queue& on) mutable { copy_slot_rows_impl(on, s, index, true, slots, batch); });
}

void Backend::scatter_slot_rows(Queue& q, const SlotRows& s, const DeviceBuffer& index,
                                const DeviceBuffer& batch, DeviceBuffer& slots) {
    check_slot_rows(s, index, slots, batch, "scatter_slot_rows");
    if (s.items <= 0 || s.rows <= 0 || s.cols <= 0) return;
    issue(q, [=, this, index = view(index), slots = view(slots), batch = view(batch)](
                 Queue& on) mutable { copy_slot_rows_impl(on, s, index, false, batch, slots); });
}

void Backend::transpose(Queue& q, int rows, int cols, const DeviceBuffer& x, DeviceBuffer& y) {
    const std::size_t total = count(rows) * count(cols);
    need(x, total, "x", "transpose");
    need(y, total, "y", "transpose");
    // In place, tiles would overwrite input other work-groups have yet to read.
    if (total == 0) return;
    distinct(x, y, "x and y", "transpose");
    issue(q, [=, this, x = view(x), y = view(y)](Queue& on) mutable {
        transpose_impl(on, rows, cols, x, y);
    });
}

void Backend::add_bias(Queue& q, int rows, int cols, const DeviceBuffer& bias, bool per_row,
                       DeviceBuffer& y) {
    const std::size_t total = count(rows) * count(cols);
    need(y, total, "y", "add_bias");
    need(bias, total > 0 ? count(per_row ? rows : cols) : 0, "bias", "add_bias");
    if (total == 0) return;
    issue(q, [=, this, bias = view(bias), y = view(y)](Queue& on) mutable {
        add_bias_impl(on, rows, cols, bias, per_row, y);
    });
}

void Backend::polar_spectrum(Queue& q, int frames, int bins, float max_magnitude,
                             const DeviceBuffer& x, DeviceBuffer& y) {
    const std::size_t total = 2 * count(frames) * count(bins);
    need(x, total, "x", "polar_spectrum");
    need(y, total, "y", "polar_spectrum");
    // A frame's output overwrites log-magnitudes of bins not yet read.
    if (total == 0) return;
    distinct(x, y, "x and y", "polar_spectrum");
    issue(q, [=, this, x = view(x), y = view(y)](Queue& on) mutable {
        polar_spectrum_impl(on, frames, bins, max_magnitude, x, y);
    });
}

void Backend::rfft(Queue& q, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out) {
    if (n > 0 && batch > 0) {
        need(in, count(batch) * count(n), "in", "rfft");
        need(out, count(batch) * (count(n) / 2 + 1) * 2, "out", "rfft");
    }
    if (n <= 0 || batch <= 0) return;
    distinct(in, out, "in and out", "rfft");
    issue(q, [=, this, in = view(in), out = view(out)](Queue& on) mutable {
        rfft_impl(on, n, batch, in, out);
    });
}

void Backend::irfft(Queue& q, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out) {
    if (n > 0 && batch > 0) {
        need(in, count(batch) * (count(n) / 2 + 1) * 2, "in", "irfft");
        need(out, count(batch) * count(n), "out", "irfft");
    }
    if (n <= 0 || batch <= 0) return;
    distinct(in, out, "in and out", "irfft");
    issue(q, [=, this, in = view(in), out = view(out)](Queue& on) mutable {
        irfft_impl(on, n, batch, in, out);
    });
}

void Backend::frame_signal(Queue& q, const DeviceBuffer& signal, int n_fft, int hop, int n_frames,
                           const DeviceBuffer& window, DeviceBuffer& frames) {
    const char* op = "frame_signal";
    if (n_fft > 0 && n_frames > 0) {
        if (hop < 0) reject(op, "hop must not be negative");
        need(signal, count(n_frames - 1) * count(hop) + count(n_fft), "signal", op);
        need(window, count(n_fft), "window", op);
        need(frames, count(n_frames) * count(n_fft), "frames", op);
    }
    if (n_fft <= 0 || n_frames <= 0) return;
    issue(q, [=, this, signal = view(signal), window = view(window),
              frames = view(frames)](Queue& on) mutable {
        frame_signal_impl(on, signal, n_fft, hop, n_frames, window, frames);
    });
}

void Backend::overlap_add(Queue& q, const DeviceBuffer& frames, int n_fft, int hop, int n_frames,
                          const DeviceBuffer& window, DeviceBuffer& out) {
    const char* op = "overlap_add";
    if (n_fft > 0 && n_frames > 0) {
        if (hop <= 0) reject(op, "hop must be positive");
        need(frames, count(n_frames) * count(n_fft), "frames", op);
        need(window, count(n_fft), "window", op);
        need(out, count(n_frames - 1) * count(hop) + count(n_fft), "out", op);
    }
    if (n_fft <= 0 || n_frames <= 0) return;
    issue(q, [=, this, frames = view(frames), window = view(window),
              out = view(out)](Queue& on) mutable {
        overlap_add_impl(on, frames, n_fft, hop, n_frames, window, out);
    });
}

void Backend::complex_multiply(Queue& q, const DeviceBuffer& a, const DeviceBuffer& b,
                               DeviceBuffer& c, std::size_t n) {
    need(a, 2 * n, "a", "complex_multiply");
    need(b, 2 * n, "b", "complex_multiply");
    need(c, 2 * n, "c", "complex_multiply");
    if (n == 0) return;
    issue(q, [=, this, a = view(a), b = view(b), c = view(c)](Queue& on) mutable {
        complex_multiply_impl(on, a, b, c, n);
    });
}

void Backend::complex_exp(Queue& q, const DeviceBuffer& x, DeviceBuffer& y, std::size_t n) {
    need(x, 2 * n, "x", "complex_exp");
    need(y, 2 * n, "y", "complex_exp");
    if (n == 0) return;
    issue(q, [=, this, x = view(x), y = view(y)](Queue& on) mutable {
        complex_exp_impl(on, x, y, n);
    });
}

void Backend::minimum_phase_fold(Queue& q, int n, int batch, const DeviceBuffer& x,
                                 DeviceBuffer& y) {
    const std::size_t total = count(n) * count(batch);
    need(x, total, "x", "minimum_phase_fold");
    need(y, total, "y", "minimum_phase_fold");
    if (total == 0) return;
    issue(q, [=, this, x = view(x), y = view(y)](Queue& on) mutable {
        minimum_phase_fold_impl(on, n, batch, x, y);
    });
}

void Backend::gated_tanh(Queue& q, int batch, int channels, int length, const DeviceBuffer& x,
                         DeviceBuffer& y) {
    const std::size_t outputs = count(batch) * count(channels) * count(length);
    need(x, 2 * outputs, "x", "gated_tanh");
    need(y, outputs, "y", "gated_tanh");
    if (outputs == 0) return;
    distinct(x, y, "x and y", "gated_tanh");
    issue(q, [=, this, x = view(x), y = view(y)](Queue& on) mutable {
        gated_tanh_impl(on, batch, channels, length, x, y);
    });
}

void Backend::softmax_rows(Queue& q, int rows, int cols, const DeviceBuffer& x, DeviceBuffer& y) {
    const std::size_t total = count(rows) * count(cols);
    need(x, total, "x", "softmax_rows");
    need(y, total, "y", "softmax_rows");
    if (total == 0) return;
    issue(q, [=, this, x = view(x), y = view(y)](Queue& on) mutable {
        softmax_rows_impl(on, rows, cols, x, y);
    });
}

namespace {

// The shape both relative-attention products share; returns the floats of
// one of q, k, v or y ([batch * length][heads * channels]).
std::size_t check_attention_shape(int batch, int heads, int length, int channels, int window,
                                  const char* op) {
    if (heads <= 0 || channels <= 0 || window < 0 || batch < 0)
        reject(op, "heads (" + std::to_string(heads) + ") and channels (" +
                       std::to_string(channels) + ") must be positive, window (" +
                       std::to_string(window) + ") and batch (" + std::to_string(batch) +
                       ") not negative");
    return count(batch) * count(length) * count(heads) * count(channels);
}

}  // namespace

void Backend::relative_attention_scores(Queue& q, int batch, int heads, int length, int channels,
                                        int window, float scale, const DeviceBuffer& queries,
                                        const DeviceBuffer& keys, const DeviceBuffer& rel_k,
                                        const DeviceBuffer& key_mask, DeviceBuffer& scores) {
    const char* op = "relative_attention_scores";
    const std::size_t rows = check_attention_shape(batch, heads, length, channels, window, op);
    const std::size_t out = count(batch) * count(heads) * count(length) * count(length);
    need(queries, rows, "queries", op);
    need(keys, rows, "keys", op);
    need(rel_k, rows > 0 ? std::size_t(2 * window + 1) * count(channels) : 0, "rel_k", op);
    if (key_mask) need(key_mask, count(batch) * count(length), "key_mask", op);
    need(scores, out, "scores", op);
    if (out == 0) return;
    distinct(queries, scores, "queries and scores", op);
    distinct(keys, scores, "keys and scores", op);
    distinct(rel_k, scores, "rel_k and scores", op);
    distinct(key_mask, scores, "key_mask and scores", op);
    issue(q, [=, this, queries = view(queries), keys = view(keys), rel_k = view(rel_k),
              key_mask = view(key_mask), scores = view(scores)](Queue& on) mutable {
        relative_attention_scores_impl(on, batch, heads, length, channels, window, scale, queries,
                                       keys, rel_k, key_mask, scores);
    });
}

void Backend::relative_attention_values(Queue& q, int batch, int heads, int length, int channels,
                                        int window, const DeviceBuffer& p,
                                        const DeviceBuffer& values, const DeviceBuffer& rel_v,
                                        DeviceBuffer& y) {
    const char* op = "relative_attention_values";
    const std::size_t rows = check_attention_shape(batch, heads, length, channels, window, op);
    need(p, count(batch) * count(heads) * count(length) * count(length), "p", op);
    need(values, rows, "values", op);
    need(rel_v, rows > 0 ? std::size_t(2 * window + 1) * count(channels) : 0, "rel_v", op);
    need(y, rows, "y", op);
    if (rows == 0) return;
    distinct(p, y, "p and y", op);
    distinct(values, y, "values and y", op);
    distinct(rel_v, y, "rel_v and y", op);
    issue(q, [=, this, p = view(p), values = view(values), rel_v = view(rel_v),
              y = view(y)](Queue& on) mutable {
        relative_attention_values_impl(on, batch, heads, length, channels, window, p, values, rel_v,
                                       y);
    });
}

void Backend::broadcast_multiply(Queue& q, int rows, int cols, const DeviceBuffer& factors,
                                 bool per_row, DeviceBuffer& y) {
    const char* op = "broadcast_multiply";
    const std::size_t total = count(rows) * count(cols);
    need(y, total, "y", op);
    need(factors, total > 0 ? count(per_row ? rows : cols) : 0, "factors", op);
    if (total == 0) return;
    distinct(factors, y, "factors and y", op);
    issue(q, [=, this, factors = view(factors), y = view(y)](Queue& on) mutable {
        broadcast_multiply_impl(on, rows, cols, factors, per_row, y);
    });
}

void Backend::spline_inverse(Queue& q, int elements, int bins, float bound, float scale,
                             const DeviceBuffer& params, const DeviceBuffer& x, DeviceBuffer& y) {
    const char* op = "spline_inverse";
    if (bins < 1 || bins > 4096)
        reject(op, "bins (" + std::to_string(bins) + ") must be between 1 and 4096");
    if (!std::isfinite(bound) || !(bound > 0) || !std::isfinite(scale))
        reject(op, "bound (" + std::to_string(bound) + ") must be finite and positive, scale (" +
                       std::to_string(scale) + ") finite");
    const std::size_t n = count(elements);
    need(params, n * std::size_t(3 * bins - 1), "params", op);
    need(x, n, "x", op);
    need(y, n, "y", op);
    if (n == 0) return;
    distinct(params, y, "params and y", op);
    issue(q, [=, this, params = view(params), x = view(x), y = view(y)](Queue& on) mutable {
        spline_inverse_impl(on, elements, bins, bound, scale, params, x, y);
    });
}

}  // namespace etude::gpu
