// Helpers that more than one of StreamCore's files needs (stream_core.cpp,
// stream_core_producer.cpp); internal to them, in no API.
#pragma once

#include <algorithm>
#include <chrono>
#include <string_view>

#include "engine/engine.h"
#include "engine/work_items.h"

namespace etude::engine::stream_core_detail {

inline double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// A mark's name into `mark`: one cut short at kMaxName bytes is cut at a
// character's start (a word can be long); the rest of `mark.name` stays
// zero, so it ends with a NUL.
inline void copy_mark_name(std::string_view name, SpeechMark& mark) {
    std::size_t n = std::min(name.size(), SpeechMark::kMaxName);
    while (n < name.size() && n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80) --n;
    name.copy(mark.name, n);
}

}  // namespace etude::engine::stream_core_detail
