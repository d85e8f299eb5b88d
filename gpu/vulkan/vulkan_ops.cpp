// The Vulkan backend's operations: each fills its shader's push-constant
// block (the same fields, in the same order, as the `Args` block of
// gpu/vulkan/shaders/NAME.comp: keep the two in step) and records one
// dispatch. Arguments were checked by gpu::Backend before these run.
#include <cstring>
#include <vector>

#include "gpu/kernels/activation_code.h"
#include "gpu/vulkan/vulkan_backend_state.h"

namespace etude::gpu {
namespace {

using Address = std::uint64_t;

// 0 for an empty buffer: a shape may name one it never reads (a
// convolution of an input of length 0 whose output is all padding).
Address address(const DeviceBuffer& b) {
    return b ? allocation_of(b).address : 0;
}

struct ConvArgs {
    Address x, w, bias, y;
    std::uint64_t total;
    std::int32_t has_bias, in_ch, out_ch, in_len, taps, stride, dilation, padding, groups, out_len,
        transposed;
};

// The conv1d.comp block of a convolution (or, `transposed`, a transposed
// one) whose output rows are `out_len` long. Without a bias the shader still
// gets a valid address (see conv1d.comp).
ConvArgs conv_args(const Conv1dShape& sh, const DeviceBuffer& x, const DeviceBuffer& w,
                   const DeviceBuffer& bias, const DeviceBuffer& y, int out_len, int transposed) {
    return {address(x),
            address(w),
            bias ? address(bias) : address(y),
            address(y),
            std::uint64_t(sh.batch) * sh.out_channels * out_len,
            bias ? 1 : 0,
            sh.in_channels,
            sh.out_channels,
            sh.in_length,
            sh.kernel,
            sh.stride,
            sh.dilation,
            sh.padding,
            sh.groups,
            out_len,
            transposed};
}

// What a convolution reads and writes (conv1d.comp).
vk::BufferAccess conv_access(const ConvArgs& a) {
    return {{a.x, a.w, a.bias}, {a.y}};
}

}  // namespace

void VulkanBackend::copy_to_device_impl(Queue& q, DeviceBuffer& dst, std::size_t dst_offset,
                                        const float* src, std::size_t floats) {
    auto& s = begin(q, "h2d");
    guarded([&] {
        s.upload(src, allocation_of(dst), dst_offset * sizeof(float), floats * sizeof(float));
    });
}

void VulkanBackend::copy_to_host_impl(Queue& q, float* dst, const DeviceBuffer& src,
                                      std::size_t src_offset, std::size_t floats) {
    auto& s = begin(q, "d2h");
    guarded([&] {
        s.download(allocation_of(src), src_offset * sizeof(float), dst, floats * sizeof(float));
    });
}

void VulkanBackend::fill_impl(Queue& q, DeviceBuffer& dst, float value, std::size_t floats) {
    auto& s = begin(q, "fill");
    std::uint32_t pattern;
    std::memcpy(&pattern, &value, sizeof pattern);
    guarded([&] { s.fill(allocation_of(dst), floats * sizeof(float), pattern, "fill"); });
}

void VulkanBackend::activation_impl(Queue& q, Activation f, const DeviceBuffer& x, DeviceBuffer& y,
                                    std::size_t n, float alpha) {
    const char* op = to_string(f);
    auto& s = begin(q, op);
    struct {
        Address x, y;
        std::uint64_t n;
        std::int32_t op;
        float alpha;
    } args{address(x), address(y), n, activation_code(f), alpha};
    launch(s, vk::Kernel::Activation, args, n, op, {{args.x}, {args.y}});
}

void VulkanBackend::axpby_impl(Queue& q, std::size_t n, float alpha, const DeviceBuffer& x,
                               float beta, DeviceBuffer& y) {
    auto& s = begin(q, "axpby");
    struct {
        Address x, y;
        std::uint64_t n;
        float alpha, beta;
    } args{address(x), address(y), n, alpha, beta};
    launch(s, vk::Kernel::Axpby, args, n, "axpby", {{args.x, args.y}, {args.y}});
}

void VulkanBackend::gemm_impl(Queue& q, bool trans_a, bool trans_b, int m, int n, int k,
                              float alpha, const DeviceBuffer& a, int lda, const DeviceBuffer& b,
                              int ldb, float beta, DeviceBuffer& c, int ldc) {
    auto& s = begin(q, "gemm");
    struct {
        Address a, b, c;
        std::int32_t trans_a, trans_b, m, n, k, lda, ldb, ldc;
        float alpha, beta;
    } args{address(a), address(b), address(c), trans_a, trans_b, m,   n,
           k,          lda,        ldb,        ldc,     alpha,   beta};
    // On the host's cores (lavapipe) barriers cost more than the loads that
    // tiles save: there, one invocation per element, in the same order.
    constexpr int kTile = 16;  // gemm.comp's TS
    const std::uint64_t col_groups = (std::uint64_t(n) + kTile - 1) / kTile;
    // The tiled shader's columns of tiles are its x groups, at most 65535.
    // C is read too (beta times it is added).
    const vk::BufferAccess access{{args.a, args.b, args.c}, {args.c}};
    if (!s_->tiled || col_groups > 65535) {
        launch(s, vk::Kernel::GemmDirect, args, std::uint64_t(m) * n, "gemm", access);
        return;
    }
    const std::uint64_t row_groups =
        std::min<std::uint64_t>((std::uint64_t(m) + kTile - 1) / kTile, 65535);
    guarded([&] {
        s.dispatch(vk::Kernel::Gemm, &args, sizeof args, std::uint32_t(col_groups),
                   std::uint32_t(row_groups), "gemm", access);
    });
}

void VulkanBackend::conv1d_impl(Queue& q, const Conv1dShape& sh, const DeviceBuffer& x,
                                const DeviceBuffer& w, const DeviceBuffer& bias, DeviceBuffer& y) {
    auto& s = begin(q, "conv1d");
    const int out_len = sh.conv_out_length();
    const ConvArgs args = conv_args(sh, x, w, bias, y, out_len, 0);
    const vk::BufferAccess access = conv_access(args);
    // Tiles of 16 channels x 16 positions (conv1d_tiled.comp) on GPUs, for
    // an ungrouped layer whose taps and input stretch fit its shared arrays.
    constexpr long kTile = 16, kMaxSpan = 1024, kMaxTaps = 64;
    const long span = (kTile - 1) * sh.stride + long(sh.kernel - 1) * sh.dilation + 1;
    const long t_groups = (out_len + kTile - 1) / kTile;
    const long c_groups = (sh.out_channels + kTile - 1) / kTile;
    if (s_->tiled && sh.groups == 1 && sh.kernel <= kMaxTaps && span <= kMaxSpan &&
        t_groups <= 65535 && c_groups <= 65535 && sh.batch <= 65535) {
        guarded([&] {
            s.dispatch(vk::Kernel::Conv1dTiled, &args, sizeof args, std::uint32_t(t_groups),
                       std::uint32_t(c_groups), "conv1d", access, std::uint32_t(sh.batch));
        });
        return;
    }
    launch(s, vk::Kernel::Conv1d, args, args.total, "conv1d", access);
}

void VulkanBackend::conv_transpose1d_impl(Queue& q, const Conv1dShape& sh, const DeviceBuffer& x,
                                          const DeviceBuffer& w, const DeviceBuffer& bias,
                                          DeviceBuffer& y) {
    auto& s = begin(q, "conv_transpose1d");
    const ConvArgs args = conv_args(sh, x, w, bias, y, sh.transpose_out_length(), 1);
    launch(s, vk::Kernel::Conv1d, args, args.total, "conv_transpose1d", conv_access(args));
}

void VulkanBackend::layer_norm_impl(Queue& q, int rows, int cols, float eps, const DeviceBuffer& x,
                                    const DeviceBuffer& gamma, const DeviceBuffer& beta,
                                    DeviceBuffer& y) {
    auto& s = begin(q, "layer_norm");
    struct {
        Address x, gamma, beta, y;
        std::int32_t rows, cols;
        float eps;
    } args{address(x), address(gamma), address(beta), address(y), rows, cols, eps};
    guarded([&] {
        s.dispatch(vk::Kernel::LayerNorm, &args, sizeof args, std::uint32_t(std::min(rows, 65535)),
                   1, "layer_norm", {{args.x, args.gamma, args.beta}, {args.y}});
    });
}

void VulkanBackend::copy_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& src,
                                   std::size_t src_offset, std::size_t src_stride,
                                   DeviceBuffer& dst, std::size_t dst_offset,
                                   std::size_t dst_stride) {
    auto& s = begin(q, "copy_rows");
    const std::size_t c = static_cast<std::size_t>(cols);
    if (rows == 1 || (src_stride == c && dst_stride == c)) {
        // One run of floats: one copy region.
        const VkBufferCopy region{src_offset * sizeof(float), dst_offset * sizeof(float),
                                  std::size_t(rows) * c * sizeof(float)};
        guarded([&] { s.copy(allocation_of(src), allocation_of(dst), &region, 1, "copy_rows"); });
        return;
    }
    // Strided rows: one dispatch (copy_rows.comp), not a copy region per row:
    // a vocoder's stream copies hundreds of channel rows per layer and chunk,
    // and NVIDIA's driver makes every region its own copy, which leaves a
    // streamed HiFi-GAN ten times slower than a whole run
    // (docs/benchmarks.md, "First GPU run").
    struct {
        Address src, dst;
        std::uint64_t total, src_at, src_stride, dst_at, dst_stride;
        std::int32_t cols;
    } args{address(src), address(dst), std::uint64_t(rows) * c, src_offset, src_stride, dst_offset,
           dst_stride,   cols};
    launch(s, vk::Kernel::CopyRows, args, args.total, "copy_rows", {{args.src}, {args.dst}});
}

