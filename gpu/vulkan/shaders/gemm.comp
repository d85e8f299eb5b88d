#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "gpu/kernels/kernel_dialect.h"

// C = alpha * op(A) * op(B) + beta * C, row-major: the OpenCL backend's
// tiled kernel (gpu/opencl/kernels/tiled_kernels.cl) in GLSL, with the same
// summation order (k ascending, one 16-wide tile at a time). One invocation
// per element of C, 16 x 16 work-groups; tiles of op(A) and op(B) are
// staged in shared memory, out-of-range entries as zero. With beta == 0, C
// is not read (BLAS semantics: it may hold NaN). Work-groups beyond 65535
// rows of tiles loop (gl_NumWorkGroups.y tiles at a time).
#define TS 16
layout(local_size_x = TS, local_size_y = TS) in;

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

shared float as_[TS][TS];
shared float bs_[TS][TS + 1];

void main() {
    const int col = int(gl_GlobalInvocationID.x);
    const int lc = int(gl_LocalInvocationID.x);
    const int lr = int(gl_LocalInvocationID.y);
    for (int row0 = int(gl_WorkGroupID.y) * TS; row0 < p.m; row0 += int(gl_NumWorkGroups.y) * TS) {
        const int row = row0 + lr;
        float acc = 0.0f;
        for (int t = 0; t < p.k; t += TS) {
            const int ka = t + lc;
            float av = 0.0f;
            if (row < p.m && ka < p.k)
                av = p.trans_a != 0 ? ETUDE_AT(p.a, uint64_t(ka) * uint64_t(p.lda) + uint64_t(row))
                                    : ETUDE_AT(p.a, uint64_t(row) * uint64_t(p.lda) + uint64_t(ka));
            as_[lr][lc] = av;
            const int kb = t + lr;
            float bv = 0.0f;
            if (kb < p.k && col < p.n)
                bv = p.trans_b != 0 ? ETUDE_AT(p.b, uint64_t(col) * uint64_t(p.ldb) + uint64_t(kb))
                                    : ETUDE_AT(p.b, uint64_t(kb) * uint64_t(p.ldb) + uint64_t(col));
            bs_[lr][lc] = bv;
            barrier();
            for (int i = 0; i < TS; ++i) acc += as_[lr][i] * bs_[i][lc];
            barrier();
        }
        if (row < p.m && col < p.n) {
            const uint64_t idx = uint64_t(row) * uint64_t(p.ldc) + uint64_t(col);
            if (p.beta == 0.0f)
                ETUDE_AT(p.c, idx) = p.alpha * acc;
            else
                ETUDE_AT(p.c, idx) = p.alpha * acc + p.beta * ETUDE_AT(p.c, idx);
        }
    }
}
