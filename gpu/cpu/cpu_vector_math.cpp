// Compiled with -O3 -ffast-math (gpu/CMakeLists.txt): see the header for why.
#include "gpu/cpu/cpu_vector_math.h"

#include <algorithm>
#include <cmath>

#include "gpu/cpu/cpu_neon_math.h"
#include "gpu/host_compute.h"

// GCC: one clone per instruction set, chosen by the loader. Other compilers
// (clang for the fuzzing build) get the plain loops, and so does a
// ThreadSanitizer build: the loader runs the clones' resolvers before the
// sanitizer's runtime is up, and an instrumented resolver crashes there.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define ETUDE_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ETUDE_VECTOR_CLONES
#endif

namespace etude::gpu::cpu {

ETUDE_VECTOR_CLONES void gelu(const float* in, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        out[i] = 0.5f * in[i] * (1.0f + std::erf(in[i] * 0.70710678118654752f));
}
// AArch64: the NEON loops of cpu_neon_math.h (no libmvec there), beside
// the loops GCC vectorises through libmvec on x86-64.
ETUDE_VECTOR_CLONES void tanh(const float* in, float* out, std::size_t n) {
#if defined(__aarch64__) && defined(__ARM_NEON)
    neon::map(in, out, n, neon::tanh4);
#else
    for (std::size_t i = 0; i < n; ++i) out[i] = std::tanh(in[i]);
#endif
}
ETUDE_VECTOR_CLONES void exp(const float* in, float* out, std::size_t n) {
#if defined(__aarch64__) && defined(__ARM_NEON)
    neon::map(in, out, n, neon::exp4);
#else
    for (std::size_t i = 0; i < n; ++i) out[i] = std::exp(in[i]);
#endif
}
ETUDE_VECTOR_CLONES void gated_tanh(const float* a, const float* b, float* out, std::size_t n) {
    // exp's argument held at 80: under -ffast-math an exp that overflows to
    // inf gives NaN here, not 0. Past 80 the sigmoid is below 2e-35 anyway.
#if defined(__aarch64__) && defined(__ARM_NEON)
    neon::gate(a, b, out, n);
#else
    for (std::size_t i = 0; i < n; ++i)
        out[i] = std::tanh(a[i]) / (1.0f + std::exp(std::min(-b[i], 80.0f)));
#endif
}
ETUDE_VECTOR_CLONES void sin(const float* in, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = std::sin(in[i]);
}
ETUDE_VECTOR_CLONES void cos(const float* in, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = std::cos(in[i]);
}

ETUDE_VECTOR_CLONES void polar(const float* log_magnitude, const float* phase, float max_magnitude,
                               float* out, std::size_t bins) {
    for (std::size_t k = 0; k < bins; ++k) {
        const float m = std::min(std::exp(log_magnitude[k]), max_magnitude);
        out[2 * k] = m * std::cos(phase[k]);
        out[2 * k + 1] = m * std::sin(phase[k]);
    }
}

}  // namespace etude::gpu::cpu

namespace etude::gpu::host {

ETUDE_VECTOR_CLONES void gelu(const double* in, double* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        out[i] = 0.5 * in[i] * (1.0 + std::erf(in[i] * 0.70710678118654752440));
}
ETUDE_VECTOR_CLONES void exp(const double* in, double* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = std::exp(in[i]);
}
void exp(const float* in, float* out, std::size_t n) {
    cpu::exp(in, out, n);
}

}  // namespace etude::gpu::host
