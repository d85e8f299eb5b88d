// Compiled with -O3 -ffast-math (gpu/CMakeLists.txt): see the header for why.
#include "gpu/cpu/cpu_vector_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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
// The block loops below must be compiled inside each clone, for its
// instruction set: a copy of their own would be built for the baseline.
#if defined(__GNUC__)
#define ETUDE_IN_CLONE_ATTR __attribute__((always_inline))
#else
#define ETUDE_IN_CLONE_ATTR
#endif
#define ETUDE_IN_CLONE ETUDE_IN_CLONE_ATTR inline
// On a block's loop. unroll 1: GCC would otherwise unroll some of them
// whole (erf's, sincos's) before the vectoriser sees them, leaving scalar
// calls. ivdep: a block is read and written value by value, in place or
// not, with no dependence between iterations; without it GCC adds a
// scalar copy of the loop for arrays that overlap in part (the same array
// passes its check), which no caller makes, but whose values would round
// apart: with it there is no scalar path at all (objdump -dr finds no call
// to a scalar tanhf, expf, erff, sinf, cosf, exp or erf in this file).
#if defined(__GNUC__) && !defined(__clang__)
#define ETUDE_BLOCK_LOOP _Pragma("GCC ivdep") _Pragma("GCC unroll 1")
#else
#define ETUDE_BLOCK_LOOP
#endif

namespace etude::gpu::cpu {
namespace {

// Values per block: 64 bytes, one AVX-512 vector (two AVX2, four SSE).
template <class T>
constexpr std::size_t kBlock = 64 / sizeof(T);

// Where a block's loop reads its kBlock values and writes its results: in
// the run itself when the block is whole; for a run's last, partial block,
// in local arrays (the run's `count` values, then zeros). Either way one
// loop in the source: two (one for the whole blocks, one for the last) are
// free to be optimised apart under -ffast-math, and GELU's were (its last
// block rounded apart from the same values in a whole one).
template <class T>
ETUDE_IN_CLONE const T* source(const T* from, std::size_t count, T* pad) {
    if (count == kBlock<T>) return from;
    std::fill(pad, pad + kBlock<T>, T(0));
    std::memcpy(pad, from, count * sizeof(T));
    return pad;
}
template <class T>
ETUDE_IN_CLONE T* target(T* to, std::size_t count, T* pad) {
    return count == kBlock<T> ? to : pad;
}
// The partial block's `count` values (of `per_value` results each) from
// its local array to the run.
template <class T>
ETUDE_IN_CLONE void finish(T* to, std::size_t count, const T* pad, std::size_t per_value = 1) {
    if (count != kBlock<T>) std::memcpy(to, pad, count * per_value * sizeof(T));
}

// out[i] = f(in[i]) (or f(a[i], b[i])) a block at a time. Why blocks: the
// block's loop has a fixed trip count that each clone's vectors divide, so
// GCC vectorises it whole, with no scalar or narrower remainder, and a
// value goes through the same libmvec call wherever it lies in the run and
// wherever the run starts. A plain loop over the run gives the values in
// its vector body, its narrower epilogue and its scalar tail different last
// bits (libmvec's SIMD tanhf is not the scalar tanhf), so a batch's items,
// or the workers' ranges, would round apart from the same values alone.
template <class T, class F>
ETUDE_IN_CLONE void map_blocks(const T* in, T* out, std::size_t n, F f) {
    constexpr std::size_t W = kBlock<T>;
    for (std::size_t i = 0; i < n; i += W) {
        const std::size_t count = std::min(W, n - i);
        alignas(64) T pad_in[W], pad_out[W];
        const T* x = source(in + i, count, pad_in);
        T* y = target(out + i, count, pad_out);
        ETUDE_BLOCK_LOOP
        for (std::size_t k = 0; k < W; ++k) y[k] = f(x[k]);
        finish(out + i, count, pad_out);
    }
}
template <class T, class F>
ETUDE_IN_CLONE void map_blocks(const T* a, const T* b, T* out, std::size_t n, F f) {
    constexpr std::size_t W = kBlock<T>;
    for (std::size_t i = 0; i < n; i += W) {
        const std::size_t count = std::min(W, n - i);
        alignas(64) T pad_a[W], pad_b[W], pad_out[W];
        const T* x = source(a + i, count, pad_a);
        const T* z = source(b + i, count, pad_b);
        T* y = target(out + i, count, pad_out);
        ETUDE_BLOCK_LOOP
        for (std::size_t k = 0; k < W; ++k) y[k] = f(x[k], z[k]);
        finish(out + i, count, pad_out);
    }
}

// One block of polar: kBlock bins to twice as many outputs. Three loops,
// not one: in one, GCC joins the cos and sin into a scalar sincosf before
// the vectoriser sees them.
ETUDE_IN_CLONE void polar_block(const float* lm, const float* ph, float max_magnitude, float* y) {
    constexpr std::size_t W = kBlock<float>;
    alignas(64) float m[W], c[W], s[W];
    ETUDE_BLOCK_LOOP
    for (std::size_t k = 0; k < W; ++k) m[k] = std::min(std::exp(lm[k]), max_magnitude);
    ETUDE_BLOCK_LOOP
    for (std::size_t k = 0; k < W; ++k) c[k] = std::cos(ph[k]);
    ETUDE_BLOCK_LOOP
    for (std::size_t k = 0; k < W; ++k) s[k] = std::sin(ph[k]);
    ETUDE_BLOCK_LOOP
    for (std::size_t k = 0; k < W; ++k) {
        y[2 * k] = m[k] * c[k];
        y[2 * k + 1] = m[k] * s[k];
    }
}

}  // namespace

// A lambda the block loops call, compiled into them (see ETUDE_IN_CLONE).
#define ETUDE_ELEMENT(args, ...) [] args ETUDE_IN_CLONE_ATTR { return __VA_ARGS__; }

ETUDE_VECTOR_CLONES void gelu(const float* in, float* out, std::size_t n) {
    map_blocks(in, out, n,
               ETUDE_ELEMENT((float x), 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f))));
}
// AArch64: the NEON loops of cpu_neon_math.h (no libmvec there), beside
// the loops GCC vectorises through libmvec on x86-64. They too give each
// value the same code wherever it lies (a tail through a padded register).
ETUDE_VECTOR_CLONES void tanh(const float* in, float* out, std::size_t n) {
#if defined(__aarch64__) && defined(__ARM_NEON)
    neon::map(in, out, n, neon::tanh4);
#else
    map_blocks(in, out, n, ETUDE_ELEMENT((float x), std::tanh(x)));
#endif
}
ETUDE_VECTOR_CLONES void exp(const float* in, float* out, std::size_t n) {
#if defined(__aarch64__) && defined(__ARM_NEON)
    neon::map(in, out, n, neon::exp4);
#else
    map_blocks(in, out, n, ETUDE_ELEMENT((float x), std::exp(x)));
#endif
}
ETUDE_VECTOR_CLONES void gated_tanh(const float* a, const float* b, float* out, std::size_t n) {
    // exp's argument held at 80: under -ffast-math an exp that overflows to
    // inf gives NaN here, not 0. Past 80 the sigmoid is below 2e-35 anyway.
#if defined(__aarch64__) && defined(__ARM_NEON)
    neon::gate(a, b, out, n);
#else
    map_blocks(
        a, b, out, n,
        ETUDE_ELEMENT((float x, float g), std::tanh(x) / (1.0f + std::exp(std::min(-g, 80.0f)))));
#endif
}
ETUDE_VECTOR_CLONES void sin(const float* in, float* out, std::size_t n) {
    map_blocks(in, out, n, ETUDE_ELEMENT((float x), std::sin(x)));
}
ETUDE_VECTOR_CLONES void cos(const float* in, float* out, std::size_t n) {
    map_blocks(in, out, n, ETUDE_ELEMENT((float x), std::cos(x)));
}

