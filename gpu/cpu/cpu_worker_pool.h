// The CPU backend's threads: one set of helper threads for the whole
// process, shared by every thread that runs a backend op.
//
// Why our own and not OpenMP's teams: libgomp gives each calling thread a
// team of its own, and a team's idle workers spin for milliseconds after
// each loop. The engine calls the backend from several threads (each
// stream's producer, the analysis workers), so one thread's idle team
// would spin on the core another thread's team needs (docs/benchmarks.md,
// "One worker pool, the second sentence held back, one shared decoder").
// Here the helpers are the same threads whoever calls, spin only briefly
// (kSpin) before they sleep, and a thread that finds them busy runs its
// loop on its own.
//
// Scheduling: a helper takes on the scheduling class of the thread whose
// loop it runs (as an OpenMP team inherits its master's), so a real-time
// producer's op runs at real-time priority on every core, and a normal
// caller's op does not.
//
// Thread safety: run() may be called from any number of threads at once.
// No allocation after the first call (the helpers are started then).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "gpu/host_compute.h"

namespace etude::gpu::cpu {

// gpu/host_compute.h's count of the CPUs this process may run on.
using host::usable_cpus;

class WorkerPool {
  public:
    // The process's pool: ETUDE_CPU_THREADS threads, else OMP_NUM_THREADS
    // (read for the same meaning it had when these were OpenMP's), else
    // one per CPU this process may run on; the caller counts as one.
    static WorkerPool& shared();

    explicit WorkerPool(int threads);
    ~WorkerPool();
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    // Threads a loop can use, the caller included.
    int threads() const { return static_cast<int>(helpers_.size()) + 1; }

    // run(body, j) for every j in [0, jobs): on the calling thread, and on
    // the helpers unless another caller holds them (then all on this
    // thread). Returns when every job has run; the first exception a job
    // threw is rethrown (the others still run).
    void run(int jobs, void (*fn)(void* body, int job), void* body);

    // True on a helper, and on a caller while it runs a job: a loop started
    // there runs on that thread alone.
    static bool inside_job();
    // gpu/host_compute.h's solo threads: run() on one runs every job there.
    static void set_solo(bool solo);
    static bool solo();

  private:
    struct SchedulingClass {
        int policy = 0;
        int priority = 0;
        bool operator==(const SchedulingClass&) const = default;
    };
    static SchedulingClass calling_class();

    void helper_main();
    void wait_for_batch(std::uint32_t seen);
    // Claims and runs jobs of the current batch until none is left; a
    // helper passes its scheduling class, to take on the caller's.
    void drain(SchedulingClass* adopt);
    void run_job(int job);
    void run_batch(int first, int count);

    std::vector<std::thread> helpers_;
    std::atomic<bool> stopping_{false};

    // Held by one caller at a time, from posting a batch until its last job
    // has run.
    std::atomic<bool> busy_{false};
    // The batch: (batch number << 32) | (jobs << 16) | next job. A claim is
    // a compare-exchange on it, so a helper holding an old value never
    // claims a job of a later batch.
    std::atomic<std::uint64_t> ticket_{0};
    // Bumped for each batch; a helper that has spun kSpin without seeing
    // it change sleeps on helper_wake_. (A condition variable and not
    // std::atomic::wait: GCC 12's notify_all lost wake-ups here.)
    std::atomic<std::uint32_t> posted_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<int> done_{0};
    // The holder, after spinning kSpin for the helpers' last jobs, sleeps
    // on caller_wake_.
    std::atomic<bool> caller_waiting_{false};
    std::mutex sleep_mutex_;
    std::condition_variable helper_wake_, caller_wake_;
    std::uint32_t batches_ = 0;  // written by the holder only
    // Written by the holder before the batch is posted, read by whoever
    // claims one of its jobs.
    void (*fn_)(void*, int) = nullptr;
    void* body_ = nullptr;
    int first_job_ = 0;
    // The holder's scheduling class, which the helpers take on (atomics: a
    // helper reads them before it claims a job, as a hint).
    std::atomic<int> policy_{0}, priority_{0};
    std::mutex failure_mutex_;
    std::exception_ptr failure_;
};

}  // namespace etude::gpu::cpu
