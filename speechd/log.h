// The module's log: standard error, which the server sends to <LogDir>/etude.log.
#pragma once

#include <atomic>
#include <cstdio>
#include <string_view>

namespace etude::speechd {

/// LOGLEVEL's number (speech-dispatcher's 0..5; 0 still logs errors).
inline std::atomic<int> g_log_level{3};

/// One line to standard error when `level` is within the log level.
/// Standard output is the protocol's: nothing else may ever go there.
inline void log_line(int level, std::string_view text) {
    if (level > g_log_level.load(std::memory_order_relaxed) && level > 1) return;
    std::fprintf(stderr, "sd_etude: %.*s\n", static_cast<int>(text.size()), text.data());
    std::fflush(stderr);
}

}  // namespace etude::speechd
