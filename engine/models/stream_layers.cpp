#include "engine/models/stream_layers.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace etude::engine {
namespace {

constexpr const char* kTag = "vocoder stream state";

SignalRef ref(gpu::DeviceBuffer& b, int channels, int length) {
    return {&b, channels, length};
}

}  // namespace

gpu::DeviceBuffer& ScratchBuffer::need(gpu::Backend& backend, std::size_t floats) {
    if (buffer_.floats() < floats) {
        buffer_ = gpu::DeviceBuffer();
        // A quarter more: chunks vary a little in length.
        buffer_ = backend.allocate(std::max<std::size_t>(floats + floats / 4, 1), kTag);
    }
    return buffer_;
}

// ---- InputWindow --------------------------------------------------------------

InputWindow::InputWindow(gpu::Backend& backend, gpu::Queue& q, int channels, int hold, int prefill,
                         ScratchBuffer& work, HeldSpace* held)
    : backend_(backend), channels_(channels), hold_(hold), prefill_(prefill), work_(work) {
    if (channels <= 0 || hold < 0 || prefill < 0 || prefill > hold)
        throw std::invalid_argument("InputWindow: bad channels, hold or prefill");
    const std::size_t n = static_cast<std::size_t>(channels) * std::max(hold, 1);
    if (held)
        place_ = held->place(n);
    else
        own_tail_ = backend_.allocate(n, kTag);
    zeros_ = backend_.allocate(n, kTag);
    backend_.fill(q, zeros_, 0.0f, n);
    reset();
}

void InputWindow::reset() {
    // The zeros come from zeros_ when the tail is next read.
    held_ = -prefill_;
}

int InputWindow::append(gpu::Queue& q, const SignalRef& in, int zeros) {
    if (in.length > 0 && in.channels != channels_)
        throw std::invalid_argument("InputWindow: input has the wrong channel count");
    if (zeros > hold_) throw std::invalid_argument("InputWindow: more zeros than the window holds");
    // held_ < 0: a fresh signal whose -held_ leading samples are zeros.
    const int held = std::abs(held_);
    const int m = std::max(in.length, 0);
    const int length = held + m + zeros;
    if (length == 0) return 0;
    auto& work = work_.need(backend_, static_cast<std::size_t>(channels_) * length);
    const std::size_t L = static_cast<std::size_t>(length);
    if (held > 0)
        backend_.copy_rows(q, channels_, held, held_ < 0 ? zeros_ : tail(),
                           held_ < 0 ? 0 : tail_at(), static_cast<std::size_t>(std::max(hold_, 1)),
                           work, 0, L);
    if (m > 0)
        backend_.copy_rows(q, channels_, m, *in.buffer, 0, static_cast<std::size_t>(in.length),
                           work, static_cast<std::size_t>(held), L);
    if (zeros > 0)
        backend_.copy_rows(q, channels_, zeros, zeros_, 0, static_cast<std::size_t>(hold_), work,
                           static_cast<std::size_t>(held + m), L);
    const int keep = std::min(length, hold_);
    if (keep > 0)
        backend_.copy_rows(q, channels_, keep, work, static_cast<std::size_t>(length - keep), L,
                           tail(), tail_at(), static_cast<std::size_t>(hold_));
    take(length);
    return length;
}

// ---- WeightedStreamLayer ----------------------------------------------------------

WeightedStreamLayer::WeightedStreamLayer(gpu::Backend& backend, gpu::Queue& q,
                                         const gpu::Conv1dShape& shape,
                                         const gpu::DeviceBuffer& weight,
                                         const gpu::DeviceBuffer& bias,
                                         std::optional<float> input_slope, int hold, int prefill,
                                         StreamScratch& scratch, ScratchBuffer& out,
                                         HeldSpace* held)
    : backend_(backend),
      shape_(shape),
      weight_(weight),
      bias_(bias),
      slope_(input_slope),
      scratch_(scratch),
      window_(backend, q, shape.in_channels, hold, prefill, scratch.window, held),
      out_(out) {}

void WeightedStreamLayer::activate(gpu::Queue& q, int length) {
    if (slope_)
        backend_.activation(q, gpu::Activation::LeakyRelu, window_.work(), window_.work(),
                            static_cast<std::size_t>(shape_.in_channels) * length, *slope_);
}

