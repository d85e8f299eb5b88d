#include "engine/models/recorded_step.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <utility>

namespace etude::engine {

// One key's buffers and its recordings, one per variant (declared after the
// buffers, so they die first: a recording must not outlive what it refers
// to).
struct RecordedSteps::Slot {
    Key key;
    std::uint64_t last_used = 0;
    bool sized = false;  // a step has run op by op on `set`
    std::vector<gpu::DeviceBuffer> set;
    struct Variant {
        long id = 0;
        std::uint64_t last_used = 0;
        gpu::Recording recording;
        SignalRef out;  // where the recorded body leaves its output
    };
    std::vector<Variant> variants;
    // How far the recorded body moved the step's host counts on (the same
    // for every variant: the key decides it).
    std::vector<long> moves;
    // What the set's bytes took of the budget, given back with the set.
    RecordingBudget* budget = nullptr;
    std::size_t charged = 0;
    Slot() = default;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() {
        if (budget && charged) budget->give_back(charged);
    }
    std::size_t bytes() const {
        std::size_t n = 0;
        for (const gpu::DeviceBuffer& b : set) n += b.bytes();
        return n;
    }
};

bool RecordingBudget::take(std::size_t bytes) {
    std::size_t held = held_.load();
    do {
        if (held + bytes > max_bytes_.load()) return false;
    } while (!held_.compare_exchange_weak(held, held + bytes));
    return true;
}

void RecordingBudget::give_back(std::size_t bytes) {
    held_.fetch_sub(bytes);
    given_back_.fetch_add(1);
}

namespace {

// Swaps a slot's set into the stream's buffers for one push, and back.
class SetInPlace {
  public:
    SetInPlace(std::vector<ScratchBuffer*>& buffers, std::vector<gpu::DeviceBuffer>& set)
        : buffers_(buffers), set_(set) {
        swap();
    }
    ~SetInPlace() { swap(); }
    SetInPlace(const SetInPlace&) = delete;
    SetInPlace& operator=(const SetInPlace&) = delete;

