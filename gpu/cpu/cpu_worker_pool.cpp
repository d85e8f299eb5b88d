#include "gpu/cpu/cpu_worker_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <utility>

#include "gpu/cpu/cpu_parallel.h"

namespace etude::gpu::cpu {
namespace {

// How long an idle helper watches for the next loop before it sleeps. The
// ops of one model come back to back (a Piper flow push is about 160 of
// them, 20-100 us each, a few microseconds apart), and a sleeping helper
// takes tens of microseconds to wake; past a model's run, spinning only
// takes a core from whoever else needs it.
constexpr auto kSpin = std::chrono::microseconds(100);
// The most jobs one posting carries (the ticket's 16-bit fields); a longer
// loop is posted in parts.
constexpr int kMaxBatchJobs = 0xffff;

thread_local bool t_inside_job = false;
thread_local int t_solo_depth = 0;  // host::enter_solo() minus leave_solo()

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#else
    std::this_thread::yield();
#endif
}

int threads_from_environment() {
    for (const char* name : {"ETUDE_CPU_THREADS", "OMP_NUM_THREADS"}) {
        const char* value = std::getenv(name);
        if (!value || !*value) continue;
        char* end = nullptr;
        // OMP_NUM_THREADS may be a list ("4,2"): its first entry counts.
        const long n = std::strtol(value, &end, 10);
        if (end != value && n >= 1) return static_cast<int>(std::min(n, 1024L));
    }
    return usable_cpus();
}

std::uint32_t batch_jobs(std::uint64_t ticket) {
    return static_cast<std::uint32_t>(ticket >> 16) & 0xffff;
}
std::uint32_t next_job(std::uint64_t ticket) {
    return static_cast<std::uint32_t>(ticket) & 0xffff;
}

}  // namespace

WorkerPool& WorkerPool::shared() {
    // Never destroyed: a backend op may run during another static's
    // destruction, and the helpers sleep harmlessly through exit.
    static WorkerPool* pool = new WorkerPool(threads_from_environment());
    return *pool;
}

WorkerPool::WorkerPool(int threads) {
    const int helpers = std::max(threads, 1) - 1;
    helpers_.reserve(static_cast<std::size_t>(helpers));
    for (int i = 0; i < helpers; ++i) helpers_.emplace_back([this] { helper_main(); });
}

WorkerPool::~WorkerPool() {
    stopping_.store(true);
    posted_.fetch_add(1);
    {
        const std::lock_guard lock(sleep_mutex_);
        helper_wake_.notify_all();
    }
    for (auto& t : helpers_) t.join();
}

bool WorkerPool::inside_job() {
    return t_inside_job;
}

void WorkerPool::set_solo(bool solo) {
    t_solo_depth += solo ? 1 : -1;
}

bool WorkerPool::solo() {
    return t_solo_depth > 0;
}

WorkerPool::SchedulingClass WorkerPool::calling_class() {
    // glibc keeps a thread's policy after pthread_setschedparam, so this
    // makes no system call once the thread has asked or set it.
    sched_param p{};
    int policy = SCHED_OTHER;
    if (pthread_getschedparam(pthread_self(), &policy, &p) != 0) return {};
    return {policy, p.sched_priority};
}

void WorkerPool::run(int jobs, void (*fn)(void*, int), void* body) {
    if (jobs <= 0) return;
    // A caller's outermost loop (never a helper's: helpers are always
    // inside a job) hands its job scratch back when it ends, however.
    struct ScratchBack {
        bool outermost;
        ~ScratchBack() {
            if (outermost) give_back_job_scratch();
        }
    } const back{!t_inside_job};
    const bool alone = jobs == 1 || helpers_.empty() || t_inside_job || t_solo_depth > 0;
    if (alone || busy_.exchange(true, std::memory_order_acquire)) {
        // On this thread: the first exception after every job has run.
        std::exception_ptr failure;
        const bool was_inside = t_inside_job;
        t_inside_job = true;
        for (int j = 0; j < jobs; ++j) try {
                fn(body, j);
            } catch (...) {
                if (!failure) failure = std::current_exception();
            }
        t_inside_job = was_inside;
        if (failure) std::rethrow_exception(failure);
        return;
    }
    fn_ = fn;
    body_ = body;
    const SchedulingClass caller = calling_class();
    policy_.store(caller.policy, std::memory_order_relaxed);
    priority_.store(caller.priority, std::memory_order_relaxed);
    failure_ = nullptr;
    for (int first = 0; first < jobs; first += kMaxBatchJobs)
        run_batch(first, std::min(kMaxBatchJobs, jobs - first));
    std::exception_ptr failure = std::exchange(failure_, nullptr);
    busy_.store(false, std::memory_order_release);
    if (failure) std::rethrow_exception(failure);
}

