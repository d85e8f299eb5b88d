#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/fft_bodies.h"

// One pass of the mixed-radix Stockham FFT (gpu/kernels/fft_bodies.h):
// one output element per invocation; x runs along a row (the host launches
// enough groups for n), y over the rows (at most 65535 groups: rows beyond
// loop).
layout(push_constant) uniform Args {
    uint64_t twiddles;
    uint64_t in_;
    uint64_t out_;
    uint64_t rows;
    int n;
    int radix;
    int span;
    int load;
    int store;
    int inverse;
    float scale;
} a;

void main() {
    const int idx = int(gl_GlobalInvocationID.x);
    if (idx >= a.n) return;
    for (uint64_t row = gl_WorkGroupID.y; row < a.rows; row += gl_NumWorkGroups.y)
        fft_pass_at(row, idx, a.n, a.radix, a.span, a.load, a.store, a.inverse, a.scale, a.twiddles, a.in_,
                    a.out_);
}