// ---- StreamConv -----------------------------------------------------------------

bool StreamConv::supports(const gpu::Conv1dShape& s) {
    return s.stride == 1 && s.padding >= 0 && (s.kernel - 1) * s.dilation == 2 * s.padding;
}

StreamConv::StreamConv(gpu::Backend& backend, gpu::Queue& q, const gpu::Conv1dShape& shape,
                       const gpu::DeviceBuffer& weight, const gpu::DeviceBuffer& bias,
                       std::optional<float> input_slope, StreamScratch& scratch, ScratchBuffer& out,
                       HeldSpace* held)
    : WeightedStreamLayer(backend, q, shape, weight, bias, input_slope,
                          supports(shape) ? 2 * shape.padding : 0,
                          supports(shape) ? shape.padding : 0, scratch, out, held) {
    if (!supports(shape)) throw std::invalid_argument("StreamConv: not a same-padded conv1d");
}

StreamConv::Staged StreamConv::plan(int in_length, bool flush) const {
    Staged st;
    st.length =
        std::abs(window_.held_state()) + std::max(in_length, 0) + (flush ? shape_.padding : 0);
    st.count = std::max(run_outputs(st.length), 0);
    return st;
}

StreamConv::Staged StreamConv::stage(gpu::Queue& q, const SignalRef& in, bool flush) {
    const Staged st = plan(in.length, flush);
    window_.append(q, in, flush ? shape_.padding : 0);
    if (st.count > 0) activate(q, st.length);
    return st;
}

gpu::Conv1dShape StreamConv::run_shape(int batch, int length) const {
    gpu::Conv1dShape s = shape_;
    s.batch = batch;
    s.in_length = length;
    s.padding = 0;  // the window holds it
    return s;
}

// ---- StreamUpsample ---------------------------------------------------------------

bool StreamUpsample::supports(const gpu::Conv1dShape& s) {
    const int extra = s.kernel - s.stride;  // (kernel - stride) = 2 * padding
    return s.stride >= 1 && s.dilation == 1 && s.groups == 1 && extra >= 0 &&
           extra % s.stride == 0 && extra == 2 * s.padding;
}

int StreamUpsample::tail(const gpu::Conv1dShape& s) {
    return supports(s) ? (s.kernel - s.stride) / s.stride : 0;
}

StreamUpsample::StreamUpsample(gpu::Backend& backend, gpu::Queue& q, const gpu::Conv1dShape& shape,
                               const gpu::DeviceBuffer& weight, const gpu::DeviceBuffer& bias,
                               std::optional<float> input_slope, StreamScratch& scratch,
                               ScratchBuffer& out, HeldSpace* held)
    : WeightedStreamLayer(backend, q, shape, weight, bias, input_slope, tail(shape), tail(shape),
                          scratch, out, held) {
    if (!supports(shape))
        throw std::invalid_argument(
            "StreamUpsample: kernel - stride must be 2 x padding, a "
            "multiple of the stride");
}

void StreamUpsample::reset() {
    window_.reset();
    in_total_ = out_total_ = full_total_ = 0;
}

StreamUpsample::Staged StreamUpsample::plan(int in_length, bool flush) const {
    const int u = shape_.stride, m = std::max(in_length, 0);
    Staged st;
    st.length = std::abs(window_.held_state()) + m + (flush ? tail(shape_) : 0);
    const int full = run_outputs(st.length);
    // Outputs before the signal's start still to drop (the first `padding`
    // of a signal lie before its start, the layer's own padding; a first
    // chunk may make fewer than that when the kernel spans 3+ strides).
    st.first = std::clamp<long>(shape_.padding - full_total_, 0, full);
    st.count = full - st.first;
    if (flush) st.count = std::min<long>(st.count, (in_total_ + m) * u - out_total_);
    st.count = std::max<long>(st.count, 0);
    return st;
}

void StreamUpsample::count(const Staged& st, int in_length) {
    in_total_ += std::max(in_length, 0);
    full_total_ += run_outputs(st.length);
    out_total_ += st.count;
}

StreamUpsample::Staged StreamUpsample::stage(gpu::Queue& q, const SignalRef& in, bool flush) {
    const Staged st = plan(in.length, flush);
    window_.append(q, in, flush ? tail(shape_) : 0);
    count(st, in.length);
    if (st.count > 0) activate(q, st.length);
    return st;
}

