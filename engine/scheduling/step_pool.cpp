#include "engine/scheduling/step_pool.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "rt/monotonic_clock.h"

namespace etude::engine {

StepPool::StepPool(int threads, std::function<void(int)> on_start) {
    const int n = std::max(1, threads);
    threads_.reserve(std::size_t(n));
    for (int i = 0; i < n; ++i)
        threads_.emplace_back([this, i, on_start] {
            if (on_start) on_start(i);
            run();
        });
}

StepPool::~StepPool() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
}

StepPool::Member StepPool::join(Step step) {
    auto slot = std::make_shared<Slot>();
    slot->step = std::move(step);
    std::lock_guard lock(mu_);
    slots_.push_back(slot);
    return Member(this, std::move(slot));
}

StepPool::Member& StepPool::Member::operator=(Member&& o) noexcept {
    if (this != &o) {
        leave();
        pool_ = std::exchange(o.pool_, nullptr);
        slot_ = std::move(o.slot_);
    }
    return *this;
}

void StepPool::Member::wake(const WorkDue& due) {
    if (slot_) pool_->wake(slot_, &due);
}

void StepPool::Member::wake() {
    if (slot_) pool_->wake(slot_, nullptr);
}

void StepPool::Member::leave() {
    if (!slot_) return;
    pool_->leave(slot_);
    slot_.reset();
    pool_ = nullptr;
}

void StepPool::wake(const std::shared_ptr<Slot>& slot, const WorkDue* due) {
    {
        std::lock_guard lock(mu_);
        const std::int64_t now = rt::now_ns();
        switch (slot->state) {
            case Slot::Gone:
                return;
            case Slot::Running:
                // Stepped again once this step is done, whatever it says:
                // what woke it may have come after the step looked.
                if (due && (!slot->woken_due || due->before(*slot->woken_due, now)))
                    slot->woken_due = *due;
                slot->woken_while_running = true;
                return;
            case Slot::Ready:
                if (due && due->before(slot->due, now)) slot->due = *due;
                return;
            case Slot::Idle:
            case Slot::LookAgain:
                slot->state = Slot::Ready;
                if (due) slot->due = *due;
                slot->ready_ns = now;
                break;
        }
    }
    work_cv_.notify_one();
}

void StepPool::leave(const std::shared_ptr<Slot>& slot) {
    std::unique_lock lock(mu_);
    // Not taken again from here: a member always ready would otherwise be
    // taken again before this wait could see it between two steps.
    slot->leaving = true;
    done_cv_.wait(lock, [&] { return slot->state != Slot::Running; });
    slot->state = Slot::Gone;
    slots_.erase(std::remove(slots_.begin(), slots_.end(), slot), slots_.end());
}

std::shared_ptr<StepPool::Slot> StepPool::take(std::int64_t now_ns, std::int64_t& wait_until) {
    wait_until = 0;
    std::shared_ptr<Slot> best;
    for (const auto& s : slots_) {
        if (s->state == Slot::LookAgain) {
            if (s->at_ns > now_ns) {
                wait_until = wait_until == 0 ? s->at_ns : std::min(wait_until, s->at_ns);
                continue;
            }
            s->state = Slot::Ready;  // its time has come, with the due it had
            s->ready_ns = s->at_ns;
        }
        if (s->state != Slot::Ready || s->leaving) continue;
        if (!best || s->due.before(best->due, now_ns)) best = s;
    }
    return best;
}

void StepPool::run() {
    std::unique_lock lock(mu_);
    for (;;) {
        if (stopping_) return;
        std::int64_t wait_until = 0;
        const std::int64_t now = rt::now_ns();
        std::shared_ptr<Slot> slot = take(now, wait_until);
        if (!slot) {
            if (wait_until == 0)
                work_cv_.wait(lock);
            else
                work_cv_.wait_for(lock, std::chrono::nanoseconds(
                                            std::max<std::int64_t>(wait_until - rt::now_ns(), 0)));
            continue;
        }
        slot->state = Slot::Running;
        slot->woken_while_running = false;
        slot->woken_due.reset();
        ++steps_;
        lock.unlock();
        const StepNext next = slot->step(slot->ready_ns, now);
        lock.lock();
        slot->ready_ns = rt::now_ns();
        if (slot->woken_while_running) {
            // The sooner of what the step says and what the wakes said; a
            // wake of no due keeps the step's (or the one it had).
            slot->state = Slot::Ready;
            if (next.kind == StepNext::Ready) slot->due = next.due;
            if (slot->woken_due &&
                (next.kind != StepNext::Ready || slot->woken_due->before(slot->due, now)))
                slot->due = *slot->woken_due;
        } else {
            slot->state = next.kind == StepNext::Ready       ? Slot::Ready
                          : next.kind == StepNext::LookAgain ? Slot::LookAgain
                                                             : Slot::Idle;
            if (next.kind == StepNext::Ready) slot->due = next.due;
            slot->at_ns = next.at_ns;
        }
        done_cv_.notify_all();
        // Another thread may be asleep with work this one cannot take at
        // once (it takes one member at a time): a member ready again, or
        // a look-again time sooner than a sleeper's, is theirs too.
        if (slot->state != Slot::Idle) work_cv_.notify_one();
    }
}

std::uint64_t StepPool::steps() const {
    std::lock_guard lock(mu_);
    return steps_;
}

std::size_t StepPool::members() const {
    std::lock_guard lock(mu_);
    return slots_.size();
}

}  // namespace etude::engine
