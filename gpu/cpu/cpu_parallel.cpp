#include "gpu/cpu/cpu_parallel.h"

#include <cblas.h>
#include <omp.h>

#include <exception>
#include <mutex>

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
    return omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads());
}

namespace detail {

void parallel_for_impl(int jobs, void (*run)(void* body, int job), void* body) {
    serial_blas_once();
    if (jobs <= 0) return;
    if (jobs == 1 || worker_count() == 1) {
        for (int j = 0; j < jobs; ++j) run(body, j);
        return;
    }
    std::exception_ptr failure;
    std::mutex failure_mutex;
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::min(jobs, worker_count()))
    for (int j = 0; j < jobs; ++j) {
        try {
            run(body, j);
        } catch (...) {
            const std::lock_guard lock(failure_mutex);
            if (!failure) failure = std::current_exception();
        }
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace detail
}  // namespace etude::gpu::cpu
