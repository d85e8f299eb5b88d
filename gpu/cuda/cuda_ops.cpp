// CudaBackend's kernel operations (see cuda_backend.h): each queues its
// work on the queue's stream through an Op (cuda_backend_state.h), which
// applies injected faults and times it when profiling.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cufft.h>

#include <algorithm>
#include <optional>
#include <string>

#include "gpu/conv_as_gemm.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/cuda/cuda_backend_state.h"
#include "gpu/cuda/cuda_conv_gemm.h"
#include "gpu/cuda/cuda_kernels.h"

namespace etude::gpu {

// ---- kernels ----

void CudaBackend::activation_impl(Queue& q, Activation f, const DeviceBuffer& x, DeviceBuffer& y,
                                  std::size_t n, float alpha) {
    Op op(*this, q, to_string(f));
    op.check(kernels::activation(op.stream(), f, fp(x), fp(y), n, alpha), "kernel launch");
    op.done();
}

void CudaBackend::gemm_impl(Queue& q, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                            const DeviceBuffer& a, int lda, const DeviceBuffer& b, int ldb,
                            float beta, DeviceBuffer& c, int ldc) {
    Op op(*this, q, "gemm");
    if (m > 0 && n > 0) {
        // cuBLAS is column-major. A row-major matrix with row stride ld is
        // its transpose in column-major with the same ld, so row-major
        // C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the
        // operands and the m/n sizes, keep each operand's transpose flag.
        cublasHandle_t h = impl_->blas(op.queue());
        op.check(
            cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                        n, m, k, &alpha, fp(b), ldb, fp(a), lda, &beta, fp(c), ldc),
            "cublasSgemm");
    }
    op.done();
}

// Convolutions: ungrouped ones as cuBLAS GEMMs (gpu/conv_as_gemm.h,
// cuda_conv_gemm.h), the rest with the direct kernels.
void CudaBackend::conv_done(Op& op, const cuda::ConvGemmStatus& st) {
    if (st.out_of_memory)
        throw OutOfMemory(std::string("CUDA cudaMallocAsync: out of memory while ") + op.name() +
                          " (" + std::to_string(st.bytes >> 20) + " MB of scratch)");
    if (st.call && st.blas != CUBLAS_STATUS_SUCCESS) op.check(st.blas, st.call);
    if (st.call) op.check(st.cuda, st.call);
    op.done();
}

