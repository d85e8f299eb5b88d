// Which fork of the process this is. Threads do not survive fork(): a child
// has a copy of its parent's memory, with every worker, lane and driver
// thread's state as it stood, but only the thread that forked. An engine
// (or a device) the parent made waits in the child for threads that are
// not there, for ever; comparing generations turns that wait into a clear
// error.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>

namespace etude::rt {

namespace detail {

inline std::atomic<std::uint64_t> forks_counted{0};

inline void count_fork_in_child() noexcept {
    forks_counted.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace detail

/// 0 in the process that first called this, 1 in a child it forks, 2 in a
/// grandchild, and so on. The first call installs the count
/// (pthread_atfork, whose handlers the children inherit); forks before it
/// are not counted, which is harmless, as whatever compares generations
/// took its own after. Wait-free after the first call, which may take a
/// lock once; where the count cannot be installed (pthread_atfork out of
/// memory) it stays 0 and nothing is refused.
inline std::uint64_t fork_generation() noexcept {
    static const bool installed =
        ::pthread_atfork(nullptr, nullptr, &detail::count_fork_in_child) == 0;
    (void)installed;
    return detail::forks_counted.load(std::memory_order_relaxed);
}

}  // namespace etude::rt
