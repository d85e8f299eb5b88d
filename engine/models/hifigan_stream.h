// The HiFi-GAN network and its incremental stream (hifigan.h makes them):
// the classes, shared by hifigan.cpp (the whole-window run, the walk of a
// push through the layers) and hifigan_batch_major.cpp (the walk of a batch
// in one state side by side). Internal to those files.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/models/batch_major.h"
#include "engine/models/device_weights.h"
#include "engine/models/hifigan.h"
#include "engine/models/receptive_field.h"
#include "engine/models/recorded_step.h"
#include "engine/models/scratch_lender.h"
#include "engine/models/shared_batching.h"
#include "engine/models/stream_joiner.h"
#include "engine/models/stream_layers.h"

namespace etude::engine {

// The generator: hyperparameters checked, weights on the device, and the
// receptive field walked from one output frame back to the mel.
class HifiGanNetwork final : public VocoderNetwork {
  public:
    using Json = MetadataReader::Json;
    HifiGanNetwork(const MetadataReader& meta, const ModelAudioParams& audio, WeightLoader& loader,
                   gpu::Backend& backend, int& left, int& right)
        : backend_(backend), work_(backend), n_mels_(audio.n_mels) {
        const Json& h = meta.at(meta.root(), "hyperparameters", "");
        const std::string p = "hyperparameters.";
        const int kind = meta.integer(h, "resblock", 1, 2, p);
        rates_ = meta.integers(h, "upsample_rates", 1, 64, p);
        const auto up_kernels = meta.integers(h, "upsample_kernel_sizes", 1, 256, p);
        const int ch0 = meta.integer(h, "upsample_initial_channel", 1, 4096, p);
        const auto rb_kernels = meta.integers(h, "resblock_kernel_sizes", 1, 63, p);
        const Json& dil = meta.at(h, "resblock_dilation_sizes", p);
        slope_ = static_cast<float>(meta.number(h, "leaky_relu_slope", p));
        final_slope_ = static_cast<float>(meta.number(h, "final_leaky_relu_slope", p));
        const int pre_k = meta.integer(h, "conv_pre_kernel", 1, 63, p);
        const int post_k = meta.integer(h, "conv_post_kernel", 1, 63, p);
        if (up_kernels.size() != rates_.size())
            meta.fail(p + "upsample_kernel_sizes", "must have one entry per upsample rate");
        if (!dil.is_array() || dil.size() != rb_kernels.size())
            meta.fail(p + "resblock_dilation_sizes", "must have one list per resblock kernel");
        if (pre_k % 2 == 0 || post_k % 2 == 0) meta.fail(p + "conv_pre_kernel", "must be odd");
        long total = 1;
        for (std::size_t i = 0; i < rates_.size(); ++i) {
            if ((up_kernels[i] - rates_[i]) % 2 != 0 || up_kernels[i] < rates_[i])
                meta.fail(p + "upsample_kernel_sizes",
                          "must exceed each rate by an even amount (output length = input x rate)");
            total *= rates_[i];
        }
        if (total != audio.hop)
            meta.fail(p + "upsample_rates", "multiply to " + std::to_string(total) +
                                                ", but hop is " + std::to_string(audio.hop));
        if ((ch0 >> rates_.size()) < 1)
            meta.fail(p + "upsample_initial_channel", "is too small for the number of upsamples");
        std::vector<std::vector<int>> dilations;
        for (std::size_t j = 0; j < dil.size(); ++j) {
            const auto key = "resblock_dilation_sizes[" + std::to_string(j) + "]";
            Json wrap = {{"d", dil[j]}};
            auto d = meta.integers(wrap, "d", 1, 64, p + key);
            if (kind == 1 && d.size() != 3)
                meta.fail(p + key, "must hold 3 dilations for resblock 1");
            if (kind == 2 && d.size() != 2)
                meta.fail(p + key, "must hold 2 dilations for resblock 2");
            if (rb_kernels[j] % 2 == 0) meta.fail(p + "resblock_kernel_sizes", "must be odd");
            dilations.push_back(std::move(d));
        }
        num_kernels_ = static_cast<int>(rb_kernels.size());

        // Weights as PyTorch holds them: Conv1d [out][in][k], ConvTranspose1d [in][out][k].
        auto layer = [&](const std::string& name, int in, int out, int k, int stride, int d,
                         int pad, bool transposed) {
            const auto o = Shape::value_type(out), i = Shape::value_type(in);
            ConvLayer c;
            c.weight = loader.load(name + ".weight",
                                   {transposed ? i : o, transposed ? o : i, Shape::value_type(k)});
            c.bias = loader.load(name + ".bias", {o});
            c.shape.in_channels = in;
            c.shape.out_channels = out;
            c.shape.kernel = k;
            c.shape.stride = stride;
            c.shape.dilation = d;
            c.shape.padding = pad;
            return c;
        };
        auto conv = [&](const std::string& name, int in, int out, int k, int d, int pad) {
            return layer(name, in, out, k, 1, d, pad, false);
        };
        conv_pre_ = conv("conv_pre", audio.n_mels, ch0, pre_k, 1, (pre_k - 1) / 2);
        int ch = ch0;
        for (std::size_t i = 0; i < rates_.size(); ++i) {
            const int out = ch / 2, k = up_kernels[i], u = rates_[i];
            ups_.push_back(layer(tensor_name("ups.", i), ch, out, k, u, 1, (k - u) / 2, true));
            ch = out;
            for (int j = 0; j < num_kernels_; ++j) {
                ResBlock rb;
                const auto base = tensor_name("resblocks.", i * num_kernels_ + j, ".");
                const int k2 = rb_kernels[j];
                for (std::size_t m = 0; m < dilations[j].size(); ++m) {
                    const int d = dilations[j][m];
                    if (kind == 1) {
                        rb.first.push_back(conv(base + tensor_name("convs1.", m), ch, ch, k2, d,
                                                (k2 * d - d) / 2));
                        rb.second.push_back(
                            conv(base + tensor_name("convs2.", m), ch, ch, k2, 1, (k2 - 1) / 2));
                    } else {
                        rb.first.push_back(
                            conv(base + tensor_name("convs.", m), ch, ch, k2, d, (k2 * d - d) / 2));
                    }
                }
                resblocks_.push_back(std::move(rb));
            }
        }
        conv_post_ = conv("conv_post", ch, 1, post_k, 1, (post_k - 1) / 2);
        final_channels_ = ch;

        // Receptive field, walked from one output frame back to the mel.
        ReceptiveField rf;
        long rate = total;
        ReceptiveField::Interval iv{0, rate};
        iv = ReceptiveField::through_conv(iv, post_k, 1, (post_k - 1) / 2);
        rf.require(iv, rate);
        for (std::size_t i = rates_.size(); i-- > 0;) {
            ReceptiveField::Interval widest = iv;
            for (int j = 0; j < num_kernels_; ++j) {
                const auto& rb = resblocks_[i * num_kernels_ + j];
                ReceptiveField::Interval r = iv;
                for (std::size_t m = rb.first.size(); m-- > 0;) {
                    if (!rb.second.empty()) {
                        const auto& s2 = rb.second[m].shape;
                        r = ReceptiveField::through_conv(r, s2.kernel, s2.dilation, s2.padding);
                        rf.require(r, rate);
                    }
                    const auto& s1 = rb.first[m].shape;
                    r = ReceptiveField::through_conv(r, s1.kernel, s1.dilation, s1.padding);
                    rf.require(r, rate);
                }
                widest = {std::min(widest.lo, r.lo), std::max(widest.hi, r.hi)};
            }
            const auto& us = ups_[i].shape;
            iv = ReceptiveField::through_transpose(widest, us.kernel, us.stride, us.padding);
            rate /= us.stride;
            rf.require(iv, rate);
        }
        iv = ReceptiveField::through_conv(iv, pre_k, 1, (pre_k - 1) / 2);
        rf.require(iv, 1);
        left = rf.left();
        right = rf.right();
        hop_ = audio.hop;
        queue_ = backend_.create_queue();
    }

