#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/kernels/kernel_dialect.h"
#include "gpu/vulkan/shaders/element_launch.glsl"

// dst[r * dst_stride + c] = src[r * src_stride + c] for a block of rows x
// cols floats, one element per invocation; src and dst are the buffers'
// addresses with their offsets already added. One dispatch instead of a
// vkCmdCopyBuffer region per row (why: gpu/vulkan/vulkan_ops.cpp). Not a shared body: CUDA
// and OpenCL have 2-D copies of their own (cudaMemcpy2DAsync,
// clEnqueueCopyBufferRect); the parity suite checks all of them.
layout(push_constant) uniform Args {
    uint64_t src;
    uint64_t dst;
    uint64_t total;
    uint64_t src_stride;
    uint64_t dst_stride;
    int cols;
}
a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride()) {
        const uint64_t r = i / uint64_t(a.cols);
        const uint64_t c = i - r * uint64_t(a.cols);
        ETUDE_AT(a.dst, r * a.dst_stride + c) = ETUDE_AT(a.src, r * a.src_stride + c);
    }
}
