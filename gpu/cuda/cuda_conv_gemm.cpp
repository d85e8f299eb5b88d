#include "gpu/cuda/cuda_conv_gemm.h"

#include <algorithm>

#include "gpu/cuda/cuda_kernels.h"

namespace etude::gpu::cuda {

ConvGemmStatus conv1d_as_gemm(cudaStream_t stream, cublasHandle_t blas, const Conv1dShape& s,
                              const ConvAsGemm& g, const float* x, const float* w,
                              const float* bias, float* y) {
    ConvGemmStatus st;
    auto failed = [&](cudaError_t e, const char* call) {
        if (e == cudaSuccess) return false;
        st.call = call;
        st.cuda = e;
        return true;
    };
    struct Scratch {  // the unfolded windows, given back to the pool in stream order
        cudaStream_t stream;
        float* p = nullptr;
        ~Scratch() {
            if (p) cudaFreeAsync(p, stream);
        }
    } scratch{stream};
    if (g.unfold) {
        st.bytes =
            g.unfolded_floats_per_item * static_cast<std::size_t>(g.items_per_call) * sizeof(float);
        const cudaError_t e =
            cudaMallocAsync(reinterpret_cast<void**>(&scratch.p), st.bytes, stream);
        if (e == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            scratch.p = nullptr;
            st.call = "cudaMallocAsync";
            st.cuda = e;
            st.out_of_memory = true;
            return st;
        }
        if (failed(e, "cudaMallocAsync")) return st;
    }
    if (bias && failed(kernels::bias_rows(stream, s.batch, g.n, g.m, bias, y), "kernel launch"))
        return st;
    const float one = 1.0f, beta = bias ? 1.0f : 0.0f;
    for (int first = 0; first < g.batch; first += g.items_per_call) {
        const int items = std::min(g.items_per_call, g.batch - first);
        const float* xs = x + static_cast<std::size_t>(first) * g.x_floats_per_item;
        if (g.unfold && failed(kernels::im2col(stream, s, items, xs, scratch.p), "kernel launch"))
            return st;
        // The arguments tests/gpu/conv_as_gemm_test.cpp gives OpenBLAS's
        // column-major SGEMM on the host.
        const cublasStatus_t b = cublasSgemmStridedBatched(
            blas, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &one, g.unfold ? scratch.p : xs,
            static_cast<int>(g.lda), g.stride_a, w, static_cast<int>(g.ldb), g.stride_b, &beta,
            y + static_cast<std::size_t>(first) * static_cast<std::size_t>(g.stride_c),
            static_cast<int>(g.ldc), g.stride_c, items);
        if (b != CUBLAS_STATUS_SUCCESS) {
            st.call = "cublasSgemmStridedBatched";
            st.blas = b;
            return st;
        }
    }
    return st;
}

}  // namespace etude::gpu::cuda
