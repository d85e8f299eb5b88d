#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_bodies.h"

layout(push_constant) uniform Args {
    uint64_t frames;
    uint64_t window;
    uint64_t out_;
    uint64_t total;
    int n_fft;
    int hop;
    int n_frames;
} a;

void main() {
    for (uint64_t t = first_index(); t < a.total; t += grid_stride())
        overlap_add_at(t, a.frames, a.n_fft, a.hop, a.n_frames, a.window, a.out_);
}
