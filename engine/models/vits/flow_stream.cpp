#include "engine/models/vits/flow_stream.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

#include "engine/error.h"

namespace etude::engine {

namespace {

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

VitsFlowStream::~VitsFlowStream() = default;

VitsFlowStream::VitsFlowStream(std::shared_ptr<const VitsFlowNetwork> network, int min_push)
    : VitsFlowStream(*network, min_push) {
    owner_ = std::move(network);
}

VitsFlowStream::VitsFlowStream(const VitsFlowNetwork& network, int min_push)
    : net_(network), queue_(network.backend().create_queue()), min_push_(std::max(min_push, 1)) {
    if (net_.join_) slot_.emplace(net_.batching_->held_slots);
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
                Layer{StreamConv(b, q, w.in_layers[std::size_t(l)].shape(0),
                                 w.in_layers[std::size_t(l)].w, w.in_layers[std::size_t(l)].b,
                                 std::nullopt, scratch_, conv_, held()),
                      std::nullopt, std::nullopt});
            // Another speaker's stream differs from this one in these
            // layers' biases alone (a batch of both reads them from the slot).
            if (slot_) layer->conv.hold_bias(q, *slot_);
            if (l < layers - 1) {
                layer->residual_delay.emplace(b, q, hid, pad, x_[(l + 1) % 2], held());
                layer->skip_delay.emplace(b, q, hid, (layers - 1 - l) * pad, skip_delayed_, held());
            }
            c.layers.push_back(std::move(layer));
        }
        // The half the WaveNet reads keeps its place; the other is shifted.
        const int from = w.mirrored ? 1 : 0;
        c.from_delay.emplace(b, q, half, layers * pad, halves_[2 * out_pair + from], held());
        c.to_delay.emplace(b, q, half, layers * pad, halves_[2 * out_pair + 1 - from], held());
        couplings_.push_back(std::move(c));
    }
    b.synchronize(q);
}

