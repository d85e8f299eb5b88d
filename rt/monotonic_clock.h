/// \file
/// Monotonic time in nanoseconds, safe to read on the audio thread:
/// clock_gettime(CLOCK_MONOTONIC) is served by the vDSO on Linux, with no
/// system call, no lock and no allocation. A public header: a host times its
/// audio callback with it (the JACK output's callback durations).
#pragma once

#include <time.h>

#include <cstdint>

namespace etude::rt {

/// CLOCK_MONOTONIC now, in nanoseconds.
inline std::int64_t now_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// Nanoseconds as milliseconds.
inline double ns_to_ms(std::int64_t ns) noexcept {
    return static_cast<double>(ns) / 1e6;
}

}  // namespace etude::rt
