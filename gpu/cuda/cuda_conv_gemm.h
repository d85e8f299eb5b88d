// CUDA's ungrouped conv1d as cuBLAS GEMMs (gpu/conv_as_gemm.h has the plan
// and why): the launches, apart from the backend so that its file stays
// about the backend. Internal to the module.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "gpu/backend.h"
#include "gpu/conv_as_gemm.h"

namespace etude::gpu::cuda {

// What went wrong, for the backend to report with the op's name: the first
// failing call and its status, or that the unfolded windows did not fit.
struct ConvGemmStatus {
    const char* call = nullptr;  // null: all queued
    cudaError_t cuda = cudaSuccess;
    cublasStatus_t blas = CUBLAS_STATUS_SUCCESS;
    bool out_of_memory = false;  // cudaMallocAsync of `bytes` failed
    std::size_t bytes = 0;
};

// Sets up the device's stream-ordered pool for the convolutions' scratch:
// false when the device has none (the direct kernels then run).
bool keep_pool_scratch(int device);

// Queues `plan` for conv1d `s` on `stream` (which `blas` is set to): the
// bias into y, then per part of the batch the windows' im2col matrices in
// scratch from the stream-ordered pool and one strided-batched SGEMM.
// `bias` may be null.
ConvGemmStatus conv1d_as_gemm(cudaStream_t stream, cublasHandle_t blas, const Conv1dShape& s,
                              const ConvAsGemm& plan, const float* x, const float* w,
                              const float* bias, float* y);

// The same for a transposed convolution: per part of the batch, one
// strided-batched SGEMM into the taps' contributions (scratch from the
// pool), then the gather into y, which adds the bias.
ConvGemmStatus conv_transpose1d_as_gemm(cudaStream_t stream, cublasHandle_t blas,
                                        const Conv1dShape& s, const ConvTransposeAsGemm& plan,
                                        const float* x, const float* w, const float* bias,
                                        float* y);

}  // namespace etude::gpu::cuda
