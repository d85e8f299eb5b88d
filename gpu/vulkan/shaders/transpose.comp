#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_dialect.h"

// y (cols x rows) = x^T (x is rows x cols), one element per invocation.
// Not a shared body: OpenCL and CUDA move tiles through local memory, and
// the parity suite checks all three against the CPU backend.
layout(push_constant) uniform Args {
    uint64_t x;
    uint64_t y;
    uint64_t total;
    int rows;
    int cols;
} a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride()) {
        const uint64_t r = i / uint64_t(a.cols);
        const uint64_t c = i - r * uint64_t(a.cols);
        ETUDE_AT(a.y, c * uint64_t(a.rows) + r) = ETUDE_AT(a.x, i);
    }
}
