#include "gpu/cpu/cpu_direct_conv.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "gpu/cpu/cpu_parallel.h"

// The register tiles are written once over Lanes8, eight output columns:
// one AVX2 register on x86-64 (with FMA, checked at run time), two NEON
// registers on AArch64 (where Advanced SIMD and its fused multiply-add are
// part of the base architecture, so nothing is checked). Either way every
// step is one fused multiply-add per column, so both give the same floats.
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ETUDE_DIRECT_CONV_TILES 1
#define ETUDE_TILE_CODE __attribute__((target("avx2,fma")))
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define ETUDE_DIRECT_CONV_TILES 1
#define ETUDE_TILE_CODE
#endif

namespace etude::gpu::cpu {
namespace {

// A register tile is kRows output channels by V x 8 output times. The
// main tile, V = 3, holds 12 accumulators plus 3 input loads and one
// broadcast weight in AVX2's 16 registers (on NEON, twice as many of half
// the width: 24 + 6 + 1 of its 32); every (input channel, tap) step does 12
// fused multiply-adds of 8 columns for 3 loads and 4 broadcasts, which two
// load ports keep up with. The last columns of a chunk take a tile of 2 or 1
// vectors, so a short signal (the VITS flow pushes 32-47 frames) computes
// at most 7 columns it throws away. Channel counts that are not a multiple
// of kRows finish with fewer rows.
constexpr int kRows = 4;
constexpr int kVectors = 3;
constexpr int kTileColumns = 8 * kVectors;
static_assert(kTileColumns == kDirectChunkAlign);
// Staged input per chunk (floats): 128 KB, so the input rows a tile reads
// stay in L2 while every block of output channels passes over them.
constexpr std::size_t kStageFloats = std::size_t{1} << 15;

// Largest transposed layer (weights, floats) the direct path takes: 256 KB,
// half of a small L2 (see direct_conv_transpose1d_applies).
constexpr std::size_t kTransposeWeightFloats = std::size_t{1} << 16;

bool cpu_runs_tiles() {
#if defined(ETUDE_DIRECT_CONV_TILES) && defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#elif defined(ETUDE_DIRECT_CONV_TILES)
    return true;
#else
    return false;
#endif
}

thread_local int direct_off_depth = 0;  // live DirectConvOff guards on this thread

bool direct_enabled() {
    static const bool enabled = [] {
        const char* env = std::getenv("ETUDE_CPU_DIRECT_CONV");
        if (env && std::strcmp(env, "0") == 0) return false;
        return cpu_runs_tiles();
    }();
    return enabled;
}

// Where a tile finds its taps: tap j of input channel ic reads the staged
// input j * x_step columns on, with the weight of output row r at
// w[ic * w_in + r * w_row + j * w_tap].
struct Taps {
    int in_channels = 0, taps = 0;
    std::ptrdiff_t x_step = 1, w_in = 0, w_row = 0, w_tap = 1;
};

#ifdef ETUDE_DIRECT_CONV_TILES
#define ETUDE_LANES inline __attribute__((always_inline)) ETUDE_TILE_CODE
#ifdef __x86_64__
struct Lanes8 {
    __m256 v;
};
ETUDE_LANES Lanes8 splat(float a) {
    return {_mm256_set1_ps(a)};
}
// The weights of a tile's R rows for one (input channel, tap): on AVX2
// each is broadcast where it is used, one register at a time.
struct RowWeights {
    const float* first;
    std::ptrdiff_t stride;
};
template <int R>
ETUDE_LANES RowWeights load_row_weights(const float* first, std::ptrdiff_t stride) {
    return {first, stride};
}
ETUDE_LANES Lanes8 row_weight(const RowWeights& w, int r) {
    return {_mm256_broadcast_ss(w.first + r * w.stride)};
}
ETUDE_LANES Lanes8 load(const float* p) {
    return {_mm256_loadu_ps(p)};
}
ETUDE_LANES void store(float* p, Lanes8 a) {
    _mm256_storeu_ps(p, a.v);
}
// acc + w x, rounded once.
ETUDE_LANES Lanes8 fused_multiply_add(Lanes8 w, Lanes8 x, Lanes8 acc) {
    return {_mm256_fmadd_ps(w.v, x.v, acc.v)};
}
#else
struct Lanes8 {
    float32x4_t lo, hi;
};
ETUDE_LANES Lanes8 splat(float a) {
    return {vdupq_n_f32(a), vdupq_n_f32(a)};
}
// On NEON the R weights share one register, each multiplied by its lane:
// 24 accumulators, 6 inputs and it fill 31 of the 32 registers, where a
// register per row's broadcast would spill accumulators to the stack.
struct RowWeights {
    float32x4_t lanes;
};
template <int R>
ETUDE_LANES RowWeights load_row_weights(const float* first, std::ptrdiff_t stride) {
    float32x4_t v = vdupq_n_f32(0.0f);
    v = vld1q_lane_f32(first, v, 0);
    if constexpr (R > 1) v = vld1q_lane_f32(first + stride, v, 1);
    if constexpr (R > 2) v = vld1q_lane_f32(first + 2 * stride, v, 2);
    if constexpr (R > 3) v = vld1q_lane_f32(first + 3 * stride, v, 3);
    return {v};
}
ETUDE_LANES Lanes8 row_weight(const RowWeights& w, int r) {
    // The lane must be a constant: r is one after the rows' loop unrolls.
    float32x4_t v;
    switch (r) {
        case 0:
            v = vdupq_laneq_f32(w.lanes, 0);
            break;
        case 1:
            v = vdupq_laneq_f32(w.lanes, 1);
            break;
        case 2:
            v = vdupq_laneq_f32(w.lanes, 2);
            break;
        default:
            v = vdupq_laneq_f32(w.lanes, 3);
            break;
    }
    return {v, v};
}
ETUDE_LANES Lanes8 load(const float* p) {
    return {vld1q_f32(p), vld1q_f32(p + 4)};
}
ETUDE_LANES void store(float* p, Lanes8 a) {
    vst1q_f32(p, a.lo);
    vst1q_f32(p + 4, a.hi);
}
ETUDE_LANES Lanes8 fused_multiply_add(Lanes8 w, Lanes8 x, Lanes8 acc) {
    return {vfmaq_f32(acc.lo, w.lo, x.lo), vfmaq_f32(acc.hi, w.hi, x.hi)};
}
#endif

// One tile: R output rows over 8 V times of the staged input `xs` (rows
// xs_stride apart), written to `out` (rows out_stride apart), the first
// `keep` columns of each row.
template <int R, int V>
ETUDE_TILE_CODE void tile(const float* xs, std::size_t xs_stride, const Taps& t, const float* w,
                          const float* bias, float* out, std::size_t out_stride, int keep) {
    const int in_channels = t.in_channels, taps = t.taps;
    const std::ptrdiff_t x_step = t.x_step, w_in = t.w_in, w_row = t.w_row, w_tap = t.w_tap;
    Lanes8 acc[R][V];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        const Lanes8 b = splat(bias ? bias[r] : 0.0f);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = b;
    }
    for (int ic = 0; ic < in_channels; ++ic) {
        const float* xr = xs + static_cast<std::size_t>(ic) * xs_stride;
        const float* wr = w + ic * w_in;
        for (int j = 0; j < taps; ++j) {
            const float* p = xr + j * x_step;
            const float* wj = wr + j * w_tap;
            Lanes8 x[V];
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) x[v] = load(p + 8 * v);
            const RowWeights weights = load_row_weights<R>(wj, w_row);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                const Lanes8 wv = row_weight(weights, r);
#pragma GCC unroll 4
                for (int v = 0; v < V; ++v) acc[r][v] = fused_multiply_add(wv, x[v], acc[r][v]);
            }
        }
    }
    if (keep == 8 * V) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) store(out + r * out_stride + 8 * v, acc[r][v]);
        return;
    }
    // A last, partial tile: every accumulator stored by a fully unrolled
    // loop (an indexed one would keep them in memory through the whole sum).
    float rows[R][8 * V];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) store(rows[r] + 8 * v, acc[r][v]);
    for (int r = 0; r < R; ++r) std::memcpy(out + r * out_stride, rows[r], sizeof(float) * keep);
}

