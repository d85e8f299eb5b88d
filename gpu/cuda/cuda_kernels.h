// Launchers for the CUDA backend's own kernels (everything that is not a
// cuBLAS GEMM or a cuFFT transform). Internal to the module.
//
// Each launcher queues its kernel on `stream` and returns the launch status
// (cudaGetLastError), so the backend can report it with the op's name. A
// size of zero launches nothing. Pointers are device pointers; sizes are in
// floats, or complex values where the name says so.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "gpu/backend.h"

namespace etude::gpu::kernels {

cudaError_t activation(cudaStream_t stream, Activation f, const float* x, float* y, std::size_t n,
                       float alpha);
cudaError_t fill(cudaStream_t stream, float* y, float value, std::size_t n);
cudaError_t scale(cudaStream_t stream, float* y, float factor, std::size_t n);
// bias may be null.
cudaError_t conv1d(cudaStream_t stream, const Conv1dShape& s, const float* x, const float* w,
                   const float* bias, float* y);
cudaError_t conv_transpose1d(cudaStream_t stream, const Conv1dShape& s, const float* x,
                             const float* w, const float* bias, float* y);
cudaError_t layer_norm(cudaStream_t stream, int rows, int cols, float eps, const float* x,
                       const float* gamma, const float* beta, float* y);
cudaError_t frame_signal(cudaStream_t stream, const float* signal, int n_fft, int hop, int n_frames,
                         const float* window, float* frames);
cudaError_t overlap_add(cudaStream_t stream, const float* frames, int n_fft, int hop, int n_frames,
                        const float* window, float* out);
cudaError_t complex_multiply(cudaStream_t stream, const float* a, const float* b, float* c,
                             std::size_t n_complex);
cudaError_t complex_exp(cudaStream_t stream, const float* x, float* y, std::size_t n_complex);
cudaError_t minimum_phase_fold(cudaStream_t stream, int n, int batch, const float* x, float* y);

}  // namespace etude::gpu::kernels
