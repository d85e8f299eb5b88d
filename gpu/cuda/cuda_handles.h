// RAII for the CUDA objects the CUDA backend owns (streams, events, cuBLAS
// handles, device memory, cuFFT plans, graphs), and cuFFT's error names.
// Private to gpu/cuda/cuda_backend.cpp.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cufft.h>

#include <memory>
#include <utility>

#include "gpu/cuda/cuda_capture_gate.h"

namespace etude::gpu::cuda {

struct StreamDeleter {
    void operator()(cudaStream_t s) const noexcept { cudaStreamDestroy(s); }
};
using Stream = std::unique_ptr<CUstream_st, StreamDeleter>;

struct EventDeleter {
    void operator()(cudaEvent_t e) const noexcept { cudaEventDestroy(e); }
};
using Event = std::unique_ptr<CUevent_st, EventDeleter>;

// cuBLAS frees its workspace when a handle goes, cuFFT its plan's work area,
// and cudaFree synchronizes the device: each waits out the recordings in
// progress (cuda_capture_gate.h).
struct CublasDeleter {
    void operator()(cublasHandle_t h) const noexcept {
        capture_gate().release([h] { cublasDestroy(h); });
    }
};
using CublasHandle = std::unique_ptr<cublasContext, CublasDeleter>;

struct DeviceFree {
    void operator()(void* p) const noexcept {
        capture_gate().release([p] { cudaFree(p); });
    }
};
using DeviceMemory = std::unique_ptr<void, DeviceFree>;

// cufftHandle is a plain int, so it gets a small owning class of its own.
class FftPlan {
  public:
    FftPlan() = default;
    explicit FftPlan(cufftHandle h) : h_(h), valid_(true) {}
    FftPlan(FftPlan&& o) noexcept : h_(o.h_), valid_(std::exchange(o.valid_, false)) {}
    FftPlan& operator=(FftPlan&& o) noexcept {
        if (this != &o) {
            reset();
            h_ = o.h_;
            valid_ = std::exchange(o.valid_, false);
        }
        return *this;
    }
    FftPlan(const FftPlan&) = delete;
    FftPlan& operator=(const FftPlan&) = delete;
    ~FftPlan() { reset(); }
    cufftHandle get() const { return h_; }
    explicit operator bool() const { return valid_; }

  private:
    void reset() noexcept {
        if (valid_) capture_gate().release([h = h_] { cufftDestroy(h); });
        valid_ = false;
    }
    cufftHandle h_ = 0;
    bool valid_ = false;
};

// cuFFT has no error-string function.
inline const char* cufft_error_name(cufftResult r) {
    switch (r) {
        case CUFFT_SUCCESS:
            return "CUFFT_SUCCESS";
        case CUFFT_INVALID_PLAN:
            return "CUFFT_INVALID_PLAN";
        case CUFFT_ALLOC_FAILED:
            return "CUFFT_ALLOC_FAILED";
        case CUFFT_INVALID_TYPE:
            return "CUFFT_INVALID_TYPE";
        case CUFFT_INVALID_VALUE:
            return "CUFFT_INVALID_VALUE";
        case CUFFT_INTERNAL_ERROR:
            return "CUFFT_INTERNAL_ERROR";
        case CUFFT_EXEC_FAILED:
            return "CUFFT_EXEC_FAILED";
        case CUFFT_SETUP_FAILED:
            return "CUFFT_SETUP_FAILED";
        case CUFFT_INVALID_SIZE:
            return "CUFFT_INVALID_SIZE";
        case CUFFT_UNALIGNED_DATA:
            return "CUFFT_UNALIGNED_DATA";
        case CUFFT_INVALID_DEVICE:
            return "CUFFT_INVALID_DEVICE";
        case CUFFT_NO_WORKSPACE:
            return "CUFFT_NO_WORKSPACE";
        case CUFFT_NOT_IMPLEMENTED:
            return "CUFFT_NOT_IMPLEMENTED";
        case CUFFT_NOT_SUPPORTED:
            return "CUFFT_NOT_SUPPORTED";
        default:
            return "cuFFT error";
    }
}

struct GraphDeleter {
    void operator()(cudaGraph_t g) const noexcept { cudaGraphDestroy(g); }
};
using Graph = std::unique_ptr<CUgraph_st, GraphDeleter>;

// Destroying an executable graph that is still running is allowed: CUDA
// frees it once the launch has finished.
struct GraphExecDeleter {
    void operator()(cudaGraphExec_t g) const noexcept { cudaGraphExecDestroy(g); }
};
using GraphExec = std::unique_ptr<CUgraphExec_st, GraphExecDeleter>;

}  // namespace etude::gpu::cuda
