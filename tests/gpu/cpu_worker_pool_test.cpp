// gpu/cpu/cpu_worker_pool.h: loops from many threads at once each run
// every job exactly once; a loop longer than one posting is posted in
// parts; a job's exception reaches its caller; a thread that finds the
// helpers held by a stuck loop still runs its own; helpers run a loop at
// its caller's scheduling class.
#include "gpu/cpu/cpu_worker_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace etude::gpu::cpu {
namespace {

// A loop over a lambda through the pool's C-style entry point.
template <class Body>
void pool_for(WorkerPool& pool, int jobs, Body&& body) {
    pool.run(
        jobs, [](void* b, int j) { (*static_cast<std::remove_reference_t<Body>*>(b))(j); }, &body);
}

TEST(WorkerPool, loops_from_many_threads_at_once_run_each_job_once) {
    WorkerPool pool(3);
    constexpr int kCallers = 4, kLoops = 300;
    std::atomic<int> wrong{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c)
        callers.emplace_back([&, c] {
            for (int loop = 0; loop < kLoops; ++loop) {
                const int jobs = 1 + (loop * 7 + c) % 40;
                std::vector<std::atomic<int>> runs(static_cast<std::size_t>(jobs));
                pool_for(pool, jobs, [&](int j) { runs[static_cast<std::size_t>(j)]++; });
                for (auto& r : runs)
                    if (r.load() != 1) wrong++;
            }
        });
    for (auto& t : callers) t.join();
    EXPECT_EQ(wrong, 0);
}

TEST(WorkerPool, a_loop_longer_than_one_posting_runs_each_job_once) {
    WorkerPool pool(2);
    const int jobs = 3 * 0xffff + 5;
    std::vector<std::atomic<unsigned char>> runs(static_cast<std::size_t>(jobs));
    pool_for(pool, jobs, [&](int j) { runs[static_cast<std::size_t>(j)]++; });
    int wrong = 0;
    for (auto& r : runs) wrong += r.load() != 1;
    EXPECT_EQ(wrong, 0);
}

TEST(WorkerPool, an_exception_on_any_thread_reaches_the_caller_after_every_job) {
    WorkerPool pool(3);
    for (int thrower : {0, 5, 63}) {
        std::atomic<int> ran{0};
        EXPECT_THROW(pool_for(pool, 64,
                              [&](int j) {
                                  ran++;
                                  if (j == thrower) throw std::runtime_error("job");
                              }),
                     std::runtime_error);
        EXPECT_EQ(ran, 64);
        // The pool serves the next loop normally.
        std::atomic<int> after{0};
        pool_for(pool, 10, [&](int) { after++; });
        EXPECT_EQ(after, 10);
    }
}

TEST(WorkerPool, a_thread_that_finds_the_helpers_held_runs_its_loop_alone) {
    WorkerPool pool(2);
    std::atomic<bool> second_done{false}, first_started{false};
    std::thread first([&] {
        // Every job of this loop waits until the second loop has finished,
        // so the helper stays held by it all along.
        pool_for(pool, 2, [&](int) {
            first_started = true;
            while (!second_done) std::this_thread::sleep_for(std::chrono::microseconds(200));
        });
    });
    while (!first_started) std::this_thread::yield();
    std::atomic<int> ran{0};
    pool_for(pool, 8, [&](int) { ran++; });
    EXPECT_EQ(ran, 8);
    second_done = true;
    first.join();
}

TEST(WorkerPool, a_loop_inside_a_job_runs_on_that_thread) {
    WorkerPool pool(3);
    std::atomic<int> inside{0}, inner{0};
    EXPECT_FALSE(WorkerPool::inside_job());
    pool_for(pool, 6, [&](int) {
        inside += WorkerPool::inside_job();
        const auto self = std::this_thread::get_id();
        pool_for(pool, 4, [&](int) { inner += std::this_thread::get_id() == self; });
    });
    EXPECT_EQ(inside, 6);
    EXPECT_EQ(inner, 24);
    EXPECT_FALSE(WorkerPool::inside_job());
}

// Each job records its thread and scheduling policy, then waits (10 s at
// most) until two threads have taken jobs, so that a helper surely runs
// some of them however late it wakes.
struct PolicyRecord {
    std::mutex mu;
    std::set<std::thread::id> threads;
    std::set<int> policies;
};

void record_loop(WorkerPool& pool, PolicyRecord& r) {
    pool_for(pool, 24, [&](int) {
        {
            const std::lock_guard lock(r.mu);
            r.threads.insert(std::this_thread::get_id());
            r.policies.insert(sched_getscheduler(0));
        }
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        for (;;) {
            {
                const std::lock_guard lock(r.mu);
                if (r.threads.size() >= 2) return;
            }
            if (std::chrono::steady_clock::now() > until) return;
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    });
}

TEST(WorkerPool, helpers_run_a_loop_at_its_callers_scheduling_class) {
    WorkerPool pool(3);
    PolicyRecord realtime, normal;
    bool allowed = false;
    std::thread rt_caller([&] {
        sched_param p{};
        p.sched_priority = sched_get_priority_min(SCHED_FIFO);
        allowed = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) == 0;
        if (allowed) record_loop(pool, realtime);
    });
    rt_caller.join();
    if (!allowed) GTEST_SKIP() << "SCHED_FIFO refused here (needs root, CAP_SYS_NICE or rtprio)";
    std::thread normal_caller([&] { record_loop(pool, normal); });
    normal_caller.join();
    EXPECT_GT(realtime.threads.size(), 1u) << "no helper ran a job";
    EXPECT_EQ(realtime.policies, std::set<int>{SCHED_FIFO});
    EXPECT_GT(normal.threads.size(), 1u) << "no helper ran a job";
    EXPECT_EQ(normal.policies, std::set<int>{SCHED_OTHER});
}

TEST(WorkerPool, a_solo_thread_runs_every_job_of_its_loops_itself_and_then_shares_again) {
    WorkerPool pool(3);
    std::thread caller([&] {
        // Solo, every job runs here. Then record_loop's jobs wait (up to
        // 10 s) for a second thread to take one, which a helper does.
        WorkerPool::set_solo(true);
        WorkerPool::set_solo(true);  // nests
        WorkerPool::set_solo(false);
        EXPECT_TRUE(WorkerPool::solo());
        std::set<std::thread::id> seen;
        pool_for(pool, 12, [&](int) { seen.insert(std::this_thread::get_id()); });
        EXPECT_EQ(seen, std::set<std::thread::id>{std::this_thread::get_id()});
        WorkerPool::set_solo(false);
        EXPECT_FALSE(WorkerPool::solo());
        PolicyRecord shared;
        record_loop(pool, shared);
        EXPECT_GT(shared.threads.size(), 1u) << "no helper ran a job once the thread was not solo";
    });
    caller.join();
    EXPECT_FALSE(WorkerPool::solo());  // per thread
}

TEST(WorkerPool, one_thread_means_no_helpers) {
    WorkerPool pool(1);
    EXPECT_EQ(pool.threads(), 1);
    std::set<std::thread::id> seen;
    pool_for(pool, 5, [&](int) { seen.insert(std::this_thread::get_id()); });
    EXPECT_EQ(seen, std::set<std::thread::id>{std::this_thread::get_id()});
}

}  // namespace
}  // namespace etude::gpu::cpu
