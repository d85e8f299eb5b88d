// The per-element math of attention, written once for every device
// language as kernel_bodies.h is (its conventions hold here): a softmax over
// each row, and VITS' multi-head attention with relative positions (Piper's
// text encoder), split into its two products around that softmax.
//
// Layouts (gpu/backend.h says the same at the ops): a batch of sentences
// padded to one length; queries, keys, values and the attention's output
// are time-major, [batch * length][heads * channels], head h's channels at
// columns [h*channels, (h+1)*channels); scores and probabilities are
// [batch][heads][length][length], rows the query positions; the relative
// embeddings are [2*window + 1][channels], row r for the offset r - window
// of the key from the query (shared by the heads, as in Piper). A key whose
// mask value ([batch * length]) is 0 is a pad: its score is -1e4, as
// Piper's masked_fill makes it, which the softmax turns into exactly 0, so
// a sentence's rows equal those it has alone.
//
// Summation order: each dot product over channels ascending, the key's
// then the relative key's, added, then scaled; each output of the values
// over key positions ascending, then over relative offsets ascending. The
// CPU backend sums the same products with SGEMM, in its own order, so the
// two differ by float rounding alone (tests/gpu/backend_parity_test.cpp
// derives its bound from that).
#ifndef ETUDE_GPU_KERNELS_ATTENTION_BODIES_H
#define ETUDE_GPU_KERNELS_ATTENTION_BODIES_H

#include "gpu/kernels/kernel_dialect.h"
#if defined(VULKAN)
#include "gpu/kernels/device_math.h"
#endif

#if !defined(__OPENCL_VERSION__) && !defined(VULKAN)
namespace etude::gpu::bodies {
#endif

// Row `row` of x [rows][cols] into y: exp(x - the row's largest) over
// their sum (ascending). x and y may be the same buffer: each element is
// read before it is written.
ETUDE_BODY void softmax_row(etude_index row, int cols, ETUDE_CPTR x, ETUDE_PTR y) {
    ETUDE_CPTR xr = ETUDE_OFFSET(x, row * ETUDE_INDEX(cols));
    ETUDE_PTR yr = ETUDE_OFFSET(y, row * ETUDE_INDEX(cols));
    float top = ETUDE_AT(xr, 0);
    for (int j = 1; j < cols; ++j) {
        const float v = ETUDE_AT(xr, j);
        if (v > top) top = v;
    }
    float sum = 0.0f;
    for (int j = 0; j < cols; ++j) {
        const float e = ETUDE_EXP(ETUDE_AT(xr, j) - top);
        ETUDE_AT(yr, j) = e;
        sum += e;
    }
    const float inv_sum = 1.0f / sum;
    for (int j = 0; j < cols; ++j) ETUDE_AT(yr, j) = ETUDE_AT(yr, j) * inv_sum;
}

// Score gid = (b, h, i, j) of [batch][heads][length][length]: scale *
// (q_i . k_j plus, for |j - i| <= window, q_i . rel_k[j - i + window]), over
// head h's channels; -1e4 for a padded key (has_mask set and its mask 0).
// The mask must be a valid buffer either way (GLSL).
ETUDE_BODY void relative_scores_at(etude_index gid, int heads, int length, int channels, int window,
                                   float scale, ETUDE_CPTR q, ETUDE_CPTR k, ETUDE_CPTR rel_k,
                                   int has_mask, ETUDE_CPTR mask, ETUDE_PTR scores) {
    const int j = ETUDE_INT(gid % ETUDE_INDEX(length));
    etude_index row = gid / ETUDE_INDEX(length);
    const int i = ETUDE_INT(row % ETUDE_INDEX(length));
    row = row / ETUDE_INDEX(length);
    const int h = ETUDE_INT(row % ETUDE_INDEX(heads));
    const etude_index first = (row / ETUDE_INDEX(heads)) * ETUDE_INDEX(length);  // b * length
    const etude_index width = ETUDE_INDEX(heads) * ETUDE_INDEX(channels);
    if (has_mask != 0) {
        if (ETUDE_AT(mask, first + ETUDE_INDEX(j)) == 0.0f) {
            ETUDE_AT(scores, gid) = -1e4f;
            return;
        }
    }
    ETUDE_CPTR qi = ETUDE_OFFSET(q, (first + ETUDE_INDEX(i)) * width + ETUDE_INDEX(h * channels));
    ETUDE_CPTR kj = ETUDE_OFFSET(k, (first + ETUDE_INDEX(j)) * width + ETUDE_INDEX(h * channels));
    float acc = 0.0f;
    for (int c = 0; c < channels; ++c) acc += ETUDE_AT(qi, c) * ETUDE_AT(kj, c);
    const int r = j - i + window;
    if (r >= 0 && r <= 2 * window) {
        ETUDE_CPTR e = ETUDE_OFFSET(rel_k, ETUDE_INDEX(r) * ETUDE_INDEX(channels));
        float band = 0.0f;
        for (int c = 0; c < channels; ++c) band += ETUDE_AT(qi, c) * ETUDE_AT(e, c);
        acc += band;
    }
    ETUDE_AT(scores, gid) = acc * scale;
}

// Output gid = (b*length + i, h*channels + c) of [batch * length][heads *
// channels]: the probabilities p[b][h][i][.] times head h's values, plus the
// probabilities on the band |j - i| <= window times the relative values of
// their offsets. A padded key's probability is 0 (its values must be finite).
ETUDE_BODY void relative_values_at(etude_index gid, int heads, int length, int channels, int window,
                                   ETUDE_CPTR p, ETUDE_CPTR v, ETUDE_CPTR rel_v, ETUDE_PTR y) {
    const etude_index width = ETUDE_INDEX(heads) * ETUDE_INDEX(channels);
    const int hc = ETUDE_INT(gid % width);
    const etude_index position = gid / width;  // b * length + i
    const int i = ETUDE_INT(position % ETUDE_INDEX(length));
    const etude_index first = position - ETUDE_INDEX(i);
    const int h = hc / channels;
    const int c = hc - h * channels;
    ETUDE_CPTR pr =
        ETUDE_OFFSET(p, ((first / ETUDE_INDEX(length)) * ETUDE_INDEX(heads) + ETUDE_INDEX(h)) *
                                ETUDE_INDEX(length) * ETUDE_INDEX(length) +
                            ETUDE_INDEX(i) * ETUDE_INDEX(length));
    ETUDE_CPTR vb = ETUDE_OFFSET(v, first * width + ETUDE_INDEX(hc));
    float acc = 0.0f;
    for (int j = 0; j < length; ++j) acc += ETUDE_AT(pr, j) * ETUDE_AT(vb, ETUDE_INDEX(j) * width);
    for (int r = 0; r <= 2 * window; ++r) {
        const int j = i + r - window;
        if (j >= 0 && j < length)
            acc += ETUDE_AT(pr, j) *
                   ETUDE_AT(rel_v, ETUDE_INDEX(r) * ETUDE_INDEX(channels) + ETUDE_INDEX(c));
    }
    ETUDE_AT(y, gid) = acc;
}

#if !defined(__OPENCL_VERSION__) && !defined(VULKAN)
}  // namespace etude::gpu::bodies
#endif

#endif  // ETUDE_GPU_KERNELS_ATTENTION_BODIES_H
