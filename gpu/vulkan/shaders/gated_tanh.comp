#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_bodies.h"

layout(push_constant) uniform Args {
    uint64_t x;
    uint64_t y;
    uint64_t item_size;    // channels * length: one item's outputs
    uint64_t batch;        // the items: the y groups' loop
} a;

void main() {
    for (uint64_t item = uint64_t(gl_WorkGroupID.y); item < a.batch; item += uint64_t(gl_NumWorkGroups.y))
        for (uint64_t i = first_index(); i < a.item_size; i += grid_stride()) gated_tanh_at(item, i, a.item_size, a.x, a.y);
}
