// exp, tanh and WaveNet's gate on four floats at a time with AArch64's
// Advanced SIMD (NEON), for cpu_vector_math.cpp.
//
// Why our own: on x86-64 GCC hands those loops to glibc's vector math
// library (libmvec), but Debian 12's glibc (2.36) has no AArch64 libmvec
// (it came with 2.38), so the loops would call the scalar expf and tanhf
// once per element. NEON is part of the base AArch64 architecture: nothing
// here needs a run-time check, and nothing uses an extension beyond it
// (FP16, dot product).
//
// Accuracy: exp4 is Cephes' expf (Cody-Waite reduction, degree-6
// polynomial), within 0.7 ulp of the double exp over [-87, 88]; tanh4 is
// built on it, within 1.2e-7 absolute over [-12, 12] (the form
// 1 - 2 / (e^2x + 1) loses relative precision for small |x|, not absolute);
// the gate within 1.4e-7 (a sweep of 2 M points each, under qemu). All far
// inside the 1e-4 parity the neural vocoders are tested to, and the 1e-6 of
// gpu/cpu_backend_test.cpp. The reductions use fused
// multiply-adds, which -ffast-math (this file's includer is compiled with
// it) cannot reassociate, so the reduction stays exact.
//
// Threads: any; no allocation.
#pragma once

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include <cstddef>
#include <cstring>

namespace etude::gpu::cpu::neon {

// e^x: x = n ln 2 + r with |r| <= ln 2 / 2, e^x = 2^n e^r. 2^n is applied
// as two halves, so that an n past the exponent range still gives +inf
// above ~88.7 and a subnormal or 0 below ~-87.3 rather than garbage.
inline float32x4_t exp4(float32x4_t x) {
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-104.0f)), vdupq_n_f32(89.0f));
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    // ln 2 in two parts: n * 0.693359375 is exact for |n| < 2^15.
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    const float32x4_t r2 = vmulq_f32(r, r);
    const float32x4_t y = vaddq_f32(vfmaq_f32(r, p, r2), vdupq_n_f32(1.0f));
    const int32x4_t k = vcvtq_s32_f32(n);
    const int32x4_t k1 = vshrq_n_s32(k, 1), k2 = vsubq_s32(k, k1);
    const auto two_to = [](int32x4_t e) {
        return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(e, vdupq_n_s32(127)), 23));
    };
    return vmulq_f32(vmulq_f32(y, two_to(k1)), two_to(k2));
}

// tanh x = sign(x) (1 - 2 / (e^2|x| + 1)); past |x| = 9 it is 1 in float.
// Below |x| = 2^-8, x - x^3 / 3 (the next term, 2x^5 / 15, is below 1e-13).
inline float32x4_t tanh4(float32x4_t x) {
    const float32x4_t ax = vminq_f32(vabsq_f32(x), vdupq_n_f32(9.0f));
    const float32x4_t e = exp4(vaddq_f32(ax, ax));
    const float32x4_t one = vdupq_n_f32(1.0f);
    const float32x4_t t = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
    const float32x4_t small =
        vmulq_f32(ax, vfmsq_f32(one, vmulq_f32(ax, ax), vdupq_n_f32(1.0f / 3)));
    const float32x4_t m = vbslq_f32(vcltq_f32(ax, vdupq_n_f32(0.00390625f)), small, t);
    // The sign of x onto the magnitude.
    const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u));
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(m), sign));
}

// tanh(a) sigmoid(b) as cpu_vector_math.h's gated_tanh: exp's argument held
// at 80, as there.
inline float32x4_t gate4(float32x4_t a, float32x4_t b) {
    const float32x4_t e = exp4(vminq_f32(vnegq_f32(b), vdupq_n_f32(80.0f)));
    return vdivq_f32(tanh4(a), vaddq_f32(e, vdupq_n_f32(1.0f)));
}

// out[i] = f(in[i]); the last n % 4 values through a padded register, so
// every element gets the same function whatever its position.
template <class F>
inline void map(const float* in, float* out, std::size_t n, F f) {
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, f(vld1q_f32(in + i)));
    if (i == n) return;
    float tail[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    std::memcpy(tail, in + i, sizeof(float) * (n - i));
    vst1q_f32(tail, f(vld1q_f32(tail)));
    std::memcpy(out + i, tail, sizeof(float) * (n - i));
}

inline void gate(const float* a, const float* b, float* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, gate4(vld1q_f32(a + i), vld1q_f32(b + i)));
    if (i == n) return;
    float ta[4] = {0.0f, 0.0f, 0.0f, 0.0f}, tb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    std::memcpy(ta, a + i, sizeof(float) * (n - i));
    std::memcpy(tb, b + i, sizeof(float) * (n - i));
    vst1q_f32(ta, gate4(vld1q_f32(ta), vld1q_f32(tb)));
    std::memcpy(out + i, ta, sizeof(float) * (n - i));
}

}  // namespace etude::gpu::cpu::neon
#endif
