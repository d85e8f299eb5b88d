#version 460
#extension GL_GOOGLE_include_directive : require
#include "gpu/vulkan/shaders/element_launch.glsl"
#include "gpu/kernels/kernel_dialect.h"

// gemm.comp without shared memory or barriers, for devices that run on the
// host's cores (lavapipe), where a work-group barrier is a switch between
// coroutines and costs more than the loads it saves. One invocation per
// element of C; k ascending, the same order as gemm.comp's tiles, so both
// give the same floats.
layout(push_constant) uniform Args {
    uint64_t a;
    uint64_t b;
    uint64_t c;
    int trans_a;
    int trans_b;
    int m;
    int n;
    int k;
    int lda;
    int ldb;
    int ldc;
    float alpha;
    float beta;
} p;

void main() {
    const uint64_t total = uint64_t(p.m) * uint64_t(p.n);
    for (uint64_t i = first_index(); i < total; i += grid_stride()) {
        const uint64_t row = i / uint64_t(p.n);
        const uint64_t col = i - row * uint64_t(p.n);
        // Element kk of row `row` of op(A), and of column `col` of op(B).
        const uint64_t a0 = p.trans_a != 0 ? row : row * uint64_t(p.lda);
        const uint64_t a_step = p.trans_a != 0 ? uint64_t(p.lda) : 1ul;
        const uint64_t b0 = p.trans_b != 0 ? col * uint64_t(p.ldb) : col;
        const uint64_t b_step = p.trans_b != 0 ? 1ul : uint64_t(p.ldb);
        float acc = 0.0f;
        for (int kk = 0; kk < p.k; ++kk)
            acc += ETUDE_AT(p.a, a0 + uint64_t(kk) * a_step) * ETUDE_AT(p.b, b0 + uint64_t(kk) * b_step);
        const uint64_t idx = row * uint64_t(p.ldc) + col;
        if (p.beta == 0.0f)
            ETUDE_AT(p.c, idx) = p.alpha * acc;
        else
            ETUDE_AT(p.c, idx) = p.alpha * acc + p.beta * ETUDE_AT(p.c, idx);
    }
}
