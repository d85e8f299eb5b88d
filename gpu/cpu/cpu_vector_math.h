// Element-wise transcendental functions for the CPU backend's activations,
// vectorised through glibc's vector math library (libmvec).
//
// Why a file of their own: GCC only calls libmvec's SIMD erf/exp/sin/...
// under -ffast-math, and -ffast-math must not leak into the rest of the
// backend (NaN checks, signed zeros). This file is compiled with it; each
// function is also built for AVX-512, AVX2 and baseline x86-64 and picks one
// at load time (target_clones), so the library stays portable. libmvec's
// float functions are within 4 ulp of the correctly rounded result; the
// scalar std:: versions are within 1-2 ulp. Both are far inside the 1e-4
// parity the neural vocoders are tested to.
//
// Vocos spends a third of its CPU time in GELU with the scalar std::erf.
// This file also defines gpu/host_compute.h's gelu and exp, for the Piper
// text-to-latent stage on the host (engine/models/vits/), whose softmaxes
// and duration predictor GELUs are most of its serial time with glibc's
// scalar exp and erf (the erf alone about 20 ns a value); libmvec's double
// functions are also within 4 ulp.
//
// Each value's result is the same bits wherever it lies in the run and
// wherever the run starts: the loops go a block of 64 bytes at a time (one
// AVX-512 vector, two AVX2 or four SSE ones), the last, partial block
// padded with zeros, so every value goes through the same vector call
// (cpu_vector_math.cpp says why a plain loop does not). A batch's items, or
// the workers' ranges of one run, round exactly as the same values alone;
// the HiFi-GAN and Piper flow batches compare so. (The clone, and with it
// the bits, differs from one CPU to another, not within a process.)
//
// Threads: any; no allocation. `in` and `out` may be the same array.
#pragma once

#include <cstddef>

namespace etude::gpu::cpu {

// 0.5 x (1 + erf(x / sqrt 2)): exact GELU, as torch.nn.GELU() by default.
void gelu(const float* in, float* out, std::size_t n);
void tanh(const float* in, float* out, std::size_t n);
void exp(const float* in, float* out, std::size_t n);
// WaveNet's gate: out[i] = tanh(a[i]) sigmoid(b[i]), as gated_tanh_at
// (gpu/kernels/kernel_bodies.h) writes it, but for gates below -80 (a
// sigmoid under 2e-35), which give tanh(a) / (1 + e^80). The Piper flow's
// WaveNet layers spent a fifth of their time in the scalar tanhf and expf.
void gated_tanh(const float* a, const float* b, float* out, std::size_t n);
void sin(const float* in, float* out, std::size_t n);
void cos(const float* in, float* out, std::size_t n);
// One frame of polar_spectrum (gpu/backend.h): out[2k], out[2k+1] =
// min(exp(log_magnitude[k]), max_magnitude) * (cos, sin)(phase[k]).
void polar(const float* log_magnitude, const float* phase, float max_magnitude, float* out,
           std::size_t bins);

}  // namespace etude::gpu::cpu
