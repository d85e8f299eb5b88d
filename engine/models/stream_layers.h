// Convolutional layers run incrementally over a signal that arrives in
// chunks, on any gpu::Backend: each keeps the last input samples its kernel
// still needs, so a stream of chunks computes every output once, and equal
// (to float rounding) to the layer run on the whole signal with its zero
// padding. The neural vocoders' incremental runners (engine/models/hifigan.cpp,
// vocos.cpp) are built from them, so that a streamed chunk costs its own
// frames only, not a recomputed context.
//
// Each layer lags its input by a fixed number of samples (its padding):
// push() returns the outputs that became complete, and push(..., flush)
// pads the end of the signal with zeros and returns the rest. Signals are
// [channels][length] in device buffers. reset() starts a new signal without
// reallocating.
//
// Memory: a layer keeps only the few samples it holds between chunks (in
// buffers of its own, or where its owner's HeldSpace places them). The
// chunk-sized buffers are its owner's: a StreamScratch that all the layers
// of one stream share (used only inside a push()), and an output buffer
// chosen per layer, which the owner shares between layers whose outputs are
// never needed at the same time. A network of 70 layers then needs a
// handful of chunk-sized buffers, not two per layer, and since none of
// them is kept between pushes, its streams can borrow them for each push
// from the network (scratch_lender.h).
//
// Threads: one owner, whose layers run one at a time on one queue.
// Allocates device memory when a chunk is longer than any before.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "gpu/backend.h"

namespace etude::engine {

// A [channels][length] signal, rows `length` floats apart, from offset 0.
// A layer's output may be changed in place by its consumer (a residual sum);
// it stays valid until the next push() of a layer writing the same buffer.
struct SignalRef {
    gpu::DeviceBuffer* buffer = nullptr;
    int channels = 0;
    int length = 0;
};

// A device buffer that grows on demand; its contents are not kept.
class ScratchBuffer {
  public:
    gpu::DeviceBuffer& need(gpu::Backend& backend, std::size_t floats);
    gpu::DeviceBuffer& get() { return buffer_; }
    // Trades buffers with `other` (a ScratchLender lending its own).
    void swap(gpu::DeviceBuffer& other) { std::swap(buffer_, other); }

  private:
    gpu::DeviceBuffer buffer_;
};

// Chunk-sized buffers the layers of one stream use only inside their own
// push(), so every layer of the stream can share them.
struct StreamScratch {
    ScratchBuffer window;   // a layer's held samples and new input, lined up
    ScratchBuffer staging;  // an upsampler's output before cropping
};

// Several streams' windows and outputs in a joint push (below): one per
// network, since one joint push runs at a time (its owner says how), rather
// than one per stream, each sized for all the streams. `batched_calls`
// counts the backend calls that took two or more streams. A batch-major
// walk (batch_major.h) lines its windows up in `window` and keeps its
// signals in `signals`, the network saying which is which.
struct JointScratch {
    ScratchBuffer in, out;
    ScratchBuffer window;
    // A batch's items' biases side by side, where they differ (the speakers
    // of one voice: BatchMajor::push).
    ScratchBuffer item_bias;
    std::array<ScratchBuffer, 12> signals;
    // The members' slots in their page, one float each, where the batch
    // copies its held samples by index (BatchMajor; set by SlotIndexed,
    // batch_major.h): then a recording of the batch serves any members in
    // those slots' page, the index uploaded before each replay.
    ScratchBuffer slot_index;
    std::vector<int> indexed_slots;  // what slot_index holds; empty: copy by runs
    std::uint64_t batched_calls = 0;
    // Every buffer above: what a recorded batch's set of its own stands in
    // for (RecordedBatches), so none a recording reads is let go under it.
    std::vector<ScratchBuffer*> buffers() {
        std::vector<ScratchBuffer*> all{&in, &out, &window, &item_bias, &slot_index};
        for (ScratchBuffer& s : signals) all.push_back(&s);
        return all;
    }
};

struct BatchMajor;

// One count a layer keeps on the host and its pushes move on (a window's
// held count, an upsampler's totals): what a replayed recording, which runs
// no host code, must move on as the push it recorded did (recorded_step.h).
class HostCount {
  public:
    explicit HostCount(int& count) : int_(&count) {}
    explicit HostCount(long& count) : long_(&count) {}
    long value() const { return int_ ? *int_ : *long_; }
    void add(long by) {
        if (int_)
            *int_ += static_cast<int>(by);
        else
            *long_ += by;
    }

