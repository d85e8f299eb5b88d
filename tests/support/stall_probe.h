// A witness of the machine's own stalls, for the live JACK tests.
//
// jackd's log names a client "Running" when the cycle ended with its
// process thread woken but not done. On a VM that does not tell our
// callback from the host: on a 2-vCPU VM like CI's, a SCHED_FIFO-80
// thread pinned to a vCPU, asking to wake every 100 us beside two normal
// CPU hogs, woke more than 1 ms late 230 times a minute per vCPU, more
// than 3 ms late 50 times, and once 101 ms late (AMD EPYC, 2026-12-03).
// Nothing of a test's (every other thread runs at FIFO 10 or below, or
// on the normal policy) can hold a FIFO-80 thread off its own CPU: only
// the kernel or the VM's host can, and whatever else was to run on that
// CPU then was held with it. So the probe runs one such thread per CPU the
// process may use and records every wake-up later than `kRecordedNs`,
// with when it should have woken and when it did.
//
// Where SCHED_FIFO is refused (not root, no rtprio) the probe watches
// nothing (watching() is false): a normal thread's lateness would be the
// test's own CPU load, not the machine.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

#include "rt/monotonic_clock.h"

namespace etude::test {

// A wake-up that came late: the CPU was held from `from_ns` (when the
// probe should have woken) to `to_ns` (when it did), CLOCK_MONOTONIC.
struct MachineStall {
    int cpu = -1;
    std::int64_t from_ns = 0, to_ns = 0;
    double micros() const { return 1e-3 * static_cast<double>(to_ns - from_ns); }
};

class MachineStallProbe {
  public:
    // Between wake-ups: a stall of S is seen as S less up to this, so a
    // quarter of a 256-frame period (1,333 us at 48 kHz) is seen from
    // 1.6 ms on; at 4,000 wake-ups a second per CPU it costs little.
    static constexpr std::int64_t kIntervalNs = 250'000;
    static constexpr std::int64_t kRecordedNs = 50'000;  // the least lateness kept
    static constexpr int kPriority = 80;                 // above jackd's 10
    // Per CPU: with every wake-up late it fills in 65 s, longer than any
    // JACK test holds a server. A full list stops growing and says so
    // (overflowed()).
    static constexpr std::size_t kCapacity = 1 << 18;

    MachineStallProbe() {
        cpu_set_t allowed;
        CPU_ZERO(&allowed);
        if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
            if (CPU_ISSET(cpu, &allowed)) cpus_.push_back(std::make_unique<Cpu>(cpu));
        for (auto& c : cpus_) c->thread = std::thread([this, cp = c.get()] { watch(*cp); });
        for (auto& c : cpus_)
            while (c->state.load() == Cpu::Starting) std::this_thread::yield();
    }
    ~MachineStallProbe() {
        stop_.store(true);
        for (auto& c : cpus_)
            if (c->thread.joinable()) c->thread.join();
    }
    MachineStallProbe(const MachineStallProbe&) = delete;
    MachineStallProbe& operator=(const MachineStallProbe&) = delete;

    // Every CPU has a probe thread at SCHED_FIFO kPriority, pinned to it.
    bool watching() const {
        if (cpus_.empty()) return false;
        for (const auto& c : cpus_)
            if (c->state.load() != Cpu::Watching) return false;
        return true;
    }
    // A CPU's list filled up and later stalls went unrecorded.
    bool overflowed() const {
        for (const auto& c : cpus_)
            if (c->full.load()) return true;
        return false;
    }
    // The stalls recorded so far, on all CPUs.
    std::vector<MachineStall> stalls() const {
        std::vector<MachineStall> all;
        for (const auto& c : cpus_) {
            const auto n = static_cast<long>(c->count.load(std::memory_order_acquire));
            all.insert(all.end(), c->stalls.begin(), c->stalls.begin() + n);
        }
        return all;
    }

  private:
    struct Cpu {
        enum State { Starting, Watching, Refused };
        explicit Cpu(int index) : index(index), stalls(kCapacity) {}
        int index;
        std::vector<MachineStall> stalls;  // written by its thread only, up to count
        std::atomic<std::size_t> count{0};
        std::atomic<bool> full{false};
        std::atomic<State> state{Starting};
        std::thread thread;
    };

    void watch(Cpu& c) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c.index, &one);
        sched_param p{};
        p.sched_priority = kPriority;
        if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0 ||
            pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) != 0) {
            c.state.store(Cpu::Refused);
            return;
        }
        c.state.store(Cpu::Watching);
        std::int64_t due = rt::now_ns();
        while (!stop_.load(std::memory_order_relaxed)) {
            due += kIntervalNs;
            const timespec at{static_cast<time_t>(due / 1'000'000'000),
                              static_cast<long>(due % 1'000'000'000)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr);
            const std::int64_t woke = rt::now_ns();
            if (woke - due >= kRecordedNs) {
                const std::size_t k = c.count.load(std::memory_order_relaxed);
                if (k < kCapacity) {
                    c.stalls[k] = MachineStall{c.index, due, woke};
                    c.count.store(k + 1, std::memory_order_release);
                } else {
                    c.full.store(true);
                }
                due = woke;  // the next wake-up is an interval after this one
            }
        }
    }

    std::vector<std::unique_ptr<Cpu>> cpus_;
    std::atomic<bool> stop_{false};
};

}  // namespace etude::test
