#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_bodies.h"

layout(push_constant) uniform Args {
    uint64_t signal;
    uint64_t window;
    uint64_t frames;
    uint64_t total;
    int n_fft;
    int hop;
} a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride())
        frame_signal_at(i, a.n_fft, a.hop, a.signal, a.window, a.frames);
}
