// How many syntheses run at once, and how many may wait for a turn: past
// both, a request is refused at once (the client hears "busy") rather than
// queued without bound. Shared by every connection of a server.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>

namespace etude::server {

class SynthesisSlots {
  public:
    SynthesisSlots(std::size_t running, std::size_t waiting)
        : max_running_(running), max_waiting_(waiting) {}

    enum class Outcome { Granted, Busy, TimedOut, Abandoned };

    // A turn to synthesise; release() gives it back. Waits (when a waiting
    // place is free) up to `timeout`, checking `abandon` every 100 ms so a
    // client that left stops waiting.
    Outcome acquire(std::chrono::milliseconds timeout, const std::function<bool()>& abandon) {
        std::unique_lock lock(mu_);
        if (running_ < max_running_) {
            ++running_;
            return Outcome::Granted;
        }
        if (waiting_ >= max_waiting_) return Outcome::Busy;
        ++waiting_;
        const auto until = std::chrono::steady_clock::now() + timeout;
        Outcome out = Outcome::TimedOut;
        while (std::chrono::steady_clock::now() < until) {
            if (abandon()) {
                out = Outcome::Abandoned;
                break;
            }
            if (running_ < max_running_) {
                ++running_;
                out = Outcome::Granted;
                break;
            }
            cv_.wait_for(lock, std::chrono::milliseconds(100));
        }
        --waiting_;
        return out;
    }
    // For an event loop, which never waits in acquire(): a turn now if
    // one is free.
    bool try_acquire() {
        std::lock_guard lock(mu_);
        if (running_ >= max_running_) return false;
        ++running_;
        return true;
    }
    // A place among those waiting (counted with acquire()'s): false when
    // every place is taken (busy). leave_waiting() gives it back.
    bool enter_waiting() {
        std::lock_guard lock(mu_);
        if (waiting_ >= max_waiting_) return false;
        ++waiting_;
        return true;
    }
    void leave_waiting() {
        std::lock_guard lock(mu_);
        --waiting_;
    }
    void release() {
        {
            std::lock_guard lock(mu_);
            --running_;
        }
        cv_.notify_one();
    }
    std::size_t running() const {
        std::lock_guard lock(mu_);
        return running_;
    }

  private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::size_t max_running_, max_waiting_;
    std::size_t running_ = 0, waiting_ = 0;
};

}  // namespace etude::server
