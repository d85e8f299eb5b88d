// A batch of streams in one state side by side through one network's
// stream layers (stream_layers.h): the batch's signal is one buffer,
// [batch][channels][length], from layer to layer, so every operation that
// is the same for each stream (the new input's copy into the windows, the
// leaky ReLU, the convolution, a residual sum) is one backend call for the
// batch, not one per stream. The samples each layer holds between chunks
// are copied into the batch's windows and back: two copies per layer for
// each run of streams in neighbouring slots of the network's HeldSlots
// (below), or two for the batch where it copies by slot index (SlotIndexed,
// at the end), where a push of its own issues four or five operations per
// layer and a JointPush seven per stream (a fresh batch's windows, which
// hold the prefill's zeros, take one fill instead of the copy in). What
// stays per stream is its mel's upload and its audio's download.
//
// Which pushes: those whose streams are in one state (every layer of every
// stream holding as many samples, and so on: BatchMajor::PushState), every
// stream pushing the same number of samples, all flushing or none. Settled
// streams (every window full, every delay holding its samples, every
// upsampler past its left padding) are all in one state; so are streams
// that started together, pushing their first chunks while their windows
// fill from the prefill's zeros, which is when a stream's first audio
// waits, and pushing their sentences' ends together (a flush: each
// window's zeros appended, one fill for the batch, and every delay emptied,
// as each stream's own flush). A batch item is then
// the same computation, on the same values, as the stream's own push: on
// the CPU's direct convolutions its outputs are the same bit for bit
// (within float rounding where the items' biases differ: the batch adds
// each one after the sum, where a call alone starts from it). The
// streams' layers are updated (held samples, counts) as their own pushes
// would update them (a flush's too, so reset() and the next sentence go
// on as after a flush alone), so any later push, alone, joint, replayed
// from a recording or side by side, goes on from where this one left.
//
// Threads: as JointPush: the calls run on `q`, the streams' queues idle.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "engine/models/stream_layers.h"

namespace etude::engine {

// A batch's signal: `batch` items of [channels][length], one after another
// in `buffer` from offset 0.
struct BatchSignal {
    gpu::DeviceBuffer* buffer = nullptr;
    int batch = 0, channels = 0, length = 0;
    std::size_t floats() const {
        return static_cast<std::size_t>(batch) * static_cast<std::size_t>(channels) *
               static_cast<std::size_t>(length);
    }
};

// Network-owned buffers that hold its streams' held samples side by side: a
// stream takes a slot, and the k-th place its layers ask for lies in the
// k-th buffer of the slot's page, at slot x its size. Every stream of one
// network makes the same layers in the same order, so a batch whose streams
// sit in neighbouring slots (sorted by order()) copies each layer's held
// samples with one call per run of neighbours, not one per stream. Pages
// of kPage slots are allocated as streams come and never move (a layer
// keeps its place's buffer); a slot goes back when its stream goes.
//
// On OpenCL a page holds one slot, each stream's held samples in buffers
// of their own: a slot's stream pushes alone on its own queue while a
// batch on another queue writes its neighbours' slots, and OpenCL's memory
// model orders commands on one memory object, not on parts of it, across
// queues (PoCL 3.1 aborted in its own bookkeeping, 3 of 15 runs of
// etude_many_streams --join, with pages of 16 there; docs/backends.md).
// CUDA's and Vulkan's buffers are plain device memory, and the CPU
// backend's host memory: disjoint parts from several queues are fine.
// Threads: any; a slot's places are its stream's.
class HeldSlots {
  public:
    static constexpr int kPage = 16;
    // On a GPU of data-centre size (32 GB or more), pages of kLargePage:
    // a batch in one state replays recordings per page its members lie in,
    // one per power of two in the page's member count
    // (RecordedBatches::run_by_page), so a thousand streams make four
    // pages' steps (at most 4 x 9 replays, 4 of 256 where the pages are
    // full), not 63 pages' of 16. A Piper medium voice's stream holds
    // 61,184 floats in its decoder's slot and 38,400 in its flow's
    // (en_US-joe-medium), so a page of 256 is about 100 MB, allocated with
    // the voice's first stream.
    static constexpr int kLargePage = 256;
    // (30 GiB: a card sold as 32 GB reports a little under 32 GiB.)
    static constexpr std::size_t kLargeDeviceBytes = std::size_t(30) << 30;
    explicit HeldSlots(gpu::Backend& backend);
    // The slots of a page on `backend`: kPage, kLargePage on a large GPU,
    // or 1 on OpenCL (above).
    static int slots_per_page(const gpu::DeviceInfo& info);
    static int slots_per_page(const gpu::Backend& backend) {
        return slots_per_page(backend.info());
    }
    class Slot final : public HeldSpace {
      public:
        explicit Slot(HeldSlots& slots);
        ~Slot() override;
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;
        HeldPlace place(std::size_t floats) override;
        // Neighbouring slots are neighbours in this order.
        std::pair<std::size_t, int> order() const { return {page_, index_}; }

