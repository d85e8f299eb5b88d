// Monotonic time in nanoseconds, safe to read on the audio thread:
// clock_gettime(CLOCK_MONOTONIC) is served by the vDSO on Linux, with no
// system call, no lock and no allocation.
#pragma once

#include <time.h>

#include <cstdint>

namespace etude::rt {

inline std::int64_t now_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline double ns_to_ms(std::int64_t ns) noexcept {
    return static_cast<double>(ns) / 1e6;
}

}  // namespace etude::rt
