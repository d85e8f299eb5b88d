#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_bodies.h"

// copy_rows (gpu/backend.h) with strided rows: one element per invocation,
// the body CUDA launches too (OpenCL keeps a rectangle copy). One dispatch instead of a
// vkCmdCopyBuffer region per row (why: gpu/vulkan/vulkan_ops.cpp).
layout(push_constant) uniform Args {
    uint64_t src;
    uint64_t dst;
    uint64_t total;  // rows * cols
    uint64_t src_at;
    uint64_t src_stride;
    uint64_t dst_at;
    uint64_t dst_stride;
    int cols;
}
a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride())
        copy_rows_at(i, a.cols, a.src_at, a.src_stride, a.dst_at, a.dst_stride, a.src, a.dst);
}
