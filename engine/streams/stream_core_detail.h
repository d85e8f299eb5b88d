// Helpers that more than one of StreamCore's files needs (stream_core.cpp,
// stream_core_producer.cpp, stream_core_steps.cpp); internal to them, in no
// API.
#pragma once

#include <chrono>

#include "engine/streams/work_items.h"

namespace etude::engine::stream_core_detail {

inline double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Whether a network or offline stream whose voice steps on a pool is
// stepped by the engine's pool of its class (stream_core_steps.cpp): unless
// ETUDE_PRODUCERS=threads gives every stream a producer thread of its own,
// as before the pools (for comparisons).
bool producers_stepped();

}  // namespace etude::engine::stream_core_detail
