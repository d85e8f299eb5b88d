// A stream's chunk of device work recorded once per chunk length and
// replayed after (gpu::Backend::record/replay): one submission of a Vulkan
// command buffer or a CUDA graph in place of a few hundred launches.
//
// What makes a chunk replayable: a recording freezes the shapes, the host
// values and the buffers of its operations. So
// - the key says what decides them: for a stream of layers (stream_layers.h)
//   the chunk's length, whether it flushes, and every layer's state (its
//   window's held count, an upsampler's dropped outputs: push_state()). Two
//   chunks of one key issue the same operations on the same buffers, in
//   any state: the first chunks of an utterance, whose windows are still
//   filling, and a flush replay too, each from a recording of its own.
// - the chunk-sized buffers must stay put: in place of the network's
//   ScratchLender (which lends any set for each push, and grows it when a
//   chunk is longer), each key gets a set of its own, swapped into the
//   stream's ScratchBuffers for its pushes. Its first chunk runs op by op
//   on it, which sizes it (a buffer that grew inside a recording would
//   leave the recording on freed memory); its second is recorded.
// - host memory stays out: the input is copied into the set's input buffer
//   before the replay, the output copied out after it.
// - the counts a push moves on in the host's memory (stream_layers.h's
//   HostCount: held counts, an upsampler's totals), which a replay does not
//   touch: the recording notes how far its body moved each on, and each
//   replay moves them on as far (before it is queued). A key decides the
//   operations, so it decides these moves too.
// Only where the backend replays natively: elsewhere (CPU, OpenCL) a
// replay would call the same operations one by one, for nothing.
//
// Memory: a set per key (up to kMaxLengths), held for the stream's life:
// for a Piper medium voice about 10 MB at 32 frames, less for shorter keys
// (a Piper flow's about half a megabyte at 48, by its buffers' sizes).
// Threads: one at a time: the stream's producer, or its joiner's lane
// thread running the stream's push while its producer waits in the joiner.
//
// A batch of streams side by side (batch_major.h) replays the same way
// (RecordedBatches, below): a batch of one key (its members in one state,
// one chunk length) issues the same operations on the same buffers every
// time (the pages of the slots' held samples, the network's weights, and
// the joint buffers, which a set per key stands in for as above). A batch runs as steps of a power
// of two members each within each page of the held slots its members lie in
// (RecordedBatches::run_by_page, step_sizes), each copying its members'
// held samples by the index of their slots, uploaded before each replay as
// the input is (SlotIndexed). So a step's key is the chunk length, the
// flush, the members' state and their count, and the page is the
// recording's variant: one set of buffers serves every page, and one
// recording a page serves any members of it. A step of another size is another key, never replayed
// from a recording that would run a leaver's slot. A lone push of a stream
// with a slot runs as a batch of one, so the network's streams share these
// recordings, their first chunks and flushes too: a stream's own
// recordings (RecordedSteps above) serve a stream without a slot.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engine/models/batch_major.h"
#include "engine/models/stream_joiner.h"
#include "engine/models/stream_layers.h"
#include "engine/models/vocoder_network.h"
#include "gpu/backend.h"

namespace etude::engine {

// What the lone recordings of one network's streams (RecordedSteps below,
// a buffer set per stream and chunk length) may hold together: about 13 MB
// a set for a Piper medium decoder at 32 frames, so a thousand streams'
// would be tens of gigabytes of device memory. A set that would pass the
// bound is let go once its sizing push has run, and that stream's chunks
// of that length run op by op, until some set is given back (a stream
// ended, or dropped one). Thread-safe.
class RecordingBudget {
  public:
    explicit RecordingBudget(std::size_t max_bytes) : max_bytes_(max_bytes) {}
    // Takes `bytes` if they fit beside what is held; false, taking nothing,
    // if not.
    bool take(std::size_t bytes);
    void give_back(std::size_t bytes);
    std::size_t held() const { return held_.load(); }
    std::size_t max_bytes() const { return max_bytes_.load(); }
    // For tests and tuning: a new bound (what is held stays).
    void set_max_bytes(std::size_t bytes) { max_bytes_.store(bytes); }
    // How many times a set was given back: a length refused before may be
    // tried again once this has moved.
    std::uint64_t given_back() const { return given_back_.load(); }

