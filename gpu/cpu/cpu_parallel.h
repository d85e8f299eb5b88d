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

// The length of each chunk when an axis of `total` is cut into chunks of
// at most `chunk` for `workers` threads, the chunks being the jobs: shorter
// so that every worker gets one when the axis allows (down to min_chunk),
// and where there are more chunks than workers, evened out to a multiple
// of the workers' count (unless that takes it below min_chunk), so that
// none waits on the others' last chunk. A streamed 32-channel layer of 8254
// columns in chunks of 984 was eight jobs and a short ninth: one worker
// made 4318 columns while the other, done at 3936, waited. An evened-out
// chunk is rounded up to a multiple of `align` where that keeps the count.
inline int balanced_chunk(int total, int chunk, int min_chunk, int workers, int align = 1) {
    const auto ceil_div = [](int a, int b) { return (a + b - 1) / b; };
    chunk = std::max(chunk, 1);
    if (workers <= 1 || total <= 0) return chunk;
    chunk = std::max(1, std::min(chunk, std::max(min_chunk, ceil_div(total, workers))));
    const int chunks = ceil_div(total, chunk);
    if (chunks <= workers || chunks % workers == 0) return chunk;
    const int target = ceil_div(chunks, workers) * workers;
    const int even = ceil_div(total, target);
    if (even < std::min(chunk, min_chunk)) return chunk;
    const int aligned = ceil_div(even, std::max(align, 1)) * std::max(align, 1);
    return ceil_div(total, aligned) == target ? aligned : even;
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
