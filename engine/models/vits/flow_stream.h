// A Piper voice's flow run incrementally over one sentence's sampled prior,
// pushed in blocks: every convolution keeps the frames its kernel still
// needs (stream_layers.h) and the residual, skip and coupling paths are
// delayed to line up with them, so each frame goes through the flow once
// and the output equals the whole sentence's flow to float rounding, for
// any block sizes. The output lags the input by VitsFlowNetwork::context()
// frames (32 for Piper's 4 couplings of 4 layers of kernel 5): the first
// output needs that many frames of prior beyond it, and the end of the
// sentence (flush) gives the rest.
//
// The weights are the network's (shared, read-only); the state here (each
// layer's held frames and the chunk-sized buffers) is this stream's, on its
// own queue of the network's backend. One sentence at a time: reset()
// starts the next.
//
// Batches: where the network's streams join (VitsFlowNetwork::joiner(), on
// a GPU), a push waits for a batch running on another stream's thread and
// goes, with the pushes that came meanwhile, into the next one. The
// batch's pushes whose streams are in one state (every layer holding as
// many frames: settled streams, or streams that started together, pushing
// their first blocks), of one block length, all the sentence's end (a
// flush) or none, run side by side, every operation one backend call for them
// (flow_batch_major.cpp, models/batch_major.h); the others walk the
// couplings layer by layer together, each layer's dilated convolution (most
// of the flow's arithmetic) one backend call for the streams whose windows
// line up (JointPush, stream_layers.h). A batch side by side in one state,
// of one block length, replays its recording where the backend replays
// natively (models/recorded_step.h), and so does a push alone of a key seen
// before: through the lane's recordings, which the network's streams share,
// as a batch of one where the stream has a slot, else through its own.
// There a sentence's end goes as blocks of powers of two and a flush of one
// frame (run_until), keys every sentence meets again. Each stream's held frames stay its
// own on the device (in a slot of the network's HeldSlots where its
// streams join). A device error in a
// batch reaches every stream of it as a gpu::DeviceError (out of memory as
// gpu::OutOfMemory), each stream's state then lost as after its own error.
//
// Threads: one owner; the joiner's lane thread runs a batch's pushes while
// their owners wait in the joiner. Not real-time safe (device calls;
// allocates when a block is longer than any before).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "engine/models/batch_major.h"
#include "engine/models/recorded_step.h"
#include "engine/models/stream_layers.h"
#include "engine/models/vits/flow_network.h"
#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vocoder_network.h"

namespace etude::engine {

// Completes a staged prior's durations (VitsPrior::complete_durations) and
// widens its latent z, [channels][frames], to the sentence's frames,
// keeping the first `made` frames of each channel. Throws as
// complete_durations() does (z then unchanged).
void complete_prior(VitsPrior& prior, std::vector<float>& z, int made);

class VitsFlowStream {
  public:
    // Frames pushed at once, at least (fewer only at the sentence's end):
    // the GEMMs of shorter pushes run far below the device's speed. 48
    // rather than 32: on the CPU backend 48 columns are two whole register
    // tiles, while 32 ran on narrower ones, whose 8 accumulators do not
    // cover the FMA latency; joe-medium's flow over a 671-frame sentence,
    // pushed as a decoder in 32-frame chunks asks, took 9-12% less time
    // per frame on one thread, 4% on two (2-vCPU AMD EPYC). The first push
    // is the chunk plus 32 frames of look-ahead anyway (47 at 15 frames).
    static constexpr int kMinPush = 48;

    // The network must outlive the stream (the second form keeps it alive).
    // `min_push`: frames pushed at once, at least (tests push fewer).
    explicit VitsFlowStream(const VitsFlowNetwork& network, int min_push = kMinPush);
    explicit VitsFlowStream(std::shared_ptr<const VitsFlowNetwork> network,
                            int min_push = kMinPush);
    ~VitsFlowStream();
    VitsFlowStream(const VitsFlowStream&) = delete;
    VitsFlowStream& operator=(const VitsFlowStream&) = delete;

    // Starts a new sentence.
    void reset();

    // Where the prior's frames come from: source(first, count, out) writes
    // frames [first, first + count) as [channels][count]. Asked for in
    // order, each frame once, and only as far as the pushes need.
    using PriorSource = std::function<void(int first, int count, float* out)>;