  private:
    int* int_ = nullptr;
    long* long_ = nullptr;
};

// Where a layer keeps the samples it holds between pushes: from `at` in
// `buffer`, [channels][max(hold, 1)].
struct HeldPlace {
    gpu::DeviceBuffer* buffer = nullptr;
    std::size_t at = 0;
    // A place in a slot of a HeldSlots page: which slot (-1: a place of its
    // own), how many the page's buffer holds and how far apart they lie,
    // so that a batch may copy its members' places by an index on the
    // device (BatchMajor, JointScratch::slot_index).
    int slot = -1, slots = 0;
    std::size_t slot_floats = 0;
};

// Gives the layers of one stream the places of their held samples, in the
// order they are made. Without one, each layer allocates its own; with a
// slot of network-owned buffers (HeldSlots, batch_major.h) the held samples
// of a batch's streams lie side by side, and a batch copies them with one
// call for each run of neighbouring slots.
class HeldSpace {
  public:
    virtual ~HeldSpace() = default;
    virtual HeldPlace place(std::size_t floats) = 0;
};

// The last `hold` input samples of every channel, lined up in front of new
// input: the part the layers below share.
class InputWindow {
  public:
    // `q` zero-fills the window's buffers (the layers' constructors take the
    // queue they will run on for this). `work` is the stream's shared
    // StreamScratch::window.
    InputWindow(gpu::Backend& backend, gpu::Queue& q, int channels, int hold, int prefill,
                ScratchBuffer& work, HeldSpace* held = nullptr);
    void reset();  // `prefill` zeros are held (the signal's left padding)
    // work = [held samples | in | `zeros` zeros] per channel; the last `hold`
    // columns of it are held for next time. Returns work's length.
    int append(gpu::Queue& q, const SignalRef& in, int zeros);
    gpu::DeviceBuffer& work() { return work_.get(); }
    int channels() const { return channels_; }
    // What append() does to the held count when its work is `length`
    // columns long (held, new input and a flush's zeros), also for a push
    // that does not run append() (BatchMajor, a replayed recording).
    void take(int length) {
        if (length > 0) held_ = std::min(length, hold_);
    }
    // The held count, and whether the held samples are the prefill's zeros
    // (held_ < 0, read from zeros_): all that decides append()'s copies.
    int held_state() const { return held_; }
    void host_counts(std::vector<HostCount>& counts) { counts.emplace_back(held_); }