    int values_per_frame() const override { return hop_; }
    std::unique_ptr<NetworkStream> open_stream(int right_context) const override;
    void set_join_streams(bool on) override { join_ = on; }
    StreamJoiner* joiner(Batching kind) const override {
        return join_ && kind != Batching::Alone ? &batching_->lanes.of(kind).joiner : nullptr;
    }
    std::uint64_t batched_layer_calls() const override { return batching_->lanes.batched_calls(); }
    ReplayStats batch_replay_stats() const override;
    // Whether its input layer's bias, where a speaker is folded in, is
    // `other`'s (the same memory): a batch of both then adds none of its own
    // (BatchMajor). The flow's twin: VitsFlowNetwork::same_speaker_biases.
    bool same_speaker_biases(const HifiGanNetwork& other) const {
        return conv_pre_.bias.buffer.handle() == other.conv_pre_.bias.buffer.handle();
    }
    std::unique_ptr<VocoderNetwork> sharing_weights(
        std::span<const float> input_bias) const override;
    RecordingBudget* lone_recordings() const override { return &batching_->lone_recordings; }

    void run(const float* mel, int frames, int first, int count, float* out) override;

  private:
    friend class HifiGanStream;
    // `base`'s layers, its weights borrowed, conv_pre's bias `input_bias`
    // (sharing_weights()).
    HifiGanNetwork(const HifiGanNetwork& base, std::span<const float> input_bias);
    struct ResBlock {
        std::vector<ConvLayer> first, second;  // ResBlock2 has no second convs
    };
    void apply(gpu::Queue& q, const ConvLayer& c, const gpu::DeviceBuffer& in,
               gpu::DeviceBuffer& out, int len, bool transpose) {
        gpu::Conv1dShape s = c.shape;
        s.batch = 1;
        s.in_length = len;
        if (transpose)
            backend_.conv_transpose1d(q, s, in, c.weight.buffer, c.bias.buffer, out);
        else
            backend_.conv1d(q, s, in, c.weight.buffer, c.bias.buffer, out);
    }