gpu::Conv1dShape StreamUpsample::run_shape(int batch, int length) const {
    gpu::Conv1dShape s = shape_;
    s.batch = batch;
    s.in_length = length;
    s.padding = tail(shape_) * shape_.stride;
    return s;
}

void WeightedStreamLayer::hold_bias(gpu::Queue& q, HeldSpace& held) {
    if (!bias_) return;
    const std::size_t n = static_cast<std::size_t>(shape_.out_channels);
    bias_place_ = held.place(n);
    backend_.copy_rows(q, 1, static_cast<int>(n), bias_, 0, n, *bias_place_.buffer, bias_place_.at,
                       n);
}

// ---- the layer's call, alone or beside other streams' --------------------------------

SignalRef WeightedStreamLayer::run_alone(gpu::Queue& q, const Staged& st) {
    if (st.count <= 0) return ref(out_.get(), shape_.out_channels, 0);
    const gpu::Conv1dShape s = run_shape(1, st.length);
    const int made = run_outputs(st.length);
    const std::size_t rows = static_cast<std::size_t>(shape_.out_channels);
    if (st.first == 0 && st.count == made) {
        // Every output is handed out: made where it goes.
        auto& out = out_.need(backend_, rows * made);
        launch(q, s, window_.work(), out);
        return ref(out, shape_.out_channels, made);
    }
    auto& made_buf = scratch_.staging.need(backend_, rows * made);
    launch(q, s, window_.work(), made_buf);
    return hand_out(q, made_buf, 0, static_cast<std::size_t>(made), st);
}

SignalRef WeightedStreamLayer::hand_out(gpu::Queue& q, const gpu::DeviceBuffer& from,
                                        std::size_t at, std::size_t stride, const Staged& st) {
    const std::size_t count = static_cast<std::size_t>(st.count);
    auto& out = out_.need(backend_, static_cast<std::size_t>(shape_.out_channels) * count);
    backend_.copy_rows(q, shape_.out_channels, static_cast<int>(count), from,
                       at + static_cast<std::size_t>(st.first), stride, out, 0, count);
    return ref(out, shape_.out_channels, static_cast<int>(count));
}

namespace {

// The steps whose windows have the same length and make outputs, through
// layers of the same weights and bias (`same(i, j)`), in groups of two or
// more: each group runs as one call of batch size its count.
template <class Staged, class Same>
std::vector<std::vector<std::size_t>> batches_of(const std::vector<Staged>& staged,
                                                 const Same& same) {
    std::vector<std::vector<std::size_t>> groups;
    std::vector<bool> taken(staged.size(), false);
    for (std::size_t i = 0; i < staged.size(); ++i) {
        if (taken[i] || staged[i].count <= 0) continue;
        std::vector<std::size_t> g{i};
        for (std::size_t j = i + 1; j < staged.size(); ++j)
            if (!taken[j] && staged[j].count > 0 && staged[j].length == staged[i].length &&
                same(i, j)) {
                g.push_back(j);
                taken[j] = true;
            }
        if (g.size() > 1) groups.push_back(std::move(g));
    }
    return groups;
}

}  // namespace

void JointPush::push_together(gpu::Queue& q, std::span<LayerStep> steps, JointScratch& joint) {
    if (steps.empty()) return;
    WeightedStreamLayer& first = *steps[0].layer;
    gpu::Backend& backend = first.backend_;
    const gpu::Conv1dShape& shape = first.shape_;
    std::vector<WeightedStreamLayer::Staged> staged;
    for (auto& step : steps) staged.push_back(step.layer->stage(q, step.in, step.flush));
    std::vector<bool> done(steps.size(), false);
    const auto same = [&](std::size_t i, std::size_t j) {
        return steps[i].layer->same_weights_and_bias(*steps[j].layer);
    };
    for (const auto& group : batches_of(staged, same)) {
        // The group's windows one after another ([batch][channels][length]),
        // one call over them, and each stream's outputs out of its item.
        const int length = staged[group[0]].length, made = first.run_outputs(length);
        const std::size_t in_each = static_cast<std::size_t>(shape.in_channels) * length;
        auto& in = joint.in.need(backend, in_each * group.size());
        for (std::size_t b = 0; b < group.size(); ++b)
            backend.copy_rows(q, shape.in_channels, length, steps[group[b]].layer->window_.work(),
                              0, static_cast<std::size_t>(length), in, b * in_each,
                              static_cast<std::size_t>(length));
        const std::size_t out_each = static_cast<std::size_t>(shape.out_channels) * made;
        auto& out = joint.out.need(backend, out_each * group.size());
        ++joint.batched_calls;
        WeightedStreamLayer& lead = *steps[group[0]].layer;
        lead.launch(q, lead.run_shape(static_cast<int>(group.size()), length), in, out);
        for (std::size_t b = 0; b < group.size(); ++b) {
            const std::size_t i = group[b];
            steps[i].out = steps[i].layer->hand_out(q, out, b * out_each,
                                                    static_cast<std::size_t>(made), staged[i]);
            done[i] = true;
        }
    }
    for (std::size_t i = 0; i < steps.size(); ++i)
        if (!done[i]) steps[i].out = steps[i].layer->run_alone(q, staged[i]);
}

