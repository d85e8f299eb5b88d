#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_bodies.h"

layout(push_constant) uniform Args {
    uint64_t x;
    uint64_t y;
    uint64_t n;  // complex values
} a;

void main() {
    for (uint64_t i = first_index(); i < a.n; i += grid_stride()) complex_exp_at(i, a.x, a.y);
}