void VulkanBackend::transpose_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                   DeviceBuffer& y) {
    auto& s = begin(q, "transpose");
    const std::uint64_t total = std::uint64_t(rows) * cols;
    struct {
        Address x, y;
        std::uint64_t total;
        std::int32_t rows, cols;
    } args{address(x), address(y), total, rows, cols};
    launch(s, vk::Kernel::Transpose, args, total, "transpose", {{args.x}, {args.y}});
}

void VulkanBackend::add_bias_impl(Queue& q, int rows, int cols, const DeviceBuffer& bias,
                                  bool per_row, DeviceBuffer& y) {
    auto& s = begin(q, "add_bias");
    const std::uint64_t total = std::uint64_t(rows) * cols;
    struct {
        Address bias, y;
        std::uint64_t total;
        std::int32_t cols, per_row;
    } args{address(bias), address(y), total, cols, per_row ? 1 : 0};
    launch(s, vk::Kernel::AddBias, args, total, "add_bias", {{args.bias, args.y}, {args.y}});
}

void VulkanBackend::polar_spectrum_impl(Queue& q, int frames, int bins, float max_magnitude,
                                        const DeviceBuffer& x, DeviceBuffer& y) {
    auto& s = begin(q, "polar_spectrum");
    const std::uint64_t total = std::uint64_t(frames) * bins;
    struct {
        Address x, y;
        std::uint64_t total;
        std::int32_t bins;
        float max_magnitude;
    } args{address(x), address(y), total, bins, max_magnitude};
    launch(s, vk::Kernel::PolarSpectrum, args, total, "polar_spectrum", {{args.x}, {args.y}});
}

