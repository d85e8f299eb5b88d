// The OpenCL kernels that use local memory and work-group barriers: GEMM,
// layer norm and transpose. CUDA has its own forms of these (cuBLAS, warp
// shuffles, 32x32 tiles), so they are not shared bodies; the parity suite
// checks them against the CPU backend all the same.
// Names and arguments are what opencl_backend.cpp sets (keep both in step).

// GEMM tile edge; the host launches 16x16 work-groups (see kGemmTile).
#define TS 16
// Work-group size of layer_norm (a power of two for the tree reduction).
#define LN_WG 64
// Transpose tile edge; the host launches TT x TT work-groups (see kTransposeTile).
#define TT 16

// C = alpha * op(A) * op(B) + beta * C, row-major. One work-item per element
// of C; each work-group stages a TS x TS tile of op(A) and of op(B) in local
// memory per step along k. Out-of-range tile entries are loaded as zero so
// sizes need not be multiples of TS. With beta == 0, C is not read (BLAS
// semantics: C may hold garbage, even NaN).
__kernel __attribute__((reqd_work_group_size(TS, TS, 1))) void gemm(
    int trans_a, int trans_b, int m, int n, int k, float alpha, __global const float* a, int lda,
    __global const float* b, int ldb, float beta, __global float* c, int ldc) {
    const int col = get_global_id(0);
    const int row = get_global_id(1);
    const int lc = get_local_id(0);
    const int lr = get_local_id(1);
    __local float as[TS][TS];
    // One column of padding keeps the column-wise reads of bs free of bank
    // conflicts on GPUs.
    __local float bs[TS][TS + 1];
    float acc = 0.0f;
    for (int t = 0; t < k; t += TS) {
        const int ka = t + lc;  // op(A)[row][ka]
        float av = 0.0f;
        if (row < m && ka < k)
            av = trans_a ? a[(size_t)ka * lda + row] : a[(size_t)row * lda + ka];
        as[lr][lc] = av;
        const int kb = t + lr;  // op(B)[kb][col]
        float bv = 0.0f;
        if (kb < k && col < n)
            bv = trans_b ? b[(size_t)col * ldb + kb] : b[(size_t)kb * ldb + col];
        bs[lr][lc] = bv;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < TS; ++i) acc += as[lr][i] * bs[i][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < m && col < n) {
        const size_t idx = (size_t)row * ldc + col;
        c[idx] = beta == 0.0f ? alpha * acc : alpha * acc + beta * c[idx];
    }
}

// One work-group of LN_WG work-items per row: a strided partial sum per
// work-item, then a tree reduction in local memory; two passes (mean, then
// the biased variance around it) as the reference does, which is more
// accurate than sum-of-squares in float.
__kernel __attribute__((reqd_work_group_size(LN_WG, 1, 1))) void layer_norm(
    int cols, float eps, __global const float* x, __global const float* gamma,
    __global const float* beta, __global float* y) {
    const int r = get_group_id(0);
    const int l = get_local_id(0);
    __local float part[LN_WG];
    __global const float* row = x + (size_t)r * cols;
    float s = 0.0f;
    for (int c = l; c < cols; c += LN_WG) s += row[c];
    part[l] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = LN_WG / 2; h > 0; h >>= 1) {
        if (l < h) part[l] += part[l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mean = part[0] / cols;
    barrier(CLK_LOCAL_MEM_FENCE);  // everyone has read part[0] before it is reused
    float v = 0.0f;
    for (int c = l; c < cols; c += LN_WG) {
        const float d = row[c] - mean;
        v += d * d;
    }
    part[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = LN_WG / 2; h > 0; h >>= 1) {
        if (l < h) part[l] += part[l + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = rsqrt(part[0] / cols + eps);
    __global float* out = y + (size_t)r * cols;
    for (int c = l; c < cols; c += LN_WG) out[c] = (row[c] - mean) * inv * gamma[c] + beta[c];
}

// y (cols x rows) = x^T (x is rows x cols). Each work-group moves one TT x TT
// tile through local memory so that both the reads of x and the writes of y
// are along rows; the padding column avoids bank conflicts on GPUs.
__kernel __attribute__((reqd_work_group_size(TT, TT, 1))) void transpose(
    int rows, int cols, __global const float* x, __global float* y) {
    __local float tile[TT][TT + 1];
    const int lc = get_local_id(0);
    const int lr = get_local_id(1);
    const int c = get_group_id(0) * TT + lc;
    const int r = get_group_id(1) * TT + lr;
    if (r < rows && c < cols) tile[lr][lc] = x[(size_t)r * cols + c];
    barrier(CLK_LOCAL_MEM_FENCE);
    // Written as row (group column base + lr) of y, column (group row base + lc).
    const int yr = get_group_id(0) * TT + lr;
    const int yc = get_group_id(1) * TT + lc;
    if (yr < cols && yc < rows) y[(size_t)yr * rows + yc] = tile[lc][lr];
}
