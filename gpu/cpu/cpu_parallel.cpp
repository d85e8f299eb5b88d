#include "gpu/cpu/cpu_parallel.h"

#include <cblas.h>

#include <mutex>
#include <vector>

#include "gpu/cpu/cpu_worker_pool.h"

namespace etude::gpu::cpu {

// Every BLAS call of the backend runs inside a job (see the header), so
// OpenBLAS must not start threads of its own under ours.
void serial_blas_once() {
    static std::once_flag once;
    std::call_once(once, [] { openblas_set_num_threads(1); });
}

float* job_scratch(std::size_t floats) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < floats) buffer.resize(floats);
    return buffer.data();
}

}  // namespace etude::gpu::cpu

// gpu/host_compute.h's loops run on the CPU backend's pool.
namespace etude::gpu::host {

void start_workers() {
    cpu::WorkerPool::shared();
}

int worker_count() {
    return cpu::WorkerPool::inside_job() ? 1 : cpu::WorkerPool::shared().threads();
}

namespace detail {

void parallel_for_impl(int jobs, void (*run)(void* body, int job), void* body) {
    cpu::serial_blas_once();
    cpu::WorkerPool::shared().run(jobs, run, body);
}

}  // namespace detail
}  // namespace etude::gpu::host
