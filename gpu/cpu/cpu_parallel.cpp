#include "gpu/cpu/cpu_parallel.h"

#include <cblas.h>

#include <mutex>
#include <vector>

#include "gpu/cpu/cpu_worker_pool.h"

namespace etude::gpu::cpu {
namespace {

// Every BLAS call of the backend runs inside a job (see the header), so
// OpenBLAS must not start threads of its own under ours.
void serial_blas_once() {
    static std::once_flag once;
    std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace

int worker_count() {
    return WorkerPool::inside_job() ? 1 : WorkerPool::shared().threads();
}

float* job_scratch(std::size_t floats) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < floats) buffer.resize(floats);
    return buffer.data();
}

namespace detail {

void parallel_for_impl(int jobs, void (*run)(void* body, int job), void* body) {
    serial_blas_once();
    WorkerPool::shared().run(jobs, run, body);
}

}  // namespace detail
}  // namespace etude::gpu::cpu
