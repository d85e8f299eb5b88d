#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/spline_bodies.h"

layout(push_constant) uniform Args {
    uint64_t params;
    uint64_t x;
    uint64_t y;
    uint64_t total;        // elements
    int bins;
    float bound;
    float scale;
} a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride())
        spline_inverse_at(i, a.bins, a.bound, a.scale, a.params, a.x, a.y);
}
