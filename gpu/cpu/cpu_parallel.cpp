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

namespace {

thread_local std::vector<float> t_scratch;
std::mutex g_spare_mu;
std::vector<std::vector<float>> g_spare;  // callers' buffers between their loops

}  // namespace

float* job_scratch(std::size_t floats) {
    if (t_scratch.empty()) {
        std::lock_guard lock(g_spare_mu);
        if (!g_spare.empty()) {
            t_scratch = std::move(g_spare.back());
            g_spare.pop_back();
        }
    }
    if (t_scratch.size() < floats) t_scratch.resize(floats);
    return t_scratch.data();
}

void give_back_job_scratch() {
    if (t_scratch.empty()) return;
    std::lock_guard lock(g_spare_mu);
    g_spare.push_back(std::move(t_scratch));
    t_scratch = std::vector<float>();
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

void enter_solo() {
    cpu::WorkerPool::set_solo(true);
}
void leave_solo() {
    cpu::WorkerPool::set_solo(false);
}
bool solo() {
    return cpu::WorkerPool::solo();
}

namespace detail {

void parallel_for_impl(int jobs, void (*run)(void* body, int job), void* body) {
    cpu::serial_blas_once();
    cpu::WorkerPool::shared().run(jobs, run, body);
}

}  // namespace detail
}  // namespace etude::gpu::host
