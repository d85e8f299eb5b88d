// A batch of flow streams in one state side by side (batch_major.h): the
// walk of walk_couplings() (flow_stream.cpp) with the batch's halves of the
// latent, its WaveNet signal and every product in one buffer each,
// [stream][channels][frames], so that each operation of a coupling (the
// pre and post 1x1 convolutions, each layer's dilated convolution, gate,
// residual and skip convolutions and sums, the delays that line the paths
// up, the mean-only affine) is one backend call for the batch; the flips
// move nothing (the halves swap roles). A stream's own calls are its
// prior's upload, by halves, and its output's download, in one piece.
// A batch in one state (a lone push of a stream with a slot as a batch of
// one) replays, a step of a power of two members of a page of the held
// slots at a time, from a recording of its couplings (push_batch_recorded;
// recorded_step.h says what makes it replayable and what its key holds), as
// a decoder's does.
#include <algorithm>
#include <string>

#include "engine/error.h"
#include "engine/models/batch_major.h"
#include "engine/models/vits/flow_stream.h"

namespace etude::engine {

BatchMajor::PushState VitsFlowStream::push_state(int frames, bool flush) const {
    // Every layer and delay the walk pushes, in its order. Why equal keys
    // suffice: a convolution's push is decided by its window's held count
    // (the window's length, whether its front is the prefill's zeros, the
    // outputs made) and a delay's by its held count (what goes out, what
    // stays), given the input's length; each layer's input length is the
    // block's, or what the layers before it handed out, itself decided by
    // their keys. Nothing else of a flow stream changes what a push does
    // (pushed_ and made_ only count; the weights are the network's). Equal
    // pushes leave equal keys, so streams started together stay in one
    // state push after push, to their sentences' ends. A flush (each
    // window's zeros, every delay emptied) is other operations than a push
    // of as many frames that does not end the sentence: it is in the key.
    BatchMajor::PushState key{frames, flush ? 1 : 0};
    each_layer(
        *this, [&](const WeightedStreamLayer& l) { l.push_state(key); },
        [&](const StreamDelay& d) { d.push_state(key); });
    return key;
}

void VitsFlowStream::host_counts(std::vector<HostCount>& counts) {
    each_layer(
        *this, [&](WeightedStreamLayer& l) { l.host_counts(counts); },
        [&](StreamDelay& d) { d.host_counts(counts); });
}

std::vector<std::vector<std::size_t>> VitsFlowStream::same_state_groups(
    std::span<const VitsFlowPush> pushes, std::size_t min_size) {
    return BatchMajor::same_state_groups(
        pushes.size(), [&](std::size_t i) { return pushes[i].frames > 0; },
        [&](std::size_t i) {
            return pushes[i].stream->push_state(pushes[i].frames, pushes[i].flush);
        },
        [&](std::size_t i) -> const HeldSlots::Slot* {
            const auto& slot = pushes[i].stream->slot_;
            return slot ? &*slot : nullptr;
        },
        min_size);
}

std::vector<bool> VitsFlowStream::replay_by_state(std::span<const VitsFlowPush> pushes,
                                                  JoinLane<VitsFlowPush>& lane) {
    std::vector<bool> replayed(pushes.size(), false);
    for (const auto& group : same_state_groups(pushes, 1)) {
        std::vector<VitsFlowPush> part;
        for (std::size_t i : group) part.push_back(pushes[i]);
        if (!push_batch_recorded(part, lane)) continue;
        for (std::size_t i : group) replayed[i] = true;
    }
    return replayed;
}

namespace {

// [channels][length] floats of every item: a signal's lengths shrink from
// layer to layer while the streams' windows fill (a first push), as in each
// stream's own walk (walk_couplings); settled, they stay.
std::size_t floats(int channels, int length) {
    return std::size_t(channels) * std::size_t(std::max(length, 0));
}

}  // namespace

// The batch's signals, by role as a stream's own buffers: the halves (two
// pairs, in and out of a coupling), the WaveNet's residual signal (two, a
// delay reading one and writing the other), a dilated convolution's output,
// the gated activations, a 1x1 convolution's product, a delayed skip, the
// skip sum, and the output (both halves of each item together).
void VitsFlowStream::walk_batch_major(gpu::Queue& q, std::span<const VitsFlowPush> pushes,
                                      JointScratch& joint) {
    upload_batch_priors(q, pushes, joint);
    take_batch_output(q, pushes, walk_batch_couplings(q, pushes, joint));
}

void VitsFlowStream::upload_batch_priors(gpu::Queue& q, std::span<const VitsFlowPush> pushes,
                                         JointScratch& joint) {
    auto& b = net_.backend();
    const std::size_t hf = floats(net_.channels() / 2, pushes[0].frames), B = pushes.size();
    auto& a_in = joint.signals[0].need(b, hf * B);
    auto& b_in = joint.signals[1].need(b, hf * B);
    for (std::size_t i = 0; i < B; ++i) {
        const float* prior = pushes[i].stream->host_in_.data();
        b.copy_to_device(q, a_in, i * hf, prior, hf);
        b.copy_to_device(q, b_in, i * hf, prior + hf, hf);
    }
}

SignalRef VitsFlowStream::walk_batch_couplings(gpu::Queue& q, std::span<const VitsFlowPush> pushes,
                                               JointScratch& joint) {
    auto& b = net_.backend();
    const int batch = static_cast<int>(pushes.size()), frames = pushes[0].frames;
    const bool flush = pushes[0].flush;  // every push's (one state)
    const int half = net_.channels() / 2, hid = net_.hidden();
    auto& signals = joint.signals;
    ScratchBuffer* halves[4] = {&signals[0], &signals[1], &signals[2], &signals[3]};
    ScratchBuffer* residual[2] = {&signals[4], &signals[5]};
    ScratchBuffer &conv = signals[6], &gate = signals[7], &product = signals[8],
                  &skip_delayed = signals[9], &skip_sum = signals[10], &output = signals[11];
    const std::size_t B = pushes.size();
    BatchSignal a{&halves[0]->get(), batch, half, frames},
        second{&halves[1]->get(), batch, half, frames};
    // The same layer (or delay) of every stream of the batch.
    const auto of_each = [&](auto pick) {
        std::vector<decltype(pick(*pushes[0].stream))> of(B);
        for (std::size_t i = 0; i < B; ++i) of[i] = pick(*pushes[i].stream);
        return of;
    };
    // Paths that meet carry as many frames (as in walk_couplings).
    const auto check = [&](const BatchSignal& s, int want) {
        if (s.length != want)
            throw Error("VITS flow stream: paths out of step in a batch (" +
                        std::to_string(s.length) + " frames, not " + std::to_string(want) + ")");
    };
    for (std::size_t k = 0; k < couplings_.size(); ++k) {
        const VitsFlowCoupling& w = *couplings_[k].weights;  // the network's: every stream's
        const BatchSignal from = w.mirrored ? second : a, to = w.mirrored ? a : second;
        // x = pre(from), then each layer: in = conv(x); acts = tanh *
        // sigmoid; x = delayed x + res(acts); sum += delayed skip(acts).
        BatchSignal x{&residual[0]->need(b, floats(hid, from.length) * B), batch, hid, from.length};
        b.conv1d(q, w.pre.shape(x.length, batch), *from.buffer, w.pre.w, w.pre.b, *x.buffer);
        int at = 0;  // x's buffer in residual[]
        BatchSignal sum;
        const std::size_t layers = w.in_layers.size();
        for (std::size_t l = 0; l < layers; ++l) {
            const auto layer = [k, l](VitsFlowStream& s) -> Layer& {
                return *s.couplings_[k].layers[l];
            };
            const BatchSignal in = BatchMajor::push(
                q,
                of_each([&](VitsFlowStream& s) -> WeightedStreamLayer* { return &layer(s).conv; }),
                x, flush, joint, conv);
            // This layer's frames: its convolution's outputs.
            const int n = in.length;
            const std::size_t H = floats(hid, n);
            // The gate pairs each item's first half of rows with its second,
            // one call for the batch.
            const BatchSignal acts{&gate.need(b, H * B), batch, hid, n};
            b.gated_tanh(q, batch, hid, n, *in.buffer, *acts.buffer);
            if (layer(*this).residual_delay) {
                const BatchSignal delayed = BatchMajor::delay(
                    q, of_each([&](VitsFlowStream& s) { return &*layer(s).residual_delay; }), x,
                    flush, joint, *residual[1 - at]);
                check(delayed, n);
                auto& r = product.need(b, H * B);
                b.conv1d(q, w.res[l].shape(n, batch), *acts.buffer, w.res[l].w, w.res[l].b, r);
                b.axpby(q, H * B, 1.0f, r, 1.0f, *delayed.buffer);
                x = delayed;
                at = 1 - at;
            }
            BatchSignal skip{&product.need(b, H * B), batch, hid, n};
            b.conv1d(q, w.skip[l].shape(n, batch), *acts.buffer, w.skip[l].w, w.skip[l].b,
                     *skip.buffer);
            if (layer(*this).skip_delay)
                skip = BatchMajor::delay(
                    q, of_each([&](VitsFlowStream& s) { return &*layer(s).skip_delay; }), skip,
                    flush, joint, skip_delayed);
            const std::size_t S = floats(hid, skip.length);
            if (l == 0) {
                sum = {&skip_sum.need(b, S * B), batch, hid, skip.length};
                b.copy_rows(q, batch * hid, skip.length, *skip.buffer, 0, std::size_t(skip.length),
                            *sum.buffer, 0, std::size_t(skip.length));
            } else {
                check(skip, sum.length);
                b.axpby(q, S * B, 1.0f, *skip.buffer, 1.0f, *sum.buffer);
            }
        }
        // The mean-only affine: the other half, lined up, less post(sum).
        const int out_pair = 1 - static_cast<int>(k % 2), from_at = w.mirrored ? 1 : 0;
        const BatchSignal kept = BatchMajor::delay(
            q, of_each([k](VitsFlowStream& s) { return &*s.couplings_[k].from_delay; }), from,
            flush, joint, *halves[2 * out_pair + from_at]);
        const BatchSignal shifted = BatchMajor::delay(
            q, of_each([k](VitsFlowStream& s) { return &*s.couplings_[k].to_delay; }), to, flush,
            joint, *halves[2 * out_pair + 1 - from_at]);
        check(kept, sum.length);
        check(shifted, sum.length);
        const std::size_t hm = floats(half, sum.length);
        auto& shift = product.need(b, hm * B);
        b.conv1d(q, w.post.shape(sum.length, batch), *sum.buffer, w.post.w, w.post.b, shift);
        b.axpby(q, hm * B, -1.0f, shift, 1.0f, *shifted.buffer);
        a = w.mirrored ? shifted : kept;
        second = w.mirrored ? kept : shifted;
    }
    // Both halves of each item side by side, [stream][a; second][frames]:
    // one download per stream, and one place a recording leaves the output.
    const std::size_t hm = floats(half, a.length);
    auto& out = output.need(b, std::max<std::size_t>(2 * hm * B, 1));
    if (hm > 0) {
        const int cols = static_cast<int>(hm);
        b.copy_rows(q, batch, cols, *a.buffer, 0, hm, out, 0, 2 * hm);
        b.copy_rows(q, batch, cols, *second.buffer, 0, hm, out, hm, 2 * hm);
    }
    return {&out, 2 * half, std::max(a.length, 0)};
}

void VitsFlowStream::take_batch_output(gpu::Queue& q, std::span<const VitsFlowPush> pushes,
                                       const SignalRef& out) {
    const std::size_t n = floats(out.channels, out.length);
    for (std::size_t i = 0; i < pushes.size(); ++i) {
        VitsFlowStream& s = *pushes[i].stream;
        *pushes[i].made = out.length;
        if (n == 0) continue;
        s.host_out_.resize(n);
        net_.backend().copy_to_host(q, s.host_out_.data(), *out.buffer, i * n, n);
    }
}

bool VitsFlowStream::push_batch_recorded(std::span<const VitsFlowPush> pushes,
                                         JoinLane<VitsFlowPush>& lane) {
    RecordedBatches& batches = net_.batching_->of(lane);
    if (pushes.empty() || !batches.steps().enabled()) return false;
    const int frames = pushes[0].frames;
    const bool flush = pushes[0].flush;
    for (const VitsFlowPush& p : pushes) {
        const VitsFlowStream& s = *p.stream;
        if (s.net_.batching_ != net_.batching_ || !s.replay_ || !s.slot_ || p.flush != flush ||
            p.frames != frames || frames <= 0 || (flush && frames > 1))
            return false;
    }
    // (One state, in the order of their slots: replay_by_state's groups.)
    const std::span<const VitsFlowPush> batch = pushes;
    // The members' own queues must have finished (their layers' zero
    // fills, their last pushes alone) before the lane's queue writes their
    // held frames.
    auto& b = net_.backend();
    for (const VitsFlowPush& p : batch) b.synchronize(*p.stream->queue_);
    // Recorded steps of powers of two members within each page of the held
    // slots (copied by slot index): any members of a page replay the
    // recording of their step's size.
    return RecordedBatches::run_by_page(
        batch.size(), [&](std::size_t i) -> auto& { return *batch[i].stream->slot_; },
        [&](const std::vector<std::size_t>& of_page, std::vector<int> slots, long page) {
            std::vector<VitsFlowPush> part;
            for (std::size_t i : of_page) part.push_back(batch[i]);
            // (And whose WaveNet input biases the batch adds: biases_in_key.)
            RecordedSteps::Key key =
                RecordedBatches::key(part[0].stream->push_state(frames, flush), part.size());
            const bool speakers = std::any_of(part.begin(), part.end(), [&](const VitsFlowPush& p) {
                return !p.stream->net_.same_speaker_biases(part[0].stream->net_);
            });
            key.push_back(biases_in_key(speakers, part[0].stream->net_.id_));
            SlotIndexed indexed(lane.joint, std::move(slots));
            RecordedSteps::Step step;
            step.stage_input = [&](gpu::Queue& sq) {
                upload_batch_priors(sq, part, lane.joint);
                indexed.upload(b, sq);
            };
            step.body = [&](gpu::Queue& bq) { return walk_batch_couplings(bq, part, lane.joint); };
            step.take_output = [&](gpu::Queue& oq, const SignalRef& out) {
                take_batch_output(oq, part, out);
            };
            step.host_counts = [&](std::vector<HostCount>& counts) {
                for (const VitsFlowPush& p : part) p.stream->host_counts(counts);
            };
            return batches.steps().run(batches.queue(), key, step, page);
        });
}

}  // namespace etude::engine
