// One pass of a mixed-radix Stockham FFT, for devices without an FFT library
// of their own (Vulkan: gpu/vulkan/shaders/fft_pass.comp). Written once in
// the subset of kernel_dialect.h and checked as host C++ against a direct
// DFT in double precision (tests/gpu/kernel_bodies_test.cpp).
//
// A transform of length n = R1 * R2 * ... runs one pass per factor R, each
// reading one buffer and writing another (autosort: no bit reversal). Pass
// with radix R over `span` = R1 * ... * R(i-1) (1 for the first): output
// element (j, s), j < n/R, s < R, is
//   out[(j / span) * span * R + j % span + s * span] =
//       sum over r < R, ascending, of in[j + r * n/R] * W^(r * e),
//   e = (j % span) * n / (span * R) + s * n / R,
// with W = exp(-2 pi i / n) (the conjugate for the inverse). Every power of
// W is read from a table of the n roots computed in double precision on the
// host, so the twiddles are exact to float rounding whatever the radix,
// and any n works (a prime factor p costs p products per output;
// fft_passes() below picks the radices).
//
// The first pass reads the transform's input and the last writes its
// output, converting between layouts on the way (`load` and `store` are
// each one of):
//   ETUDE_FFT_COMPLEX        n complex values per row
//   ETUDE_FFT_REAL           n real values per row: read with zero imaginary
//                            parts (rfft); written as the real parts times
//                            `scale` (irfft: 1/n)
//   ETUDE_FFT_HALF_SPECTRUM  the n/2+1 first bins per row: written as they
//                            are (rfft); read with the rest by Hermitian
//                            symmetry and imag(DC), imag(Nyquist) as zero,
//                            as FFTW does (irfft)
// Complex values are interleaved (re, im) floats; an invocation makes output
// `idx` (< n) of row `row` (a 64-bit row and a 32-bit position: no 64-bit
// division per element, which devices emulate).
#ifndef ETUDE_GPU_KERNELS_FFT_BODIES_H
#define ETUDE_GPU_KERNELS_FFT_BODIES_H

#include "gpu/kernels/kernel_dialect.h"
#if !defined(__OPENCL_VERSION__) && !defined(VULKAN) && !defined(__CUDACC__)
#include <vector>
#endif

#define ETUDE_FFT_COMPLEX 0
#define ETUDE_FFT_REAL 1
#define ETUDE_FFT_HALF_SPECTRUM 2

#if !defined(__OPENCL_VERSION__) && !defined(VULKAN)
namespace etude::gpu::bodies {
#endif

// Real (part 0) or imaginary (part 1) part of element p of row `row`.
ETUDE_BODY float fft_load(int load, ETUDE_CPTR src, etude_index row, int n, int p, int part) {
    if (load == ETUDE_FFT_REAL)
        return part == 0 ? ETUDE_AT(src, row * ETUDE_INDEX(n) + ETUDE_INDEX(p)) : 0.0f;
    if (load == ETUDE_FFT_HALF_SPECTRUM) {
        const etude_index bins = ETUDE_INDEX(n / 2 + 1);
        if (2 * p <= n) {
            if (part == 1 && (p == 0 || 2 * p == n)) return 0.0f;
            return ETUDE_AT(src, 2 * (row * bins + ETUDE_INDEX(p)) + ETUDE_INDEX(part));
        }
        const float v = ETUDE_AT(src, 2 * (row * bins + ETUDE_INDEX(n - p)) + ETUDE_INDEX(part));
        return part == 0 ? v : -v;
    }
    return ETUDE_AT(src, 2 * (row * ETUDE_INDEX(n) + ETUDE_INDEX(p)) + ETUDE_INDEX(part));
}

ETUDE_BODY void fft_pass_at(etude_index row, int idx, int n, int radix, int span, int load,
                            int store, int inverse, float scale, ETUDE_CPTR twiddles,
                            ETUDE_CPTR src, ETUDE_PTR dst) {
    const int m = n / radix;
    const int j = idx % m;
    const int s = idx / m;
    const int k = j % span;
    const int step = (k * (n / (span * radix)) + s * m) % n;
    const float sign = inverse != 0 ? -1.0f : 1.0f;
    float re = 0.0f;
    float im = 0.0f;
    int e = 0;
    for (int r = 0; r < radix; ++r) {
        const float vr = fft_load(load, src, row, n, j + r * m, 0);
        const float vi = fft_load(load, src, row, n, j + r * m, 1);
        const float wr = ETUDE_AT(twiddles, 2 * e);
        const float wi = sign * ETUDE_AT(twiddles, 2 * e + 1);
        re += vr * wr - vi * wi;
        im += vr * wi + vi * wr;
        e += step;
        if (e >= n) e -= n;
    }
    const int o = (j / span) * span * radix + k + s * span;
    if (store == ETUDE_FFT_REAL) {
        ETUDE_AT(dst, row * ETUDE_INDEX(n) + ETUDE_INDEX(o)) = re * scale;
    } else if (store == ETUDE_FFT_HALF_SPECTRUM) {
        if (2 * o <= n) {
            const etude_index at = 2 * (row * ETUDE_INDEX(n / 2 + 1) + ETUDE_INDEX(o));
            ETUDE_AT(dst, at) = re;
            ETUDE_AT(dst, at + 1) = im;
        }
    } else {
        const etude_index at = 2 * (row * ETUDE_INDEX(n) + ETUDE_INDEX(o));
        ETUDE_AT(dst, at) = re;
        ETUDE_AT(dst, at + 1) = im;
    }
}

// ---- host side: the passes a transform of length n runs ----
#if !defined(__OPENCL_VERSION__) && !defined(VULKAN) && !defined(__CUDACC__)

struct FftPass {
    int radix, span, load, store;
};

// One pass per factor of n: 4s (half the passes of 2s for the same number of
// products), then a 2, then odd primes ascending; n = 1 is one pass of radix
// 1. The first pass loads the transform's input, the last stores its output.
inline std::vector<FftPass> fft_passes(int n, bool forward) {
    std::vector<int> radices;
    for (int p : {4, 2})
        while (n % p == 0) {
            radices.push_back(p);
            n /= p;
        }
    for (int p = 3; n > 1; p += 2)
        while (n % p == 0) {
            radices.push_back(p);
            n /= p;
        }
    if (radices.empty()) radices.push_back(1);
    std::vector<FftPass> passes;
    int span = 1;
    for (std::size_t i = 0; i < radices.size(); ++i) {
        const bool first = i == 0, last = i + 1 == radices.size();
        const int load = !first    ? ETUDE_FFT_COMPLEX
                         : forward ? ETUDE_FFT_REAL
                                   : ETUDE_FFT_HALF_SPECTRUM;
        const int store = !last     ? ETUDE_FFT_COMPLEX
                          : forward ? ETUDE_FFT_HALF_SPECTRUM
                                    : ETUDE_FFT_REAL;
        passes.push_back({radices[i], span, load, store});
        span *= radices[i];
    }
    return passes;
}

#endif

#if !defined(__OPENCL_VERSION__) && !defined(VULKAN)
}  // namespace etude::gpu::bodies
#endif

#endif  // ETUDE_GPU_KERNELS_FFT_BODIES_H
