#include "engine/scheduling/deadline_gate.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "gpu/host_compute.h"
#include "rt/monotonic_clock.h"

namespace etude::engine {

std::int64_t DeadlineGate::now_ns() {
    return steady_ns(std::chrono::steady_clock::now());
}

DeadlineGate::DeadlineGate(int turns, int priority, bool solo_when_shared)
    : turns_(std::max(1, turns)), priority_(priority), solo_when_shared_(solo_when_shared) {}

void DeadlineGate::Turn::release() {
    outside_ = false;
    // Given back first: restored to a normal thread while still counted as
    // running, the holder could be kept off the CPU with the turn.
    if (gate_) std::exchange(gate_, nullptr)->give_back(std::exchange(cpu_, -1));
    if (std::exchange(solo_, false)) gpu::host::leave_solo();
    pin_ = rt::ScopedCpuPin();
    priority_ = rt::ScopedRealtime();  // the holder's own priority again
}

DeadlineGate::Turn DeadlineGate::wait(Due due, const std::function<bool()>& give_up) {
    if (due.outside) return Turn::outside_the_order();
    std::unique_lock lock(mu_);
    Waiter me{due, next_ticket_++};
    me.asked_ns = rt::now_ns();
    waiting_.push_back(&me);
    grant_free_turns();
    // A turn granted is taken even if give_up() has become true meanwhile:
    // the holder finds out itself (its stream's cancel), and gives it back.
    me.cv.wait(lock, [&] { return me.granted || give_up(); });
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &me));
    if (!me.granted) return Turn();
    // Others hold turns now (running_ counts this one): their loops have
    // the cores the CPU workers would take.
    const bool solo = solo_when_shared_ && running_ > 1;
    const int cpu = solo ? claim_cpu() : -1;
    lock.unlock();
    Turn turn(this, priority_);
    turn.asked_ns_ = me.asked_ns;
    turn.granted_ns_ = me.granted_ns;
    if (solo) {
        gpu::host::enter_solo();
        turn.solo_ = true;
        turn.cpu_ = cpu;
        if (cpu >= 0) turn.pin_ = rt::ScopedCpuPin(cpu);
    }
    return turn;
}

bool DeadlineGate::grant_free_turns() {
    bool granted = false;
    const std::int64_t now = now_ns();
    while (running_ < turns_) {
        Waiter* first = nullptr;
        for (Waiter* w : waiting_) {
            if (w->granted) continue;
            if (!first || w->due.before(first->due, now) ||
                (!first->due.before(w->due, now) && w->ticket < first->ticket))
                first = w;
        }
        if (!first) break;
        first->granted = true;
        first->granted_ns = rt::now_ns();
        ++running_;
        granted = true;
        // Notified under mu_: the waiter cannot leave its wait (and take
        // its Waiter, on its stack, with it) before the lock is let go.
        first->cv.notify_one();
    }
    return granted;
}

int DeadlineGate::claim_cpu() {
    const cpu_set_t allowed = rt::current_thread_cpus();
    const auto free = [&](int c) {
        return c >= 0 && c < CPU_SETSIZE && CPU_ISSET(c, &allowed) &&
               std::find(claimed_cpus_.begin(), claimed_cpus_.end(), c) == claimed_cpus_.end();
    };
    int cpu = sched_getcpu();
    if (!free(cpu)) {
        cpu = -1;
        for (int c = 0; c < CPU_SETSIZE && cpu < 0; ++c)
            if (free(c)) cpu = c;
    }
    if (cpu < 0) return -1;
    claimed_cpus_.push_back(cpu);
    return cpu;
}

void DeadlineGate::give_back(int cpu) {
    std::lock_guard lock(mu_);
    --running_;
    if (cpu >= 0) claimed_cpus_.erase(std::find(claimed_cpus_.begin(), claimed_cpus_.end(), cpu));
    grant_free_turns();
}

void DeadlineGate::wake_all() {
    std::lock_guard lock(mu_);
    for (Waiter* w : waiting_) w->cv.notify_one();
}

std::size_t DeadlineGate::waiting() const {
    std::lock_guard lock(mu_);
    return static_cast<std::size_t>(std::count_if(waiting_.begin(), waiting_.end(),
                                                  [](const Waiter* w) { return !w->granted; }));
}

int DeadlineGate::running() const {
    std::lock_guard lock(mu_);
    return running_;
}

int default_turns(unsigned cores) {
    return static_cast<int>(std::max(2u, cores) - 1);
}

}  // namespace etude::engine
