// Where a Wyoming server's syntheses run: at most `threads` at once, each
// on a thread of the pool. Threads start when work comes and end after a
// second without any, so an idle server holds none. Work past `threads`
// waits in a queue, costing no thread: at most `max_waiting` of it (past
// that, submit() says busy at once) and for at most `queue_timeout`.
//
// The turn to synthesise itself is still SynthesisSlots' (shared with the
// HTTP endpoint): the pool bounds the threads, the slots the syntheses.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace etude::server {

class SynthesisPool {
  public:
    // `run` true: synthesise now, on a pool thread. False: it waited past
    // the queue timeout; report that and return at once (on the thread
    // that calls expire()).
    using Work = std::function<void(bool run)>;

    // `idle` runs on the last thread before it ends, without the pool's
    // lock (by default the engine gives freed memory back to the system).
    SynthesisPool(std::size_t threads, std::size_t max_waiting,
                  std::chrono::milliseconds queue_timeout,
                  std::function<void()> idle = default_idle);
    // Waits for the work running to end; work still queued never runs
    // (withdraw it first).
    ~SynthesisPool();
    SynthesisPool(const SynthesisPool&) = delete;
    SynthesisPool& operator=(const SynthesisPool&) = delete;

    // Queues `work` for `owner` (one piece of work per owner at a time).
    // False, with nothing queued, when every thread is busy and
    // `max_waiting` pieces wait.
    bool submit(const void* owner, Work work);
    // Removes `owner`'s work if it has not started; true when it had not
    // (it never runs).
    bool withdraw(const void* owner);
    // Work that has waited past the queue timeout leaves the queue and is
    // called with `run` false, on the calling thread.
    void expire();

    // Threads now (for tests and the log).
    std::size_t threads() const;

    // How long a thread with no work waits for more before it ends.
    static constexpr std::chrono::seconds kIdleThread{1};

    static void default_idle();

  private:
    void thread_main();

    struct Waiting {
        const void* owner;
        Work work;
        std::chrono::steady_clock::time_point since;
    };
    const std::size_t max_threads_, max_waiting_;
    const std::chrono::milliseconds queue_timeout_;
    const std::function<void()> idle_;
    mutable std::mutex mu_;
    std::condition_variable work_cv_, ended_cv_;
    std::deque<Waiting> queue_;
    std::size_t live_ = 0;  // threads started and not ended
    std::size_t busy_ = 0;  // threads running work
    bool stopping_ = false;
};

}  // namespace etude::server
