// One processor's queue of ready units, taken earliest deadline first
// (deadline.h's WorkDue order: a started stream's urgent work before all
// else), in batches formed on purpose: the first unit due, and with it the
// units of the same network due within the batch rule's window, as many as
// the rule allows and the first unit's deadline still leaves time for.
//
// Not thread-safe: the executor owns one per processor and calls it under
// its own lock (or from one thread, as the simulation does). Never touched
// by an audio callback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/executor/batch_cost.h"
#include "engine/executor/work_unit.h"

namespace etude::engine::executor {

class ReadyQueue {
  public:
    void push(const WorkUnit& unit) { units_.push_back(unit); }
    bool empty() const { return units_.empty(); }
    std::size_t size() const { return units_.size(); }

    // The next batch at `now_ns`, in order (first: the unit due first);
    // empty when the queue is. The batch grows only while `cost` still
    // finishes it by its first unit's deadline, so batching never makes
    // the most urgent unit late; a unit that is late already goes alone.
    std::vector<WorkUnit> take_batch(std::int64_t now_ns, const BatchRule& rule,
                                     const BatchCost& cost);

    // Drops every unit of `stream` (cancelled, or its client gone); how many.
    std::size_t remove_stream(std::uint64_t stream);

    // How long the units that go before a unit due `due` keep the processor
    // busy, in batches as the rule forms them at best: what a unit routed
    // here now waits before its own batch starts.
    std::int64_t wait_before_ns(const WorkDue& due, std::int64_t now_ns, const BatchRule& rule,
                                const BatchCost& cost) const;

  private:
    std::vector<WorkUnit> units_;
};

}  // namespace etude::engine::executor