void VitsFlowStream::reset() {
    membership_.leave();  // a sentence cut short pushes no more
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

// Both halves of every stream of a push through every coupling, layer by
// layer across the streams: each layer's dilated convolution, the flow's
// largest product (5 columns deep against the 1x1 convolutions' 1), runs
// for all of them through JointPush, one backend call for the streams whose
// windows line up; the rest is each stream's own, on its own buffers. One
// stream alone is the same walk.
void VitsFlowStream::walk_couplings(gpu::Queue& q, std::span<VitsFlowStream* const> streams,
                                    std::span<const VitsFlowPush> pushes, std::vector<SignalRef>& a,
                                    std::vector<SignalRef>& second, JointScratch& joint) {
    auto& b = net_.backend();
    const int hid = net_.hidden();
    const std::size_t count = streams.size();
    std::vector<SignalRef> from(count), to(count), x(count), sum(count);
    std::vector<LayerStep> steps(count);
    for (std::size_t k = 0; k < couplings_.size(); ++k) {
        const VitsFlowCoupling& w = *couplings_[k].weights;  // the network's: every stream's
        for (std::size_t i = 0; i < count; ++i) {
            VitsFlowStream& s = *streams[i];
            from[i] = w.mirrored ? second[i] : a[i];
            to[i] = w.mirrored ? a[i] : second[i];
            // x = pre(from), then each layer: in = conv(x); acts = tanh *
            // sigmoid; x = delayed x + res(acts); sum += delayed skip(acts).
            const int n = from[i].length;
            x[i] = {&s.x_[0].need(b, std::size_t(hid) * std::max(n, 1)), hid, n};
            if (n > 0) b.conv1d(q, w.pre.shape(n), *from[i].buffer, w.pre.w, w.pre.b, *x[i].buffer);
            sum[i] = {nullptr, hid, 0};
        }
        for (std::size_t l = 0; l < w.in_layers.size(); ++l) {
            for (std::size_t i = 0; i < count; ++i)
                steps[i] = {&streams[i]->couplings_[k].layers[l]->conv, x[i], pushes[i].flush, {}};
            JointPush::push_together(q, steps, joint);
            for (std::size_t i = 0; i < count; ++i)
                streams[i]->layer_rest(q, w, l, *streams[i]->couplings_[k].layers[l], steps[i].out,
                                       pushes[i].flush, x[i], sum[i]);
        }
        for (std::size_t i = 0; i < count; ++i) {
            VitsFlowStream& s = *streams[i];
            Coupling& c = s.couplings_[k];
            const SignalRef kept = c.from_delay->push(q, from[i], pushes[i].flush);
            const SignalRef shifted = c.to_delay->push(q, to[i], pushes[i].flush);
            const int m = sum[i].length;
            if (shifted.length != m || kept.length != m)
                throw Error("VITS flow stream: paths out of step (" + std::to_string(kept.length) +
                            ", " + std::to_string(shifted.length) + ", " + std::to_string(m) +
                            " frames)");
            if (m > 0) {
                const std::size_t hT = std::size_t(w.post.out) * std::size_t(m);
                auto& shift = s.shift_.need(b, hT);
                b.conv1d(q, w.post.shape(m), *sum[i].buffer, w.post.w, w.post.b, shift);
                b.axpby(q, hT, -1.0f, shift, 1.0f, *shifted.buffer);
            }
            a[i] = w.mirrored ? shifted : kept;
            second[i] = w.mirrored ? kept : shifted;
        }
    }
}

void VitsFlowStream::layer_rest(gpu::Queue& q, const VitsFlowCoupling& w, std::size_t l,
                                Layer& layer, const SignalRef& in, bool flush, SignalRef& x,
                                SignalRef& sum) {
    auto& b = net_.backend();
    const int hid = net_.hidden();
    const int n = in.length;
    auto& acts = acts_.need(b, std::size_t(hid) * std::max(n, 1));
    if (n > 0) b.gated_tanh(q, hid, n, *in.buffer, acts);
    const std::size_t T = std::size_t(hid) * std::size_t(n);
    if (layer.residual_delay) {
        const SignalRef delayed = layer.residual_delay->push(q, x, flush);
        if (n > 0) {
            auto& r = res_.need(b, T);
            b.conv1d(q, w.res[l].shape(n), acts, w.res[l].w, w.res[l].b, r);
            b.axpby(q, T, 1.0f, r, 1.0f, *delayed.buffer);
        }
        x = delayed;
    }
    auto& s = skip_.need(b, std::max<std::size_t>(T, 1));
    if (n > 0) b.conv1d(q, w.skip[l].shape(n), acts, w.skip[l].w, w.skip[l].b, s);
    const SignalRef skip =
        layer.skip_delay ? layer.skip_delay->push(q, {&s, hid, n}, flush) : SignalRef{&s, hid, n};
    if (l == 0) {
        auto& total = skip_sum_.need(b, std::size_t(hid) * std::max(skip.length, 1));
        if (skip.length > 0)
            b.copy_rows(q, hid, skip.length, *skip.buffer, 0, std::size_t(skip.length), total, 0,
                        std::size_t(skip.length));
        sum = {&total, hid, skip.length};
    } else if (skip.length > 0) {
        b.axpby(q, std::size_t(hid) * skip.length, 1.0f, *skip.buffer, 1.0f, *sum.buffer);
    }
}

int VitsFlowStream::push_block(int frames, bool flush) {
    int made = 0;
    const VitsFlowPush me{this, frames, flush, &made};
    PushJoiner<VitsFlowPush>* joiner = net_.joiner(batching_);
    if (!joiner) {
        membership_.leave();
        push_together({&me, 1});
        return made;
    }
    // (Run on the lane's thread by the batch's first push: this stream's,
    // when it is first.) A member of the lane from the sentence's first
    // push to its flush: the lane's batches wait for its next push, within
    // their slack.
    membership_.push(
        *joiner, me,
        [this, kind = batching_](std::span<const VitsFlowPush> batch) {
            // Whichever stream it was, it reaches every stream of the batch as
            // a device error (of the same kind, so that the joiner halves its
            // batches after an out-of-memory), naming the batch: each stream's
            // CPU flow takes its sentence over, and the stream's
            // gpu_last_error says what happened.
            run_naming_the_batch(batch.size(), "VITS flow", "streams",
                                 [&] { push_in_lane(batch, net_.batching_->lanes.of(kind)); });
        },
        join_wait_until_ns_, flush);
    return made;
}

void VitsFlowStream::push_in_lane(std::span<const VitsFlowPush> pushes,
                                  JoinLane<VitsFlowPush>& lane) {
    // Streams of a flow of other weights cannot share this one's layers:
    // each goes alone (not through push_block(), which may wait for a joiner
    // this thread may be running a batch of). Another speaker's flow of the
    // same voice shares them (its own input biases aside, BatchMajor).
    std::vector<VitsFlowStream*> streams;
    for (const auto& p : pushes) {
        if (p.stream->net_.batching_ != net_.batching_) {
            for (const auto& one : pushes) one.stream->push_together({&one, 1});
            return;
        }
        streams.push_back(p.stream);
    }
    // The pushes through the lane's recordings, a group of those in one
    // state at a time, and a lone push of a stream with a slot as a batch
    // of one, the recordings all the network's streams share (as
    // HiFi-GAN's: HifiGanStream::push_in_lane). A lone push of a stream
    // without a slot goes through its own (streams[0]'s, whose push it
    // is).
    auto rest_of =
        replay_in_lane(pushes, streams, lane.mu, [&] { return replay_by_state(pushes, lane); });
    if (pushes.size() > 1)
        for (std::size_t i = 0; i < pushes.size(); ++i)
            if (rest_of.replayed[i]) ++streams[i]->batched_pushes_;
    if (rest_of.pushes.empty()) return;
    auto& b = net_.backend();
    auto& q = *queue_;
    const int half = net_.channels() / 2;
    const std::vector<VitsFlowPush>& left = rest_of.pushes;
    const std::vector<VitsFlowStream*>& left_streams = rest_of.streams;
    // Lent until this push's outputs are on the host (its synchronize).
    std::vector<std::array<ScratchBuffer*, 16>> buffers;
    for (VitsFlowStream* s : left_streams) buffers.push_back(s->lent());
    const std::vector<std::span<ScratchBuffer* const>> groups(buffers.begin(), buffers.end());
    const ScratchLender::Loan loan(net_.lender(), groups);
    const FinishOnUnwind finish(b, q);
    // Everything below runs on this stream's queue: the others' own queues
    // must have finished (their layers' zero fills).
    for (VitsFlowStream* s : left_streams)
        if (s != this) b.synchronize(*s->queue_);
    // Each group of pushes in one state side by side, the others coupling
    // by coupling, layer by layer together (walk_couplings).
    std::vector<bool> side_by_side(left.size(), false);
    for (const auto& group : same_state_groups(left)) {
        std::vector<VitsFlowPush> of_group;
        for (std::size_t i : group) {
            side_by_side[i] = true;
            of_group.push_back(left[i]);
        }
        walk_batch_major(q, of_group, lane.joint);
    }
    std::vector<VitsFlowPush> rest;
    std::vector<VitsFlowStream*> rest_streams;
    for (std::size_t i = 0; i < left.size(); ++i)
        if (!side_by_side[i]) {
            rest.push_back(left[i]);
            rest_streams.push_back(left_streams[i]);
        }
    std::vector<SignalRef> a(rest.size()), second(rest.size());
    for (std::size_t i = 0; i < rest.size(); ++i) {
        // The block of the prior, [channels][n], onto the device by halves.
        VitsFlowStream& s = *rest_streams[i];
        const int n = rest[i].frames;
        const std::size_t hn = std::size_t(half) * std::size_t(n);
        auto& a_in = s.halves_[0].need(b, std::max<std::size_t>(hn, 1));
        auto& b_in = s.halves_[1].need(b, std::max<std::size_t>(hn, 1));
        if (n > 0) {
            b.copy_to_device(q, a_in, 0, s.host_in_.data(), hn);
            b.copy_to_device(q, b_in, 0, s.host_in_.data() + hn, hn);
        }
        a[i] = {&a_in, half, n};
        second[i] = {&b_in, half, n};
    }
    if (!rest.empty()) walk_couplings(q, rest_streams, rest, a, second, lane.joint);
    for (std::size_t i = 0; i < rest.size(); ++i) {
        VitsFlowStream& s = *rest_streams[i];
        const int m = std::max(a[i].length, 0);
        *rest[i].made = m;
        if (m == 0) continue;
        const std::size_t hm = std::size_t(half) * std::size_t(m);
        s.host_out_.resize(2 * hm);
        b.copy_to_host(q, s.host_out_.data(), *a[i].buffer, 0, hm);
        b.copy_to_host(q, s.host_out_.data() + hm, *second[i].buffer, 0, hm);
    }
    b.synchronize(q);  // the inputs are read, the outputs on the host
    if (streams.size() > 1)
        for (VitsFlowStream* s : left_streams) ++s->batched_pushes_;
}

bool VitsFlowStream::push_recorded(const VitsFlowPush& p) {
    // (Nor a flush of more than a frame: a short sentence's only push, of
    // its own length, a key that must not hold one of the stream's sets.)
    if (!replay_ || !steps_.enabled() || p.frames <= 0 || (p.flush && p.frames > 1)) return false;
    auto& b = net_.backend();
    const int half = net_.channels() / 2, n = p.frames;
    const std::size_t hn = std::size_t(half) * std::size_t(n);
    RecordedSteps::Step step;
    step.stage_input = [&](gpu::Queue& sq) {
        b.copy_to_device(sq, halves_[0].need(b, hn), 0, host_in_.data(), hn);
        b.copy_to_device(sq, halves_[1].need(b, hn), 0, host_in_.data() + hn, hn);
    };
    step.body = [&](gpu::Queue& bq) {
        VitsFlowStream* self = this;
        std::vector<SignalRef> a{{&halves_[0].get(), half, n}},
            second{{&halves_[1].get(), half, n}};
        // (One stream: the joint buffers are not used.)
        walk_couplings(bq, {&self, 1}, {&p, 1}, a, second,
                       net_.batching_->lanes.of(Batching::Join).joint);
        // Both halves in one buffer, [a; second]: where the recording
        // leaves its output, as the op-by-op push downloads it.
        const int m = std::max(a[0].length, 0);
        const std::size_t hm = std::size_t(half) * std::size_t(m);
        auto& out = gathered_.need(b, std::max<std::size_t>(2 * hm, 1));
        if (hm > 0) {
            const int cols = static_cast<int>(hm);
            b.copy_rows(bq, 1, cols, *a[0].buffer, 0, hm, out, 0, 2 * hm);
            b.copy_rows(bq, 1, cols, *second[0].buffer, 0, hm, out, hm, 2 * hm);
        }
        return SignalRef{&out, 2 * half, m};
    };
    step.take_output = [&](gpu::Queue& oq, const SignalRef& out) {
        *p.made = out.length;
        const std::size_t size = std::size_t(out.channels) * std::size_t(out.length);
        if (size == 0) return;
        host_out_.resize(size);
        b.copy_to_host(oq, host_out_.data(), *out.buffer, 0, size);
    };
    step.host_counts = [&](std::vector<HostCount>& counts) { host_counts(counts); };
    return steps_.run(*queue_, push_state(n, p.flush), step);
}

std::vector<std::vector<float>> VitsFlowStream::push_blocks_together(
    std::span<VitsFlowStream* const> streams, std::span<const std::span<const float>> blocks,
    int frames, bool flush) {
    std::vector<Block> each;  // (the form below checks them)
    for (const auto& block : blocks) each.push_back({block, frames, flush});
    return push_blocks_together(streams, each);
}

std::vector<std::vector<float>> VitsFlowStream::push_blocks_together(
    std::span<VitsFlowStream* const> streams, std::span<const Block> blocks,
    VitsFlowStream* leader) {
    if (streams.empty()) return {};
    const VitsFlowNetwork& net = streams[0]->net_;
    if (blocks.size() != streams.size())
        throw std::invalid_argument("VITS flow stream: " + std::to_string(blocks.size()) +
                                    " blocks for " + std::to_string(streams.size()) + " streams");
    for (const Block& block : blocks) {
        const std::size_t size =
            std::size_t(net.channels()) * std::size_t(std::max(block.frames, 0));
        if (block.frames < 1 || block.prior.size() != size)
            throw std::invalid_argument("VITS flow stream: a block of " +
                                        std::to_string(block.frames) + " frames of " +
                                        std::to_string(net.channels()) + " channels, not " +
                                        std::to_string(block.prior.size()) + " values");
    }
    if (!leader) leader = streams[0];
    for (const VitsFlowStream* s : streams)
        if (s->net_.batching_ != net.batching_ || leader->net_.batching_ != net.batching_)
            throw std::invalid_argument(
                "VITS flow stream: a batch of streams of flows of other weights");
    std::vector<int> made(streams.size(), 0);
    std::vector<VitsFlowPush> pushes;
    for (std::size_t i = 0; i < streams.size(); ++i) {
        streams[i]->host_in_.assign(blocks[i].prior.begin(), blocks[i].prior.end());
        pushes.push_back({streams[i], blocks[i].frames, blocks[i].flush, &made[i]});
    }
    leader->push_together(pushes);
    std::vector<std::vector<float>> out(streams.size());
    for (std::size_t i = 0; i < streams.size(); ++i) {
        streams[i]->pushed_ += blocks[i].frames;
        streams[i]->made_ += made[i];
        ++streams[i]->pushes_;
        const auto& host = streams[i]->host_out_;
        out[i].assign(host.begin(), host.begin() + std::ptrdiff_t(net.channels()) * made[i]);
    }
    return out;
}

std::array<ScratchBuffer*, 16> VitsFlowStream::lent() {
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
            &shift_,
            &gathered_};
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
    const int channels = net_.channels();
    const std::size_t size = std::size_t(channels) * std::size_t(std::max(frames, 0));
    if (z.size() != size)
        throw Error("VITS flow stream: the latent holds " + std::to_string(z.size()) +
                    " values, not " + std::to_string(channels) + " x " + std::to_string(frames));
    until = std::min(until, frames);
    while (made_ < until && pushed_ < frames) {
        const int want = std::max(until + net_.context() - pushed_, min_push_);
        int n = std::min(want, frames - pushed_);
        // Where pushes replay, the sentence's end goes as blocks of powers
        // of two and a flush of its last frame, keys every sentence meets
        // again, where a flush of the rest would be a key of its own length
        // (as a decoder's: HifiGanStream::push_in_steps). Replays on or
        // off: the same blocks either way. Not the sentence's first push:
        // a short sentence's only push would wait for several before its
        // first audio.
        if (steps_.enabled() && pushed_ > 0 && n > 1 && pushed_ + n == frames)
            n = static_cast<int>(RecordedBatches::step_sizes(std::size_t(n - 1)).front());
        const bool flush = pushed_ + n == frames;
        // This block of the prior, [channels][n]; read by the push's upload
        // until its synchronize.
        host_in_.resize(std::size_t(channels) * std::size_t(n));
        prior(pushed_, n, host_in_.data());
        pushed_ += n;
        ++pushes_;
        const int m = push_block(n, flush);
        if (m <= 0) continue;
        if (made_ + m > frames) throw Error("VITS flow stream: more output than input");
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