    gpu::Backend& backend_;
    std::unique_ptr<gpu::Queue> queue_;
    Workspace work_;
    // The streams' pushes meet in batches on a GPU (stream_joiner.h says
    // why not on the CPU).
    std::atomic<bool> join_{backend_.info().is_gpu};
    // Which network this is, in the keys of batch recordings
    // (shared_batching.h).
    const std::uint64_t id_ = next_network_id();
    int n_mels_ = 0, hop_ = 0, num_kernels_ = 0, final_channels_ = 0;
    float slope_ = 0.1f, final_slope_ = 0.01f;
    std::vector<int> rates_;
    ConvLayer conv_pre_, conv_post_;
    std::vector<ConvLayer> ups_;
    std::vector<ResBlock> resblocks_;
    // Where its streams batch, with those of every network sharing these
    // weights (shared_batching.h). Declared last: its recordings name the
    // weights above. Made here, or the base's (sharing_weights()).
    std::shared_ptr<SharedBatching<StreamPush>> batching_ =
        std::make_shared<SharedBatching<StreamPush>>(backend_);
};

// HiFi-GAN, layer by layer as HifiGanNetwork::run, each layer a stream layer:
// the residual paths are delayed by their branch's lag, and the resblocks of
// a stage by the difference to the slowest one, so every sum lines up.
class HifiGanStream final : public NetworkStream {
  public:
    explicit HifiGanStream(const HifiGanNetwork& net)
        : net_(net), backend_(net.backend_), queue_(backend_.create_queue()) {
        if (net.join_) slot_.emplace(net.batching_->held_slots);
        // Outputs that are never needed at the same time share a buffer
        // (see push()): every conv writes `conv_out_` and is read at once by
        // the next layer or the residual sum; the residual path of a
        // resblock alternates between two buffers, a delay reading one and
        // writing the other.
        pre_ = conv(net.conv_pre_, std::nullopt, conv_out_);
        for (std::size_t i = 0; i < net.ups_.size(); ++i) {
            Stage st;
            st.up = std::make_unique<StreamUpsample>(
                backend_, *queue_, net.ups_[i].shape, net.ups_[i].weight.buffer,
                net.ups_[i].bias.buffer, net.slope_, scratch_, up_out_, held());
            st.channels = net.ups_[i].shape.out_channels;
            std::vector<int> lags;
            for (int j = 0; j < net.num_kernels_; ++j) {
                const auto& rb = net.resblocks_[i * net.num_kernels_ + j];
                Branch br;
                int lag = 0;
                for (std::size_t m = 0; m < rb.first.size(); ++m) {
                    Sub sub;
                    sub.c1 = conv(rb.first[m], net.slope_, conv_out_);
                    int sub_lag = rb.first[m].shape.padding;
                    if (!rb.second.empty()) {
                        sub.c2 = conv(rb.second[m], net.slope_, conv_out_);
                        sub_lag += rb.second[m].shape.padding;
                    }
                    sub.skip = std::make_unique<StreamDelay>(backend_, *queue_, st.channels,
                                                             sub_lag, residual_[m % 2], held());
                    lag += sub_lag;
                    br.subs.push_back(std::move(sub));
                }
                lags.push_back(lag);
                st.branches.push_back(std::move(br));
            }
            const int slowest = lags.empty() ? 0 : *std::max_element(lags.begin(), lags.end());
            for (std::size_t j = 0; j < st.branches.size(); ++j) {
                // The last residual sits in residual_[(subs - 1) % 2]; the
                // aligned copy goes to the other one.
                const std::size_t subs = st.branches[j].subs.size();
                st.branches[j].align = std::make_unique<StreamDelay>(
                    backend_, *queue_, st.channels, slowest - lags[j], residual_[subs % 2], held());
            }
            st.lag = slowest;
            stages_.push_back(std::move(st));
        }
        post_ = conv(net.conv_post_, net.final_slope_, conv_out_);
        // Another speaker's stream differs from this one in the first
        // layer's bias alone (a batch of both reads it from the slot).
        if (slot_) {
            pre_->hold_bias(*queue_, *slot_);
            // Landed before the stream can go: a copy still queued when it
            // went (its slot freed before its queue waits) could land over
            // the next stream's in that slot.
            backend_.synchronize(*queue_);
        }
    }

