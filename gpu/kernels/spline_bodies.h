// The inverse of a monotonic rational-quadratic spline, per element, written
// once for every device language as kernel_bodies.h is (its conventions
// hold here): VITS' stochastic duration predictor runs its ConvFlows in
// reverse through it (Durkan et al., "Neural Spline Flows"; Piper's
// piper_train/vits/transforms.py with tails="linear").
//
// The spline maps [-bound, bound] onto itself (identity outside) through
// `bins` bins. Its parameters for one element are 3*bins - 1 floats:
// `bins` unnormalised widths and `bins` heights (both multiplied by
// `scale`, then a softmax, each bin at least 1e-3 of the interval: Piper's
// minimum bin width and height), then the bins - 1 interior knots'
// unconstrained derivatives (softplus + 1e-3; the two end knots have
// derivative 1, which is what Piper's padded constant makes of them).
//
// The order of every sum, so that each device gives the same floats: the
// softmax's sums over bins ascending; the knots as running sums of the bin
// sizes in that order, 2*bound*sum - bound, the last knot exactly bound;
// the bin of x is the first whose upper knot exceeds it (x >= -bound
// lies in one). The root of the bin's quadratic is taken in the form
// 2c / (-b - sqrt(b^2 - 4ac)) Piper uses, which does not cancel (b > 0
// there), with a discriminant that rounding made negative taken as 0.
//
// softplus needs log1p, which GLSL lacks and whose log Vulkan bounds only
// to 2^-21 absolute near 1: it is written here from exp alone, as
// max(v, 0) + log1p(e) with e = exp(-|v|) in (0, 1], and log1p(e) =
// 2 atanh(s) with s = e / (2 + e) <= 1/3, by its series to s^17 (the next
// term is below 2^-30 of the sum).
#ifndef ETUDE_GPU_KERNELS_SPLINE_BODIES_H
#define ETUDE_GPU_KERNELS_SPLINE_BODIES_H

#include "gpu/kernels/kernel_dialect.h"
#if defined(VULKAN)
#include "gpu/kernels/device_math.h"
#endif

#if !defined(__OPENCL_VERSION__) && !defined(VULKAN)
namespace etude::gpu::bodies {
#endif

ETUDE_BODY float spline_softplus(float v) {
    const float e = ETUDE_EXP(v > 0.0f ? -v : v);
    const float s = e / (2.0f + e);
    const float s2 = s * s;
    float series = 1.0f / 17.0f;
    series = 1.0f / 15.0f + s2 * series;
    series = 1.0f / 13.0f + s2 * series;
    series = 1.0f / 11.0f + s2 * series;
    series = 1.0f / 9.0f + s2 * series;
    series = 1.0f / 7.0f + s2 * series;
    series = 1.0f / 5.0f + s2 * series;
    series = 1.0f / 3.0f + s2 * series;
    series = 1.0f + s2 * series;
    return (v > 0.0f ? v : 0.0f) + 2.0f * s * series;
}

// The inverse of element gid's spline at x[gid], into y[gid]; its
// parameters are row gid of params ([count][3*bins - 1]). x and y may be
// the same buffer.
ETUDE_BODY void spline_inverse_at(etude_index gid, int bins, float bound, float scale,
                                  ETUDE_CPTR params, ETUDE_CPTR x, ETUDE_PTR y) {
    const float v = ETUDE_AT(x, gid);
    if (!(v >= -bound && v <= bound)) {  // the linear tails (and NaN) pass through
        ETUDE_AT(y, gid) = v;
        return;
    }
    const float min_bin = 1e-3f, min_derivative = 1e-3f;
    ETUDE_CPTR uw = ETUDE_OFFSET(params, gid * ETUDE_INDEX(3 * bins - 1));
    ETUDE_CPTR uh = ETUDE_OFFSET(uw, bins);
    ETUDE_CPTR ud = ETUDE_OFFSET(uw, 2 * bins);
    float top_w = ETUDE_AT(uw, 0) * scale, top_h = ETUDE_AT(uh, 0) * scale;
    for (int i = 1; i < bins; ++i) {
        const float w = ETUDE_AT(uw, i) * scale, h = ETUDE_AT(uh, i) * scale;
        if (w > top_w) top_w = w;
        if (h > top_h) top_h = h;
    }
    float sum_w = 0.0f, sum_h = 0.0f;
    for (int i = 0; i < bins; ++i) {
        sum_w += ETUDE_EXP(ETUDE_AT(uw, i) * scale - top_w);
        sum_h += ETUDE_EXP(ETUDE_AT(uh, i) * scale - top_h);
    }
    // Walk the knots up to the bin holding v: [w0, w1) x [h0, h1).
    const float share = 1.0f - min_bin * ETUDE_FLOAT(bins);
    float acc_w = 0.0f, acc_h = 0.0f;
    float w0 = -bound, h0 = -bound, w1 = bound, h1 = bound;
    int k = 0;
    for (; k < bins; ++k) {
        acc_w += min_bin + share * (ETUDE_EXP(ETUDE_AT(uw, k) * scale - top_w) / sum_w);
        acc_h += min_bin + share * (ETUDE_EXP(ETUDE_AT(uh, k) * scale - top_h) / sum_h);
        w1 = k == bins - 1 ? bound : 2.0f * bound * acc_w - bound;
        h1 = k == bins - 1 ? bound : 2.0f * bound * acc_h - bound;
        if (v < h1 || k == bins - 1) break;
        w0 = w1;
        h0 = h1;
    }
    const float d0 = k == 0 ? 1.0f : min_derivative + spline_softplus(ETUDE_AT(ud, k - 1));
    const float d1 = k == bins - 1 ? 1.0f : min_derivative + spline_softplus(ETUDE_AT(ud, k));
    const float width = w1 - w0, height = h1 - h0;
    const float slope = height / width;
    const float dy = v - h0;
    const float curve = d0 + d1 - 2.0f * slope;
    const float a = dy * curve + height * (slope - d0);
    const float b = height * d0 - dy * curve;
    const float c = -slope * dy;
    float disc = b * b - 4.0f * a * c;
    if (disc < 0.0f) disc = 0.0f;
    const float theta = (2.0f * c) / (-b - ETUDE_SQRT(disc));
    ETUDE_AT(y, gid) = theta * width + w0;
}

#if !defined(__OPENCL_VERSION__) && !defined(VULKAN)
}  // namespace etude::gpu::bodies
#endif

#endif  // ETUDE_GPU_KERNELS_SPLINE_BODIES_H