  private:
    friend struct BatchMajor;
    // The held samples: in own_tail_ unless a HeldSpace placed them (the
    // window may move, so the own buffer is not named by a pointer).
    gpu::DeviceBuffer& tail() { return place_.buffer ? *place_.buffer : own_tail_; }
    std::size_t tail_at() const { return place_.buffer ? place_.at : 0; }
    HeldPlace held_place() { return place_.buffer ? place_ : HeldPlace{&own_tail_, 0}; }
    gpu::Backend& backend_;
    int channels_, hold_, prefill_, held_ = 0;
    gpu::DeviceBuffer own_tail_, zeros_;
    HeldPlace place_;
    ScratchBuffer& work_;
};

// What a convolution and an upsampler share: the layer's weights, its input
// window, an optional leaky ReLU on the input, where its output goes, and
// push() in two steps: stage() lines the window up (and activates it) and
// says which outputs of the layer's backend call over it are handed out;
// then that call runs, over this window alone (run_alone) or beside other
// streams' windows (JointPush, below).
class WeightedStreamLayer {
  public:
    virtual ~WeightedStreamLayer() = default;
    WeightedStreamLayer(WeightedStreamLayer&&) = default;  // (layers are held by value too)
    int lag() const { return shape_.padding; }
    // What a push of `in_length` samples (the signal's end where `flush`:
    // its zeros appended) does to the layer's counts (its window's held
    // count, an upsampler's totals), for a push that does not run push() (a
    // replayed recording, a batch-major push): plan()'s window, as stage().
    virtual void advance(int in_length, bool flush = false) {
        window_.take(plan(in_length, flush).length);
    }
    // Appends to `key` what decides the operations of the layer's next
    // push, for a given input length, flushing or not: the window's held
    // count (and whether it is the prefill's zeros), and for an upsampler
    // how many of its first outputs it still drops. Two layers of one
    // network with equal keys, pushed the same length (both flushing or
    // neither), issue the same operations with the same shapes and hand out
    // the same outputs, and their keys are equal again after (BatchMajor
    // runs such pushes as one). Settled layers' keys are all equal.
    virtual void push_state(std::vector<long>& key) const { key.push_back(window_.held_state()); }
    // Appends every count on the host that a push moves on (HostCount).
    virtual void host_counts(std::vector<HostCount>& counts) { window_.host_counts(counts); }
    SignalRef push(gpu::Queue& q, const SignalRef& in, bool flush) {
        return run_alone(q, stage(q, in, flush));
    }
    // A copy of its bias kept in a place of `held` (the stream's slot),
    // beside the same layer's of the neighbouring slots: a batch whose
    // items' biases differ (a voice's speakers) gathers them from there,
    // one copy per run of neighbours, and a batch's recording finds there
    // the bias of whichever stream holds the slot when it replays
    // (BatchMajor). Nothing for a layer without a bias. Runs on `q`.
    void hold_bias(gpu::Queue& q, HeldSpace& held);

  protected:
    WeightedStreamLayer(gpu::Backend& backend, gpu::Queue& q, const gpu::Conv1dShape& shape,
                        const gpu::DeviceBuffer& weight, const gpu::DeviceBuffer& bias,
                        std::optional<float> input_slope, int hold, int prefill,
                        StreamScratch& scratch, ScratchBuffer& out, HeldSpace* held);
    // The leaky ReLU over the window's first `length` columns (the window
    // holds raw input; the activation is applied to the copy).
    void activate(gpu::Queue& q, int length);

    struct Staged {
        int length = 0;  // window columns
        long first = 0;  // outputs of the call over the window to drop in front
        long count = 0;  // outputs handed out, from `first` on
    };
    virtual Staged stage(gpu::Queue& q, const SignalRef& in, bool flush) = 0;
    // stage()'s arithmetic without its work or its effect on the counts:
    // the window's length and the outputs handed out for a push of
    // `in_length` samples.
    virtual Staged plan(int in_length, bool flush) const = 0;
    // The backend call over `batch` windows of `length` columns each, and
    // the outputs it makes per window.
    virtual gpu::Conv1dShape run_shape(int batch, int length) const = 0;
    virtual int run_outputs(int length) const = 0;
    // The call with `bias` (bias_, or an empty buffer for none: a batch
    // whose items' biases differ adds them after, BatchMajor::push).
    virtual void launch(gpu::Queue& q, const gpu::Conv1dShape& s, const gpu::DeviceBuffer& in,
                        const gpu::DeviceBuffer& bias, gpu::DeviceBuffer& out) = 0;
    void launch(gpu::Queue& q, const gpu::Conv1dShape& s, const gpu::DeviceBuffer& in,
                gpu::DeviceBuffer& out) {
        launch(q, s, in, bias_, out);
    }
    // Whether `other` runs on the same weights and bias (the same memory:
    // a network sharing another's weights borrows them), so that the two
    // go in one call.
    bool same_weights_and_bias(const WeightedStreamLayer& other) const {
        return weight_.handle() == other.weight_.handle() && bias_.handle() == other.bias_.handle();
    }
    SignalRef run_alone(gpu::Queue& q, const Staged& st);
    // The staged outputs, out of a call's outputs at `at` (rows `stride`
    // apart), into this layer's output buffer.
    SignalRef hand_out(gpu::Queue& q, const gpu::DeviceBuffer& from, std::size_t at,
                       std::size_t stride, const Staged& st);

