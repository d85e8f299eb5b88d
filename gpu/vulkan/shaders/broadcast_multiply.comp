#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_bodies.h"

layout(push_constant) uniform Args {
    uint64_t factors;
    uint64_t y;
    uint64_t total;        // rows * cols
    int cols;
    int per_row;
} a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride())
        broadcast_multiply_at(i, a.cols, a.factors, a.per_row, a.y);
}
