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

#include "gpu/host_compute.h"

namespace etude::gpu::cpu {

// The calling thread's work buffer of at least `floats` floats (a job's
// im2col columns or staged input), grown on demand and kept: the layers of
// a model repeat their shapes, so after the first calls nothing allocates.
// One buffer per thread: a job must not hold it across a call that uses it.
// The pool's helpers keep theirs. A thread that calls into the pool (a
// stream's producer, an analysis worker) hands its buffer to a spare list
// when its outermost loop ends (give_back_job_scratch, called by the pool),
// and its next loop takes one from there: a server's producers, one per
// stream, share as many buffers as run loops at once (up to 1 MB each for a
// Piper medium voice) instead of keeping one each for the stream's life.
float* job_scratch(std::size_t floats);
void give_back_job_scratch();

// The loops of gpu/host_compute.h, in this namespace too: the backend's ops
// are written with them.
using host::jobs_for;
using host::parallel_for;
using host::parallel_ranges;
using host::worker_count;

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

}  // namespace etude::gpu::cpu