using TileFn = void (*)(const float*, std::size_t, const Taps&, const float*, const float*, float*,
                        std::size_t, int);
// kTiles[V - 1][R - 1]: the tile of R rows and V vectors.
constexpr TileFn kTiles[kVectors][kRows] = {{tile<1, 1>, tile<2, 1>, tile<3, 1>, tile<4, 1>},
                                            {tile<1, 2>, tile<2, 2>, tile<3, 2>, tile<4, 2>},
                                            {tile<1, 3>, tile<2, 3>, tile<3, 3>, tile<4, 3>}};
static_assert(kRows == 4 && kVectors == 3, "kTiles lists one tile per row and vector count");

// Stages input columns [first, first + width) of every channel of x
// (channels x length) as rows of `width` floats, zero outside the signal.
float* stage_input(const float* x, int channels, int length, std::ptrdiff_t first, int width) {
    float* stage = job_scratch(static_cast<std::size_t>(channels) * width);
    const std::ptrdiff_t lo = std::clamp<std::ptrdiff_t>(-first, 0, width);
    const std::ptrdiff_t hi = std::clamp<std::ptrdiff_t>(length - first, lo, width);
    for (int c = 0; c < channels; ++c) {
        float* row = stage + static_cast<std::size_t>(c) * width;
        const float* src = x + static_cast<std::size_t>(c) * length;
        std::fill(row, row + lo, 0.0f);
        if (hi > lo) std::memcpy(row + lo, src + first + lo, sizeof(float) * (hi - lo));
        std::fill(row + hi, row + width, 0.0f);
    }
    return stage;
}

