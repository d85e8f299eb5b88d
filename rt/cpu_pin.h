// Holding a thread to one CPU for a while, and the CPUs it may run on.
//
// Why: the engine's turns (engine/scheduling/deadline_gate.h) are handed
// from thread to thread. A thread woken for a turn is put on the CPU it
// last ran on, often one that another holder is busy on, and the thread
// that woke it then sleeps: Linux leaves the CPU it frees idle for up to
// 15 ms (measured on 6.18, 2 vCPUs) before it moves one of the two onto it.
// Holders that each compute alone are each held to a CPU of their own.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <utility>

namespace etude::rt {

// The CPUs the calling thread may run on now (empty if the OS will not say).
inline cpu_set_t current_thread_cpus() noexcept {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) != 0) CPU_ZERO(&allowed);
    return allowed;
}

// Lets the calling thread run on every CPU the process may use (its main
// thread's: taskset, a container's cpuset), as a thread made by a thread
// pinned for a while would not (it inherits the one CPU for good).
inline void use_process_cpus() noexcept {
    cpu_set_t process;
    CPU_ZERO(&process);
    if (sched_getaffinity(getpid(), sizeof process, &process) == 0 && CPU_COUNT(&process) > 0)
        pthread_setaffinity_np(pthread_self(), sizeof process, &process);
}

// While one lives, the thread that made it runs only on `cpu`; then it may
// run on the CPUs it could before (those it could when the pin was made).
// A CPU it may not use, or an OS that refuses, pins nothing. Movable; it
// may be undone from any thread while the pinned thread lives. A thread
// made by the pinned one meanwhile inherits the one CPU for good: make
// none while pinned (the engine's turns make none; devices and workers are
// made when a stream or the engine is).
class ScopedCpuPin {
  public:
    ScopedCpuPin() = default;
    explicit ScopedCpuPin(int cpu) noexcept {
        const cpu_set_t allowed = current_thread_cpus();
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) return;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) return;
        thread_ = pthread_self();
        before_ = allowed;
        pinned_ = true;
    }
    ScopedCpuPin(ScopedCpuPin&& o) noexcept
        : thread_(o.thread_), before_(o.before_), pinned_(std::exchange(o.pinned_, false)) {}
    ScopedCpuPin& operator=(ScopedCpuPin&& o) noexcept {
        if (this != &o) {
            restore();
            thread_ = o.thread_;
            before_ = o.before_;
            pinned_ = std::exchange(o.pinned_, false);
        }
        return *this;
    }
    ScopedCpuPin(const ScopedCpuPin&) = delete;
    ScopedCpuPin& operator=(const ScopedCpuPin&) = delete;
    ~ScopedCpuPin() { restore(); }
    bool pinned() const { return pinned_; }

  private:
    void restore() noexcept {
        if (std::exchange(pinned_, false))
            pthread_setaffinity_np(thread_, sizeof before_, &before_);
    }
    pthread_t thread_{};
    cpu_set_t before_{};
    bool pinned_ = false;
};

}  // namespace etude::rt
