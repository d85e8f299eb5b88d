#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/attention_bodies.h"

// One invocation per row (the rows of an attention's scores are short).
layout(push_constant) uniform Args {
    uint64_t x;
    uint64_t y;
    uint64_t rows;
    int cols;
} a;

void main() {
    for (uint64_t r = first_index(); r < a.rows; r += grid_stride()) softmax_row(r, a.cols, a.x, a.y);
}