void VulkanBackend::frame_signal_impl(Queue& q, const DeviceBuffer& signal, int n_fft, int hop,
                                      int n_frames, const DeviceBuffer& window,
                                      DeviceBuffer& frames) {
    auto& s = begin(q, "frame_signal");
    const std::uint64_t total = std::uint64_t(n_fft) * n_frames;
    struct {
        Address signal, window, frames;
        std::uint64_t total;
        std::int32_t n_fft, hop;
    } args{address(signal), address(window), address(frames), total, n_fft, hop};
    launch(s, vk::Kernel::FrameSignal, args, total, "frame_signal",
           {{args.signal, args.window}, {args.frames}});
}

void VulkanBackend::overlap_add_impl(Queue& q, const DeviceBuffer& frames, int n_fft, int hop,
                                     int n_frames, const DeviceBuffer& window, DeviceBuffer& out) {
    auto& s = begin(q, "overlap_add");
    const std::uint64_t total = std::uint64_t(n_frames - 1) * hop + n_fft;
    struct {
        Address frames, window, out;
        std::uint64_t total;
        std::int32_t n_fft, hop, n_frames;
    } args{address(frames), address(window), address(out), total, n_fft, hop, n_frames};
    launch(s, vk::Kernel::OverlapAdd, args, total, "overlap_add",
           {{args.frames, args.window}, {args.out}});
}

