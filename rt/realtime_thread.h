// Real-time scheduling for worker threads, where the OS allows it.
//
// SCHED_FIFO needs root, CAP_SYS_NICE or an rtprio limit (e.g. the "audio"
// group set up by jackd2). When it is refused the thread keeps its normal
// policy and the call says so; nothing else changes.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

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

// SCHED_FIFO priority of the engine's threads that make audio ahead of the
// callback (block processors, a live text stream's producer, a device
// lane's thread): below an audio callback's. JACK2 runs its clients'
// process threads at the server's priority less 5 (5 under jackd's default
// 10): at 5 too, two busy workers held both cores of a 2-vCPU VM while the
// callback's thread waited for one, an xrun named on our client (its
// callback's longest call 28 us). At 4 the callback's thread takes a core
// from them at once.
constexpr int kWorkerPriority = 4;

// The nice of work that nobody hears as it is made: an offline reader's
// producer and the device lane that runs offline readers' batches.
constexpr int kOfflineNice = 10;

// Puts the calling thread on the normal policy (SCHED_OTHER) at nice
// `nice` (0..19; a thread may always lower itself, not raise itself again
// without privilege). Returns false if the OS refused the policy.
inline bool make_current_thread_background(int nice) noexcept {
    sched_param p{};
    p.sched_priority = 0;
    if (pthread_setschedparam(pthread_self(), SCHED_OTHER, &p) != 0) return false;
    // Linux keeps a nice value per thread.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), std::clamp(nice, 0, 19));
    return true;
}

// While one lives, the thread that made it runs at SCHED_FIFO `priority`
// if it was on the normal policy at nice 0 or below and the OS allows it;
// then it goes back to what it was. A thread already real-time, or one
// that stepped down on purpose (positive nice), is left as it is. Movable,
// but undone by the thread that made it.
class ScopedRealtime {
  public:
    ScopedRealtime() = default;
    explicit ScopedRealtime(int priority) noexcept {
        sched_param old{};
        int policy = 0;
        if (pthread_getschedparam(pthread_self(), &policy, &old) != 0 || policy != SCHED_OTHER)
            return;
        if (::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid))) > 0) return;
        raised_ = make_current_thread_realtime(priority);
    }
    ScopedRealtime(ScopedRealtime&& o) noexcept : raised_(o.raised_) { o.raised_ = false; }
    ScopedRealtime& operator=(ScopedRealtime&& o) noexcept {
        if (this != &o) {
            restore();
            raised_ = o.raised_;
            o.raised_ = false;
        }
        return *this;
    }
    ScopedRealtime(const ScopedRealtime&) = delete;
    ScopedRealtime& operator=(const ScopedRealtime&) = delete;
    ~ScopedRealtime() { restore(); }
    bool raised() const { return raised_; }

  private:
    void restore() noexcept {
        if (!raised_) return;
        raised_ = false;
        sched_param p{};
        pthread_setschedparam(pthread_self(), SCHED_OTHER, &p);
    }
    bool raised_ = false;
};

}  // namespace etude::rt