    // The lag of the whole network in output samples: what must be within the
    // right context the stream waits for.
    long lag_samples() const {
        long total = 1;
        for (int u : net_.rates_) total *= u;
        long lag = static_cast<long>(net_.conv_pre_.shape.padding) * total;
        long rate = 1;
        for (std::size_t i = 0; i < stages_.size(); ++i) {
            rate *= net_.rates_[i];
            lag += static_cast<long>(net_.ups_[i].shape.padding + stages_[i].lag) * (total / rate);
        }
        return lag + net_.conv_post_.shape.padding;
    }

    static bool supports(const HifiGanNetwork& net) {
        if (!StreamConv::supports(net.conv_pre_.shape) ||
            !StreamConv::supports(net.conv_post_.shape))
            return false;
        for (const auto& u : net.ups_)
            if (!StreamUpsample::supports(u.shape)) return false;
        for (const auto& rb : net.resblocks_) {
            for (const auto& c : rb.first)
                if (!StreamConv::supports(c.shape)) return false;
            for (const auto& c : rb.second)
                if (!StreamConv::supports(c.shape)) return false;
        }
        return true;
    }

    // Calls `layer(WeightedStreamLayer&)` and `delay(StreamDelay&)` on every
    // layer and delay in the walk's order.
    // (`self`: this stream, const or not, as the callbacks take its layers.)
    template <class Self, class OnLayer, class OnDelay>
    static void each_layer(Self& self, OnLayer&& layer, OnDelay&& delay) {
        layer(*self.pre_);
        for (auto& st : self.stages_) {
            layer(*st.up);
            for (auto& br : st.branches) {
                for (auto& sub : br.subs) {
                    layer(*sub.c1);
                    if (sub.c2) layer(*sub.c2);
                    delay(*sub.skip);
                }
                delay(*br.align);
            }
        }
        layer(*self.post_);
    }
    // What decides the operations of a push of `frames` frames, the
    // signal's end where `flush` (BatchMajor::PushState): every layer and
    // delay in the walk's order; pushes of equal states are the same
    // operations for any of the network's streams.
    BatchMajor::PushState push_state(int frames, bool flush) const {
        BatchMajor::PushState key{frames, flush ? 1 : 0};
        each_layer(
            *this, [&](const WeightedStreamLayer& l) { l.push_state(key); },
            [&](const StreamDelay& d) { d.push_state(key); });
        return key;
    }
    // The counts on the host a push moves on, every layer's in the walk's
    // order (recorded_step.h: what a replay moves on).
    void host_counts(std::vector<HostCount>& counts) {
        each_layer(
            *this, [&](WeightedStreamLayer& l) { l.host_counts(counts); },
            [&](StreamDelay& d) { d.host_counts(counts); });
    }
    void set_replay(bool on) override { replay_ = on; }
    ReplayStats replay_stats() const override { return steps_.stats(); }

