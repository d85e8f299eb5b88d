#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "gpu/kernels/kernel_dialect.h"

// The OpenCL backend's layer norm (gpu/opencl/kernels/tiled_kernels.cl) in
// GLSL: one work-group of 64 per row, strided partial sums, a tree reduction
// in shared memory, two passes (the mean, then the biased variance around
// it). Rows beyond the group count loop.
#define LN_WG 64
layout(local_size_x = LN_WG) in;

layout(push_constant) uniform Args {
    uint64_t x;
    uint64_t gamma;
    uint64_t beta;
    uint64_t y;
    int rows;
    int cols;
    float eps;
} p;

shared float part[LN_WG];

float reduce_sum(float v, int l) {
    part[l] = v;
    barrier();
    for (int h = LN_WG / 2; h > 0; h >>= 1) {
        if (l < h) part[l] += part[l + h];
        barrier();
    }
    const float total = part[0];
    barrier();  // everyone has read part[0] before it is written again
    return total;
}

void main() {
    const int l = int(gl_LocalInvocationID.x);
    for (int r = int(gl_WorkGroupID.x); r < p.rows; r += int(gl_NumWorkGroups.x)) {
        const uint64_t row = ETUDE_OFFSET(p.x, uint64_t(r) * uint64_t(p.cols));
        const uint64_t out_row = ETUDE_OFFSET(p.y, uint64_t(r) * uint64_t(p.cols));
        float s = 0.0f;
        for (int c = l; c < p.cols; c += LN_WG) s += ETUDE_AT(row, c);
        const float mean = reduce_sum(s, l) / float(p.cols);
        float v = 0.0f;
        for (int c = l; c < p.cols; c += LN_WG) {
            const float d = ETUDE_AT(row, c) - mean;
            v += d * d;
        }
        const float inv = inversesqrt(reduce_sum(v, l) / float(p.cols) + p.eps);
        for (int c = l; c < p.cols; c += LN_WG)
            ETUDE_AT(out_row, c) = (ETUDE_AT(row, c) - mean) * inv * ETUDE_AT(p.gamma, c) + ETUDE_AT(p.beta, c);
    }
}