  private:
    std::atomic<std::size_t> max_bytes_;
    std::atomic<std::size_t> held_{0};
    std::atomic<std::uint64_t> given_back_{0};
};

class RecordedSteps {
  public:
    // A lone decoder stream's keys: its chunk lengths (powers of two)
    // settled, the states its utterances fill their windows through (each
    // utterance starts fresh: reset()), and the flush; about ten for
    // Piper's schedule. Keys past them run op by op: every utterance meets
    // the same keys in the same order, so dropping the one used longest
    // ago would drop each key just before it is met again.
    static constexpr std::size_t kMaxLengths = 12;
    // What decides a step's operations: the length, the flush and the
    // layers' states (push_state()).
    using Key = std::vector<long>;
    // With `max_keys` sets held, a new key runs op by op (a lone stream's
    // keys: a few, each for the stream's life), or takes the place of the
    // key used longest ago (a lane's batches, whose members come and go: a
    // batch of streams that left is not seen again).
    enum class WhenFull { RunOpByOp, DropOldest };
    // `buffers`: the chunk-sized buffers (a stream's, empty between pushes;
    // or a lane's joint ones): a key's set is swapped into them for each
    // step, and swapped back after.
    // `max_bytes` (0: no bound): what the keys' sets may hold together;
    // past it, the sets used longest ago go (the one just used stays).
    // `budget` (null: none): what the sets of every stream of the network
    // may hold together (RecordingBudget); a set it cannot take is let go.
    RecordedSteps(gpu::Backend& backend, std::vector<ScratchBuffer*> buffers,
                  std::size_t max_keys = kMaxLengths, WhenFull when_full = WhenFull::RunOpByOp,
                  std::size_t max_bytes = 0, RecordingBudget* budget = nullptr);
    ~RecordedSteps();
    RecordedSteps(const RecordedSteps&) = delete;
    RecordedSteps& operator=(const RecordedSteps&) = delete;

    // Whether the stream's chunks replay: on a backend that replays
    // natively (Vulkan, CUDA), until a recording says it does not.
    bool enabled() const { return native_; }

    // One chunk of the operations `key` decides on `q`: `stage_input`
    // copies the chunk into the stream's buffers, `body` issues the device
    // work and says where its output lies, `take_output` copies it out;
    // `host_counts` names the counts `body` moves on, in an order the key
    // decides (a replay moves them on as the recording's body did). Runs op
    // by op (the first time, or when a `body` moved a buffer), records, or
    // replays.
    // False, having done nothing, when no set is free for `key` (or the
    // budget refused one for it, and none was given back since). Returns
    // (or throws) with `q` synchronized: nothing queued may still write to
    // the buffers or the outputs once the caller gives them back.
    // Every step of one RecordedSteps runs on the same `q` (a recording
    // replays only on the queue it was recorded on).
    struct Step {
        std::function<void(gpu::Queue&)> stage_input;
        std::function<SignalRef(gpu::Queue&)> body;
        std::function<void(gpu::Queue&, const SignalRef&)> take_output;
        std::function<void(std::vector<HostCount>&)> host_counts;
    };
    // `variant`: steps of one key whose operations differ only in buffers
    // outside the key's set (a batch's page of held slots: RecordedBatches)
    // share the set and are recorded one per variant, at most kMaxVariants
    // a key (past them, the one replayed longest ago goes).
    static constexpr std::size_t kMaxVariants = 64;
    bool run(gpu::Queue& q, const Key& key, const Step& step, long variant = 0);

    ReplayStats stats() const { return stats_; }

  private:
    struct Slot;
    Slot* slot_for(const Key& key);
    // What run_queued() did: nothing (no set for the key), the op-by-op
    // push that sized the key's set, or a replay (recorded first, or not).
    enum class Ran { No, Sized, Replayed };
    Ran run_queued(gpu::Queue& q, const Key& key, const Step& step, long variant);
    std::size_t held_bytes() const;  // what the sets hold
    // Drops the sets used longest ago while the sets hold more than
    // max_bytes_, keeping the one used last.
    void keep_within_max_bytes();
    void drop_oldest();  // the set used longest ago
    std::vector<void*> handles() const;