ETUDE_VECTOR_CLONES void polar(const float* log_magnitude, const float* phase, float max_magnitude,
                               float* out, std::size_t bins) {
    // As map_blocks. `out` is never an input (polar_spectrum refuses in place).
    constexpr std::size_t W = kBlock<float>;
    for (std::size_t i = 0; i < bins; i += W) {
        const std::size_t count = std::min(W, bins - i);
        alignas(64) float pad_lm[W], pad_ph[W], pad_out[2 * W];
        polar_block(source(log_magnitude + i, count, pad_lm), source(phase + i, count, pad_ph),
                    max_magnitude, target(out + 2 * i, count, pad_out));
        finish(out + 2 * i, count, pad_out, 2);
    }
}

}  // namespace etude::gpu::cpu

namespace etude::gpu::host {

ETUDE_VECTOR_CLONES void gelu(const double* in, double* out, std::size_t n) {
    cpu::map_blocks(
        in, out, n,
        ETUDE_ELEMENT((double x), 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440))));
}
ETUDE_VECTOR_CLONES void exp(const double* in, double* out, std::size_t n) {
    cpu::map_blocks(in, out, n, ETUDE_ELEMENT((double x), std::exp(x)));
}
void exp(const float* in, float* out, std::size_t n) {
    cpu::exp(in, out, n);
}

}  // namespace etude::gpu::host