      private:
        HeldSlots& slots_;
        std::size_t page_ = 0, next_ = 0;
        int index_ = 0;
    };

  private:
    struct Page {
        explicit Page(int slots) : used(static_cast<std::size_t>(slots), false) {}
        std::vector<std::unique_ptr<gpu::DeviceBuffer>> buffers;
        std::vector<std::size_t> floats;  // each buffer's per slot
        std::vector<bool> used;
    };
    gpu::Backend& backend_;
    const int page_slots_;  // slots_per_page(backend_)
    std::mutex mu_;
    std::vector<std::unique_ptr<Page>> pages_;
};

struct BatchMajor {
    // What decides the operations of a stream's push: its length, whether
    // it flushes, then each layer's and delay's push_state()
    // (stream_layers.h) in the network's order. Pushes of one network with
    // equal states are the same operations on the same shapes, item for
    // item, so they run side by side.
    using PushState = std::vector<long>;
    // Which of `count` pushes run side by side: those `may(i)` allows (some
    // frames), grouped by `state(i)`, the groups of two or
    // more, largest first, each in the order of its streams' slots
    // (`slot(i)`; null for a stream without one, which goes last), so that
    // neighbours' held samples go as one copy.
    // (`min_size` 1: every group, a push alone in its state too.)
    static std::vector<std::vector<std::size_t>> same_state_groups(
        std::size_t count, const std::function<bool(std::size_t)>& may,
        const std::function<PushState(std::size_t)>& state,
        const std::function<const HeldSlots::Slot*(std::size_t)>& slot, std::size_t min_size = 2);
    // The same layer of each stream of the batch (layers[b] takes item b of
    // `in`; the same weights, the biases each its own), all in one state
    // (push_state()): their pushes of in.length
    // samples, the signals' ends where `flush`, as one call, each layer's
    // counts updated as its own push would (plan(), the arithmetic its own
    // stage() follows). The outputs go to `out` (which may be in's
    // buffer), item b stream b's; of length 0 where the windows are still
    // filling. Throws std::logic_error for layers in different states.
    static BatchSignal push(gpu::Queue& q, std::span<WeightedStreamLayer* const> layers,
                            const BatchSignal& in, bool flush, JointScratch& joint,
                            ScratchBuffer& out);
    // The same for each stream's StreamDelay (all in one state; at a flush
    // every held sample goes out); `out` must not be in's buffer.
    static BatchSignal delay(gpu::Queue& q, std::span<StreamDelay* const> delays,
                             const BatchSignal& in, bool flush, JointScratch& joint,
                             ScratchBuffer& out);

  private:
    // Whether the layers' biases differ (the first layer of each speaker of
    // a voice whose speakers share every other weight: a batch may hold
    // several). Throws std::logic_error for layers of other weights, or with
    // a bias on some only: checked before the batch changes anything.
    static bool biases_differ(std::span<WeightedStreamLayer* const> layers);
    // Each layer's bias side by side in joint.item_bias, for the batch's
    // call to add after running without one: from the copies the layers
    // keep in their slots (WeightedStreamLayer::hold_bias), one copy per
    // run of neighbours, else one copy per item.
    static const gpu::DeviceBuffer& item_biases(gpu::Queue& q,
                                                std::span<WeightedStreamLayer* const> layers,
                                                JointScratch& joint);
};

// While alive, the batches run on `joint` copy their members' held samples
// by the index of their slots (JointScratch::slot_index, one gather or
// scatter per layer) in place of a copy per run of neighbours. For a
// recorded batch, whose members share one page of the held slots
// (RecordedBatches::run_by_page): its recording then serves any members of
// that page, upload() putting their slots on the device before each replay
// (host memory stays out of a recording). Threads: the lane's lock holder.
class SlotIndexed {
  public:
    // `slots`: each member's, in the batch's order.
    SlotIndexed(JointScratch& joint, std::vector<int> slots);
    ~SlotIndexed() { joint_.indexed_slots.clear(); }
    SlotIndexed(const SlotIndexed&) = delete;
    SlotIndexed& operator=(const SlotIndexed&) = delete;
    // Queues the index's upload on `q`; this object must outlive it.
    void upload(gpu::Backend& backend, gpu::Queue& q);

  private:
    JointScratch& joint_;
    std::vector<float> index_;
};

}  // namespace etude::engine
