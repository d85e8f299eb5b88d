// The engine's gate for the work that makes audio (engine/scheduling/deadline_gate.h):
// turns go earliest deadline first, a started stream's urgent work before
// everything else, never more at once than there are turns, and a waiter
// whose stream is cancelled gives up. Each test holds the gate's turns
// itself while waiters queue, so the order they get them in is decided by
// the gate alone, not by which thread the OS runs first.
#include "engine/scheduling/deadline_gate.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/host_compute.h"

using namespace etude::engine;

namespace {

constexpr std::int64_t kMs = 1'000'000;
constexpr int kPriority = 4;

// Waits (bounded) until `n` waiters are queued at `gate`.
bool wait_for_waiters(const DeadlineGate& gate, std::size_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (gate.waiting() < n) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

// Waiters that note the order in which they got their turns.
struct Recorder {
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::thread> threads;

    // Queued one at a time, so that tickets (the tie-break) follow `id`.
    void add(DeadlineGate& gate, int id, DeadlineGate::Due due) {
        const std::size_t before = gate.waiting();
        threads.emplace_back([this, &gate, id, due] {
            auto turn = gate.wait(due, [] { return false; });
            ASSERT_TRUE(turn.held());
            std::lock_guard lock(mu);
            order.push_back(id);
        });
        ASSERT_TRUE(wait_for_waiters(gate, before + 1));
    }
    void join() {
        for (auto& t : threads) t.join();
    }
};

const auto never = [] { return false; };

}  // namespace

TEST(DeadlineGate, turns_go_earliest_deadline_first_and_ties_in_the_order_they_came) {
    DeadlineGate gate(1, kPriority);
    const std::int64_t now = DeadlineGate::now_ns();
    Recorder r;
    {
        auto held = gate.wait({now, WorkDue::kNever}, never);
        ASSERT_TRUE(held.held());
        r.add(gate, 0, {now + 300 * kMs});
        r.add(gate, 1, {now + 100 * kMs});
        r.add(gate, 2, {now + 200 * kMs});
        r.add(gate, 3, {now + 100 * kMs});  // ties with 1, came later
        EXPECT_EQ(gate.running(), 1);
    }
    r.join();
    EXPECT_EQ(r.order, (std::vector<int>{1, 3, 2, 0}));
}

TEST(DeadlineGate, urgent_work_of_a_started_stream_goes_before_earlier_deadlines) {
    DeadlineGate gate(1, kPriority);
    const std::int64_t now = DeadlineGate::now_ns();
    Recorder r;
    {
        auto held = gate.wait({now}, never);
        // A new stream past its target, and a started stream that becomes
        // urgent while both wait (its urgent time passes before the turn is free).
        r.add(gate, 0, {now - 500 * kMs});
        r.add(gate, 1, {now + 200 * kMs, now + 20 * kMs});
        r.add(gate, 2, {now + 100 * kMs, now + 10'000 * kMs});  // started, not urgent
        while (DeadlineGate::now_ns() < now + 20 * kMs)
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    r.join();
    EXPECT_EQ(r.order, (std::vector<int>{1, 0, 2}));
}

TEST(DeadlineGate, no_more_run_at_once_than_there_are_turns) {
    DeadlineGate gate(2, kPriority);
    {
        // Two at once: a second waiter gets a turn while the first is held.
        auto one = gate.wait({DeadlineGate::now_ns()}, never);
        auto two = gate.wait({DeadlineGate::now_ns()}, never);
        EXPECT_TRUE(one.held() && two.held());
        EXPECT_EQ(gate.running(), 2);
    }
    std::atomic<int> inside{0}, most{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i)
        threads.emplace_back([&, i] {
            for (int k = 0; k < 50; ++k) {
                auto turn = gate.wait({DeadlineGate::now_ns() + i * kMs}, never);
                const int n = ++inside;
                int m = most.load();
                while (n > m && !most.compare_exchange_weak(m, n)) {
                }
                std::this_thread::sleep_for(std::chrono::microseconds(100));
                --inside;
            }
        });
    for (auto& t : threads) t.join();
    EXPECT_LE(most.load(), 2);
    EXPECT_GE(most.load(), 1);
    EXPECT_EQ(gate.running(), 0);
    EXPECT_EQ(gate.waiting(), 0u);
}

TEST(DeadlineGate, a_waiter_whose_stream_is_cancelled_gives_up_and_the_next_goes_on) {
    DeadlineGate gate(1, kPriority);
    const std::int64_t now = DeadlineGate::now_ns();
    std::atomic<bool> cancelled{false};
    DeadlineGate::Turn held = gate.wait({now}, never);
    bool gave_up = false;
    std::thread cancelled_waiter([&] {
        auto turn = gate.wait({now + kMs}, [&] { return cancelled.load(); });
        gave_up = !turn.held();
    });
    ASSERT_TRUE(wait_for_waiters(gate, 1));
    Recorder r;
    r.add(gate, 7, {now + 2 * kMs});
    cancelled = true;
    gate.wake_all();
    cancelled_waiter.join();  // returns while the turn is still held
    EXPECT_TRUE(gave_up);
    EXPECT_EQ(gate.running(), 1) << "giving up took a turn";
    held.release();
    r.join();
    EXPECT_EQ(r.order, (std::vector<int>{7}));
    EXPECT_EQ(gate.running(), 0);
}

TEST(DeadlineGate, a_normal_thread_holds_its_turn_at_worker_priority_and_then_gets_its_own_back) {
    // Whether this process may use SCHED_FIFO at all (tried on a thread of
    // its own), and whether its threads run niced (as under `nice ctest`),
    // which a turn leaves as they are.
    bool fifo_allowed = false;
    std::thread([&] { fifo_allowed = etude::rt::make_current_thread_realtime(kPriority); }).join();
    const bool niced = ::getpriority(PRIO_PROCESS, 0) > 0;
    DeadlineGate gate(1, kPriority);
    int before = -1, during = -1, after = -1;
    sched_param p{};
    std::thread t([&] {
        pthread_getschedparam(pthread_self(), &before, &p);
        {
            auto turn = gate.wait({DeadlineGate::now_ns()}, never);
            pthread_getschedparam(pthread_self(), &during, &p);
        }
        pthread_getschedparam(pthread_self(), &after, &p);
    });
    t.join();
    EXPECT_EQ(before, SCHED_OTHER);
    EXPECT_EQ(during, fifo_allowed && !niced ? SCHED_FIFO : SCHED_OTHER);
    EXPECT_EQ(after, SCHED_OTHER);
    if (!fifo_allowed || niced)
        std::printf(
            "SCHED_FIFO is refused here, or the test runs niced: only the restore was checked\n");
}

TEST(DeadlineGate, a_gate_without_a_priority_leaves_its_holders_at_their_own) {
    // The network class's gate (EngineWorkers::network_gate()): its holders
    // must not be raised over the threads that send their audio.
    DeadlineGate gate(1, 0);
    int during = -1;
    sched_param p{};
    std::thread t([&] {
        auto turn = gate.wait({DeadlineGate::now_ns()}, never);
        ASSERT_TRUE(turn.held());
        pthread_getschedparam(pthread_self(), &during, &p);
    });
    t.join();
    EXPECT_EQ(during, SCHED_OTHER);
}

TEST(DeadlineGate, a_holder_granted_beside_another_computes_alone_until_it_gives_its_turn_back) {
    // The offline gate (EngineWorkers::offline_gate()): as many turns as
    // cores, so two holders whose loops both spread over the CPU workers
    // would run more threads than cores.
    DeadlineGate gate(2, 0, /*solo_when_shared=*/true);
    std::atomic<int> stage{0};
    bool first_solo = true, first_solo_after = true, second_solo = false, second_after = true;
    bool second_thread_solo = false;
    std::thread first([&] {
        auto turn = gate.wait({DeadlineGate::now_ns()}, never);
        first_solo = turn.solo() || etude::gpu::host::solo();
        stage = 1;
        while (stage < 2) std::this_thread::yield();
        first_solo_after = etude::gpu::host::solo();  // the other's turn is not this thread's
    });
    while (stage < 1) std::this_thread::yield();
    std::thread second([&] {
        {
            auto turn = gate.wait({DeadlineGate::now_ns()}, never);
            second_solo = turn.solo();
            second_thread_solo = etude::gpu::host::solo();
        }
        second_after = etude::gpu::host::solo();
        stage = 2;
    });
    second.join();
    first.join();
    EXPECT_FALSE(first_solo) << "alone at the gate, its loops may use every worker";
    EXPECT_FALSE(first_solo_after);
    EXPECT_TRUE(second_solo);
    EXPECT_TRUE(second_thread_solo);
    EXPECT_FALSE(second_after) << "solo outlived the turn";
}

namespace {

// What a solo holder saw of its CPUs: the one its turn claimed, where it
// ran, its CPUs while it held the turn and after.
struct SeenCpus {
    int cpu = -2, ran_on = -2;
    cpu_set_t during{}, after{};
    bool held_to_its_cpu() const {
        return CPU_COUNT(&during) == 1 && CPU_ISSET(cpu, &during) && ran_on == cpu;
    }
};

// A turn of each of `gates` held at once, each on a thread of its own; each
// gate already has a holder, so each of these turns is solo.
std::vector<SeenCpus> solo_turns_at_once(const std::vector<DeadlineGate*>& gates) {
    std::vector<SeenCpus> seen(gates.size());
    std::atomic<std::size_t> holding{0};
    std::atomic<bool> release{false};
    std::vector<std::thread> holders;
    for (std::size_t i = 0; i < gates.size(); ++i) {
        holders.emplace_back([&, i] {
            {
                auto turn = gates[i]->wait({DeadlineGate::now_ns()}, never);
                seen[i].cpu = turn.cpu();
                seen[i].ran_on = sched_getcpu();
                seen[i].during = etude::rt::current_thread_cpus();
                holding.fetch_add(1);
                while (!release) std::this_thread::yield();
            }
            seen[i].after = etude::rt::current_thread_cpus();
        });
        while (holding.load() < holders.size()) std::this_thread::yield();
    }
    release = true;
    for (auto& t : holders) t.join();
    return seen;
}

// Whether this thread may be held to a CPU here (a sandbox may refuse).
bool pins_allowed() {
    return etude::rt::ScopedCpuPin(sched_getcpu()).pinned();
}

}  // namespace

// Solo holders are each held to a CPU no other holder has (rt/cpu_pin.h
// says why): left where Linux woke them, two shared a core for up to 15 ms
// while the other stood idle. A holder past the CPUs stays free, and each
// may run where it could before once its turn is given back, its CPU free
// for the next.
TEST(DeadlineGate,
     solo_holders_are_each_held_to_a_cpu_of_their_own_until_they_give_their_turn_back) {
    if (!pins_allowed()) GTEST_SKIP() << "the OS refuses to hold a thread to a CPU here";
    const cpu_set_t allowed = etude::rt::current_thread_cpus();
    const int cpus = CPU_COUNT(&allowed);
    DeadlineGate gate(3, 0, /*solo_when_shared=*/true);
    auto first = gate.wait({DeadlineGate::now_ns()}, never);  // alone: not solo, not held
    EXPECT_EQ(first.cpu(), -1);
    for (int round = 0; round < 2; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        const std::vector<SeenCpus> seen = solo_turns_at_once({&gate, &gate});
        ASSERT_GE(seen[0].cpu, 0) << "a solo holder was not given a CPU";
        EXPECT_TRUE(seen[0].held_to_its_cpu());
        if (cpus >= 2) {
            ASSERT_GE(seen[1].cpu, 0) << "(in the second round: a CPU never freed)";
            EXPECT_TRUE(seen[1].held_to_its_cpu());
            EXPECT_NE(seen[0].cpu, seen[1].cpu) << "two solo holders were given one CPU";
        } else {
            EXPECT_EQ(seen[1].cpu, -1) << "a holder past the CPUs";
            EXPECT_TRUE(CPU_EQUAL(&seen[1].during, &allowed));
        }
        for (const SeenCpus& s : seen)
            EXPECT_TRUE(CPU_EQUAL(&s.after, &allowed)) << "held to a CPU past its turn";
    }
}

// One held holder a CPU across gates too: an engine's network and offline
// gates (and other engines) hold their solo holders apart, where Linux
// could not move two pinned to one CPU.
TEST(DeadlineGate, solo_holders_of_two_gates_are_held_to_different_cpus) {
    if (!pins_allowed()) GTEST_SKIP() << "the OS refuses to hold a thread to a CPU here";
    const cpu_set_t allowed = etude::rt::current_thread_cpus();
    if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "one CPU";
    DeadlineGate network(2, 0, /*solo_when_shared=*/true), offline(2, 0, /*solo_when_shared=*/true);
    auto first_network = network.wait({DeadlineGate::now_ns()}, never);
    auto first_offline = offline.wait({DeadlineGate::now_ns()}, never);
    const std::vector<SeenCpus> seen = solo_turns_at_once({&network, &offline});
    ASSERT_GE(seen[0].cpu, 0);
    ASSERT_GE(seen[1].cpu, 0);
    EXPECT_NE(seen[0].cpu, seen[1].cpu) << "two gates' solo holders were given one CPU";
    EXPECT_TRUE(seen[0].held_to_its_cpu());
    EXPECT_TRUE(seen[1].held_to_its_cpu());
}

TEST(DeadlineGate, a_gate_that_is_not_solo_when_shared_leaves_its_holders_sharing) {
    DeadlineGate gate(2, 0);
    auto first = gate.wait({DeadlineGate::now_ns()}, never);
    bool solo = true;
    std::thread([&] {
        auto turn = gate.wait({DeadlineGate::now_ns()}, never);
        solo = turn.solo() || etude::gpu::host::solo();
    }).join();
    EXPECT_FALSE(solo);
}

// A freed turn wakes the waiter it goes to and no other: each waiter's
// give_up() is asked once as it queues and again only if it is woken
// without its turn. With one condition shared by all, every grant woke
// every waiter to look and sleep again (up to 36 asks here, 27 measured,
// where 8 are needed).
TEST(DeadlineGate, a_freed_turn_wakes_only_the_waiter_it_goes_to) {
    DeadlineGate gate(1, 0);
    const std::int64_t now = DeadlineGate::now_ns();
    constexpr int kWaiters = 8;
    std::atomic<int> asks{0};
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::thread> threads;
    {
        DeadlineGate::Turn held = gate.wait({now}, never);
        for (int id = 0; id < kWaiters; ++id) {
            threads.emplace_back([&, id] {
                auto turn = gate.wait({now + kMs}, [&] {
                    asks.fetch_add(1);
                    return false;
                });
                ASSERT_TRUE(turn.held());
                std::lock_guard lock(mu);
                order.push_back(id);
            });
            ASSERT_TRUE(wait_for_waiters(gate, std::size_t(id) + 1));
        }
        EXPECT_EQ(asks.load(), kWaiters);
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
    // Room for a few spurious wake-ups, which POSIX allows; far below what
    // waking everyone at each grant makes.
    EXPECT_LE(asks.load(), kWaiters + 4);
}
