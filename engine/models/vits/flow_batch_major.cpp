// A steady batch of flow streams side by side (batch_major.h): the walk of
// walk_couplings() (flow_stream.cpp) with the batch's halves of the latent,
// its WaveNet signal and every product in one buffer each,
// [stream][channels][frames], so that each operation of a coupling (the
// pre and post 1x1 convolutions, each layer's dilated convolution, gate,
// residual and skip convolutions and sums, the delays that line the paths
// up, the mean-only affine) is one backend call for the batch; the flips
// move nothing (the halves swap roles). A stream's own calls are its
// prior's upload and its output's download, two each.
#include <algorithm>
#include <string>

#include "engine/error.h"
#include "engine/models/batch_major.h"
#include "engine/models/vits/flow_stream.h"

namespace etude::engine {

bool VitsFlowStream::settled() const {
    const auto delay_settled = [](const std::optional<StreamDelay>& d) {
        return !d || d->settled();
    };
    for (const Coupling& c : couplings_) {
        for (const auto& l : c.layers)
            if (!l->conv.settled() || !delay_settled(l->residual_delay) ||
                !delay_settled(l->skip_delay))
                return false;
        if (!delay_settled(c.from_delay) || !delay_settled(c.to_delay)) return false;
    }
    return true;
}

std::vector<std::size_t> VitsFlowStream::steady_batch(std::span<const VitsFlowPush> pushes) {
    return BatchMajor::steady_batch(
        pushes.size(),
        [&](std::size_t i) {
            return !pushes[i].flush && pushes[i].frames > 0 && pushes[i].stream->settled();
        },
        [&](std::size_t i) { return pushes[i].frames; },
        [&](std::size_t i) -> const HeldSlots::Slot* {
            const auto& slot = pushes[i].stream->slot_;
            return slot ? &*slot : nullptr;
        });
}

void VitsFlowStream::walk_batch_major(gpu::Queue& q, std::span<const VitsFlowPush> pushes,
                                      JointScratch& joint) {
    auto& b = net_.backend();
    const int batch = static_cast<int>(pushes.size()), n = pushes[0].frames;
    const int half = net_.channels() / 2, hid = net_.hidden();
    // The batch's signals, by role as a stream's own buffers: the halves
    // (two pairs, in and out of a coupling), the WaveNet's residual signal
    // (two, a delay reading one and writing the other), a dilated
    // convolution's output, the gated activations, a 1x1 convolution's
    // product, a delayed skip and the skip sum.
    auto& signals = joint.signals;
    ScratchBuffer* halves[4] = {&signals[0], &signals[1], &signals[2], &signals[3]};
    ScratchBuffer* residual[2] = {&signals[4], &signals[5]};
    ScratchBuffer &conv = signals[6], &gate = signals[7], &product = signals[8],
                  &skip_delayed = signals[9], &skip_sum = signals[10];
    const std::size_t hn = std::size_t(half) * std::size_t(n), H = std::size_t(hid) * n;
    const std::size_t B = pushes.size();
    auto& a_in = halves[0]->need(b, hn * B);
    auto& b_in = halves[1]->need(b, hn * B);
    for (std::size_t i = 0; i < B; ++i) {
        const float* prior = pushes[i].stream->host_in_.data();
        b.copy_to_device(q, a_in, i * hn, prior, hn);
        b.copy_to_device(q, b_in, i * hn, prior + hn, hn);
    }
    BatchSignal a{&a_in, batch, half, n}, second{&b_in, batch, half, n};
    // The same layer (or delay) of every stream of the batch.
    const auto of_each = [&](auto pick) {
        std::vector<decltype(pick(*pushes[0].stream))> of(B);
        for (std::size_t i = 0; i < B; ++i) of[i] = pick(*pushes[i].stream);
        return of;
    };
    const auto check = [&](const BatchSignal& s) {
        if (s.length != n)
            throw Error("VITS flow stream: paths out of step in a batch (" +
                        std::to_string(s.length) + " frames, not " + std::to_string(n) + ")");
    };
    for (std::size_t k = 0; k < couplings_.size(); ++k) {
        const VitsFlowCoupling& w = *couplings_[k].weights;  // the network's: every stream's
        const BatchSignal from = w.mirrored ? second : a, to = w.mirrored ? a : second;
        // x = pre(from), then each layer: in = conv(x); acts = tanh *
        // sigmoid; x = delayed x + res(acts); sum += delayed skip(acts).
        BatchSignal x{&residual[0]->need(b, H * B), batch, hid, n};
        b.conv1d(q, w.pre.shape(n, batch), *from.buffer, w.pre.w, w.pre.b, *x.buffer);
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
                x, joint, conv);
            check(in);
            // The gate pairs each item's first half of rows with its second,
            // one call for the batch.
            const BatchSignal acts{&gate.need(b, H * B), batch, hid, n};
            b.gated_tanh(q, batch, hid, n, *in.buffer, *acts.buffer);
            if (layer(*this).residual_delay) {
                const BatchSignal delayed = BatchMajor::delay(
                    q, of_each([&](VitsFlowStream& s) { return &*layer(s).residual_delay; }), x,
                    joint, *residual[1 - at]);
                check(delayed);
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
                    joint, skip_delayed);
            check(skip);
            if (l == 0) {
                sum = {&skip_sum.need(b, H * B), batch, hid, n};
                b.copy_rows(q, batch * hid, n, *skip.buffer, 0, std::size_t(n), *sum.buffer, 0,
                            std::size_t(n));
            } else {
                b.axpby(q, H * B, 1.0f, *skip.buffer, 1.0f, *sum.buffer);
            }
        }
        // The mean-only affine: the other half, lined up, less post(sum).
        const int out_pair = 1 - static_cast<int>(k % 2), from_at = w.mirrored ? 1 : 0;
        const BatchSignal kept = BatchMajor::delay(
            q, of_each([k](VitsFlowStream& s) { return &*s.couplings_[k].from_delay; }), from,
            joint, *halves[2 * out_pair + from_at]);
        const BatchSignal shifted = BatchMajor::delay(
            q, of_each([k](VitsFlowStream& s) { return &*s.couplings_[k].to_delay; }), to, joint,
            *halves[2 * out_pair + 1 - from_at]);
        check(kept);
        check(shifted);
        auto& shift = product.need(b, hn * B);
        b.conv1d(q, w.post.shape(n, batch), *sum.buffer, w.post.w, w.post.b, shift);
        b.axpby(q, hn * B, -1.0f, shift, 1.0f, *shifted.buffer);
        a = w.mirrored ? shifted : kept;
        second = w.mirrored ? kept : shifted;
    }
    for (std::size_t i = 0; i < B; ++i) {
        VitsFlowStream& s = *pushes[i].stream;
        *pushes[i].made = n;
        s.host_out_.resize(2 * hn);
        b.copy_to_host(q, s.host_out_.data(), *a.buffer, i * hn, hn);
        b.copy_to_host(q, s.host_out_.data() + hn, *second.buffer, i * hn, hn);
    }
}

}  // namespace etude::engine
