// Work sharing for the CPU backend's ops: a loop's iterations spread over
// the process's CPU worker pool (cpu_worker_pool.h: the calling thread and
// one helper per further CPU, or ETUDE_CPU_THREADS / OMP_NUM_THREADS
// threads in all).
//
// Why our own split rather than OpenBLAS's threads: the backend runs each
// GEMM of a convolution on a slice of the time axis, with its im2col or
// col2im, and the slices are independent. Giving each thread whole slices
// (im2col + single-threaded SGEMM + bias) keeps both cores busy through the
// copies that OpenBLAS's threads would spin through, and scales on the 32-
// and 64-channel layers where a two-thread SGEMM did not. So the first use
// sets OpenBLAS to one thread for the process (openblas_set_num_threads(1)):
// a host application that calls OpenBLAS itself gets it single-threaded too.
//
// Threads: any. A call from inside a job runs its loop on that thread
// alone, and so does a call made while another thread's loop holds the
// helpers. No allocation after the pool's first use.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

namespace etude::gpu::cpu {

// Threads a parallel_for can use (1 inside a job or with one thread).
int worker_count();

// The calling thread's work buffer of at least `floats` floats (a job's
// im2col columns or staged input), grown on demand and kept: the layers of
// a model repeat their shapes, so after the first calls nothing allocates.
// One buffer per thread: a job must not hold it across a call that uses it.
float* job_scratch(std::size_t floats);

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

}  // namespace etude::gpu::cpu