    gpu::Backend& backend_;
    std::vector<ScratchBuffer*> buffers_;
    const std::size_t max_keys_;
    const WhenFull when_full_;
    const std::size_t max_bytes_;
    RecordingBudget* const budget_;
    std::vector<std::unique_ptr<Slot>> slots_;
    // Keys whose set the budget refused, with its given_back() then.
    std::vector<std::pair<Key, std::uint64_t>> refused_;
    std::uint64_t steps_run_ = 0;  // the clock of Slot::last_used
    ReplayStats stats_;
    bool native_ = false;
};

// The recordings of one join lane's side-by-side batches (a network's
// JointScratch, batch_major.h), on a queue of their own: a batch runs on
// the queue of whichever member runs it, and a recording replays only on
// the queue it was recorded on. Keys as above; kMaxBatches sets, each
// the joint buffers of one batch (for a Piper medium voice about 10 MB per
// stream at 32 frames), the one used longest ago dropped for a new key, and
// dropped too while the sets hold more than an eighth of the device's
// memory (a thousand streams' batch is gigabytes): a network's two lanes
// keep at most a quarter of it in recordings, the rest left to the
// weights, the streams' held samples and the batches that run op by op.
// Threads: whoever holds the lane's lock.
class RecordedBatches {
  public:
    // (A batch takes a key per power of two it has in a page's member
    // count, up to nine for a page of 256, and a lane's chunk lengths and
    // states multiply them: a decoder's utterance starts in three states
    // and flushes in a fourth, beside its settled lengths, and lone pushes
    // are batches of one. The bound on bytes holds whatever this allows.)
    static constexpr std::size_t kMaxBatches = 64;
    RecordedBatches(gpu::Backend& backend, JointScratch& joint);
    // Made at the first batch that may replay (none on the CPU, OpenCL).
    gpu::Queue& queue() {
        if (!queue_) queue_ = backend_.create_queue();
        return *queue_;
    }
    RecordedSteps& steps() { return steps_; }
    // A batch's key: the members' one state (push_state(): the chunk
    // length and the flush in front), then their count. Its members
    // lie in one page of the held slots (run_by_page), copied by slot
    // index (SlotIndexed), so its operations differ from another such
    // batch's only in the page, which is the recording's variant
    // (RecordedSteps::run): one set of joint buffers serves every page, and
    // one recording a page serves any members of it.
    static RecordedSteps::Key key(BatchMajor::PushState state, std::size_t members) {
        state.push_back(-2);
        state.push_back(static_cast<long>(members));
        return state;
    }
    // A batch in one state, its members (0 to count - 1) in slot order
    // (`slot_of(i)`), run as recorded steps of a power of two members each
    // (step_sizes()) within each page its members lie in:
    // `run_page(members, slots, page)` runs one such step, its members'
    // slots in the page given, and says whether a set was free. False,
    // having run nothing, where the first step's was not (the caller runs
    // the batch op by op).
    template <class SlotOf, class RunPage>
    static bool run_by_page(std::size_t count, SlotOf slot_of, RunPage run_page) {
        bool first = true;
        for (std::size_t b = 0; b < count;) {
            const std::size_t page = slot_of(b).order().first;
            std::size_t end = b;
            while (end < count && slot_of(end).order().first == page) ++end;
            for (std::size_t size : step_sizes(end - b)) {
                std::vector<std::size_t> members;
                std::vector<int> slots;
                for (std::size_t e = b; e < b + size; ++e) {
                    members.push_back(e);
                    slots.push_back(slot_of(e).order().second);
                }
                if (!run_page(members, std::move(slots), static_cast<long>(page))) {
                    // (A lane's recordings drop the oldest set for a new key
                    // and have no budget: they always find one.)
                    if (first) return false;
                    throw std::logic_error("RecordedBatches: no set for a later step of a batch");
                }
                first = false;
                b += size;
            }
        }
        return true;
    }
    // How a page's `members` split into steps: the powers of two that sum
    // to it, largest first (13: 8, 4, 1). A step's key holds its member
    // count, so a lane whose batches come in every size up to a page's
    // would otherwise hold a key, its buffers and its recording for each
    // size; a few keys stay recorded where that many would drop one another
    // from RecordedBatches' kMaxBatches. (On an H200, 256 streams read
    // offline made batches of 1 to 80 pushes, 5.7 on average, and 454
    // operations a batch: mostly op by op.) A batch of 13 then issues three
    // replays rather than one.
    static std::vector<std::size_t> step_sizes(std::size_t members) {
        std::vector<std::size_t> sizes;
        for (std::size_t bit = std::size_t(1) << (8 * sizeof(std::size_t) - 1); bit; bit >>= 1)
            if (members & bit) sizes.push_back(bit);
        return sizes;
    }

  private:
    gpu::Backend& backend_;
    std::unique_ptr<gpu::Queue> queue_;
    RecordedSteps steps_;  // declared after the queue its recordings name
};

}  // namespace etude::engine
