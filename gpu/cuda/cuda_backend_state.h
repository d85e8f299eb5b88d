// CudaBackend's insides, shared by its two files: cuda_backend.cpp (the
// device, memory, queues, copies, recordings) and cuda_ops.cpp (the kernel
// operations). Internal to the module. (A named namespace, not an
// anonymous one: CudaQueue must be one type in both files for
// Impl::queue()'s dynamic_cast.)
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cufft.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/cuda/cuda_backend.h"
#include "gpu/cuda/cuda_handles.h"
#include "gpu/kernel_timing_table.h"

namespace etude::gpu {
namespace cuda_state {

using cuda::capture_gate;
using cuda::CublasHandle;
using cuda::cufft_error_name;
using cuda::DeviceMemory;
using cuda::Event;
using cuda::FftPlan;
using cuda::Graph;
using cuda::GraphExec;
using cuda::Stream;

inline float* fp(const DeviceBuffer& b) {
    return static_cast<float*>(b.handle());
}

struct TimedOp {
    const char* name;  // always a string literal or to_string(): static storage
    Event start, stop;
};

struct FftEntry {
    FftPlan forward, inverse;
    // C2R overwrites its input, so irfft transforms a copy: one buffer per
    // plan, allocated with it.
    DeviceMemory scratch;
};

class CudaQueue final : public Queue {
  public:
    CudaQueue(const void* owner, int device, Stream stream)
        : owner(owner), device(device), stream(std::move(stream)) {}
    ~CudaQueue() override {
        // Work still queued may use the plans, scratch and events below.
        cudaSetDevice(device);
        cudaStreamSynchronize(stream.get());
    }

    const void* owner;
    int device;
    // Declared first so that it is destroyed last, after everything using it.
    Stream stream;
    CublasHandle blas;
    int blas_math = -1;  // the MathPrecision the handle is set to; -1: not yet
    std::map<std::pair<int, int>, FftEntry> ffts;  // (n, batch)
    std::vector<Event> spare_events;
    std::deque<TimedOp> pending;  // recorded, not yet read
};

// Bounds the events in flight on a queue that is never synchronized.
constexpr std::size_t kMaxPendingTimings = 4096;

}  // namespace cuda_state

using namespace cuda_state;

// ---------------------------------------------------------------------------

struct CudaBackend::Impl {
    explicit Impl(CudaBackend& self) : self(self) {}

    CudaBackend& self;
    int device = 0;  // CUDA ordinal; set once by the constructor
    // Ungrouped convolutions, plain and transposed, as cuBLAS GEMMs
    // (gpu/conv_as_gemm.h) unless ETUDE_CUDA_CONV=direct asks for the
    // one-thread-per-output kernels.
    bool conv_as_gemm = true;
    // What the cuBLAS handles compute in (set_math_precision); each queue's
    // handle follows it at its next GEMM.
    std::atomic<MathPrecision> precision{MathPrecision::Fp32};
    DeviceInfo info;
    KernelTimingTable timings;

    // Every CUDA, cuFFT and cuBLAS call goes through one of these.
    void check(cudaError_t e, const char* call, const char* op) {
        if (e == cudaSuccess) return;
        cudaGetLastError();  // clear a non-sticky error so later launch checks are not confused
        self.fail(std::string("CUDA ") + call + ": " + cudaGetErrorString(e) + " while " + op);
    }
    void check(cufftResult r, const char* call, const char* op) {
        if (r == CUFFT_SUCCESS) return;
        if (r == CUFFT_ALLOC_FAILED)
            throw OutOfMemory(std::string("CUDA ") + call + ": " + cufft_error_name(r) + " while " +
                              op);
        self.fail(std::string("CUDA ") + call + ": " + cufft_error_name(r) + " while " + op);
    }
    void check(cublasStatus_t s, const char* call, const char* op) {
        if (s == CUBLAS_STATUS_SUCCESS) return;
        if (s == CUBLAS_STATUS_ALLOC_FAILED)
            throw OutOfMemory(std::string("CUDA ") + call + ": " + cublasGetStatusString(s) +
                              " while " + op);
        self.fail(std::string("CUDA ") + call + ": " + cublasGetStatusString(s) + " while " + op);
    }

    // The current device is per host thread; any thread may call us.
    void use_device(const char* op) { check(cudaSetDevice(device), "cudaSetDevice", op); }