    gpu::Backend& backend_;
    gpu::Conv1dShape shape_;
    const gpu::DeviceBuffer& weight_;
    const gpu::DeviceBuffer& bias_;
    std::optional<float> slope_;
    StreamScratch& scratch_;
    InputWindow window_;
    ScratchBuffer& out_;
    HeldPlace bias_place_;  // hold_bias(); none before

  private:
    friend struct JointPush;
    friend struct BatchMajor;
};

// conv1d with "same" zero padding ((kernel-1)*dilation == 2*padding), any
// groups, stride 1; an optional leaky ReLU on its input. Lag: padding.
// Its output goes to `out` (which may be the input's buffer: the input is
// copied into the window first).
class StreamConv final : public WeightedStreamLayer {
  public:
    StreamConv(gpu::Backend& backend, gpu::Queue& q, const gpu::Conv1dShape& shape,
               const gpu::DeviceBuffer& weight, const gpu::DeviceBuffer& bias,
               std::optional<float> input_slope, StreamScratch& scratch, ScratchBuffer& out,
               HeldSpace* held = nullptr);
    // Whether `shape` can run this way.
    static bool supports(const gpu::Conv1dShape& shape);
    void reset() { window_.reset(); }

  private:
    Staged stage(gpu::Queue& q, const SignalRef& in, bool flush) override;
    Staged plan(int in_length, bool flush) const override;
    gpu::Conv1dShape run_shape(int batch, int length) const override;
    int run_outputs(int length) const override { return length - 2 * shape_.padding; }
    using WeightedStreamLayer::launch;
    void launch(gpu::Queue& q, const gpu::Conv1dShape& s, const gpu::DeviceBuffer& in,
                const gpu::DeviceBuffer& bias, gpu::DeviceBuffer& out) override {
        backend_.conv1d(q, s, in, weight_, bias, out);
    }
};

// conv_transpose1d (upsampling by `stride`) whose kernel minus stride is a
// whole, even number of strides (HiFi-GAN's kernel = 2 x stride); an
// optional leaky ReLU on its input. Lag: padding output samples.
class StreamUpsample final : public WeightedStreamLayer {
  public:
    StreamUpsample(gpu::Backend& backend, gpu::Queue& q, const gpu::Conv1dShape& shape,
                   const gpu::DeviceBuffer& weight, const gpu::DeviceBuffer& bias,
                   std::optional<float> input_slope, StreamScratch& scratch, ScratchBuffer& out,
                   HeldSpace* held = nullptr);
    static bool supports(const gpu::Conv1dShape& shape);
    void reset();
    void advance(int in_length, bool flush = false) override {
        count(plan(in_length, flush), in_length);
        WeightedStreamLayer::advance(in_length, flush);
    }
    // Past `padding` outputs made, the first ones dropped no longer depend
    // on how many: the key of every settled upsampler is the same. A
    // flush's last outputs follow too: every push makes stride outputs per
    // input sample (the prefill holds the window's tail), so the outputs
    // still owed, in_total_ x stride - out_total_, are this minimum.
    void push_state(std::vector<long>& key) const override {
        WeightedStreamLayer::push_state(key);
        key.push_back(std::min<long>(full_total_, shape_.padding));
    }
    void host_counts(std::vector<HostCount>& counts) override {
        WeightedStreamLayer::host_counts(counts);
        counts.emplace_back(in_total_);
        counts.emplace_back(out_total_);
        counts.emplace_back(full_total_);
    }

