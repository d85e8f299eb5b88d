#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "gpu/kernels/kernel_dialect.h"

// conv1d (groups == 1) in tiles for GPUs: a work-group makes 16 output
// channels x 16 output positions of one batch item. Input channel by input
// channel it stages in shared memory the stretch of x its 16 positions read
// and the 16 channels' taps, so each input value is read from memory once
// per tile instead of once per output channel, and each weight once per
// tile instead of once per position. The sum is taken in the shared body's
// order (gpu/kernels/kernel_bodies.h: bias, then input channels ascending,
// then taps ascending); a tap outside the input reads a staged zero, which
// adds nothing. The host uses it when the stretch and the taps fit the
// arrays below, and conv1d.comp otherwise.
#define TILE 16
#define MAX_SPAN 1024  // floats of x one input channel of a tile reads
#define MAX_TAPS 64
layout(local_size_x = TILE, local_size_y = TILE) in;

layout(push_constant) uniform Args {
    uint64_t x;
    uint64_t w;
    uint64_t bias;
    uint64_t y;
    uint64_t total;  // unused here: the launch covers the output exactly
    int has_bias;
    int in_ch;
    int out_ch;
    int in_len;
    int taps;
    int stride;
    int dilation;
    int padding;
    int groups;
    int out_len;
    int transposed;
} a;

shared float xs[MAX_SPAN];
shared float ws[TILE][MAX_TAPS];

void main() {
    const int lt = int(gl_LocalInvocationID.x);
    const int lo = int(gl_LocalInvocationID.y);
    const int t0 = int(gl_WorkGroupID.x) * TILE;
    const int oc0 = int(gl_WorkGroupID.y) * TILE;
    const uint64_t bt = uint64_t(gl_WorkGroupID.z);
    const int t = t0 + lt;
    const int oc = oc0 + lo;
    const int first = t0 * a.stride - a.padding;  // input position of tap 0 of output t0
    const int span = (TILE - 1) * a.stride + (a.taps - 1) * a.dilation + 1;
    const int l = lo * TILE + lt;  // 0..255, for the cooperative loads
    float acc = 0.0f;
    if (a.has_bias != 0 && oc < a.out_ch) acc = ETUDE_AT(a.bias, oc);
    for (int ic = 0; ic < a.in_ch; ++ic) {
        const uint64_t xrow = ETUDE_OFFSET(a.x, (bt * uint64_t(a.in_ch) + uint64_t(ic)) * uint64_t(a.in_len));
        for (int i = l; i < span; i += TILE * TILE) {
            const int ti = first + i;
            xs[i] = ti >= 0 && ti < a.in_len ? ETUDE_AT(xrow, ti) : 0.0f;
        }
        for (int i = l; i < TILE * a.taps; i += TILE * TILE) {
            const int o = i / a.taps, k = i - o * a.taps;
            ws[o][k] = oc0 + o < a.out_ch
                           ? ETUDE_AT(a.w, (uint64_t(oc0 + o) * uint64_t(a.in_ch) + uint64_t(ic)) * uint64_t(a.taps) + uint64_t(k))
                           : 0.0f;
        }
        barrier();
        for (int k = 0; k < a.taps; ++k) acc += ws[lo][k] * xs[lt * a.stride + k * a.dilation];
        barrier();
    }
    if (t < a.out_len && oc < a.out_ch)
        ETUDE_AT(a.y, (bt * uint64_t(a.out_ch) + uint64_t(oc)) * uint64_t(a.out_len) + uint64_t(t)) = acc;
}
