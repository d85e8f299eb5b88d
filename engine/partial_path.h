/// \file
/// Where a file is written before it is renamed over its real path, so that a
/// failed or abandoned write leaves nothing at that path. A public header:
/// the file writers of the engine (models, traces) and of `audio-io/` (WAV,
/// .npy) share this one rule.
#pragma once

#include <unistd.h>

#include <atomic>
#include <string>

namespace etude {

/// The temporary for one write of `path`: PATH.partial-PID-N. N makes each
/// write's temporary its own, also for two writers of one path in one
/// process (two threads saving the same file), which the process id alone
/// would make share one, the second truncating the first's bytes.
inline std::string partial_path(const std::string& path) {
    // One counter for the process (an inline function's static is one object).
    static std::atomic<unsigned long> next{0};
    return path + ".partial-" + std::to_string(::getpid()) + "-" +
           std::to_string(next.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace etude
