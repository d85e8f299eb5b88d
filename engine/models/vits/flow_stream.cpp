#include "engine/models/vits/flow_stream.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <string>

#include "engine/error.h"

namespace etude::engine {

namespace {

gpu::Conv1dShape conv_shape(const VitsFlowConv& c, int length) {
    gpu::Conv1dShape s;
    s.in_channels = c.in;
    s.out_channels = c.out;
    s.in_length = length;
    s.kernel = c.k;
    s.padding = (c.k - 1) / 2;
    return s;
}

// Waits for the queue when a push is cut short by an exception, so that
// nothing still queued writes the lent buffers once they are given back.
class FinishOnUnwind {
  public:
    FinishOnUnwind(gpu::Backend& b, gpu::Queue& q) : b_(b), q_(q) {}
    FinishOnUnwind(const FinishOnUnwind&) = delete;
    FinishOnUnwind& operator=(const FinishOnUnwind&) = delete;
    ~FinishOnUnwind() {
        if (std::uncaught_exceptions() <= unwinding_) return;
        try {
            b_.synchronize(q_);
        } catch (...) {
        }
    }

  private:
    gpu::Backend& b_;
    gpu::Queue& q_;
    int unwinding_ = std::uncaught_exceptions();
};

}  // namespace

// One WaveNet layer: its dilated convolution (which lags its input by half
// its kernel), the delay that lines the residual signal up with it, and the
// delay that lines its skip output up with the last layer's.
struct VitsFlowStream::Layer {
    StreamConv conv;
    std::optional<StreamDelay> residual_delay;  // not for the last layer
    std::optional<StreamDelay> skip_delay;      // not for the last layer
};

// A coupling: its layers, and the delays that line the half it reads (passed
// through) and the half it shifts up with the WaveNet's output.
struct VitsFlowStream::Coupling {
    const VitsFlowCoupling* weights = nullptr;
    std::vector<std::unique_ptr<Layer>> layers;
    std::optional<StreamDelay> from_delay, to_delay;
};

VitsFlowStream::~VitsFlowStream() = default;

VitsFlowStream::VitsFlowStream(std::shared_ptr<const VitsFlowNetwork> network, int min_push)
    : VitsFlowStream(*network, min_push) {
    owner_ = std::move(network);
}

VitsFlowStream::VitsFlowStream(const VitsFlowNetwork& network, int min_push)
    : net_(network), queue_(network.backend().create_queue()), min_push_(std::max(min_push, 1)) {
    auto& b = net_.backend();
    auto& q = *queue_;
    const int hid = net_.hidden(), half = net_.channels() / 2, pad = (net_.kernel() - 1) / 2;
    const auto& all = net_.couplings();
    for (std::size_t k = 0; k < all.size(); ++k) {
        const VitsFlowCoupling& w = all[k];
        Coupling c;
        c.weights = &w;
        // Coupling k reads the halves from pair k % 2 of halves_ and leaves
        // them in the other pair (pair 0 takes the prior).
        const int out_pair = 1 - static_cast<int>(k % 2);
        const int layers = static_cast<int>(w.in_layers.size());
        for (int l = 0; l < layers; ++l) {
            auto layer = std::make_unique<Layer>(
                Layer{StreamConv(b, q, conv_shape(w.in_layers[std::size_t(l)], 0),
                                 w.in_layers[std::size_t(l)].w, w.in_layers[std::size_t(l)].b,
                                 std::nullopt, scratch_, conv_),
                      std::nullopt, std::nullopt});
            if (l < layers - 1) {
                layer->residual_delay.emplace(b, q, hid, pad, x_[(l + 1) % 2]);
                layer->skip_delay.emplace(b, q, hid, (layers - 1 - l) * pad, skip_delayed_);
            }
            c.layers.push_back(std::move(layer));
        }
        // The half the WaveNet reads keeps its place; the other is shifted.
        const int from = w.mirrored ? 1 : 0;
        c.from_delay.emplace(b, q, half, layers * pad, halves_[2 * out_pair + from]);
        c.to_delay.emplace(b, q, half, layers * pad, halves_[2 * out_pair + 1 - from]);
        couplings_.push_back(std::move(c));
    }
    b.synchronize(q);
}

void VitsFlowStream::reset() {
    // A push cut short by an error may have left an upload from host_in_
    // pending; it must land before host_in_ is written again. A device
    // error here shows again on the next push, which reports it.
    try {
        net_.backend().synchronize(*queue_);
    } catch (const std::exception&) {
    }
    for (auto& c : couplings_) {
        for (auto& l : c.layers) {
            l->conv.reset();
            if (l->residual_delay) l->residual_delay->reset();
            if (l->skip_delay) l->skip_delay->reset();
        }
        c.from_delay->reset();
        c.to_delay->reset();
    }
    pushed_ = made_ = 0;
}

// Both halves through every coupling; returns the first half's output and
// sets the second's (both the same length).
SignalRef VitsFlowStream::push(const SignalRef& a_in, const SignalRef& b_in, bool flush,
                               SignalRef& b_out) {
    auto& b = net_.backend();
    auto& q = *queue_;
    const int hid = net_.hidden();
    SignalRef a = a_in, second = b_in;
    for (Coupling& c : couplings_) {
        const VitsFlowCoupling& w = *c.weights;
        const SignalRef from = w.mirrored ? second : a;
        const SignalRef to = w.mirrored ? a : second;
        // x = pre(from), then each layer: in = conv(x); acts = tanh * sigmoid;
        // x = delayed x + res(acts); sum += delayed skip(acts).
        SignalRef x{&x_[0].need(b, std::size_t(hid) * std::max(from.length, 1)), hid, from.length};
        if (from.length > 0)
            b.conv1d(q, conv_shape(w.pre, from.length), *from.buffer, w.pre.w, w.pre.b, *x.buffer);
        SignalRef sum{nullptr, hid, 0};
        for (std::size_t l = 0; l < c.layers.size(); ++l) {
            Layer& layer = *c.layers[l];
            const SignalRef in = layer.conv.push(q, x, flush);
            const int n = in.length;
            auto& acts = acts_.need(b, std::size_t(hid) * std::max(n, 1));
            if (n > 0) b.gated_tanh(q, hid, n, *in.buffer, acts);
            const std::size_t T = std::size_t(hid) * std::size_t(n);
            if (layer.residual_delay) {
                const SignalRef delayed = layer.residual_delay->push(q, x, flush);
                if (n > 0) {
                    auto& r = res_.need(b, T);
                    b.conv1d(q, conv_shape(w.res[l], n), acts, w.res[l].w, w.res[l].b, r);
                    b.axpby(q, T, 1.0f, r, 1.0f, *delayed.buffer);
                }
                x = delayed;
            }
            auto& s = skip_.need(b, std::max<std::size_t>(T, 1));
            if (n > 0) b.conv1d(q, conv_shape(w.skip[l], n), acts, w.skip[l].w, w.skip[l].b, s);
            const SignalRef skip = layer.skip_delay ? layer.skip_delay->push(q, {&s, hid, n}, flush)
                                                    : SignalRef{&s, hid, n};
            if (l == 0) {
                auto& total = skip_sum_.need(b, std::size_t(hid) * std::max(skip.length, 1));
                if (skip.length > 0)
                    b.copy_rows(q, hid, skip.length, *skip.buffer, 0, std::size_t(skip.length),
                                total, 0, std::size_t(skip.length));
                sum = {&total, hid, skip.length};
            } else if (skip.length > 0) {
                b.axpby(q, std::size_t(hid) * skip.length, 1.0f, *skip.buffer, 1.0f, *sum.buffer);
            }
        }
        const SignalRef kept = c.from_delay->push(q, from, flush);
        const SignalRef shifted = c.to_delay->push(q, to, flush);
        if (shifted.length != sum.length || kept.length != sum.length)
            throw Error("VITS flow stream: paths out of step (" + std::to_string(kept.length) +
                        ", " + std::to_string(shifted.length) + ", " + std::to_string(sum.length) +
                        " frames)");
        if (sum.length > 0) {
            const std::size_t hT = std::size_t(w.post.out) * std::size_t(sum.length);
            auto& m = shift_.need(b, hT);
            b.conv1d(q, conv_shape(w.post, sum.length), *sum.buffer, w.post.w, w.post.b, m);
            b.axpby(q, hT, -1.0f, m, 1.0f, *shifted.buffer);
        }
        a = w.mirrored ? shifted : kept;
        second = w.mirrored ? kept : shifted;
    }
    b_out = second;
    return a;
}

std::array<ScratchBuffer*, 15> VitsFlowStream::lent() {
    return {&scratch_.window,
            &scratch_.staging,
            &halves_[0],
            &halves_[1],
            &halves_[2],
            &halves_[3],
            &x_[0],
            &x_[1],
            &conv_,
            &acts_,
            &res_,
            &skip_,
            &skip_delayed_,
            &skip_sum_,
            &shift_};
}

int VitsFlowStream::run_until(const std::vector<float>& prior, int frames, int until,
                              std::vector<float>& z) {
    const int channels = net_.channels();
    if (prior.size() != std::size_t(channels) * std::size_t(std::max(frames, 0)))
        throw Error("VITS flow stream: the prior holds " + std::to_string(prior.size()) +
                    " values, not " + std::to_string(channels) + " x " + std::to_string(frames));
    const PriorSource copy = [&](int first, int count, float* out) {
        for (int c = 0; c < channels; ++c)
            std::copy_n(prior.begin() + std::ptrdiff_t(c) * frames + first, count,
                        out + std::ptrdiff_t(c) * count);
    };
    return run_until(copy, frames, until, z);
}

void complete_prior(VitsPrior& prior, std::vector<float>& z, int made) {
    if (prior.complete()) return;
    const int before = prior.frames(), channels = prior.channels();
    prior.complete_durations();
    const int after = prior.frames();
    std::vector<float> wider(std::size_t(channels) * std::size_t(after), 0.0f);
    for (int c = 0; c < channels; ++c)
        std::copy_n(z.begin() + std::ptrdiff_t(c) * before, std::min(made, before),
                    wider.begin() + std::ptrdiff_t(c) * after);
    z = std::move(wider);
}

int VitsFlowStream::frames_needed(int until) const {
    if (made_ >= until) return pushed_;
    return std::max(until + net_.context(), pushed_ + min_push_);
}

bool VitsFlowStream::needs_complete_prior(const VitsPrior& prior, int until) const {
    // At the known frames' end a push would flush, as at the sentence's.
    // (frames_needed(until) >= until: the pushes so far or the next reach it.)
    return !prior.complete() && frames_needed(until) >= prior.frames();
}

int VitsFlowStream::run_until(VitsPrior& prior, int until, std::vector<float>& z) {
    if (needs_complete_prior(prior, until)) complete_prior(prior, z, made_);
    return run_until([&](int first, int count, float* out) { prior.sample(first, count, out); },
                     prior.frames(), until, z);
}

int VitsFlowStream::run_until(const PriorSource& prior, int frames, int until,
                              std::vector<float>& z) {
    const int channels = net_.channels(), half = channels / 2;
    const std::size_t size = std::size_t(channels) * std::size_t(std::max(frames, 0));
    if (z.size() != size)
        throw Error("VITS flow stream: the latent holds " + std::to_string(z.size()) +
                    " values, not " + std::to_string(channels) + " x " + std::to_string(frames));
    until = std::min(until, frames);
    auto& b = net_.backend();
    auto& q = *queue_;
    while (made_ < until && pushed_ < frames) {
        const int want = std::max(until + net_.context() - pushed_, min_push_);
        const int n = std::min(want, frames - pushed_);
        const bool flush = pushed_ + n == frames;
        // Lent until this push's outputs are on the host (its synchronize).
        const std::array<ScratchBuffer*, 15> buffers = lent();
        const std::span<ScratchBuffer* const> group(buffers);
        const ScratchLender::Loan loan(net_.lender(), {&group, 1});
        const FinishOnUnwind finish(b, q);
        // This block of the prior, [channels][n], onto the device by halves.
        host_in_.resize(std::size_t(channels) * std::size_t(n));
        prior(pushed_, n, host_in_.data());
        const std::size_t hn = std::size_t(half) * std::size_t(n);
        auto& a_in = halves_[0].need(b, hn);
        auto& b_in = halves_[1].need(b, hn);
        b.copy_to_device(q, a_in, 0, host_in_.data(), hn);
        b.copy_to_device(q, b_in, 0, host_in_.data() + hn, hn);
        pushed_ += n;
        ++pushes_;
        SignalRef second;
        const SignalRef first = push({&a_in, half, n}, {&b_in, half, n}, flush, second);
        const int m = first.length;
        if (m <= 0) {
            b.synchronize(q);  // host_in_ is read until here
            continue;
        }
        if (made_ + m > frames) {
            b.synchronize(q);
            throw Error("VITS flow stream: more output than input");
        }
        const std::size_t hm = std::size_t(half) * std::size_t(m);
        host_out_.resize(2 * hm);
        b.copy_to_host(q, host_out_.data(), *first.buffer, 0, hm);
        b.copy_to_host(q, host_out_.data() + hm, *second.buffer, 0, hm);
        b.synchronize(q);
        for (int c = 0; c < channels; ++c) {
            const int from = net_.ends_flipped() ? channels - 1 - c : c;
            std::copy_n(host_out_.begin() + std::ptrdiff_t(from) * m, m,
                        z.begin() + std::ptrdiff_t(c) * frames + made_);
        }
        made_ += m;
    }
    return made_;
}

}  // namespace etude::engine
