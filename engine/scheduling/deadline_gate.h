// The order across streams for the work that makes audio (deadline.h):
// every unit of it (a sentence's analysis on a front end, a decoder chunk
// with the flow and durations it needs on a producer) waits for a turn
// here, and the turns go to the engine's streams by deadline, a few at a
// time:
//
//  1. first, work of a started stream that has become urgent (its
//     listener is about to run out of audio), earliest deadline first;
//  2. then all other work, earliest deadline first: a new stream's by the
//     first-audio target after its push, a started stream's as its
//     listener needs it.
//
// Why two classes: with one, a burst of new streams already past their
// target goes before every started stream however close it is to running
// dry. A new stream's target is a goal; a started stream running dry is a
// gap in speech.
//
// Why turns at all: each stream has its own producer thread, and a Piper
// producer decodes as fast as its ring takes audio, seconds ahead of its
// listener. Threads sharing the cores equally leave a stream that has not
// started behind streams seconds ahead, and streams started together all
// start late together.
//
// The work of a stream read offline (read()) takes no turn here: nobody
// hears it late, and it runs at its thread's own priority outside the
// order (its producer at nice +10), taking what the cores leave. In a turn
// of this gate, held at that priority, it would keep the turn from live
// work for as long as the cores are busy. It takes turns at a gate of its
// own (EngineWorkers::offline_gate()), a turn per core, whose holders
// compute alone, each on a core of its own, while others hold turns:
// sixteen offline readers each spreading its loops over the CPU workers ran
// seventeen threads on two cores. Left where Linux put them, two holders
// shared a core for up to 15 ms at a time while the other core stood idle
// (rt/cpu_pin.h): the two cores were 83-86% busy, and an extra turn took
// them only to 88-94%. Each held to a core of its own, the cores are 98-99%
// busy and 16 streams read offline made 23.0-25.4x against 21.9-23.5x
// (docs/benchmarks.md, "Turn holders held to a core each").
//
// A network stream's (SchedulingClass::Network: a server's, whose reader
// is a socket) decoder chunks wait at a gate of their own
// (EngineWorkers::network_gate()), in the same order, with a turn per core,
// each holder beside others computing alone, and no raised priority: raised, its holders would
// starve the threads that send their audio, and one turn at a time held a server's streams below
// the speed the cores give them side by side. Its sentences are analysed in deadline order by the
// front ends (engine_workers.h) without a turn. docs/benchmarks.md ("Turns for the work that makes
// audio", and "Network streams in the deadline order") has the measurements behind these choices.
//
// A turn's holder runs at the engine's worker priority (SCHED_FIFO, where
// the OS allows it) while it holds it, if it is a normal thread at nice 0
// or below: a front end's thread is one, and as a normal thread it would
// get only what the real-time producers leave it while new streams wait
// for their first sentence.
//
// A turn covers computation only: the holder gives it back before it
// writes into its ring, which may block until the consumer reads (an
// offline reader that stops reading must not hold every stream up).
//
// Threads: any. A thread holds at most one turn and never waits for
// another while holding one, so the waits cannot form a cycle.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/scheduling/deadline.h"
#include "rt/cpu_pin.h"
#include "rt/realtime_thread.h"

namespace etude::engine {

class DeadlineGate {
  public:
    // `turns`: how many units run at once. `priority`: the SCHED_FIFO
    // priority of a turn's holder (see above); 0: holders keep their own
    // (the network class's gate, EngineWorkers::network_gate()).
    // `solo_when_shared`: a holder granted its turn while others hold one
    // computes on its own thread alone (gpu::host::SoloScope) until it gives
    // the turn back, held to a CPU no other solo holder has
    // (rt::ScopedCpuPin). For a gate of as many turns as cores: two holders
    // whose loops each spread over the CPU workers would run three threads
    // on two cores; and holders left where Linux wakes them shared one core
    // for up to 15 ms while the other stood idle (rt/cpu_pin.h).
    DeadlineGate(int turns, int priority, bool solo_when_shared = false);
    DeadlineGate(const DeadlineGate&) = delete;
    DeadlineGate& operator=(const DeadlineGate&) = delete;