  private:
    Staged stage(gpu::Queue& q, const SignalRef& in, bool flush) override;
    Staged plan(int in_length, bool flush) const override;
    // A staged push's counts: `in_length` taken, st's outputs made and handed out.
    void count(const Staged& st, int in_length);
    gpu::Conv1dShape run_shape(int batch, int length) const override;
    // With the window's tail samples in front, cropping held * u outputs on
    // each side leaves exactly the outputs the new input completes.
    int run_outputs(int length) const override {
        return std::max(0, (length - tail(shape_)) * shape_.stride);
    }
    using WeightedStreamLayer::launch;
    void launch(gpu::Queue& q, const gpu::Conv1dShape& s, const gpu::DeviceBuffer& in,
                const gpu::DeviceBuffer& bias, gpu::DeviceBuffer& out) override {
        backend_.conv_transpose1d(q, s, in, weight_, bias, out);
    }
    static int tail(const gpu::Conv1dShape& s);  // input samples held: (kernel - stride) / stride
    // Input taken, outputs handed out, and outputs made before cropping
    // (from the left padding on).
    long in_total_ = 0, out_total_ = 0, full_total_ = 0;
};

// Delays a signal by `delay` samples (to line a residual path up with the
// layers beside it); at flush it hands out what it held. Each sample is
// copied once on its way through, from the input or from the held samples
// straight into `out`, which must not be the input's buffer.
class StreamDelay {
  public:
    StreamDelay(gpu::Backend& backend, gpu::Queue& q, int channels, int delay, ScratchBuffer& out,
                HeldSpace* held = nullptr);
    void reset() { held_ = 0; }
    SignalRef push(gpu::Queue& q, const SignalRef& in, bool flush);
    // As WeightedStreamLayer::push_state(): the held count decides a push.
    void push_state(std::vector<long>& key) const { key.push_back(held_); }
    void host_counts(std::vector<HostCount>& counts) { counts.emplace_back(held_); }

  private:
    friend struct BatchMajor;
    // Of the `total` samples not yet handed out ([held | in]), those a push
    // hands out: all at a flush, else all but `delay`.
    int handed_out(int total, bool flush) const {
        return flush ? total : std::max(total - delay_, 0);
    }
    gpu::Backend& backend_;
    int channels_, delay_, held_ = 0;
    // The held samples: always in tail() (own_[0] unless a HeldSpace
    // placed them), so that a recorded push finds them where the last one
    // left them. When part of them stays held, the next ones are gathered
    // in own_[1] and copied back, so no copy overlaps its source.
    gpu::DeviceBuffer& tail() { return place_.buffer ? *place_.buffer : own_[0]; }
    std::size_t tail_at() const { return place_.buffer ? place_.at : 0; }
    HeldPlace held_place() { return place_.buffer ? place_ : HeldPlace{&own_[0], 0}; }
    gpu::DeviceBuffer own_[2];
    HeldPlace place_;
    ScratchBuffer& out_;
};

// Several streams' pushes through the same layer of one network (the same
// weights, one backend): the streams whose windows have the same length (in
// steady state, every stream pushing chunks of one size) and whose layers
// have the same bias (another speaker's first layer has its own) run as one
// backend call of that batch size, each window one batch item, and each stream's
// outputs are copied out to its own buffer; the others run alone. A batch
// item is the same computation as the window alone, so each stream gets the
// values its own push would make (on the CPU's direct convolutions, bit for
// bit). Lining windows of any length up end to end in one long signal was
// tried first: the outputs that straddle two windows, thrown away, are as
// many as a window's held samples (up to 50 a layer for HiFi-GAN V1), more
// than a 4-frame chunk's new ones in the first stage. Each step's
// layer belongs to a different stream; the calls run on `q` and use `joint`.
struct LayerStep {
    WeightedStreamLayer* layer = nullptr;
    SignalRef in;
    bool flush = false;
    SignalRef out;  // set by push_together
};
struct JointPush {
    static void push_together(gpu::Queue& q, std::span<LayerStep> steps, JointScratch& joint);
};

}  // namespace etude::engine
