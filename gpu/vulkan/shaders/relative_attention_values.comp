#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/attention_bodies.h"

layout(push_constant) uniform Args {
    uint64_t p;
    uint64_t v;
    uint64_t rel_v;
    uint64_t y;
    uint64_t total;        // batch * length * heads * channels
    int heads;
    int len;
    int channels;
    int window;
} a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride())
        relative_values_at(i, a.heads, a.len, a.channels, a.window, a.p, a.v, a.rel_v, a.y);
}
