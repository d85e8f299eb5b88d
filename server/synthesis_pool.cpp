#include "server/synthesis_pool.h"

#include <thread>
#include <vector>

#include "engine/engine.h"

namespace etude::server {

SynthesisPool::SynthesisPool(std::size_t threads, std::size_t max_waiting,
                             std::chrono::milliseconds queue_timeout, std::function<void()> idle)
    : max_threads_(threads < 1 ? 1 : threads),
      max_waiting_(max_waiting),
      queue_timeout_(queue_timeout),
      idle_(std::move(idle)) {}

void SynthesisPool::default_idle() {
    engine::Engine::give_back_free_memory();
}

SynthesisPool::~SynthesisPool() {
    std::unique_lock lock(mu_);
    stopping_ = true;
    queue_.clear();
    work_cv_.notify_all();
    ended_cv_.wait(lock, [&] { return live_ == 0; });
}

bool SynthesisPool::submit(const void* owner, Work work) {
    std::lock_guard lock(mu_);
    if (busy_ + queue_.size() >= max_threads_ + max_waiting_) return false;
    queue_.push_back({owner, std::move(work), std::chrono::steady_clock::now()});
    // A thread for it when none is free to take it (threads not running
    // work are fewer than the work queued) and the bound allows one more.
    if (live_ - busy_ < queue_.size() && live_ < max_threads_) {
        ++live_;
        // Detached and counted: the destructor waits for live_ to be 0.
        std::thread([this] { thread_main(); }).detach();
    } else {
        work_cv_.notify_one();
    }
    return true;
}

bool SynthesisPool::withdraw(const void* owner) {
    std::lock_guard lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
        if (it->owner == owner) {
            queue_.erase(it);
            return true;
        }
    return false;
}

void SynthesisPool::expire() {
    std::vector<Work> late;
    {
        std::lock_guard lock(mu_);
        const auto now = std::chrono::steady_clock::now();
        while (!queue_.empty() && now - queue_.front().since > queue_timeout_) {
            late.push_back(std::move(queue_.front().work));
            queue_.pop_front();
        }
    }
    for (auto& work : late) work(false);
}

std::size_t SynthesisPool::threads() const {
    std::lock_guard lock(mu_);
    return live_;
}

void SynthesisPool::thread_main() {
    std::unique_lock lock(mu_);
    for (;;) {
        if (queue_.empty() && !stopping_)
            work_cv_.wait_for(lock, kIdleThread, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty() || stopping_) {
            if (live_ == 1 && idle_) {
                // The last thread: what the syntheses freed here, after the
                // engine's last stream ended and it gave memory back, goes
                // back too (their jobs and buffers are destroyed on these
                // threads).
                lock.unlock();
                idle_();
                lock.lock();
                // Work submitted meanwhile started no thread: this one still
                // counted as free to take it, and nobody else will.
                if (!queue_.empty() && !stopping_) continue;
            }
            break;
        }
        Work work = std::move(queue_.front().work);
        queue_.pop_front();
        ++busy_;
        lock.unlock();
        work(true);
        work = nullptr;  // its captures go before the lock is taken again
        lock.lock();
        --busy_;
    }
    --live_;
    ended_cv_.notify_all();
}

}  // namespace etude::server