void WorkerPool::run_batch(int first, int count) {
    first_job_ = first;
    done_.store(0, std::memory_order_relaxed);
    ++batches_;
    // Publishing the ticket releases fn_, body_, first_job_ and the class to
    // whoever claims a job through it.
    ticket_.store((std::uint64_t{batches_} << 32) | (std::uint64_t(count) << 16),
                  std::memory_order_release);
    posted_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        const std::lock_guard lock(sleep_mutex_);
        helper_wake_.notify_all();
    }

    t_inside_job = true;
    drain(nullptr);
    t_inside_job = false;

    // The helpers' last jobs: short, so spin a while, then sleep until the
    // helper that finishes the batch says so.
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0; done_.load(std::memory_order_acquire) < count; ++i) {
        cpu_relax();
        if (i % 64 == 63 && std::chrono::steady_clock::now() > until) {
            std::unique_lock lock(sleep_mutex_);
            caller_waiting_.store(true, std::memory_order_seq_cst);
            caller_wake_.wait(lock, [&] { return done_.load(std::memory_order_seq_cst) >= count; });
            caller_waiting_.store(false, std::memory_order_relaxed);
            break;
        }
    }
}

void WorkerPool::drain(SchedulingClass* adopt) {
    std::uint64_t t = ticket_.load(std::memory_order_acquire);
    for (;;) {
        const std::uint32_t jobs = batch_jobs(t), next = next_job(t);
        if (next >= jobs) return;
        if (adopt) {
            // The caller's priority before claiming a job: a helper never
            // holds a real-time caller's job at normal priority. (A class
            // read as a later batch is posted is only a hint; the next
            // batch corrects it.)
            const SchedulingClass wanted{policy_.load(std::memory_order_relaxed),
                                         priority_.load(std::memory_order_relaxed)};
            if (!(wanted == *adopt)) {
                sched_param p{};
                p.sched_priority = wanted.priority;
                if (pthread_setschedparam(pthread_self(), wanted.policy, &p) == 0) *adopt = wanted;
            }
            adopt = nullptr;
        }
        if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel,
                                           std::memory_order_acquire))
            continue;
        run_job(first_job_ + static_cast<int>(next));
        if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == static_cast<int>(jobs) &&
            caller_waiting_.load(std::memory_order_seq_cst)) {
            const std::lock_guard lock(sleep_mutex_);
            caller_wake_.notify_all();
        }
        t = ticket_.load(std::memory_order_acquire);
    }
}

void WorkerPool::run_job(int job) {
    try {
        fn_(body_, job);
    } catch (...) {
        const std::lock_guard lock(failure_mutex_);
        if (!failure_) failure_ = std::current_exception();
    }
}

void WorkerPool::wait_for_batch(std::uint32_t seen) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0;; ++i) {
        if (posted_.load(std::memory_order_acquire) != seen || stopping_.load()) return;
        cpu_relax();
        if (i % 64 == 63 && std::chrono::steady_clock::now() > until) break;
    }
    std::unique_lock lock(sleep_mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    // stopping_ too: the pool may stop between a helper's last look at
    // posted_ and this wait.
    helper_wake_.wait(
        lock, [&] { return posted_.load(std::memory_order_seq_cst) != seen || stopping_.load(); });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

void WorkerPool::helper_main() {
    t_inside_job = true;  // a loop inside a helper's job stays on the helper
    SchedulingClass mine = calling_class();
    for (;;) {
        // Read before draining, so that a batch posted while this helper
        // started or drained is not slept through: the wait then returns at
        // once and the next drain takes it.
        const std::uint32_t seen = posted_.load(std::memory_order_acquire);
        drain(&mine);
        wait_for_batch(seen);
        if (stopping_.load()) return;
    }
}

}  // namespace etude::gpu::cpu

namespace etude::gpu::host {

int usable_cpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace etude::gpu::host
