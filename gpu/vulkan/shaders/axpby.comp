#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_bodies.h"

layout(push_constant) uniform Args {
    uint64_t x;
    uint64_t y;
    uint64_t n;
    float alpha;
    float beta;
} a;

void main() {
    for (uint64_t i = first_index(); i < a.n; i += grid_stride()) axpby_at(i, a.alpha, a.x, a.beta, a.y);
}
