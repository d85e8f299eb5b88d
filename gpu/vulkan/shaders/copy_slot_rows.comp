#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_bodies.h"

// gather_slot_rows and scatter_slot_rows (gpu/backend.h): one element per
// invocation, the body shared with CUDA and OpenCL.
layout(push_constant) uniform Args {
    uint64_t index;
    uint64_t src;
    uint64_t dst;
    uint64_t total;  // items * rows * cols
    uint64_t slot_at;
    uint64_t slot_floats;
    uint64_t slot_stride;
    uint64_t batch_at;
    uint64_t batch_stride;
    int rows;
    int cols;
    int slots;
    int from_slots;
} a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride())
        copy_slot_rows_at(i, a.rows, a.cols, a.index, a.slots, a.slot_at, a.slot_floats,
                          a.slot_stride, a.batch_at, a.batch_stride, a.from_slots, a.src, a.dst);
}