    // z is [channels][frames] for the whole sentence. Pushes the prior's
    // next frames until the output reaches `until` frames (at least
    // min_push at a time, the rest of the sentence at its end; where pushes
    // replay, a push after the first that would end the sentence goes as
    // blocks of powers of two and a flush of one frame), writing each
    // new output frame into the same column of z. Returns the frames of z
    // made so far (>= min(until, frames)).
    int run_until(const PriorSource& prior, int frames, int until, std::vector<float>& z);
    // The same with the whole prior at hand, [channels][frames].
    int run_until(const std::vector<float>& prior, int frames, int until, std::vector<float>& z);
    // The same drawing a sentence's prior (VitsPrior::sample) as the pushes
    // need its frames. A staged prior whose known frames the pushes would
    // reach is completed first (complete_prior), z widened with it.
    int run_until(VitsPrior& prior, int until, std::vector<float>& z);
    int made() const { return made_; }
    // Pushes run since the stream was made (for statistics), and those of
    // them that ran in a batch with other streams' pushes.
    std::uint64_t pushes() const { return pushes_; }
    std::uint64_t batched_pushes() const { return batched_pushes_; }
    // Whether this stream's pushes, alone or in a batch, may replay
    // a recording (on by default where the backend replays natively; tests
    // turn it off to compare).
    void set_replay(bool on) { replay_ = on; }
    // How its pushes alone ran on its own recordings (models/recorded_step.h);
    // a batch's, and a lone push's with a slot, are the network's
    // (VitsFlowNetwork::batch_replay_stats()).
    ReplayStats replay_stats() const { return steps_.stats(); }
    // Whether later pushes may join other streams' in a batch, where the
    // network's streams join (Batching, models/vocoder_network.h: the
    // caller knows how urgent its work is). Join until set.
    void set_batching(Batching batching) { batching_ = batching; }
    // How long the next joined pushes may wait for the lane's other members
    // (rt::now_ns()'s clock; 0, not at all): the caller's share of the
    // chunk's slack (deadline.h's join_wait_until_ns()).
    void set_join_wait_until(std::int64_t ns) { join_wait_until_ns_ = ns; }
    // The sentence ends here without its flush (cancelled, dropped): the
    // lane's batches stop waiting for this stream's next push.
    void leave_join_lane() { membership_.leave(); }
    // True when `prior` is staged and run_until(prior, until, ...) would
    // push up to or past its known frames, so must complete it first. (The
    // pushes reach at least `until`, so a caller that reads frames up to
    // `until` is covered too.)
    bool needs_complete_prior(const VitsPrior& prior, int until) const;

    // Several streams' pushes of this one's network at once, each stream
    // once, this stream's queue running them (the joiner calls it; a lone
    // push is a batch of one). Each stream's output is what its own push
    // would make: the same operations, a batched convolution's item being
    // the same computation as the window alone.
    void push_together(std::span<const VitsFlowPush> pushes) {
        push_in_lane(pushes, net_.batching_->lanes.of(Batching::Join));
    }
    // `streams` (of one flow, or of flows sharing its weights: a voice's
    // speakers; each once) push one block each as their next, all in one
    // batch on this thread (push_together, as the joiner runs their
    // pushes): stream i blocks[i], `frames` frames of prior
    // ([channels][frames]), the sentence ending there where `flush`.
    // Returns each stream's output frames, [channels][made], its halves as
    // the couplings leave them (in reverse channel order where the flow
    // ends flipped). How the batched path is timed (models/batch_timing.h)
    // and tested: a stream pushed so is fit for more such pushes or reset()
    // only (run_until() would not find its output). Throws
    // std::invalid_argument for a block of another size or streams of flows
    // of other weights, and as push_together() does.
    static std::vector<std::vector<float>> push_blocks_together(
        std::span<VitsFlowStream* const> streams, std::span<const std::span<const float>> blocks,
        int frames, bool flush = false);
    // The same with a block of its own length for each stream, each ending
    // its sentence or not (a join of pushes in different states), run by
    // `leader` (streams[0] where null; else a stream of the network that
    // need not be one of them).
    struct Block {
        std::span<const float> prior;  // [channels][frames]
        int frames = 0;
        bool flush = false;
    };
    static std::vector<std::vector<float>> push_blocks_together(
        std::span<VitsFlowStream* const> streams, std::span<const Block> blocks,
        VitsFlowStream* leader = nullptr);
    // The same `block` for every stream, not flushing; the output dropped.
    static void push_block_together(std::span<VitsFlowStream* const> streams,
                                    std::span<const float> block, int frames) {
        const std::vector<std::span<const float>> blocks(streams.size(), block);
        push_blocks_together(streams, blocks, frames);
    }