  private:
    void swap() {
        for (std::size_t i = 0; i < buffers_.size(); ++i) buffers_[i]->swap(set_[i]);
    }
    std::vector<ScratchBuffer*>& buffers_;
    std::vector<gpu::DeviceBuffer>& set_;
};

}  // namespace

RecordedSteps::RecordedSteps(gpu::Backend& backend, std::vector<ScratchBuffer*> buffers,
                             std::size_t max_keys, WhenFull when_full, std::size_t max_bytes,
                             RecordingBudget* budget)
    : backend_(backend),
      buffers_(std::move(buffers)),
      max_keys_(max_keys),
      when_full_(when_full),
      max_bytes_(max_bytes),
      budget_(budget) {
    // (Not info().is_gpu: lavapipe, a CPU device, replays Vulkan command
    // buffers natively too.) Known without a trial recording, which would
    // allocate, and so take an injected fault meant for the model's load.
    const gpu::BackendKind kind = backend.info().kind;
    native_ = kind == gpu::BackendKind::Vulkan || kind == gpu::BackendKind::Cuda;
}

RecordedSteps::~RecordedSteps() = default;

RecordedSteps::Slot* RecordedSteps::slot_for(const Key& key) {
    ++steps_run_;
    for (auto& s : slots_)
        if (s->key == key) {
            s->last_used = steps_run_;
            return s.get();
        }
    for (auto it = refused_.begin(); it != refused_.end(); ++it)
        if (it->first == key) {
            // Refused, and nothing given back since: op by op, without
            // sizing a set again only to let it go.
            if (it->second == budget_->given_back()) return nullptr;
            refused_.erase(it);
            break;
        }
    if (slots_.size() >= max_keys_) {
        if (when_full_ == WhenFull::RunOpByOp || slots_.empty()) return nullptr;
        // (Nothing of the dropped slot's is still queued: every step is
        // synchronized by its caller before the next.)
        drop_oldest();
    }
    auto slot = std::make_unique<Slot>();
    slot->key = key;
    slot->last_used = steps_run_;
    slot->set.resize(buffers_.size());
    slots_.push_back(std::move(slot));
    return slots_.back().get();
}

std::size_t RecordedSteps::held_bytes() const {
    std::size_t total = 0;
    for (const auto& s : slots_) total += s->bytes();
    return total;
}

void RecordedSteps::keep_within_max_bytes() {
    if (max_bytes_ == 0) return;
    for (;;) {
        const std::size_t total = held_bytes();
        // (With two or more, the one used longest ago is not the one just
        // used, which alone may exceed the bound: it stays.)
        if (total <= max_bytes_ || slots_.size() < 2) return;
        drop_oldest();
    }
}

void RecordedSteps::drop_oldest() {
    slots_.erase(std::min_element(slots_.begin(), slots_.end(), [](const auto& a, const auto& b) {
        return a->last_used < b->last_used;
    }));
}

std::vector<void*> RecordedSteps::handles() const {
    std::vector<void*> h;
    for (ScratchBuffer* b : buffers_) h.push_back(b->get().handle());
    return h;
}

bool RecordedSteps::run(gpu::Queue& q, const Key& key, const Step& step, long variant) {
    try {
        const Ran ran = run_queued(q, key, step, variant);
        if (ran == Ran::No) return false;
        backend_.synchronize(q);
        if (ran == Ran::Sized && budget_) {
            // The set's size is known now (the push sized it), and it lies
            // in the slot again.
            const auto it = std::find_if(slots_.begin(), slots_.end(),
                                         [&](const auto& s) { return s->key == key; });
            Slot& slot = **it;
            const std::size_t bytes = slot.bytes();
            if (!budget_->take(bytes)) {
                // The push has run; its set goes, and the key runs op by op
                // until the budget is given something back.
                refused_.emplace_back(key, budget_->given_back());
                slots_.erase(it);
                return true;
            }
            slot.budget = budget_;
            slot.charged = bytes;
        }
        // (Here, not in run_queued: there the set just used lies in the
        // stream's buffers, swapped, and nothing of the others is queued.)
        keep_within_max_bytes();
    } catch (...) {
        try {
            backend_.synchronize(q);
        } catch (...) {
        }
        throw;
    }
    return true;
}

RecordedSteps::Ran RecordedSteps::run_queued(gpu::Queue& q, const Key& key, const Step& step,
                                             long variant) {
    Slot* slot = slot_for(key);
    if (!slot) return Ran::No;
    const SetInPlace in_place(buffers_, slot->set);
    if (!slot->sized) {
        step.stage_input(q);
        step.take_output(q, step.body(q));
        slot->sized = true;
        ++stats_.op_by_op;
        return Ran::Sized;
    }
    // The counts the step moves on: noted around a recording, moved on by
    // a replay.
    std::vector<HostCount> counts;
    step.host_counts(counts);
    auto v = std::find_if(slot->variants.begin(), slot->variants.end(),
                          [&](const Slot::Variant& x) { return x.id == variant; });
    if (v == slot->variants.end()) {
        if (slot->variants.size() >= kMaxVariants)
            slot->variants.erase(std::min_element(
                slot->variants.begin(), slot->variants.end(),
                [](const auto& a, const auto& b) { return a.last_used < b.last_used; }));
        Slot::Variant made;
        made.id = variant;
        // A buffer that grew inside the body leaves every recording of the
        // set naming the freed one: the set is sized anew and they go.
        // Cannot happen for a chunk of a sized key; if it did,
        // the push is lost rather than replayed wrong.
        const std::vector<void*> before = handles();
        const auto set_moved = [&] {
            if (handles() == before) return false;
            slot->sized = false;
            slot->variants.clear();
            return true;
        };
        std::vector<long> counts_before;
        for (const HostCount& c : counts) counts_before.push_back(c.value());
        try {
            made.recording = backend_.record(q, [&](gpu::Queue& rq) { made.out = step.body(rq); });
        } catch (...) {
            set_moved();  // (a body that grew a buffer, then failed)
            throw;
        }
        if (set_moved()) throw std::logic_error("recorded step: a buffer moved while recording");
        // A fallback replay would call the operations one by one anyway:
        // this one replays, and the next chunks go op by op.
        if (!made.recording.replays_natively()) native_ = false;
        slot->variants.push_back(std::move(made));
        v = std::prev(slot->variants.end());
        ++stats_.recordings;
        // The body moved the host counts on already: by this much.
        slot->moves.clear();
        for (std::size_t i = 0; i < counts.size(); ++i)
            slot->moves.push_back(counts[i].value() - counts_before[i]);
    } else {
        if (counts.size() != slot->moves.size())
            throw std::logic_error(
                "recorded step: a replay names other host counts than its key's");
        for (std::size_t i = 0; i < counts.size(); ++i) counts[i].add(slot->moves[i]);
    }
    v->last_used = steps_run_;
    step.stage_input(q);
    backend_.replay(q, v->recording);
    ++stats_.replayed;
    step.take_output(q, v->out);
    return Ran::Replayed;
}

RecordedBatches::RecordedBatches(gpu::Backend& backend, JointScratch& joint)
    : backend_(backend),
      steps_(backend, joint.buffers(), kMaxBatches, RecordedSteps::WhenFull::DropOldest,
             backend.info().global_memory / 8) {}

}  // namespace etude::engine