    // A turn, held until destroyed or released; empty when its wait gave up.
    class Turn {
      public:
        Turn() = default;
        Turn(Turn&& o) noexcept
            : gate_(std::exchange(o.gate_, nullptr)),
              outside_(std::exchange(o.outside_, false)),
              asked_ns_(o.asked_ns_),
              granted_ns_(o.granted_ns_),
              solo_(std::exchange(o.solo_, false)),
              cpu_(std::exchange(o.cpu_, -1)),
              pin_(std::move(o.pin_)),
              priority_(std::move(o.priority_)) {}
        Turn& operator=(Turn&& o) noexcept {
            if (this != &o) {
                release();
                gate_ = std::exchange(o.gate_, nullptr);
                outside_ = std::exchange(o.outside_, false);
                asked_ns_ = o.asked_ns_;
                granted_ns_ = o.granted_ns_;
                solo_ = std::exchange(o.solo_, false);
                cpu_ = std::exchange(o.cpu_, -1);
                pin_ = std::move(o.pin_);
                priority_ = std::move(o.priority_);
            }
            return *this;
        }
        ~Turn() { release(); }
        // Work that goes outside the order (an offline reader's): held, of
        // no gate.
        static Turn outside_the_order() {
            Turn t;
            t.outside_ = true;
            return t;
        }
        void release();
        bool held() const { return gate_ != nullptr || outside_; }
        // Held outside the order (Turn::outside_the_order()).
        bool outside() const { return outside_; }
        // When it was asked for and granted (rt::now_ns()); 0 outside the
        // order. Grants are stamped under the gate's lock, in grant order.
        std::int64_t asked_ns() const { return asked_ns_; }
        std::int64_t granted_ns() const { return granted_ns_; }
        // Whether its holder computes alone (the gate's solo_when_shared):
        // then it must be released on the thread that waited for it.
        bool solo() const { return solo_; }
        // The CPU a solo holder is held to (-1: none; see the gate).
        int cpu() const { return cpu_; }

      private:
        friend class DeadlineGate;
        // A priority of 0 or less leaves the holder at its own.
        Turn(DeadlineGate* gate, int priority)
            : gate_(gate),
              priority_(priority > 0 ? rt::ScopedRealtime(priority) : rt::ScopedRealtime()) {}
        DeadlineGate* gate_ = nullptr;
        bool outside_ = false;
        std::int64_t asked_ns_ = 0, granted_ns_ = 0;
        bool solo_ = false;
        int cpu_ = -1;  // claimed for pin_ (hold_to_a_cpu)
        rt::ScopedCpuPin pin_;
        rt::ScopedRealtime priority_;
    };

    // When a unit of work is due, and from when it is urgent (deadline.h).
    using Due = WorkDue;
    static std::int64_t now_ns();

    // Waits until this unit is first in the order above (ties: first come,
    // first served) when a turn is free. `give_up` is checked under the
    // gate's lock whenever the waiter wakes (wake_all() wakes them all): it
    // must not take locks that a turn's holder may hold. Returns an empty
    // turn if it gave up. Work outside the turns (Due::outside) returns at
    // once with Turn::outside_the_order(). A stepped stream's unit
    // (step_pool.h) asked when the pool made it ready (`asked_ns`) and was
    // chosen when a pool thread took it (`taken_ns`): a turn free at once is
    // granted at that choice, not at this call a little after it.
    Turn wait(Due due, const std::function<bool()>& give_up, std::int64_t asked_ns = 0,
              std::int64_t taken_ns = 0);
    // A waiter's give_up may have changed (its stream was cancelled or closed).
    void wake_all();

    int turns() const { return turns_; }
    // Waiting and running now (for tests and statistics).
    std::size_t waiting() const;
    int running() const;

  private:
    struct Waiter {
        Due due;
        std::uint64_t ticket = 0;
        bool granted = false;
        std::int64_t asked_ns = 0, granted_ns = 0;
        // Each waiter sleeps on its own: a freed turn wakes the one it goes
        // to, not every waiter to look and sleep again (with a dozen
        // streams waiting, one shared condition made seven wake-ups a turn).
        std::condition_variable cv;
    };
    // Free turns go to the first waiters in the order, decided here, at
    // one moment, by the thread that frees them (mu_ held), and each is
    // woken. Returns whether any was granted.
    bool grant_free_turns();
    // Holds the calling thread, a solo holder, to a CPU of its own (its
    // turn's cpu_ and pin_): the one it runs on if no solo holder of any
    // gate of the process has it, else the first free one; none if all are
    // taken or the OS refuses. One pinned holder a CPU across gates: an
    // engine's network and offline gates, or two engines, would otherwise
    // pin two holders to one CPU, where Linux could not move them apart.
    static void hold_to_a_cpu(Turn& turn);
    static void free_cpu(int cpu);  // a claim hold_to_a_cpu() made
    void give_back();

    const int turns_, priority_;
    const bool solo_when_shared_;
    mutable std::mutex mu_;
    int running_ = 0;  // turns held or granted
    std::uint64_t next_ticket_ = 0;
    std::vector<Waiter*> waiting_;  // not yet gone with a turn or given up
};

// Turns for a machine of `cores` hardware threads: one less, at least one.
// A turn's holder runs real-time and its convolutions share their work
// over every core, so with as many turns as cores, the threads outside a
// turn (a server's connections, the threads that push text and run
// espeak-ng, the front end looking for its next sentence) got no CPU while
// work waited: on 2 vCPUs (AMD EPYC), 16 streams started together had
// first audio p95 1.36-1.38 s with 2 turns against 1.07-1.10 s with 1.
int default_turns(unsigned cores);

}  // namespace etude::engine
