// The host CPU's share of gpu/ that code outside it may use: the CPUs this
// process may run on, loops spread over the process's CPU workers (the same
// threads the CPU backend's ops run on), and the vectorised transcendental
// functions. Models that run a stage on the host in their own loops (Piper's
// text-to-latent stage) and the engine (sizing its workers) use these
// rather than gpu/cpu/, whose headers stay private to the CPU backend.
//
// Threads: any. A loop started from inside a job runs on that thread alone,
// and so does one started while another thread's loop holds the workers.
// No allocation after the workers' first use.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

namespace etude::gpu::host {

// The CPUs this process may run on (its affinity: taskset, a container's
// cpuset; not the host's count, nor a CPU-time quota such as docker
// --cpus, which leaves every CPU usable), at least 1.
int usable_cpus();

// Makes the process's CPU workers now, on the calling thread. A helper
// thread inherits its maker's nice value for good, so whoever makes the
// workers decides it: the engine makes them when it starts, at normal
// priority.
void start_workers();

// Threads a parallel_for can use (1 inside a job or with one thread).
int worker_count();

// While a thread is solo, its loops run on it alone, never on the workers;
// they are still cut into worker_count() jobs, so a result does not depend
// on whether its thread was solo. For a caller that holds one of as many
// turns as there are CPUs (the engine's offline and network streams): when
// other holders compute too, a loop spread over the workers would put a
// third thread on two cores. Nests; per thread.
void enter_solo();
void leave_solo();
bool solo();  // whether the calling thread is solo now
class SoloScope {
  public:
    explicit SoloScope(bool solo = true) : solo_(solo) {
        if (solo_) enter_solo();
    }
    ~SoloScope() {
        if (solo_) leave_solo();
    }
    SoloScope(const SoloScope&) = delete;
    SoloScope& operator=(const SoloScope&) = delete;

  private:
    bool solo_;
};

namespace detail {
void parallel_for_impl(int jobs, void (*run)(void* body, int job), void* body);
}

// body(job) for every job in [0, jobs), on up to worker_count() threads;
// returns when all have run. The first exception a job throws is rethrown
// here (the remaining jobs still run).
template <class Body>
void parallel_for(int jobs, Body&& body) {
    detail::parallel_for_impl(
        jobs, [](void* b, int job) { (*static_cast<std::remove_reference_t<Body>*>(b))(job); },
        &body);
}

// How many jobs `work` units are worth: one per `grain` units, at most one
// per worker, at least one.
inline int jobs_for(std::size_t work, std::size_t grain) {
    const std::size_t jobs = grain == 0 ? work : work / grain;
    return static_cast<int>(
        std::clamp<std::size_t>(jobs, 1, static_cast<std::size_t>(worker_count())));
}

// body(begin, end) over [0, n) cut into `jobs` contiguous ranges of nearly
// equal length, each a multiple of `align` except the last.
template <class Body>
void parallel_ranges(std::size_t n, int jobs, std::size_t align, Body&& body) {
    align = std::max<std::size_t>(align, 1);
    const std::size_t per = (n + std::max(jobs, 1) - 1) / std::max(jobs, 1);
    const std::size_t step = std::max<std::size_t>((per + align - 1) / align * align, 1);
    const int count = static_cast<int>((n + step - 1) / step);
    parallel_for(count, [&](int j) {
        const std::size_t begin = static_cast<std::size_t>(j) * step;
        body(begin, std::min(n, begin + step));
    });
}

// Element-wise over n values, vectorised (glibc's libmvec, within 4 ulp of
// the correctly rounded result); `in` and `out` may be the same array.
// 0.5 x (1 + erf(x / sqrt 2)): exact GELU, as torch.nn.GELU() by default.
void gelu(const double* in, double* out, std::size_t n);
void exp(const double* in, double* out, std::size_t n);
void exp(const float* in, float* out, std::size_t n);

}  // namespace etude::gpu::host
