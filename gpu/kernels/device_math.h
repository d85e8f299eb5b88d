// Single-precision exp, sin, cos, tanh and erf for devices whose own are
// missing (GLSL has no erf) or only loosely bounded (Vulkan requires sin and
// cos within 2^-11 absolute on [-pi, pi] and says nothing outside it; exp
// within 3 + 2|x| ULP). The GLSL dialect of kernel_dialect.h maps ETUDE_EXP,
// ETUDE_SIN, ETUDE_COS, ETUDE_TANH and ETUDE_ERF onto these, so a Vulkan
// device computes the activations and spectra with the same algorithm on
// every vendor's driver.
//
// The algorithms are the classic ones of Cephes' single-precision library:
// a reduction by a constant split in two or three parts (so that n * C1 is
// exact), then a short polynomial. tests/gpu/kernel_bodies_test.cpp runs
// these functions on the host against double precision: exp within 2 ULP,
// sin and cos within 2e-7 absolute for |x| <= 8192, tanh within 3 ULP and
// erf within 3e-7 absolute over the inputs the models feed them.
//
// Written in the subset of kernel_dialect.h, like kernel_bodies.h.
#ifndef ETUDE_GPU_KERNELS_DEVICE_MATH_H
#define ETUDE_GPU_KERNELS_DEVICE_MATH_H

#include "gpu/kernels/kernel_dialect.h"

#if defined(VULKAN)
#define ETUDE_INFINITY uintBitsToFloat(0x7f800000u)
#else
#define ETUDE_INFINITY INFINITY
#endif

#if !defined(VULKAN) && !defined(__OPENCL_VERSION__)
namespace etude::gpu::device_math {
#endif

// x = n ln2 + r with |r| <= ln2 / 2, e^r by a degree-7 polynomial, then
// scaled by 2^n in two halves (2^128 alone would overflow before the product
// is taken, which GLSL's ldexp leaves undefined).
ETUDE_BODY float etude_exp(float x) {
    if (x > 88.72283905f) return ETUDE_INFINITY;
    if (x < -103.972084f) return 0.0f;
    const float n = ETUDE_FLOOR(x * 1.44269504088896341f + 0.5f);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    const float z = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * z + r + 1.0f;
    const int e = ETUDE_INT(n);
    const int half_e = e / 2;
    return ETUDE_LDEXP(ETUDE_LDEXP(p, half_e), e - half_e);
}

// sin (want_cos == 0) or cos (want_cos == 1): x reduced to the octant
// j = round-to-even(|x| * 4/pi) by pi/4 in three parts, then the sine or
// cosine polynomial of the remainder, by octant.
ETUDE_BODY float etude_sincos(float x, int want_cos) {
    float sign = 1.0f;
    if (want_cos == 0 && x < 0.0f) sign = -1.0f;
    const float ax = ETUDE_FABS(x);
    int j = ETUDE_INT(ax * 1.27323954473516f);
    float y = ETUDE_FLOAT(j);
    if ((j & 1) != 0) {
        j += 1;
        y += 1.0f;
    }
    j = j & 7;
    if (j > 3) {
        sign = -sign;
        j -= 4;
    }
    if (want_cos == 1 && j > 1) sign = -sign;
    const float r =
        ((ax - y * 0.78515625f) - y * 2.4187564849853515625e-4f) - y * 3.77489497744594108e-8f;
    const float z = r * r;
    // The cosine polynomial where (octant is 1 or 2) differs from want_cos.
    const int use_cos = ((j == 1 || j == 2) ? 1 : 0) != want_cos ? 1 : 0;
    float v;
    if (use_cos == 1) {
        v = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z *
            z;
        v = v - 0.5f * z + 1.0f;
    } else {
        v = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;
    }
    return sign * v;
}

ETUDE_BODY float etude_sin(float x) {
    return etude_sincos(x, 0);
}

ETUDE_BODY float etude_cos(float x) {
    return etude_sincos(x, 1);
}

// tanh: an odd polynomial near zero (where 1 - 2/(e^2x + 1) would cancel),
// that form above 0.625; exp's overflow to infinity gives exactly +-1.
ETUDE_BODY float etude_tanh(float x) {
    const float ax = ETUDE_FABS(x);
    float t;
    if (ax > 0.625f) {
        t = 1.0f - 2.0f / (etude_exp(2.0f * ax) + 1.0f);
    } else {
        const float z = ax * ax;
        t = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
              1.33314422036e-1f) *
                 z -
             3.33332819422e-1f) *
                z * ax +
            ax;
    }
    return x < 0.0f ? -t : t;
}

// erf: an odd polynomial below 1; above, 1 - erfc with erfc from the
// Chebyshev fit of Numerical Recipes (relative error under 1.2e-7, so erf's
// absolute error there is under 1.2e-7 * erfc(1) = 2e-8).
ETUDE_BODY float etude_erf(float x) {
    const float ax = ETUDE_FABS(x);
    float e;
    if (ax < 1.0f) {
        const float z = ax * ax;
        e = ((((((7.853861353153693e-5f * z - 8.010193625184903e-4f) * z + 5.188327685732524e-3f) *
                    z -
                2.685381193529856e-2f) *
                   z +
               1.128358514861418e-1f) *
                  z -
              3.761262582423300e-1f) *
                 z +
             1.128379165726710f) *
            ax;
    } else {
        const float t = 1.0f / (1.0f + 0.5f * ax);
        float p = 0.17087277f;
        p = p * t - 0.82215223f;
        p = p * t + 1.48851587f;
        p = p * t - 1.13520398f;
        p = p * t + 0.27886807f;
        p = p * t - 0.18628806f;
        p = p * t + 0.09678418f;
        p = p * t + 0.37409196f;
        p = p * t + 1.00002368f;
        p = p * t - 1.26551223f;
        e = 1.0f - t * etude_exp(p - ax * ax);
    }
    return x < 0.0f ? -e : e;
}

#if !defined(VULKAN) && !defined(__OPENCL_VERSION__)
}  // namespace etude::gpu::device_math
#endif

#endif  // ETUDE_GPU_KERNELS_DEVICE_MATH_H