    void reset() override {
        membership_.leave();  // an utterance cut short pushes no more
        pre_->reset();
        post_->reset();
        for (auto& st : stages_) {
            st.up->reset();
            for (auto& br : st.branches) {
                for (auto& sub : br.subs) {
                    sub.c1->reset();
                    if (sub.c2) sub.c2->reset();
                    sub.skip->reset();
                }
                br.align->reset();
            }
        }
        started_ = false;
    }

    void push(const float* mel, int frames, bool flush, std::vector<float>& values,
              Batching batching) override {
        // (On any replaying backend, replays on or off: the same chunks
        // either way, so a stream with replays off is the same work op by op.
        // Not an utterance's first chunk: a short utterance's only push,
        // a flush, would wait for several before its first audio.)
        if (steps_.enabled() && started_ && !replays_as_is(frames, flush)) {
            push_in_steps(mel, frames, flush, values, batching);
            return;
        }
        push_chunk(mel, frames, flush, values, batching);
    }
    // Where chunks replay, a chunk of a power of two frames, or a flush of
    // one (or none), keeps to the keys an utterance meets again and again
    // (recorded_step.h); any other length would be a key of its own, sized
    // op by op for a set that is seldom used again. A flush's length is the
    // rest of its utterance, a different one each time. Only such pushes
    // are recorded: a rare key (an utterance's first chunk of another
    // length) must not hold one of a stream's sets for its life.
    static bool replays_as_is(int frames, bool flush) {
        if (frames <= 1) return true;
        return !flush && (frames & (frames - 1)) == 0;
    }
    // The chunk as chunks of powers of two frames, largest first, and a
    // flush as its last frame: the same audio, since every layer computes
    // each output once whatever the chunks (stream_layers.h).
    void push_in_steps(const float* mel, int frames, bool flush, std::vector<float>& values,
                       Batching batching) {
        const int n_mels = net_.n_mels_;
        std::vector<int> sizes;
        for (std::size_t size :
             RecordedBatches::step_sizes(static_cast<std::size_t>(frames - (flush ? 1 : 0))))
            sizes.push_back(static_cast<int>(size));
        if (flush) sizes.push_back(1);
        int from = 0;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const int n = sizes[i];
            // [n_mels][frames] in, [n_mels][n] out.
            step_mel_.resize(static_cast<std::size_t>(n_mels) * n);
            for (int c = 0; c < n_mels; ++c)
                std::copy_n(mel + static_cast<std::size_t>(c) * frames + from, n,
                            step_mel_.data() + static_cast<std::size_t>(c) * n);
            push_chunk(step_mel_.data(), n, flush && i + 1 == sizes.size(), values, batching);
            from += n;
        }
    }
    void push_chunk(const float* mel, int frames, bool flush, std::vector<float>& values,
                    Batching batching) {
        started_ = true;
        const StreamPush alone{this, mel, frames, flush, &values};
        StreamJoiner* joiner = net_.joiner(batching);
        if (!joiner) {
            membership_.leave();
            push_together({&alone, 1});
            return;
        }
        // (Run on the lane's thread by the batch's first push: this
        // stream's, when it is first.)
        // Whichever stream failed, it reaches every stream of the batch as a
        // device error: each one's scheduler remakes the chunk on the CPU, as
        // for a failed kernel. A member of the lane from the utterance's
        // first push to its flush (the lane's batches wait for its next push,
        // within their slack).
        membership_.push(
            *joiner, alone,
            [this, batching](std::span<const StreamPush> batch) {
                run_naming_the_batch(batch.size(), "HiFi-GAN", "streams", [&] {
                    push_in_lane(batch, net_.batching_->lanes.of(batching));
                });
            },
            join_wait_until_ns_, flush);
    }
    void set_join_wait_until(std::int64_t ns) override { join_wait_until_ns_ = ns; }
    void leave_join_lane() override { membership_.leave(); }
    void push_together(std::span<const StreamPush> pushes) override {
        push_in_lane(pushes, net_.batching_->lanes.of(Batching::Join));
    }
    // push_together() with the joint buffers of `lane`.
    void push_in_lane(std::span<const StreamPush> pushes, JoinLane<StreamPush>& lane);
    // push_together()'s work on `q`: the inputs copied in, the walk through
    // the layers (walk_layers: from the inputs in `x` to the audio), the
    // audio copied out.
    void walk_together(gpu::Queue& q, std::span<const StreamPush> pushes,
                       const std::vector<HifiGanStream*>& streams, JointScratch& joint);
    // Every group of pushes in one state (of `min_size` or more), as
    // BatchMajor::same_state_groups.
    static std::vector<std::vector<std::size_t>> state_groups(
        std::span<const StreamPush> pushes, const std::vector<HifiGanStream*>& streams,
        std::size_t min_size);
    // Each group of pushes in one state (one alone too) through the lane's
    // recordings (push_batch_recorded); which replayed. The caller holds
    // the lane's lock.
    std::vector<bool> replay_by_state(std::span<const StreamPush> pushes,
                                      const std::vector<HifiGanStream*>& streams,
                                      JoinLane<StreamPush>& lane);
    // The pushes that can go side by side (batch_major.h): the largest
    // group of two or more in one state (push_state(): settled streams,
    // or streams that started together; a flush only with flushes), in the
    // order of their slots; none unless two or more.
    static std::vector<std::size_t> same_state_batch(std::span<const StreamPush> pushes,
                                                     const std::vector<HifiGanStream*>& streams);
    // walk_together()'s work for such pushes, side by side: the inputs
    // copied in (upload_batch_mels), the layers (walk_batch_layers: no host
    // memory, so a recording's body), the audio copied out
    // (take_batch_audio) (hifigan_batch_major.cpp).
    void walk_batch_major(gpu::Queue& q, std::span<const StreamPush> pushes,
                          const std::vector<HifiGanStream*>& streams, JointScratch& joint);
    BatchSignal upload_batch_mels(gpu::Queue& q, std::span<const StreamPush> pushes,
                                  JointScratch& joint);
    BatchSignal walk_batch_layers(gpu::Queue& q, const std::vector<HifiGanStream*>& streams,
                                  int frames, bool flush, JointScratch& joint);
    void take_batch_audio(gpu::Queue& q, std::span<const StreamPush> pushes,
                          const BatchSignal& audio);
    // A batch in one state, in the order of its slots (one group of
    // state_groups(); or one push, a batch of one), every push of
    // `pushes` side by side, steps of powers of two members of a page of
    // the held slots at a time, each through its key's recording on the
    // lane's queue (recorded_step.h: the length, the flush, the members'
    // state and the step's count, the page the recording's variant); false,
    // having done nothing, where it cannot replay. The caller holds the
    // lane's lock.
    bool push_batch_recorded(std::span<const StreamPush> pushes,
                             const std::vector<HifiGanStream*>& streams,
                             JoinLane<StreamPush>& lane);
    void walk_layers(gpu::Queue& q, std::span<const StreamPush> pushes,
                     const std::vector<HifiGanStream*>& streams, std::vector<SignalRef>& x,
                     JointScratch& joint);
    // A lone push of a stream without a slot through its own recording of
    // the push's key (recorded_step.h); false, having done nothing, where it
    // cannot replay.
    bool push_recorded(const StreamPush& p);

