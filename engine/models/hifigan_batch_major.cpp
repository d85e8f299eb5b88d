// A batch of HiFi-GAN streams in one state side by side (batch_major.h):
// the walk of walk_layers() (hifigan.cpp) with the batch's signal in one
// buffer from the mel to the audio, so that each layer, each residual sum
// and the tanh is one backend call for the batch, and a stream's own calls
// are its held samples' copies, its mel's upload and its audio's download.
// While the streams' windows fill (their first chunks), the signal's
// length changes from layer to layer as in each stream's own walk.
// A batch in one state (filling or settled, a flush too; a lone push of a
// stream with a slot as a batch of one) replays, a step of a power of two
// members of a page of the held slots at a time, from a recording of its
// layers (push_batch_recorded; recorded_step.h says what makes it
// replayable and what its key holds).
#include <algorithm>

#include "engine/models/batch_major.h"
#include "engine/models/hifigan_stream.h"

namespace etude::engine {

std::vector<std::vector<std::size_t>> HifiGanStream::state_groups(
    std::span<const StreamPush> pushes, const std::vector<HifiGanStream*>& streams,
    std::size_t min_size) {
    return BatchMajor::same_state_groups(
        pushes.size(), [&](std::size_t i) { return pushes[i].frames > 0; },
        [&](std::size_t i) { return streams[i]->push_state(pushes[i].frames, pushes[i].flush); },
        [&](std::size_t i) { return streams[i]->slot_ ? &*streams[i]->slot_ : nullptr; }, min_size);
}

std::vector<std::size_t> HifiGanStream::same_state_batch(
    std::span<const StreamPush> pushes, const std::vector<HifiGanStream*>& streams) {
    auto groups = state_groups(pushes, streams, 2);
    return groups.empty() ? std::vector<std::size_t>{} : std::move(groups.front());
}

std::vector<bool> HifiGanStream::replay_by_state(std::span<const StreamPush> pushes,
                                                 const std::vector<HifiGanStream*>& streams,
                                                 JoinLane<StreamPush>& lane) {
    std::vector<bool> replayed(pushes.size(), false);
    for (const auto& group : state_groups(pushes, streams, 1)) {
        std::vector<StreamPush> part;
        std::vector<HifiGanStream*> members;
        for (std::size_t i : group) {
            part.push_back(pushes[i]);
            members.push_back(streams[i]);
        }
        if (!push_batch_recorded(part, members, lane)) continue;
        for (std::size_t i : group) replayed[i] = true;
    }
    return replayed;
}

void HifiGanStream::walk_batch_major(gpu::Queue& q, std::span<const StreamPush> pushes,
                                     const std::vector<HifiGanStream*>& streams,
                                     JointScratch& joint) {
    upload_batch_mels(q, pushes, joint);
    const BatchSignal audio =
        walk_batch_layers(q, streams, pushes[0].frames, pushes[0].flush, joint);
    take_batch_audio(q, pushes, audio);
}

// The batch's signals, as a stream's own in push(): the mel, the convs'
// outputs, the upsampler's, the residual paths' two, the resblocks' sum.
BatchSignal HifiGanStream::upload_batch_mels(gpu::Queue& q, std::span<const StreamPush> pushes,
                                             JointScratch& joint) {
    const int frames = pushes[0].frames;
    const std::size_t n_mel = static_cast<std::size_t>(net_.n_mels_) * frames;
    auto& mel_buf = joint.signals[0].need(backend_, n_mel * pushes.size());
    for (std::size_t b = 0; b < pushes.size(); ++b)
        backend_.copy_to_device(q, mel_buf, b * n_mel, pushes[b].mel, n_mel);
    return {&mel_buf, static_cast<int>(pushes.size()), net_.n_mels_, frames};
}

BatchSignal HifiGanStream::walk_batch_layers(gpu::Queue& q,
                                             const std::vector<HifiGanStream*>& streams, int frames,
                                             bool flush, JointScratch& joint) {
    const int batch = static_cast<int>(streams.size());
    auto& signals = joint.signals;
    ScratchBuffer &conv_out = signals[1], &up_out = signals[2], &residual0 = signals[3],
                  &residual1 = signals[4], &sum = signals[5];
    ScratchBuffer* residual[2] = {&residual0, &residual1};
    // The same layer (or delay) of every stream of the batch.
    const auto layers = [&](auto pick) {
        std::vector<decltype(pick(*streams[0]))> of(streams.size());
        for (std::size_t b = 0; b < streams.size(); ++b) of[b] = pick(*streams[b]);
        return of;
    };
    const auto sum_into = [&](const BatchSignal& from, float keep, const BatchSignal& to) {
        if (from.floats() != to.floats()) throw Error("HiFi-GAN stream: paths out of step");
        backend_.axpby(q, from.floats(), 1.0f, *from.buffer, keep, *to.buffer);
    };
    BatchSignal x{&signals[0].get(), batch, net_.n_mels_, frames};
    x = BatchMajor::push(
        q, layers([](HifiGanStream& s) -> WeightedStreamLayer* { return s.pre_.get(); }), x, flush,
        joint, conv_out);
    for (std::size_t k = 0; k < stages_.size(); ++k) {
        const BatchSignal y = BatchMajor::push(
            q,
            layers([k](HifiGanStream& s) -> WeightedStreamLayer* { return s.stages_[k].up.get(); }),
            x, flush, joint, up_out);
        BatchSignal total;
        const std::size_t branches = stages_[k].branches.size();
        for (std::size_t j = 0; j < branches; ++j) {
            BatchSignal r = y;
            const std::size_t subs = stages_[k].branches[j].subs.size();
            for (std::size_t m = 0; m < subs; ++m) {
                // ResBlock1: r + c2(lrelu(c1(lrelu(r)))); ResBlock2: r + c1(lrelu(r)).
                const auto sub = [k, j, m](HifiGanStream& s) -> Sub& {
                    return s.stages_[k].branches[j].subs[m];
                };
                BatchSignal b =
                    BatchMajor::push(q, layers([&](HifiGanStream& s) -> WeightedStreamLayer* {
                                         return sub(s).c1.get();
                                     }),
                                     r, flush, joint, conv_out);
                if (sub(*this).c2)
                    b = BatchMajor::push(q, layers([&](HifiGanStream& s) -> WeightedStreamLayer* {
                                             return sub(s).c2.get();
                                         }),
                                         b, flush, joint, conv_out);
                const BatchSignal d = BatchMajor::delay(
                    q, layers([&](HifiGanStream& s) { return sub(s).skip.get(); }), r, flush, joint,
                    *residual[m % 2]);
                sum_into(b, 1.0f, d);
                r = d;
            }
            const BatchSignal a = BatchMajor::delay(q, layers([k, j](HifiGanStream& s) {
                                                        return s.stages_[k].branches[j].align.get();
                                                    }),
                                                    r, flush, joint, *residual[subs % 2]);
            if (j == 0) total = {&sum.need(backend_, a.floats()), batch, a.channels, a.length};
            sum_into(a, j == 0 ? 0.0f : 1.0f, total);
        }
        backend_.axpby(q, total.floats(), 1.0f / static_cast<float>(branches), *total.buffer, 0.0f,
                       *total.buffer);
        x = total;
    }
    x = BatchMajor::push(
        q, layers([](HifiGanStream& s) -> WeightedStreamLayer* { return s.post_.get(); }), x, flush,
        joint, conv_out);
    // One tanh for the batch: each item's samples get the bits they get in
    // its push alone, wherever the batch puts them (on the CPU backend too,
    // gpu/cpu/cpu_vector_math.h, whatever the length).
    backend_.activation(q, gpu::Activation::Tanh, *x.buffer, *x.buffer, x.floats());
    return x;
}

void HifiGanStream::take_batch_audio(gpu::Queue& q, std::span<const StreamPush> pushes,
                                     const BatchSignal& x) {
    const std::size_t n = static_cast<std::size_t>(x.length);
    for (std::size_t b = 0; b < pushes.size() && n > 0; ++b) {
        const std::size_t at = pushes[b].values->size();
        pushes[b].values->resize(at + n);
        backend_.copy_to_host(q, pushes[b].values->data() + at, *x.buffer, b * n, n);
    }
}

bool HifiGanStream::push_batch_recorded(std::span<const StreamPush> pushes,
                                        const std::vector<HifiGanStream*>& streams,
                                        JoinLane<StreamPush>& lane) {
    RecordedBatches& batches = net_.batching_->of(lane);
    if (pushes.empty() || !batches.steps().enabled()) return false;
    const int frames = pushes[0].frames;
    const bool flush = pushes[0].flush;
    for (std::size_t i = 0; i < pushes.size(); ++i) {
        const HifiGanStream& s = *streams[i];
        if (!s.replay_ || !s.slot_ || pushes[i].flush != flush || pushes[i].frames != frames ||
            frames <= 0 || !replays_as_is(frames, flush))
            return false;
    }
    // (One state, in the order of their slots: replay_by_state's groups.)
    const std::span<const StreamPush> batch = pushes;
    const std::vector<HifiGanStream*>& members = streams;
    // The members' own queues must have finished (their layers' zero
    // fills, their last pushes alone) before the lane's queue writes
    // their held samples.
    for (HifiGanStream* s : members) backend_.synchronize(*s->queue_);
    gpu::Queue& q = batches.queue();
    const auto slot_of = [&](std::size_t i) -> auto& {
        return *members[i]->slot_;
    };
    // Recorded steps of powers of two members within each page of the held
    // slots (copied by slot index): any members of a page replay the
    // recording of their step's size.
    return RecordedBatches::run_by_page(
        members.size(), slot_of,
        [&](const std::vector<std::size_t>& of_page, std::vector<int> slots, long page) {
            std::vector<StreamPush> part;
            std::vector<HifiGanStream*> part_members;
            for (std::size_t i : of_page) {
                part.push_back(batch[i]);
                part_members.push_back(members[i]);
            }
            // (And whose first-layer bias the batch adds: biases_in_key.)
            RecordedSteps::Key key = RecordedBatches::key(
                part_members[0]->push_state(frames, flush), part_members.size());
            const bool speakers =
                std::any_of(part_members.begin(), part_members.end(), [&](const HifiGanStream* s) {
                    return !s->net_.same_speaker_biases(part_members[0]->net_);
                });
            key.push_back(biases_in_key(speakers, part_members[0]->net_.id_));
            SlotIndexed indexed(lane.joint, std::move(slots));
            RecordedSteps::Step step;
            step.stage_input = [&](gpu::Queue& sq) {
                upload_batch_mels(sq, part, lane.joint);
                indexed.upload(backend_, sq);
            };
            step.body = [&](gpu::Queue& bq) {
                const BatchSignal x =
                    walk_batch_layers(bq, part_members, frames, flush, lane.joint);
                return SignalRef{x.buffer, x.channels, x.length};
            };
            step.take_output = [&](gpu::Queue& oq, const SignalRef& out) {
                take_batch_audio(
                    oq, part,
                    {out.buffer, static_cast<int>(part.size()), out.channels, out.length});
            };
            step.host_counts = [&](std::vector<HostCount>& counts) {
                for (HifiGanStream* s : part_members) s->host_counts(counts);
            };
            return batches.steps().run(q, key, step, page);
        });
}

}  // namespace etude::engine
