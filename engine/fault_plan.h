// Fault injection for tests and drills: makes a processor slow on purpose so
// that the scheduler's fallback can be proven. Set through StreamOptions, or
// for the primary processor through the ETUDE_FAULT_SLOW environment variable
// ("PROBABILITY:MILLISECONDS", e.g. "0.05:30").
#pragma once

#include <cstdint>

namespace etude::engine {

struct FaultPlan {
    double slow_probability = 0.0;  // chance that a block is delayed
    double slow_ms = 0.0;           // by this much, on top of its real cost
    std::uint32_t seed = 1;
    bool active() const { return slow_probability > 0.0 && slow_ms > 0.0; }
};

}  // namespace etude::engine