    CudaQueue& queue(Queue& q) const {
        auto* cq = dynamic_cast<CudaQueue*>(&q);
        if (!cq || cq->owner != this)
            throw std::invalid_argument("CUDA backend: a queue from another backend was passed");
        return *cq;
    }

    // Reads the timings of finished ops in order, stopping at the first that
    // is still running (or at all of them after a synchronize).
    void harvest(CudaQueue& q) {
        while (!q.pending.empty()) {
            TimedOp& op = q.pending.front();
            const cudaError_t ready = cudaEventQuery(op.stop.get());
            if (ready == cudaErrorNotReady) {
                cudaGetLastError();  // "not ready" is a status, not an error to keep
                return;
            }
            check(ready, "cudaEventQuery", "reading kernel timings");
            float ms = 0.0f;
            check(cudaEventElapsedTime(&ms, op.start.get(), op.stop.get()), "cudaEventElapsedTime",
                  "reading kernel timings");
            timings.record(op.name, ms);
            q.spare_events.push_back(std::move(op.start));
            q.spare_events.push_back(std::move(op.stop));
            q.pending.pop_front();
        }
    }

    Event take_event(CudaQueue& q, const char* op) {
        if (!q.spare_events.empty()) {
            Event e = std::move(q.spare_events.back());
            q.spare_events.pop_back();
            return e;
        }
        cudaEvent_t e = nullptr;
        check(cudaEventCreate(&e), "cudaEventCreate", op);
        return Event(e);
    }

    FftEntry& fft(CudaQueue& q, int n, int batch) { return q.ffts[{n, batch}]; }

    cublasHandle_t blas(CudaQueue& q) {
        if (!q.blas) {
            cublasHandle_t h = nullptr;
            check(cublasCreate(&h), "cublasCreate", "gemm");
            q.blas.reset(h);
            check(cublasSetStream(h, q.stream.get()), "cublasSetStream", "gemm");
        }
        // The default math mode computes in full FP32 (no TF32 tensor
        // cores), which the 1e-4 parity with the CPU's SGEMM relies on;
        // TF32 only when asked for.
        const MathPrecision want = precision.load(std::memory_order_relaxed);
        if (q.blas_math != static_cast<int>(want)) {
            check(cublasSetMathMode(q.blas.get(), want == MathPrecision::Tf32
                                                      ? CUBLAS_TF32_TENSOR_OP_MATH
                                                      : CUBLAS_DEFAULT_MATH),
                  "cublasSetMathMode", "gemm");
            q.blas_math = static_cast<int>(want);
        }
        return q.blas.get();
    }
};

// One operation on a queue: applies an injected fault, makes the device
// current and, when profiling, brackets the work with a pair of timing
// events. done() files
// the pair for synchronize() to read; an op that throws before done() just
// returns its events to the pool.
class CudaBackend::Op {
  public:
    Op(CudaBackend& b, Queue& q, const char* name)
        : impl_(*b.impl_), q_(impl_.queue(q)), name_(name) {
        const double late_ms = b.consume_fault(name);
        if (late_ms > 0)
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(late_ms));
        impl_.use_device(name);
        // Inside a recording nothing is timed: an event there would be a
        // node of the graph, never read.
        if (!b.profiling() || q.recording()) return;
        if (q_.pending.size() >= kMaxPendingTimings) impl_.harvest(q_);
        if (q_.pending.size() >= kMaxPendingTimings) return;  // still busy: skip timing this op
        start_ = impl_.take_event(q_, name);
        stop_ = impl_.take_event(q_, name);
        impl_.check(cudaEventRecord(start_.get(), q_.stream.get()), "cudaEventRecord", name);
    }
    ~Op() {
        if (start_) q_.spare_events.push_back(std::move(start_));
        if (stop_) q_.spare_events.push_back(std::move(stop_));
    }
    Op(const Op&) = delete;
    Op& operator=(const Op&) = delete;

    CudaQueue& queue() const { return q_; }
    cudaStream_t stream() const { return q_.stream.get(); }
    const char* name() const { return name_; }
    template <typename Status>
    void check(Status s, const char* call) {
        impl_.check(s, call, name_);
    }

    void done() {
        if (!start_) return;
        impl_.check(cudaEventRecord(stop_.get(), q_.stream.get()), "cudaEventRecord", name_);
        q_.pending.push_back(TimedOp{name_, std::move(start_), std::move(stop_)});
    }

  private:
    Impl& impl_;
    CudaQueue& q_;
    const char* name_;
    Event start_, stop_;
};

}  // namespace etude::gpu