// Rows [o, o + rows) over staged columns [0, count): tiles of kVectors
// vectors, the last 25-32 columns as two of 2 vectors: a 1-vector tile has
// only 4 independent sums, too few to hide the multiply-add's latency, so
// it runs only on signals of 8 columns or fewer.
void tile_row_block(const float* stage, int width, const Taps& taps, const float* w,
                    const float* bias, int rows, int count, float* out, std::size_t out_stride) {
    for (int c = 0; c < count;) {
        const int left = count - c;
        const int vectors = left > 24 && left <= 32 ? 2 : std::min(kVectors, (left + 7) / 8);
        const int keep = std::min(count - c, 8 * vectors);
        kTiles[vectors - 1][rows - 1](stage + c, static_cast<std::size_t>(width), taps, w, bias,
                                      out + c, out_stride, keep);
        c += keep;
    }
}
#endif

// Columns per chunk whose staged input (channels x (columns + reach))
// stays near kStageFloats: a whole number of tiles, at least four.
int chunk_for(int channels, std::size_t reach) {
    const std::size_t width = kStageFloats / static_cast<std::size_t>(std::max(channels, 1));
    const std::size_t columns = width > reach + 4 * kTileColumns ? width - reach : 4 * kTileColumns;
    return static_cast<int>(columns / kTileColumns * kTileColumns);
}

// Taps of phase r of a transposed convolution with stride u: kernel taps
// r, r + u, r + 2u, ... below `kernel`.
int phase_taps(int kernel, int stride, int r) {
    return r < kernel ? (kernel - r + stride - 1) / stride : 0;
}

}  // namespace

DirectConvOff::DirectConvOff() {
    ++direct_off_depth;
}
DirectConvOff::~DirectConvOff() {
    --direct_off_depth;
}

bool direct_conv1d_applies(const Conv1dShape& s) {
    // 1x1 layers stay on SGEMM, which reads their input in place.
    return s.groups == 1 && s.stride == 1 && s.kernel > 1 && direct_off_depth == 0 &&
           direct_enabled();
}

int direct_conv1d_chunk(const Conv1dShape& s) {
    return chunk_for(s.in_channels, static_cast<std::size_t>(s.kernel - 1) * s.dilation);
}

void direct_conv1d(const Conv1dShape& s, const float* x, const float* w, const float* bias,
                   float* y, int t0, int count, int o0, int o1) {
#ifdef ETUDE_DIRECT_CONV_TILES
    const int out_len = s.conv_out_length();
    // The chunk's input, a whole number of tiles wide plus the taps' reach;
    // column 0 is the input of output t0 through tap 0.
    const int width =
        (count + kTileColumns - 1) / kTileColumns * kTileColumns + (s.kernel - 1) * s.dilation;
    const float* stage =
        stage_input(x, s.in_channels, s.in_length, std::ptrdiff_t{t0} - s.padding, width);
    Taps taps;
    taps.in_channels = s.in_channels;
    taps.taps = s.kernel;
    taps.x_step = s.dilation;
    taps.w_in = s.kernel;
    taps.w_row = std::ptrdiff_t{s.in_channels} * s.kernel;
    for (int o = o0; o < o1; o += kRows)
        tile_row_block(stage, width, taps, w + o * taps.w_row, bias ? bias + o : nullptr,
                       std::min(kRows, o1 - o), count,
                       y + static_cast<std::size_t>(o) * out_len + t0,
                       static_cast<std::size_t>(out_len));
#else
    (void)s, (void)x, (void)w, (void)bias, (void)y, (void)t0, (void)count, (void)o0, (void)o1;
#endif
}