// ---- StreamDelay ------------------------------------------------------------------

StreamDelay::StreamDelay(gpu::Backend& backend, gpu::Queue& q, int channels, int delay,
                         ScratchBuffer& out, HeldSpace* held)
    : backend_(backend), channels_(channels), delay_(delay), out_(out) {
    if (channels <= 0 || delay < 0)
        throw std::invalid_argument("StreamDelay: bad channels or delay");
    const std::size_t n = static_cast<std::size_t>(channels) * std::max(delay, 1);
    // (Zeroed where they are the delay's own; a place is written before it
    // is read: a push reads only the samples an earlier one held.)
    if (held) place_ = held->place(n);
    for (auto& t : own_) {
        if (held && &t == &own_[0]) continue;
        t = backend_.allocate(n, kTag);
        backend_.fill(q, t, 0.0f, n);
    }
}

SignalRef StreamDelay::push(gpu::Queue& q, const SignalRef& in, bool flush) {
    const int m = std::max(in.length, 0);
    if (m > 0 && in.channels != channels_)
        throw std::invalid_argument("StreamDelay: input has the wrong channel count");
    if (m > 0 && in.buffer == &out_.get())
        throw std::invalid_argument("StreamDelay: output buffer is the input's");
    // The signal so far, not yet handed out: [held | in], `total` long. The
    // first n of it go out; the rest is held.
    const int total = held_ + m;
    const int n = handed_out(total, flush);
    const auto rows = [](int len) { return static_cast<std::size_t>(std::max(len, 1)); };
    const std::size_t hold = rows(delay_);
    if (n > 0) {
        auto& out = out_.need(backend_, static_cast<std::size_t>(channels_) * n);
        const std::size_t N = static_cast<std::size_t>(n);
        const int from_held = std::min(held_, n);
        if (from_held > 0)
            backend_.copy_rows(q, channels_, from_held, tail(), tail_at(), hold, out, 0, N);
        if (n > from_held)
            backend_.copy_rows(q, channels_, n - from_held, *in.buffer, 0, rows(in.length), out,
                               static_cast<std::size_t>(from_held), N);
    }
    // What is left, [held | in] from n on, becomes the held samples.
    const int keep = total - n;
    if (keep > 0) {
        const int old_part = std::max(held_ - n, 0);  // still from the old held samples
        // All from the input: straight into tail() (its old samples went
        // out above); else gathered in own_[1] and copied back.
        gpu::DeviceBuffer& gather = old_part > 0 ? own_[1] : tail();
        const std::size_t gather_at = old_part > 0 ? 0 : tail_at();
        if (old_part > 0)
            backend_.copy_rows(q, channels_, old_part, tail(), tail_at() + n, hold, gather, 0,
                               hold);
        if (keep > old_part)
            backend_.copy_rows(q, channels_, keep - old_part, *in.buffer,
                               static_cast<std::size_t>(m - (keep - old_part)), rows(in.length),
                               gather, gather_at + static_cast<std::size_t>(old_part), hold);
        if (old_part > 0)
            backend_.copy_rows(q, channels_, keep, own_[1], 0, hold, tail(), tail_at(), hold);
    }
    held_ = keep;
    return ref(out_.get(), channels_, n);
}

}  // namespace etude::engine
