#include "engine/models/hifigan.h"

#include "engine/models/hifigan_stream.h"

namespace etude::engine {

// ---- the whole-window run and the incremental run, side by side ----------
//
// Whole window: every layer over all of the window's frames at once, in the
// workspace's buffers.
void HifiGanNetwork::run(const float* mel, int frames, int first, int count, float* out) {
    gpu::Queue& q = *queue_;
    std::size_t widest = static_cast<std::size_t>(conv_pre_.shape.out_channels) * frames;
    {
        std::size_t ch = conv_pre_.shape.out_channels, len = frames;
        for (int u : rates_) {
            ch /= 2;
            len *= u;
            widest = std::max(widest, ch * len);
        }
    }
    auto& in = work_.get(0, static_cast<std::size_t>(n_mels_) * frames);
    gpu::DeviceBuffer* x = &work_.get(1, widest);
    gpu::DeviceBuffer* y = &work_.get(2, widest);
    auto& r = work_.get(3, widest);
    auto& t1 = work_.get(4, widest);
    auto& t2 = work_.get(5, widest);
    backend_.copy_to_device(q, in, 0, mel, static_cast<std::size_t>(n_mels_) * frames);

    int len = frames;
    apply(q, conv_pre_, in, *x, len, false);
    for (std::size_t i = 0; i < ups_.size(); ++i) {
        const int ch = ups_[i].shape.in_channels;
        backend_.activation(q, gpu::Activation::LeakyRelu, *x, *x,
                            static_cast<std::size_t>(ch) * len, slope_);
        apply(q, ups_[i], *x, *y, len, true);
        len *= rates_[i];
        const std::size_t n = static_cast<std::size_t>(ups_[i].shape.out_channels) * len;
        // y holds the upsampled signal; x collects the resblock sum.
        for (int j = 0; j < num_kernels_; ++j) {
            const auto& rb = resblocks_[i * num_kernels_ + j];
            backend_.axpby(q, n, 1.0f, *y, 0.0f, r);
            for (std::size_t m = 0; m < rb.first.size(); ++m) {
                // ResBlock1: r += c2(lrelu(c1(lrelu(r)))); ResBlock2: r += c1(lrelu(r)).
                backend_.activation(q, gpu::Activation::LeakyRelu, r, t1, n, slope_);
                apply(q, rb.first[m], t1, t2, len, false);
                const gpu::DeviceBuffer* branch = &t2;
                if (!rb.second.empty()) {
                    backend_.activation(q, gpu::Activation::LeakyRelu, t2, t2, n, slope_);
                    apply(q, rb.second[m], t2, t1, len, false);
                    branch = &t1;
                }
                backend_.axpby(q, n, 1.0f, *branch, 1.0f, r);
            }
            backend_.axpby(q, n, 1.0f, r, j == 0 ? 0.0f : 1.0f, *x);
        }
        backend_.axpby(q, n, 1.0f / static_cast<float>(num_kernels_), *x, 0.0f, *x);
    }
    const std::size_t n = static_cast<std::size_t>(final_channels_) * len;
    backend_.activation(q, gpu::Activation::LeakyRelu, *x, *x, n, final_slope_);
    apply(q, conv_post_, *x, *y, len, false);
    backend_.activation(q, gpu::Activation::Tanh, *y, *y, static_cast<std::size_t>(len));
    backend_.copy_to_host(q, out, *y, static_cast<std::size_t>(first) * hop_,
                          static_cast<std::size_t>(count) * hop_);
    backend_.synchronize(q);
}

// Incremental: the same layers as stream layers, each keeping the input its
// kernel still needs; the sums line up through the delays made above. Every
// stream of the push goes through each layer before any goes to the next, so
// that the streams' convolutions run as one backend call per layer
// (JointPush, stream_layers.h); one stream alone is the same walk.
void HifiGanStream::push_in_lane(std::span<const StreamPush> pushes, JoinLane<StreamPush>& lane) {
    // Streams of a network of other weights cannot share this one's layers:
    // each goes alone (not through push(), which may wait for a joiner this
    // thread may be running a batch of). Another speaker's network of the
    // same voice shares them (its own first-layer bias aside, BatchMajor).
    std::vector<HifiGanStream*> streams;
    for (const auto& p : pushes) {
        auto* s = dynamic_cast<HifiGanStream*>(p.stream);
        if (!s || s->net_.batching_ != net_.batching_) {
            for (const auto& one : pushes)
                if (auto* h = dynamic_cast<HifiGanStream*>(one.stream))
                    h->push_together({&one, 1});
                else
                    one.stream->push(one.mel, one.frames, one.flush, *one.values, Batching::Alone);
            return;
        }
        streams.push_back(s);
    }
    // The pushes through the lane's recordings, a group of those in one
    // state at a time, and a lone push of a stream whose held samples lie in
    // the network's slots as a batch of one (push_batch_recorded): the
    // recordings all the network's streams share, so that every stream's
    // first chunks (each utterance starts in the same states) and flushes
    // replay one recording per key, where recordings of its own would pay
    // only once the stream had sized and recorded each key itself. A lone
    // push of a stream without a slot goes through its own (streams[0]'s,
    // whose push it is).
    auto left = replay_in_lane(pushes, streams, lane.mu,
                               [&] { return replay_by_state(pushes, streams, lane); });
    if (left.pushes.empty()) return;
    const std::vector<StreamPush>& rest = left.pushes;
    const std::vector<HifiGanStream*>& rest_streams = left.streams;
    std::vector<std::array<ScratchBuffer*, 8>> buffers;
    for (HifiGanStream* s : rest_streams) buffers.push_back(s->lent());
    const std::vector<std::span<ScratchBuffer* const>> groups(buffers.begin(), buffers.end());
    // Declared before the try: the catch below synchronizes while the
    // buffers are still this push's.
    const ScratchLender::Loan loan(net_.batching_->lender, groups);
    gpu::Queue& q = *queue_;
    try {
        walk_together(q, rest, rest_streams, lane.joint);
    } catch (...) {
        // What was queued before the failure must not still be writing to
        // the streams' buffers (or, copied to the host, to their values)
        // once they have returned and rolled back.
        try {
            backend_.synchronize(q);
        } catch (...) {
        }
        throw;
    }
}

void HifiGanStream::walk_together(gpu::Queue& q, std::span<const StreamPush> pushes,
                                  const std::vector<HifiGanStream*>& streams, JointScratch& joint) {
    // Everything below runs on this stream's queue: the others' own queues
    // must have finished (their layers' zero fills, on a GPU).
    for (HifiGanStream* s : streams)
        if (s != this) backend_.synchronize(*s->queue_);
    // The pushes in one state side by side, the others layer by layer
    // as below.
    std::vector<StreamPush> side_by_side, rest;
    std::vector<HifiGanStream*> side_streams, rest_streams;
    std::vector<bool> steady(pushes.size(), false);
    for (std::size_t i : same_state_batch(pushes, streams)) {
        steady[i] = true;
        side_by_side.push_back(pushes[i]);
        side_streams.push_back(streams[i]);
    }
    for (std::size_t i = 0; i < pushes.size(); ++i)
        if (!steady[i]) {
            rest.push_back(pushes[i]);
            rest_streams.push_back(streams[i]);
        }
    if (!side_by_side.empty()) walk_batch_major(q, side_by_side, side_streams, joint);
    const std::size_t count = rest.size();
    const auto each = [&](auto&& body) {
        for (std::size_t i = 0; i < count; ++i) body(*rest_streams[i], rest[i], i);
    };
    std::vector<SignalRef> x(count);
    each([&](HifiGanStream& s, const StreamPush& p, std::size_t i) {
        const std::size_t n_in = static_cast<std::size_t>(net_.n_mels_) * std::max(p.frames, 0);
        auto& in = s.mel_.need(backend_, n_in);
        if (n_in > 0) backend_.copy_to_device(q, in, 0, p.mel, n_in);
        x[i] = {&in, net_.n_mels_, p.frames};
    });
    if (count > 0) walk_layers(q, rest, rest_streams, x, joint);
    each([&](HifiGanStream&, const StreamPush& p, std::size_t i) {
        if (x[i].length <= 0) return;
        const std::size_t n = static_cast<std::size_t>(x[i].length);
        const std::size_t at = p.values->size();
        p.values->resize(at + n);
        backend_.copy_to_host(q, p.values->data() + at, *x[i].buffer, 0, n);
    });
    backend_.synchronize(q);
}

// No host memory and no waits in here: a recording (push_recorded) is this
// walk for one stream.
void HifiGanStream::walk_layers(gpu::Queue& q, std::span<const StreamPush> pushes,
                                const std::vector<HifiGanStream*>& streams,
                                std::vector<SignalRef>& x, JointScratch& joint) {
    const std::size_t count = pushes.size();
    const auto each = [&](auto&& body) {
        for (std::size_t i = 0; i < count; ++i) body(*streams[i], pushes[i], i);
    };
    // One layer of every stream: `layer` picks it, `in` is each one's input;
    // the outputs come back in `out`.
    const auto together = [&](auto layer, const std::vector<SignalRef>& in,
                              std::vector<SignalRef>& out) {
        std::vector<LayerStep> steps(count);
        each([&](HifiGanStream& s, const StreamPush& p, std::size_t i) {
            steps[i].layer = layer(s);
            steps[i].in = in[i];
            steps[i].flush = p.flush;
        });
        JointPush::push_together(q, steps, joint);
        out.resize(count);
        each([&](HifiGanStream&, const StreamPush&, std::size_t i) { out[i] = steps[i].out; });
    };
    together([](HifiGanStream& s) { return s.pre_.get(); }, x, x);
    std::vector<SignalRef> y, r, b;
    for (std::size_t k = 0; k < stages_.size(); ++k) {
        const int channels = stages_[k].channels;
        together([k](HifiGanStream& s) { return s.stages_[k].up.get(); }, x, y);
        // Every resblock, lined up, completes the same samples.
        std::vector<int> length(count, -1);
        for (std::size_t j = 0; j < stages_[k].branches.size(); ++j) {
            r = y;
            for (std::size_t m = 0; m < stages_[k].branches[j].subs.size(); ++m) {
                // ResBlock1: r + c2(lrelu(c1(lrelu(r)))); ResBlock2: r + c1(lrelu(r)).
                const auto sub = [k, j, m](HifiGanStream& s) -> Sub& {
                    return s.stages_[k].branches[j].subs[m];
                };
                together([&](HifiGanStream& s) { return sub(s).c1.get(); }, r, b);
                if (sub(*this).c2)
                    together([&](HifiGanStream& s) { return sub(s).c2.get(); }, b, b);
                each([&](HifiGanStream& s, const StreamPush& p, std::size_t i) {
                    const SignalRef d = sub(s).skip->push(q, r[i], p.flush);
                    if (b[i].length != d.length) throw Error("HiFi-GAN stream: paths out of step");
                    if (d.length > 0)
                        backend_.axpby(q, static_cast<std::size_t>(channels) * d.length, 1.0f,
                                       *b[i].buffer, 1.0f, *d.buffer);
                    r[i] = d;
                });
            }
            each([&](HifiGanStream& s, const StreamPush& p, std::size_t i) {
                const SignalRef a = s.stages_[k].branches[j].align->push(q, r[i], p.flush);
                if (j == 0)
                    length[i] = a.length;
                else if (a.length != length[i])
                    throw Error("HiFi-GAN stream: resblocks out of step");
                const std::size_t n = static_cast<std::size_t>(channels) * length[i];
                if (n > 0)
                    backend_.axpby(q, n, 1.0f, *a.buffer, j == 0 ? 0.0f : 1.0f,
                                   s.sum_.need(backend_, n));
            });
        }
        each([&](HifiGanStream& s, const StreamPush&, std::size_t i) {
            const std::size_t n = static_cast<std::size_t>(channels) * std::max(length[i], 0);
            if (n > 0)
                backend_.axpby(q, n, 1.0f / static_cast<float>(stages_[k].branches.size()),
                               s.sum_.get(), 0.0f, s.sum_.get());
            // The next stage's upsampler takes x into its window before
            // anything writes `sum_` again.
            x[i] = {&s.sum_.get(), channels, std::max(length[i], 0)};
        });
    }
    together([](HifiGanStream& s) { return s.post_.get(); }, x, x);
    for (const SignalRef& out : x)
        if (out.length > 0)
            backend_.activation(q, gpu::Activation::Tanh, *out.buffer, *out.buffer,
                                static_cast<std::size_t>(out.length));
}

bool HifiGanStream::push_recorded(const StreamPush& p) {
    if (!replay_ || !steps_.enabled() || p.frames <= 0 || !replays_as_is(p.frames, p.flush))
        return false;
    gpu::Queue& q = *queue_;
    const std::size_t n_in = static_cast<std::size_t>(net_.n_mels_) * p.frames;
    RecordedSteps::Step step;
    step.stage_input = [&](gpu::Queue& sq) {
        backend_.copy_to_device(sq, mel_.need(backend_, n_in), 0, p.mel, n_in);
    };
    step.body = [&](gpu::Queue& bq) {
        std::vector<SignalRef> x{{&mel_.get(), net_.n_mels_, p.frames}};
        // (One stream: the joint buffers are not used.)
        walk_layers(bq, {&p, 1}, {this}, x, net_.batching_->lanes.of(Batching::Join).joint);
        return x[0];
    };
    step.take_output = [&](gpu::Queue& oq, const SignalRef& out) {
        const std::size_t n = static_cast<std::size_t>(out.length);
        const std::size_t at = p.values->size();
        p.values->resize(at + n);
        backend_.copy_to_host(oq, p.values->data() + at, *out.buffer, 0, n);
    };
    step.host_counts = [&](std::vector<HostCount>& counts) { host_counts(counts); };
    return steps_.run(q, push_state(p.frames, p.flush), step);
}

namespace {

// A layer whose weights are another network's (borrowed: that network
// outlives this one's).
ConvLayer borrowed(const ConvLayer& c) {
    return {{c.weight.buffer.borrow(), c.weight.shape},
            {c.bias.buffer.borrow(), c.bias.shape},
            c.shape};
}

}  // namespace

HifiGanNetwork::HifiGanNetwork(const HifiGanNetwork& base, std::span<const float> input_bias)
    : backend_(base.backend_),
      work_(backend_),
      n_mels_(base.n_mels_),
      hop_(base.hop_),
      num_kernels_(base.num_kernels_),
      final_channels_(base.final_channels_),
      slope_(base.slope_),
      final_slope_(base.final_slope_),
      rates_(base.rates_),
      batching_(base.batching_) {
    const auto channels = static_cast<std::size_t>(base.conv_pre_.shape.out_channels);
    if (input_bias.size() != channels)
        throw std::invalid_argument("HiFi-GAN: an input bias of " +
                                    std::to_string(input_bias.size()) + " values, not " +
                                    std::to_string(channels));
    join_.store(base.join_.load());
    queue_ = backend_.create_queue();
    conv_pre_ = borrowed(base.conv_pre_);
    conv_pre_.bias.buffer = backend_.allocate(channels, kWeightsTag);
    backend_.copy_to_device(*queue_, conv_pre_.bias.buffer, 0, input_bias.data(), channels);
    conv_post_ = borrowed(base.conv_post_);
    for (const ConvLayer& up : base.ups_) ups_.push_back(borrowed(up));
    for (const ResBlock& rb : base.resblocks_) {
        ResBlock mine;
        for (const ConvLayer& c : rb.first) mine.first.push_back(borrowed(c));
        for (const ConvLayer& c : rb.second) mine.second.push_back(borrowed(c));
        resblocks_.push_back(std::move(mine));
    }
    backend_.synchronize(*queue_);  // (input_bias is the caller's)
}

std::unique_ptr<VocoderNetwork> HifiGanNetwork::sharing_weights(
    std::span<const float> input_bias) const {
    return std::unique_ptr<VocoderNetwork>(new HifiGanNetwork(*this, input_bias));
}

ReplayStats HifiGanNetwork::batch_replay_stats() const {
    return batching_->replay_stats();
}

std::unique_ptr<NetworkStream> HifiGanNetwork::open_stream(int right_context) const {
    if (!HifiGanStream::supports(*this)) return nullptr;
    auto s = std::make_unique<HifiGanStream>(*this);
    // The stream hands out frames once their right context is in: the
    // runner must have completed them by then.
    if (s->lag_samples() > static_cast<long>(right_context) * hop_) return nullptr;
    return s;
}

std::unique_ptr<VocoderNetwork> make_hifigan_network(const MetadataReader& meta,
                                                     const ModelAudioParams& audio,
                                                     WeightLoader& loader, gpu::Backend& backend,
                                                     int& left_context, int& right_context) {
    return std::make_unique<HifiGanNetwork>(meta, audio, loader, backend, left_context,
                                            right_context);
}

}  // namespace etude::engine
