#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/fft_bodies.h"

// One pass of the mixed-radix Stockham FFT (gpu/kernels/fft_bodies.h):
// one output element per invocation, batch * n of them.
layout(push_constant) uniform Args {
    uint64_t twiddles;
    uint64_t in_;
    uint64_t out_;
    uint64_t total;
    int n;
    int radix;
    int span;
    int load;
    int store;
    int inverse;
    float scale;
} a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride())
        fft_pass_at(i, a.n, a.radix, a.span, a.load, a.store, a.inverse, a.scale, a.twiddles, a.in_, a.out_);
}