  private:
    // One WaveNet layer: its dilated convolution (which lags its input by
    // half its kernel), the delay that lines the residual signal up with
    // it, and the delay that lines its skip output up with the last layer's.
    struct Layer {
        StreamConv conv;
        std::optional<StreamDelay> residual_delay;  // not for the last layer
        std::optional<StreamDelay> skip_delay;      // not for the last layer
    };
    // A coupling: its layers, and the delays that line the half it reads
    // (passed through) and the half it shifts up with the WaveNet's output.
    struct Coupling {
        const VitsFlowCoupling* weights = nullptr;
        std::vector<std::unique_ptr<Layer>> layers;
        std::optional<StreamDelay> from_delay, to_delay;
    };
    // One push of the block in host_in_ (`frames` frames), alone or in a
    // batch; the output is left in host_out_, and its frames returned.
    int push_block(int frames, bool flush);
    // push_together() with the joint buffers of `lane`.
    void push_in_lane(std::span<const VitsFlowPush> pushes, JoinLane<VitsFlowPush>& lane);
    // The couplings, for every stream of a push together on `q`: a[i] and
    // second[i] hold stream i's halves in and are replaced by its output.
    void walk_couplings(gpu::Queue& q, std::span<VitsFlowStream* const> streams,
                        std::span<const VitsFlowPush> pushes, std::vector<SignalRef>& a,
                        std::vector<SignalRef>& second, JointScratch& joint);
    // What decides the operations of a push of `frames` frames, the
    // sentence's end where `flush` (BatchMajor::PushState): pushes of equal
    // states are the same operations for any streams of the network.
    BatchMajor::PushState push_state(int frames, bool flush) const;
    // The pushes that can go side by side (batch_major.h): grouped by
    // push_state() (a flush only with flushes), the groups of two or more,
    // largest first, each in the order of its slots.
    static std::vector<std::vector<std::size_t>> same_state_groups(
        std::span<const VitsFlowPush> pushes, std::size_t min_size = 2);
    // Each group of pushes in one state (one alone too) through the lane's
    // recordings (push_batch_recorded); which replayed. The caller holds
    // the lane's lock.
    std::vector<bool> replay_by_state(std::span<const VitsFlowPush> pushes,
                                      JoinLane<VitsFlowPush>& lane);
    // push_in_lane()'s work for one such group, side by side: the priors
    // copied in (upload_batch_priors), the couplings (walk_batch_couplings:
    // no host memory, so a recording's body; the output, both halves of
    // each item together, in the joint buffers), the output copied out
    // (take_batch_output) (flow_batch_major.cpp).
    void walk_batch_major(gpu::Queue& q, std::span<const VitsFlowPush> pushes, JointScratch& joint);
    void upload_batch_priors(gpu::Queue& q, std::span<const VitsFlowPush> pushes,
                             JointScratch& joint);
    SignalRef walk_batch_couplings(gpu::Queue& q, std::span<const VitsFlowPush> pushes,
                                   JointScratch& joint);
    void take_batch_output(gpu::Queue& q, std::span<const VitsFlowPush> pushes,
                           const SignalRef& out);
    // A batch in one state, in the order of its slots (one group of
    // same_state_groups(); or one push, a batch of one), every push of
    // `pushes` side by side, through its key's recording on
    // the lane's queue (recorded_step.h: the length, the members' state and
    // count); false, having done nothing, where it cannot replay. The
    // caller holds the lane's lock.
    bool push_batch_recorded(std::span<const VitsFlowPush> pushes, JoinLane<VitsFlowPush>& lane);
    // This stream's push alone through its own recording of the push's key on its own queue
    // (recorded_step.h); false, having done nothing, where it cannot replay.
    bool push_recorded(const VitsFlowPush& p);
    // (replay_in_lane, stream_joiner.h: the lone and lane recordings' turn
    // of push_in_lane, written once for the decoder and the flow.)
    template <class P, class S, class R>
    friend LeftInLane<P, S> replay_in_lane(std::span<const P>, const std::vector<S*>&, std::mutex&,
                                           R&&);
    bool has_slot() const { return slot_.has_value(); }
    // Calls `layer(WeightedStreamLayer&)` and `delay(StreamDelay&)` on every
    // layer and delay the walk pushes, in its order.
    // (`self`: this stream, const or not, as the callbacks take its layers.)
    template <class Self, class OnLayer, class OnDelay>
    static void each_layer(Self& self, OnLayer&& layer, OnDelay&& delay) {
        for (auto& c : self.couplings_) {
            for (const auto& l : c.layers) {
                layer(l->conv);
                if (l->residual_delay) delay(*l->residual_delay);
                if (l->skip_delay) delay(*l->skip_delay);
            }
            delay(*c.from_delay);
            delay(*c.to_delay);
        }
    }
    // The counts on the host a push moves on, in the walk's order
    // (recorded_step.h: what a replay moves on).
    void host_counts(std::vector<HostCount>& counts);
    // One WaveNet layer's work after its dilated convolution, whose output
    // is `in`: the gate, the residual and the skip paths.
    void layer_rest(gpu::Queue& q, const VitsFlowCoupling& w, std::size_t l, Layer& layer,
                    const SignalRef& in, bool flush, SignalRef& x, SignalRef& sum);
    // The prior's frames run_until(..., until, ...) would push, from the
    // start of the sentence (before the sentence's end caps it).
    int frames_needed(int until) const;