void CudaBackend::conv1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                              const DeviceBuffer& w, const DeviceBuffer& bias, DeviceBuffer& y) {
    Op op(*this, q, "conv1d");
    const float* b = bias ? fp(bias) : nullptr;
    if (const auto plan = impl_->conv_as_gemm ? conv_as_gemm(s) : std::nullopt)
        return conv_done(op, cuda::conv1d_as_gemm(op.stream(), impl_->blas(op.queue()), s, *plan,
                                                  fp(x), fp(w), b, fp(y)));
    op.check(kernels::conv1d(op.stream(), s, fp(x), fp(w), b, fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::conv_transpose1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                                        const DeviceBuffer& w, const DeviceBuffer& bias,
                                        DeviceBuffer& y) {
    Op op(*this, q, "conv_transpose1d");
    const float* b = bias ? fp(bias) : nullptr;
    if (const auto plan = impl_->conv_as_gemm ? conv_transpose_as_gemm(s) : std::nullopt)
        return conv_done(op, cuda::conv_transpose1d_as_gemm(op.stream(), impl_->blas(op.queue()), s,
                                                            *plan, fp(x), fp(w), b, fp(y)));
    op.check(kernels::conv_transpose1d(op.stream(), s, fp(x), fp(w), b, fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::layer_norm_impl(Queue& q, int rows, int cols, float eps, const DeviceBuffer& x,
                                  const DeviceBuffer& gamma, const DeviceBuffer& beta,
                                  DeviceBuffer& y) {
    Op op(*this, q, "layer_norm");
    op.check(kernels::layer_norm(op.stream(), rows, cols, eps, fp(x), fp(gamma), fp(beta), fp(y)),
             "kernel launch");
    op.done();
}

void CudaBackend::axpby_impl(Queue& q, std::size_t n, float alpha, const DeviceBuffer& x,
                             float beta, DeviceBuffer& y) {
    Op op(*this, q, "axpby");
    op.check(kernels::axpby(op.stream(), n, alpha, fp(x), beta, fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::copy_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& src,
                                 std::size_t src_offset, std::size_t src_stride, DeviceBuffer& dst,
                                 std::size_t dst_offset, std::size_t dst_stride) {
    Op op(*this, q, "copy_rows");
    const std::size_t c = static_cast<std::size_t>(cols);
    if (rows > 0 && cols > 0) {
        if (rows == 1 || (src_stride == c && dst_stride == c)) {
            // One run of floats.
            op.check(cudaMemcpyAsync(fp(dst) + dst_offset, fp(src) + src_offset,
                                     static_cast<std::size_t>(rows) * c * sizeof(float),
                                     cudaMemcpyDeviceToDevice, op.stream()),
                     "cudaMemcpyAsync");
        } else {
            // Strided rows: one kernel over every element. A batch gathers a
            // few frames of hundreds of channel rows, and cudaMemcpy2DAsync
            // took a third of the device's time in the fourth H200 run
            // (docs/benchmarks.md).
            op.check(kernels::copy_rows(op.stream(), rows, cols, fp(src), src_offset, src_stride,
                                        fp(dst), dst_offset, dst_stride),
                     "kernel launch");
        }
    }
    op.done();
}

void CudaBackend::transpose_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                 DeviceBuffer& y) {
    Op op(*this, q, "transpose");
    op.check(kernels::transpose(op.stream(), rows, cols, fp(x), fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::add_bias_impl(Queue& q, int rows, int cols, const DeviceBuffer& bias,
                                bool per_row, DeviceBuffer& y) {
    Op op(*this, q, "add_bias");
    op.check(kernels::add_bias(op.stream(), rows, cols, fp(bias), per_row, fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::polar_spectrum_impl(Queue& q, int frames, int bins, float max_magnitude,
                                      const DeviceBuffer& x, DeviceBuffer& y) {
    Op op(*this, q, "polar_spectrum");
    op.check(kernels::polar_spectrum(op.stream(), frames, bins, max_magnitude, fp(x), fp(y)),
             "kernel launch");
    op.done();
}

void CudaBackend::rfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out) {
    Op op(*this, q, "rfft");
    if (n <= 0 || batch <= 0) return op.done();
    FftEntry& e = impl_->fft(op.queue(), n, batch);
    if (!e.forward) {
        // Basic (contiguous) layout: null embeds make cuFFT ignore the
        // strides and distances, which is exactly [batch][n] -> [batch][n/2+1].
        cufftHandle h = 0;
        op.check(cufftPlanMany(&h, 1, &n, nullptr, 1, 0, nullptr, 1, 0, CUFFT_R2C, batch),
                 "cufftPlanMany");
        e.forward = FftPlan(h);
        op.check(cufftSetStream(h, op.stream()), "cufftSetStream");
    }
    op.check(cufftExecR2C(e.forward.get(), fp(in), reinterpret_cast<cufftComplex*>(fp(out))),
             "cufftExecR2C");
    op.done();
}

void CudaBackend::irfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in,
                             DeviceBuffer& out) {
    Op op(*this, q, "irfft");
    if (n <= 0 || batch <= 0) return op.done();
    const std::size_t bins = static_cast<std::size_t>(n / 2 + 1);
    const std::size_t spectrum_floats = static_cast<std::size_t>(batch) * bins * 2;
    FftEntry& e = impl_->fft(op.queue(), n, batch);
    if (!e.inverse) {
        cufftHandle h = 0;
        op.check(cufftPlanMany(&h, 1, &n, nullptr, 1, 0, nullptr, 1, 0, CUFFT_C2R, batch),
                 "cufftPlanMany");
        e.inverse = FftPlan(h);
        op.check(cufftSetStream(h, op.stream()), "cufftSetStream");
        void* p = nullptr;
        const cudaError_t err = cudaMalloc(&p, spectrum_floats * sizeof(float));
        if (err == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            e.inverse = FftPlan();  // retry the whole setup next time
            throw OutOfMemory("CUDA cudaMalloc: out of memory while irfft");
        }
        op.check(err, "cudaMalloc");
        e.scratch.reset(p);
    }
    // The caller's spectrum is const: transform a copy.
    op.check(cudaMemcpyAsync(e.scratch.get(), fp(in), spectrum_floats * sizeof(float),
                             cudaMemcpyDeviceToDevice, op.stream()),
             "cudaMemcpyAsync");
    op.check(kernels::hermitian_edges(op.stream(), batch, n, static_cast<float*>(e.scratch.get())),
             "kernel launch");
    op.check(cufftExecC2R(e.inverse.get(), static_cast<cufftComplex*>(e.scratch.get()), fp(out)),
             "cufftExecC2R");
    // cuFFT's inverse is unnormalised; the interface promises 1/n.
    op.check(kernels::scale(op.stream(), fp(out), 1.0f / static_cast<float>(n),
                            static_cast<std::size_t>(batch) * n),
             "kernel launch");
    op.done();
}

void CudaBackend::frame_signal_impl(Queue& q, const DeviceBuffer& signal, int n_fft, int hop,
                                    int n_frames, const DeviceBuffer& window,
                                    DeviceBuffer& frames) {
    Op op(*this, q, "frame_signal");
    if (n_fft <= 0 || n_frames <= 0) return op.done();
    op.check(kernels::frame_signal(op.stream(), fp(signal), n_fft, hop, n_frames, fp(window),
                                   fp(frames)),
             "kernel launch");
    op.done();
}

void CudaBackend::overlap_add_impl(Queue& q, const DeviceBuffer& frames, int n_fft, int hop,
                                   int n_frames, const DeviceBuffer& window, DeviceBuffer& out) {
    Op op(*this, q, "overlap_add");
    if (n_fft <= 0 || n_frames <= 0) return op.done();
    op.check(
        kernels::overlap_add(op.stream(), fp(frames), n_fft, hop, n_frames, fp(window), fp(out)),
        "kernel launch");
    op.done();
}

void CudaBackend::complex_multiply_impl(Queue& q, const DeviceBuffer& a, const DeviceBuffer& b,
                                        DeviceBuffer& c, std::size_t n) {
    Op op(*this, q, "complex_multiply");
    op.check(kernels::complex_multiply(op.stream(), fp(a), fp(b), fp(c), n), "kernel launch");
    op.done();
}

void CudaBackend::complex_exp_impl(Queue& q, const DeviceBuffer& x, DeviceBuffer& y,
                                   std::size_t n) {
    Op op(*this, q, "complex_exp");
    op.check(kernels::complex_exp(op.stream(), fp(x), fp(y), n), "kernel launch");
    op.done();
}

void CudaBackend::minimum_phase_fold_impl(Queue& q, int n, int batch, const DeviceBuffer& x,
                                          DeviceBuffer& y) {
    Op op(*this, q, "minimum_phase_fold");
    op.check(kernels::minimum_phase_fold(op.stream(), n, batch, fp(x), fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::gated_tanh_impl(Queue& q, int batch, int channels, int length,
                                  const DeviceBuffer& x, DeviceBuffer& y) {
    Op op(*this, q, "gated_tanh");
    op.check(kernels::gated_tanh(op.stream(), batch, channels, length, fp(x), fp(y)),
             "kernel launch");
    op.done();
}

void CudaBackend::softmax_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                    DeviceBuffer& y) {
    Op op(*this, q, "softmax_rows");
    op.check(kernels::softmax_rows(op.stream(), rows, cols, fp(x), fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::relative_attention_scores_impl(
    Queue& q, int batch, int heads, int length, int channels, int window, float scale,
    const DeviceBuffer& queries, const DeviceBuffer& keys, const DeviceBuffer& rel_k,
    const DeviceBuffer& key_mask, DeviceBuffer& scores) {
    Op op(*this, q, "relative_attention_scores");
    op.check(kernels::relative_attention_scores(op.stream(), batch, heads, length, channels, window,
                                                scale, fp(queries), fp(keys), fp(rel_k),
                                                key_mask ? fp(key_mask) : nullptr, fp(scores)),
             "kernel launch");
    op.done();
}

void CudaBackend::relative_attention_values_impl(Queue& q, int batch, int heads, int length,
                                                 int channels, int window, const DeviceBuffer& p,
                                                 const DeviceBuffer& values,
                                                 const DeviceBuffer& rel_v, DeviceBuffer& y) {
    Op op(*this, q, "relative_attention_values");
    op.check(kernels::relative_attention_values(op.stream(), batch, heads, length, channels, window,
                                                fp(p), fp(values), fp(rel_v), fp(y)),
             "kernel launch");
    op.done();
}

void CudaBackend::copy_slot_rows_impl(Queue& q, const SlotRows& s, const DeviceBuffer& index,
                                      bool from_slots, const DeviceBuffer& src, DeviceBuffer& dst) {
    Op op(*this, q, from_slots ? "gather_slot_rows" : "scatter_slot_rows");
    op.check(kernels::copy_slot_rows(op.stream(), s, fp(index), from_slots, fp(src), fp(dst)),
             "kernel launch");
    op.done();
}

void CudaBackend::broadcast_multiply_impl(Queue& q, int rows, int cols, const DeviceBuffer& factors,
                                          bool per_row, DeviceBuffer& y) {
    Op op(*this, q, "broadcast_multiply");
    op.check(kernels::broadcast_multiply(op.stream(), rows, cols, fp(factors), per_row, fp(y)),
             "kernel launch");
    op.done();
}

void CudaBackend::spline_inverse_impl(Queue& q, int count, int bins, float bound, float scale,
                                      const DeviceBuffer& params, const DeviceBuffer& x,
                                      DeviceBuffer& y) {
    Op op(*this, q, "spline_inverse");
    op.check(
        kernels::spline_inverse(op.stream(), count, bins, bound, scale, fp(params), fp(x), fp(y)),
        "kernel launch");
    op.done();
}

}  // namespace etude::gpu