void VulkanBackend::complex_multiply_impl(Queue& q, const DeviceBuffer& a, const DeviceBuffer& b,
                                          DeviceBuffer& c, std::size_t n) {
    auto& s = begin(q, "complex_multiply");
    struct {
        Address a, b, c;
        std::uint64_t n;
    } args{address(a), address(b), address(c), n};
    launch(s, vk::Kernel::ComplexMultiply, args, n, "complex_multiply",
           {{args.a, args.b}, {args.c}});
}

void VulkanBackend::complex_exp_impl(Queue& q, const DeviceBuffer& x, DeviceBuffer& y,
                                     std::size_t n) {
    auto& s = begin(q, "complex_exp");
    struct {
        Address x, y;
        std::uint64_t n;
    } args{address(x), address(y), n};
    launch(s, vk::Kernel::ComplexExp, args, n, "complex_exp", {{args.x}, {args.y}});
}

void VulkanBackend::minimum_phase_fold_impl(Queue& q, int n, int batch, const DeviceBuffer& x,
                                            DeviceBuffer& y) {
    auto& s = begin(q, "minimum_phase_fold");
    const std::uint64_t total = std::uint64_t(n) * batch;
    struct {
        Address x, y;
        std::uint64_t total;
        std::int32_t n;
    } args{address(x), address(y), total, n};
    launch(s, vk::Kernel::MinimumPhaseFold, args, total, "minimum_phase_fold",
           {{args.x}, {args.y}});
}

void VulkanBackend::gated_tanh_impl(Queue& q, int batch, int channels, int length,
                                    const DeviceBuffer& x, DeviceBuffer& y) {
    auto& s = begin(q, "gated_tanh");
    const std::uint64_t item_size = std::uint64_t(channels) * length;
    struct {
        Address x, y;
        std::uint64_t item_size, batch;
    } args{address(x), address(y), item_size, std::uint64_t(batch)};
    // x groups over an item's outputs, y groups over the items (each
    // capped at 65535 as launch() caps x; the shader's loops cover the rest).
    const std::uint64_t groups = std::min<std::uint64_t>((item_size + 255) / 256, 65535);
    const std::uint64_t item_groups = std::min<std::uint64_t>(std::uint64_t(batch), 65535);
    guarded([&] {
        s.dispatch(vk::Kernel::GatedTanh, &args, sizeof args, std::uint32_t(groups),
                   std::uint32_t(item_groups), "gated_tanh", {{args.x}, {args.y}});
    });
}

void VulkanBackend::softmax_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                      DeviceBuffer& y) {
    auto& s = begin(q, "softmax_rows");
    struct {
        Address x, y;
        std::uint64_t rows;
        std::int32_t cols;
    } args{address(x), address(y), std::uint64_t(rows), cols};
    launch(s, vk::Kernel::SoftmaxRows, args, args.rows, "softmax_rows", {{args.x}, {args.y}});
}