    std::shared_ptr<const VitsFlowNetwork> owner_;  // may be empty
    const VitsFlowNetwork& net_;
    ScratchLender::User lender_user_{net_.lender()};
    std::unique_ptr<gpu::Queue> queue_;
    StreamScratch scratch_;
    // Chunk-sized buffers by role, shared by the couplings (one coupling
    // runs at a time): the halves of the latent (two pairs, in and out),
    // the WaveNet's residual signal (two, alternating), a convolution's
    // output, the gated activations, the residual and skip products, a
    // delayed skip, the skip sum and the coupling's shift; and the output's
    // halves gathered in one place, where a recorded push leaves them.
    // All of them are empty between pushes: the network's lender fills
    // them for one (lent()), or a recording's set of its own (steps_).
    ScratchBuffer halves_[4], x_[2], conv_, acts_, res_, skip_, skip_delayed_, skip_sum_, shift_,
        gathered_;
    std::array<ScratchBuffer*, 16> lent();
    // Where the layers hold their frames: a slot of the network's
    // (batch_major.h) where its streams join, else buffers of their own.
    // Declared before the layers, which keep places in it.
    std::optional<HeldSlots::Slot> slot_;
    HeldSpace* held() { return slot_ ? &*slot_ : nullptr; }
    std::vector<Coupling> couplings_;
    // One push's input and its output on the host. Separate: the upload
    // reads the input asynchronously until the push's synchronize().
    std::vector<float> host_in_, host_out_;
    int min_push_;
    int pushed_ = 0, made_ = 0;
    std::uint64_t pushes_ = 0;
    // Counted by the joiner's lane thread running a batch, while this
    // stream's owner waits for it in the joiner.
    std::uint64_t batched_pushes_ = 0;
    Batching batching_ = Batching::Join;
    bool replay_ = true;
    std::int64_t join_wait_until_ns_ = 0;
    // In the lane of the sentence's pushes (stream_joiner.h): declared
    // after the buffers and layers a batch uses, so that it leaves before
    // they go. (steps_, below, goes before it; no push is pending then.)
    JoinMembership<VitsFlowPush> membership_;
    // The pushes alone of a stream without a slot, recorded per key. Declared last:
    // its recordings name the queue, the layers' held frames and the
    // buffers above, so they must die first.
    RecordedSteps steps_{net_.backend(),
                         [this] {
                             const auto buffers = lent();
                             return std::vector<ScratchBuffer*>(buffers.begin(), buffers.end());
                         }(),
                         RecordedSteps::kMaxLengths,
                         RecordedSteps::WhenFull::RunOpByOp,
                         0,
                         &net_.lone_recordings()};
};

}  // namespace etude::engine
