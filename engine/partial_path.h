// Where a file is written before it is renamed over its real path, so that a
// failed or abandoned write leaves nothing at that path: PATH.partial-PID-N.
// The number makes each write's temporary its own. With the process id alone,
// two writers of one path in one process (two threads saving the same file,
// or a second writer opened before the first commits) shared one temporary:
// the second truncated the first's bytes and one rename then failed.
#pragma once

#include <unistd.h>

#include <atomic>
#include <string>

namespace etude {

inline std::string partial_path(const std::string& path) {
    // One counter for the process (an inline function's static is one object).
    static std::atomic<unsigned long> next{0};
    return path + ".partial-" + std::to_string(::getpid()) + "-" +
           std::to_string(next.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace etude
