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
    // Its CPU free before the turn goes: the holder granted it next claims
    // one at once, and would find every CPU taken.
    pin_ = rt::ScopedCpuPin();
    if (cpu_ >= 0) free_cpu(std::exchange(cpu_, -1));
    // Given back before the priority: restored to a normal thread while
    // still counted as running, the holder could be kept off the CPU with
    // the turn.
    if (gate_) std::exchange(gate_, nullptr)->give_back();
    if (std::exchange(solo_, false)) gpu::host::leave_solo();
    priority_ = rt::ScopedRealtime();  // the holder's own priority again
}

DeadlineGate::Turn DeadlineGate::wait(Due due, const std::function<bool()>& give_up,
                                      std::int64_t asked_ns, std::int64_t taken_ns) {
    if (due.outside) return Turn::outside_the_order();
    std::unique_lock lock(mu_);
    Waiter me{due, next_ticket_++};
    me.asked_ns = asked_ns > 0 ? std::min(asked_ns, rt::now_ns()) : rt::now_ns();
    waiting_.push_back(&me);
    grant_free_turns();
    if (me.granted && taken_ns > 0)
        me.granted_ns = std::clamp(taken_ns, me.asked_ns, me.granted_ns);
    // A turn granted is taken even if give_up() has become true meanwhile:
    // the holder finds out itself (its stream's cancel), and gives it back.
    me.cv.wait(lock, [&] { return me.granted || give_up(); });
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &me));
    if (!me.granted) return Turn();
    // Others hold turns now (running_ counts this one): their loops have
    // the cores the CPU workers would take.
    const bool solo = solo_when_shared_ && running_ > 1;
    lock.unlock();
    Turn turn(this, priority_);
    turn.asked_ns_ = me.asked_ns;
    turn.granted_ns_ = me.granted_ns;
    if (solo) {
        gpu::host::enter_solo();
        turn.solo_ = true;
        hold_to_a_cpu(turn);
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

namespace {

// The CPUs solo holders are held to, across every gate of the process
// (zero-initialised: none). The lock is held only to read and change the set.
std::mutex g_claims_mu;
cpu_set_t g_claimed;

}  // namespace

void DeadlineGate::hold_to_a_cpu(Turn& turn) {
    const cpu_set_t allowed = rt::current_thread_cpus();
    int cpu = -1;
    {
        std::lock_guard lock(g_claims_mu);
        const auto free = [&](int c) {
            return c >= 0 && c < CPU_SETSIZE && CPU_ISSET(c, &allowed) && !CPU_ISSET(c, &g_claimed);
        };
        cpu = sched_getcpu();
        if (!free(cpu)) {
            cpu = -1;
            for (int c = 0; c < CPU_SETSIZE && cpu < 0; ++c)
                if (free(c)) cpu = c;
        }
        if (cpu < 0) return;
        CPU_SET(cpu, &g_claimed);
    }
    turn.pin_ = rt::ScopedCpuPin(cpu);
    if (!turn.pin_.pinned()) {
        free_cpu(cpu);  // refused (a cpuset, a sandbox): nobody is held there
        return;
    }
    turn.cpu_ = cpu;
}

void DeadlineGate::free_cpu(int cpu) {
    std::lock_guard lock(g_claims_mu);
    CPU_CLR(cpu, &g_claimed);
}

void DeadlineGate::give_back() {
    std::lock_guard lock(mu_);
    --running_;
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
