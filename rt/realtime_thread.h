// Real-time scheduling for worker threads, where the OS allows it.
//
// SCHED_FIFO needs root, CAP_SYS_NICE or an rtprio limit (e.g. the "audio"
// group set up by jackd2). When it is refused the thread keeps its normal
// policy and the call says so; nothing else changes.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>

namespace etude::rt {

// Gives the calling thread SCHED_FIFO at `priority` (clamped to the
// system's range). Returns false if the OS refused.
inline bool make_current_thread_realtime(int priority) noexcept {
    sched_param p{};
    p.sched_priority = std::clamp(priority, sched_get_priority_min(SCHED_FIFO),
                                  sched_get_priority_max(SCHED_FIFO));
    return pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) == 0;
}

}  // namespace etude::rt