bool direct_conv_transpose1d_applies(const Conv1dShape& s) {
    // Each phase reads its own taps of every weight row ([in][out][kernel]:
    // 2 of 16 floats a cache line for an x8 upsampler), so the phases pass
    // over the weights stride times: only a layer whose weights sit in L2
    // gains. Measured (2-vCPU AMD EPYC, one thread): 64 -> 32 x 8 taps 1.34x
    // faster than col2im + SGEMM, 128 -> 64 x 16 even, 256 -> 128 x 16
    // 0.79x, 512 -> 256 x 16 0.49x.
    const std::size_t weights = static_cast<std::size_t>(s.in_channels) * s.out_channels * s.kernel;
    return s.groups == 1 && s.dilation == 1 && s.stride > 1 && s.padding >= 0 &&
           weights <= kTransposeWeightFloats && direct_off_depth == 0 && direct_enabled();
}

int direct_conv_transpose1d_steps(const Conv1dShape& s, int& first) {
    // Output t is phase (t + padding) % stride of input step (t + padding) / stride.
    const int out_len = s.transpose_out_length();
    first = s.padding / s.stride;
    return out_len <= 0 ? 0 : (out_len - 1 + s.padding) / s.stride + 1 - first;
}

int direct_conv_transpose1d_chunk(const Conv1dShape& s) {
    return chunk_for(s.in_channels, static_cast<std::size_t>(phase_taps(s.kernel, s.stride, 0)));
}

void direct_conv_transpose1d(const Conv1dShape& s, const float* x, const float* w,
                             const float* bias, float* y, int q0, int count, int o0, int o1) {
#ifdef ETUDE_DIRECT_CONV_TILES
    const int out_len = s.transpose_out_length();
    const int u = s.stride, most = phase_taps(s.kernel, u, 0);
    // Step q of phase r sums x[q - j] * w[.][.][r + j u] over its taps j;
    // read from the stage as a correlation, tap i = taps - 1 - j. Column 0
    // is input q0 - (most - 1).
    const int width = (count + kTileColumns - 1) / kTileColumns * kTileColumns + most - 1;
    const float* stage =
        stage_input(x, s.in_channels, s.in_length, std::ptrdiff_t{q0} - (most - 1), width);
    alignas(32) float block[kRows * kTileColumns];
    for (int o = o0; o < o1; o += kRows) {
        const int rows = std::min(kRows, o1 - o);
        for (int c = 0; c < count; c += kTileColumns) {
            const int n = std::min(kTileColumns, count - c);
            for (int r = 0; r < u; ++r) {
                const int taps_r = phase_taps(s.kernel, u, r);
                if (taps_r == 0) {
                    for (int i = 0; i < rows; ++i)
                        std::fill_n(block + i * kTileColumns, n, bias ? bias[o + i] : 0.0f);
                } else {
                    Taps taps;
                    taps.in_channels = s.in_channels;
                    taps.taps = taps_r;
                    taps.x_step = 1;
                    taps.w_in = std::ptrdiff_t{s.out_channels} * s.kernel;
                    taps.w_row = s.kernel;
                    taps.w_tap = -u;
                    tile_row_block(stage + c + (most - taps_r), width, taps,
                                   w + std::ptrdiff_t{o} * s.kernel + r + (taps_r - 1) * u,
                                   bias ? bias + o : nullptr, rows, n, block, kTileColumns);
                }
                // Step q0 + c + j of phase r is output (q0 + c + j) u + r - padding.
                for (int i = 0; i < rows; ++i) {
                    float* yr = y + static_cast<std::size_t>(o + i) * out_len;
                    for (int j = 0; j < n; ++j) {
                        const long t = long(q0 + c + j) * u + r - s.padding;
                        if (t >= 0 && t < out_len) yr[t] = block[i * kTileColumns + j];
                    }
                }
            }
        }
    }
#else
    (void)s, (void)x, (void)w, (void)bias, (void)y, (void)q0, (void)count, (void)o0, (void)o1;
#endif
}

}  // namespace etude::gpu::cpu