  private:
    struct Sub {
        std::unique_ptr<StreamConv> c1, c2;  // c2: ResBlock1 only
        std::unique_ptr<StreamDelay> skip;   // the residual, delayed by c1 (+ c2)
    };
    struct Branch {
        std::vector<Sub> subs;
        std::unique_ptr<StreamDelay> align;  // up to the slowest resblock of the stage
    };
    struct Stage {
        std::unique_ptr<StreamUpsample> up;
        std::vector<Branch> branches;
        int channels = 0, lag = 0;
    };
    std::unique_ptr<StreamConv> conv(const ConvLayer& c, std::optional<float> slope,
                                     ScratchBuffer& out) {
        return std::make_unique<StreamConv>(backend_, *queue_, c.shape, c.weight.buffer,
                                            c.bias.buffer, slope, scratch_, out, held());
    }

    // The chunk-sized buffers below, which the network's lender fills for
    // a push and empties after it.
    std::array<ScratchBuffer*, 8> lent() {
        return {&scratch_.window, &scratch_.staging, &mel_,         &conv_out_,
                &up_out_,         &residual_[0],     &residual_[1], &sum_};
    }

    const HifiGanNetwork& net_;
    gpu::Backend& backend_;
    std::unique_ptr<gpu::Queue> queue_;
    ScratchLender::User lender_user_{net_.batching_->lender};
    // Declared before the layers, which keep references to them. Empty
    // between pushes (lent()).
    StreamScratch scratch_;
    ScratchBuffer mel_, conv_out_, up_out_, residual_[2], sum_;
    // Where the layers below hold their samples: a slot of the network's
    // (batch_major.h) where its streams may meet in batches, else buffers
    // of their own (a slot's page holds 16 streams' worth).
    std::optional<HeldSlots::Slot> slot_;
    HeldSpace* held() { return slot_ ? &*slot_ : nullptr; }
    // (replay_in_lane, stream_joiner.h: the lone and lane recordings' turn
    // of push_in_lane, written once for the decoder and the flow.)
    template <class P, class S, class R>
    friend LeftInLane<P, S> replay_in_lane(std::span<const P>, const std::vector<S*>&, std::mutex&,
                                           R&&);
    bool has_slot() const { return slot_.has_value(); }
    std::unique_ptr<StreamConv> pre_, post_;
    std::vector<Stage> stages_;
    bool replay_ = true;
    bool started_ = false;         // a chunk of this utterance was pushed
    std::vector<float> step_mel_;  // one step's mel frames (push_in_steps)
    std::int64_t join_wait_until_ns_ = 0;
    JoinMembership<StreamPush> membership_;  // of its lane (stream_joiner.h)
    // Declared last: its recordings name the queue, the layers' state and
    // the buffers above, so they must die first.
    RecordedSteps steps_{backend_,
                         [this] {
                             const auto buffers = lent();
                             return std::vector<ScratchBuffer*>(buffers.begin(), buffers.end());
                         }(),
                         RecordedSteps::kMaxLengths,
                         RecordedSteps::WhenFull::RunOpByOp,
                         0,
                         &net_.batching_->lone_recordings};
};

}  // namespace etude::engine