void VulkanBackend::relative_attention_scores_impl(
    Queue& q, int batch, int heads, int length, int channels, int window, float scale,
    const DeviceBuffer& queries, const DeviceBuffer& keys, const DeviceBuffer& rel_k,
    const DeviceBuffer& key_mask, DeviceBuffer& scores) {
    const char* op = "relative_attention_scores";
    auto& s = begin(q, op);
    struct {
        Address q, k, rel_k, mask, scores;
        std::uint64_t total;
        std::int32_t heads, length, channels, window;
        float scale;
        std::int32_t has_mask;
    } args{address(queries),
           address(keys),
           address(rel_k),
           key_mask ? address(key_mask) : address(keys),
           address(scores),
           std::uint64_t(batch) * heads * length * length,
           heads,
           length,
           channels,
           window,
           scale,
           key_mask ? 1 : 0};
    launch(s, vk::Kernel::RelativeAttentionScores, args, args.total, op,
           {{args.q, args.k, args.rel_k, args.mask}, {args.scores}});
}

void VulkanBackend::relative_attention_values_impl(Queue& q, int batch, int heads, int length,
                                                   int channels, int window, const DeviceBuffer& p,
                                                   const DeviceBuffer& values,
                                                   const DeviceBuffer& rel_v, DeviceBuffer& y) {
    const char* op = "relative_attention_values";
    auto& s = begin(q, op);
    struct {
        Address p, v, rel_v, y;
        std::uint64_t total;
        std::int32_t heads, length, channels, window;
    } args{address(p),
           address(values),
           address(rel_v),
           address(y),
           std::uint64_t(batch) * length * heads * channels,
           heads,
           length,
           channels,
           window};
    launch(s, vk::Kernel::RelativeAttentionValues, args, args.total, op,
           {{args.p, args.v, args.rel_v}, {args.y}});
}

void VulkanBackend::copy_slot_rows_impl(Queue& q, const SlotRows& r, const DeviceBuffer& index,
                                        bool from_slots, const DeviceBuffer& src,
                                        DeviceBuffer& dst) {
    const char* op = from_slots ? "gather_slot_rows" : "scatter_slot_rows";
    auto& s = begin(q, op);
    struct {
        Address index, src, dst;
        std::uint64_t total, slot_at, slot_floats, slot_stride, batch_at, batch_stride;
        std::int32_t rows, cols, slots, from_slots;
    } args{address(index),
           address(src),
           address(dst),
           std::uint64_t(r.items) * std::uint64_t(r.rows) * std::uint64_t(r.cols),
           r.slot_at,
           r.slot_floats,
           r.slot_stride,
           r.batch_at,
           r.batch_stride,
           r.rows,
           r.cols,
           r.slots,
           from_slots ? 1 : 0};
    launch(s, vk::Kernel::CopySlotRows, args, args.total, op, {{args.index, args.src}, {args.dst}});
}

void VulkanBackend::broadcast_multiply_impl(Queue& q, int rows, int cols,
                                            const DeviceBuffer& factors, bool per_row,
                                            DeviceBuffer& y) {
    auto& s = begin(q, "broadcast_multiply");
    const std::uint64_t total = std::uint64_t(rows) * cols;
    struct {
        Address factors, y;
        std::uint64_t total;
        std::int32_t cols, per_row;
    } args{address(factors), address(y), total, cols, per_row ? 1 : 0};
    launch(s, vk::Kernel::BroadcastMultiply, args, total, "broadcast_multiply",
           {{args.factors, args.y}, {args.y}});
}

void VulkanBackend::spline_inverse_impl(Queue& q, int count, int bins, float bound, float scale,
                                        const DeviceBuffer& params, const DeviceBuffer& x,
                                        DeviceBuffer& y) {
    auto& s = begin(q, "spline_inverse");
    struct {
        Address params, x, y;
        std::uint64_t total;
        std::int32_t bins;
        float bound, scale;
    } args{address(params), address(x), address(y), std::uint64_t(count), bins, bound, scale};
    launch(s, vk::Kernel::SplineInverse, args, args.total, "spline_inverse",
           {{args.params, args.x}, {args.y}});
}

}  // namespace etude::gpu
