// A few threads that step many members: the executor's CPU pool, in place
// of a producer thread per stream. Each member is a step function that does
// one unit of its work without waiting for anyone (a Piper chunk whose
// audio has room to go) and says what comes next: nothing until it is woken
// (idle), its next unit (ready, with the unit's WorkDue), or a look again
// at a time (it waits for room that a real-time reader frees and cannot
// signal). A thread takes the ready member due first (deadline.h's order)
// and steps it; a member is stepped by one thread at a time, and a wake()
// that comes while it runs steps it again after.
//
// Measured before it was written (docs/benchmarks.md, 2026-12-03): two
// threads stepping sixteen Piper streams in turn make what sixteen
// producers make; the threads are what the pool saves (a thousand streams
// of a server, a thousand producers).
//
// Threads: wake() from any non-real-time thread, with any of the member's
// own locks held (the pool never calls a member while holding its own
// lock). A member's step runs on a pool thread, never two at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/scheduling/deadline.h"

namespace etude::engine {

// What a member's step says comes next.
struct StepNext {
    enum Kind { Idle, Ready, LookAgain };
    Kind kind = Idle;
    WorkDue due;             // Ready: when its next unit is due
    std::int64_t at_ns = 0;  // LookAgain: when (rt::now_ns())
    static StepNext idle() { return {}; }
    static StepNext ready(WorkDue due) { return {Ready, due, 0}; }
    static StepNext look_again(std::int64_t at_ns) { return {LookAgain, {}, at_ns}; }
};

class StepPool {
    struct Slot;

  public:
    // A member's step, given when it was made ready and when a thread took
    // it (rt::now_ns()): how long it waited for a thread is part of its
    // wait for a turn (DeadlineGate::wait()).
    using Step = std::function<StepNext(std::int64_t ready_ns, std::int64_t taken_ns)>;

    // `threads` stepping threads (at least 1); `on_start(i)` runs first on
    // the i-th (its priority, its core).
    explicit StepPool(int threads, std::function<void(int)> on_start = {});
    // Joins the threads: every member must be gone by then.
    ~StepPool();
    StepPool(const StepPool&) = delete;
    StepPool& operator=(const StepPool&) = delete;

    // One member's place in the pool: idle until woken. Its end waits for a
    // step in progress, and the member is never stepped after it.
    class Member {
      public:
        Member() = default;
        Member(Member&& o) noexcept = default;
        Member& operator=(Member&& o) noexcept;
        ~Member() { leave(); }
        // It has something to do, due `due` (a due that goes before the one
        // it waits with, in deadline.h's order, replaces it).
        void wake(const WorkDue& due);
        // It has something to do whose due it does not know (its reader made
        // room for the unit it was at): it keeps the due it had.
        void wake();
        // Leaves the pool (as the end does); waits for a step in progress.
        void leave();

      private:
        friend class StepPool;
        Member(StepPool* pool, std::shared_ptr<Slot> slot) : pool_(pool), slot_(std::move(slot)) {}
        StepPool* pool_ = nullptr;
        std::shared_ptr<Slot> slot_;
    };

    // A member stepped by `step`, idle until its first wake().
    Member join(Step step);

    // Steps run so far, and members in the pool now.
    std::uint64_t steps() const;
    std::size_t members() const;

  private:
    struct Slot {
        Step step;
        enum State { Idle, Ready, LookAgain, Running, Gone } state = Idle;
        WorkDue due;
        std::int64_t at_ns = 0;
        std::int64_t ready_ns = 0;  // since when it has been ready
        bool leaving = false;       // never taken again (leave() waits for its step)
        bool woken_while_running = false;
        std::optional<WorkDue> woken_due;  // the soonest due such wakes gave
    };
    void run();
    // `due`: null to keep the slot's own.
    void wake(const std::shared_ptr<Slot>& slot, const WorkDue* due);
    void leave(const std::shared_ptr<Slot>& slot);
    // The member to step now, or null (with `wait_until` the soonest look
    // again, or 0 for none). mu_ held.
    std::shared_ptr<Slot> take(std::int64_t now_ns, std::int64_t& wait_until);

    mutable std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    bool stopping_ = false;
    std::vector<std::shared_ptr<Slot>> slots_;  // every member, in joining order
    std::uint64_t steps_ = 0;
    std::vector<std::thread> threads_;
};

}  // namespace etude::engine
