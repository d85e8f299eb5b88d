// The device executor's core: which processor makes each ready unit and
// which units go together in a batch, for every stream at once. Streams
// have no threads of their own here: a stream submits its next unit when
// the previous one is done (it is a state machine), each processor (a
// device, or the CPU pool's workers) takes batches from its own
// earliest-deadline-first ReadyQueue, and a unit goes to the processor
// that processor_chooser.h's rule picks: the preferred one expected to
// finish it by its deadline, else the quickest.
//
// No clock and no threads: the caller says what time it is and runs the
// launches it is handed, so the same code is driven by the simulated
// device in tests/engine/executor/ (a thousand streams in virtual time on
// two cores) and by threads around real devices. Not thread-safe; never
// called from an audio callback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/executor/batch_cost.h"
#include "engine/executor/ready_queue.h"
#include "engine/executor/work_unit.h"
#include "engine/scheduling/processor_chooser.h"

namespace etude::engine::executor {

class Executor {
  public:
    struct ProcessorSpec {
        Processor kind = Processor::Gpu;  // how the chooser names it
        BatchRule rule;
        BatchCost cost;
        int workers = 1;  // batches it runs at once (a device's queue: 1)
    };

    // The processors in order of preference (a device first, the CPU last).
    explicit Executor(std::vector<ProcessorSpec> processors);

    // A stream's next unit is ready; returns the processor it joins, or -1
    // when none is available (every processor lost).
    int submit(const WorkUnit& unit, std::int64_t now_ns);

    // A batch handed to one worker of one processor to run.
    struct Launch {
        int processor = 0;
        int worker = 0;
        std::vector<WorkUnit> units;
        std::int64_t expected_ns = 0;  // the cost model's time for it
    };
    // Batches for every idle worker that has ready units, at `now_ns`.
    std::vector<Launch> start_ready(std::int64_t now_ns);
    // The worker finished its launch and is idle again.
    void finished(int processor, int worker);

    // The processor failed for good (device lost): it takes no more work,
    // and its queue and the units it was running go to the others.
    void lose(int processor, std::span<const WorkUnit> running, std::int64_t now_ns);
    // The worker's launch did not fit in memory: its units go back to the
    // queue and the processor's batches are at most half that size from
    // now on (smaller batches, not failure).
    void out_of_memory(int processor, int worker, std::span<const WorkUnit> units);
    // Drops the queued units of a cancelled stream; how many. A unit
    // already launched finishes; its caller drops the result.
    std::size_t cancel(std::uint64_t stream);

    const BatchRule& rule(int processor) const { return at(processor).spec.rule; }
    bool available(int processor) const { return !at(processor).lost; }
    std::size_t queued(int processor) const { return at(processor).queue.size(); }

  private:
    struct ProcessorState {
        ProcessorSpec spec;
        ReadyQueue queue;
        std::vector<std::int64_t> busy_until_ns;  // per worker; -1: idle
        bool lost = false;
    };
    ProcessorState& at(int processor) { return processors_[static_cast<std::size_t>(processor)]; }
    const ProcessorState& at(int processor) const {
        return processors_[static_cast<std::size_t>(processor)];
    }
    std::int64_t estimate_ns(const ProcessorState& p, const WorkUnit& unit,
                             std::int64_t now_ns) const;

    std::vector<ProcessorState> processors_;
};

}  // namespace etude::engine::executor
