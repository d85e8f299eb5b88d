// One unit of the work that makes audio, as the device executor sees it:
// a decoder chunk (with the flow it needs) or a sentence's analysis, of one
// stream, for one network. A stream has at most one unit ready at a time
// (each chunk continues the state its previous one left), so a stream is a
// state machine the executor advances one unit at a time, not a thread.
#pragma once

#include <cstdint>

#include "engine/scheduling/deadline.h"

namespace etude::engine::executor {

struct WorkUnit {
    std::uint64_t stream = 0;  // whose it is; cancelling a stream drops its units
    // What it runs: a network at one shape (voice, layer group, chunk size).
    // Only units of one network share a batch: a batch is one launch of one
    // network over several streams' inputs.
    std::uint32_t network = 0;
    std::int32_t frames = 0;  // its size, in the network's frames
    WorkDue due;              // when it is due (deadline.h's one order)
};

}  // namespace etude::engine::executor
