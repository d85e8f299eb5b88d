#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/attention_bodies.h"

layout(push_constant) uniform Args {
    uint64_t q;
    uint64_t k;
    uint64_t rel_k;
    uint64_t mask;         // the keys when there is no mask (never read then)
    uint64_t scores;
    uint64_t total;        // batch * heads * length * length
    int heads;
    int len;
    int channels;
    int window;
    float scale;
    int has_mask;
} a;

void main() {
    for (uint64_t i = first_index(); i < a.total; i += grid_stride())
        relative_scores_at(i, a.heads, a.len, a.channels, a.window, a.scale, a.q, a.k, a.rel_k,
                           a.has_mask, a.mask, a.scores);
}
