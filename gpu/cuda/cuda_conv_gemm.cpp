#include "gpu/cuda/cuda_conv_gemm.h"

#include <algorithm>
#include <cstdint>

#include "gpu/cuda/cuda_kernels.h"

namespace etude::gpu::cuda {
namespace {

// Scratch from the stream-ordered pool, given back in stream order (after
// the work queued on `stream` that uses it).
struct PoolScratch {
    cudaStream_t stream;
    float* p = nullptr;
    explicit PoolScratch(cudaStream_t on) : stream(on) {}
    PoolScratch(const PoolScratch&) = delete;
    PoolScratch& operator=(const PoolScratch&) = delete;
    ~PoolScratch() {
        if (p) cudaFreeAsync(p, stream);
    }
    // False with `st` filled in when the pool cannot give `bytes`.
    bool take(std::size_t bytes, ConvGemmStatus& st) {
        st.bytes = bytes;
        const cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&p), bytes, stream);
        if (e == cudaSuccess) return true;
        p = nullptr;
        st.call = "cudaMallocAsync";
        st.cuda = e;
        if (e == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            st.out_of_memory = true;
        }
        return false;
    }
};

bool failed(cudaError_t e, const char* call, ConvGemmStatus& st) {
    if (e == cudaSuccess) return false;
    st.call = call;
    st.cuda = e;
    return true;
}

bool failed(cublasStatus_t b, ConvGemmStatus& st) {
    if (b == CUBLAS_STATUS_SUCCESS) return false;
    st.call = "cublasSgemmStridedBatched";
    st.blas = b;
    return true;
}

}  // namespace

// The scratch comes from the stream-ordered pool (cudaMallocAsync: a node of
// the graph when recorded, so a recording holds no pointer to scratch that
// could be freed under it), kept in the pool rather than given back to the
// driver at every synchronize, so a chunk's scratch is not a fresh device
// allocation each time.
bool keep_pool_scratch(int device) {
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess || !pool) {
        cudaGetLastError();
        return false;
    }
    std::uint64_t keep = UINT64_MAX;
    if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return true;
}

// The GEMM arguments below are the ones tests/gpu/conv_as_gemm_test.cpp
// gives OpenBLAS's column-major SGEMM on the host.

ConvGemmStatus conv1d_as_gemm(cudaStream_t stream, cublasHandle_t blas, const Conv1dShape& s,
                              const ConvAsGemm& g, const float* x, const float* w,
                              const float* bias, float* y) {
    ConvGemmStatus st;
    PoolScratch scratch(stream);
    if (g.unfold &&
        !scratch.take(g.unfolded_floats_per_item * std::size_t(g.items_per_call) * sizeof(float),
                      st))
        return st;
    if (bias && failed(kernels::bias_rows(stream, s.batch, g.n, g.m, bias, y), "kernel launch", st))
        return st;
    const float one = 1.0f, beta = bias ? 1.0f : 0.0f;
    for (int first = 0; first < g.batch; first += g.items_per_call) {
        const int items = std::min(g.items_per_call, g.batch - first);
        const float* xs = x + std::size_t(first) * g.x_floats_per_item;
        if (g.unfold &&
            failed(kernels::im2col(stream, s, items, xs, scratch.p), "kernel launch", st))
            return st;
        if (failed(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &one,
                                             g.unfold ? scratch.p : xs, int(g.lda), g.stride_a, w,
                                             int(g.ldb), g.stride_b, &beta,
                                             y + std::size_t(first) * std::size_t(g.stride_c),
                                             int(g.ldc), g.stride_c, items),
                   st))
            return st;
    }
    return st;
}

ConvGemmStatus conv_transpose1d_as_gemm(cudaStream_t stream, cublasHandle_t blas,
                                        const Conv1dShape& s, const ConvTransposeAsGemm& g,
                                        const float* x, const float* w, const float* bias,
                                        float* y) {
    ConvGemmStatus st;
    PoolScratch z(stream);
    if (!z.take(g.z_floats_per_item * std::size_t(g.items_per_call) * sizeof(float), st)) return st;
    const float one = 1.0f, zero = 0.0f;
    for (int first = 0; first < g.batch; first += g.items_per_call) {
        const int items = std::min(g.items_per_call, g.batch - first);
        const float* xs = x + std::size_t(first) * g.x_floats_per_item;
        if (failed(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_T, g.m, g.n, g.k, &one,
                                             xs, int(g.lda), g.stride_a, w, int(g.ldb), g.stride_b,
                                             &zero, z.p, int(g.ldc), g.stride_c, items),
                   st))
            return st;
        if (failed(kernels::col2im(stream, s, items, z.p, bias,
                                   y + std::size_t(first) * g.y_floats_per_item),
                   "kernel launch", st))
            return st;
    }
    return st;
}

}  // namespace etude::gpu::cuda
