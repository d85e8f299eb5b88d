// Helpers that more than one of StreamCore's files needs (stream_core.cpp,
// stream_core_producer.cpp); internal to them, in no API.
#pragma once

#include <chrono>

#include "engine/streams/work_items.h"

namespace etude::engine::stream_core_detail {

inline double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace etude::engine::stream_core_detail
