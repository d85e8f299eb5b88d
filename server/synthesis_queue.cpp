#include "server/synthesis_queue.h"

#include <algorithm>

namespace etude::server {

SynthesisQueue::SynthesisQueue(SynthesisSlots& slots, EventLoop& loop,
                               std::chrono::milliseconds timeout)
    : slots_(slots), loop_(loop), timeout_(timeout) {}

SynthesisQueue::~SynthesisQueue() {
    for (std::size_t i = 0; i < waiting_.size(); ++i) slots_.leave_waiting();
}

SynthesisQueue::Admit SynthesisQueue::admit(Key key) {
    // Behind others already waiting, a turn just freed is theirs.
    if (waiting_.empty() && slots_.try_acquire()) return Admit::Now;
    if (!slots_.enter_waiting()) return Admit::Busy;
    waiting_.push_back({key, std::chrono::steady_clock::now()});
    return Admit::Waiting;
}

bool SynthesisQueue::withdraw(Key key) {
    const auto it = std::find_if(waiting_.begin(), waiting_.end(),
                                 [&](const Waiter& w) { return w.key == key; });
    if (it == waiting_.end()) return false;
    waiting_.erase(it);
    slots_.leave_waiting();
    return true;
}

void SynthesisQueue::settle(const std::function<void(Key)>& granted,
                            const std::function<void(Key)>& expired) {
    while (!waiting_.empty() && slots_.try_acquire()) {
        const Key key = waiting_.front().key;
        waiting_.pop_front();
        slots_.leave_waiting();
        granted(key);
    }
    const auto now = std::chrono::steady_clock::now();
    while (!waiting_.empty() && now - waiting_.front().since > timeout_) {
        const Key key = waiting_.front().key;
        waiting_.pop_front();
        slots_.leave_waiting();
        expired(key);
    }
}

std::function<void()> SynthesisQueue::listener(Key key,
                                               std::shared_ptr<std::atomic<bool>> pending) {
    return [ready = ready_, &loop = loop_, key, pending = std::move(pending)] {
        if (pending->exchange(true, std::memory_order_acq_rel)) return;
        {
            std::lock_guard lock(ready->mu);
            ready->keys.push_back(key);
        }
        loop.wake();
    };
}

std::vector<SynthesisQueue::Key> SynthesisQueue::take_ready() {
    std::vector<Key> keys;
    std::lock_guard lock(ready_->mu);
    keys.swap(ready_->keys);
    return keys;
}

}  // namespace etude::server
