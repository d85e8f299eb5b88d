#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_bodies.h"

// conv1d and conv_transpose1d: one output element per invocation, the shared
// bodies' fixed summation order. `bias` is always a valid buffer (the output
// when there is none; has_bias says whether to read it).
layout(push_constant) uniform Args {
    uint64_t x;
    uint64_t w;
    uint64_t bias;
    uint64_t y;
    uint64_t total;
    int has_bias;
    int in_ch;
    int out_ch;
    int in_len;
    int taps;
    int stride;
    int dilation;
    int padding;
    int groups;
    int out_len;
    int transposed;
} a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride()) {
        if (a.transposed != 0)
            conv_transpose1d_at(i, a.x, a.w, a.bias, a.has_bias, a.y, a.in_ch, a.out_ch, a.in_len, a.taps,
                                a.stride, a.dilation, a.padding, a.groups, a.out_len);
        else
            conv1d_at(i, a.x, a.w, a.bias, a.has_bias, a.y, a.in_ch, a.out_ch, a.in_len, a.taps, a.stride,
                      a.dilation, a.padding, a.groups, a.out_len);
    }
}
