#include "gpu/cpu/cpu_direct_conv.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ETUDE_DIRECT_CONV_X86 1
#define ETUDE_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace etude::gpu::cpu {
namespace {

// A register tile is kRows output channels by V x 8 output times. The
// main tile, V = 3, holds 12 accumulators plus 3 input loads and one
// broadcast weight in AVX2's 16 registers; every (input channel, tap) step
// does 12 fused multiply-adds for 3 loads and 4 broadcasts, which two load
// ports keep up with. The last columns of a chunk take a tile of 2 or 1
// vectors, so a short signal (the VITS flow pushes 32-47 frames) computes
// at most 7 columns it throws away. Channel counts that are not a multiple
// of kRows finish with fewer rows.
constexpr int kRows = 4;
constexpr int kVectors = 3;
constexpr int kTileColumns = 8 * kVectors;
// Staged input per chunk (floats): 128 KB, so the input rows a tile reads
// stay in L2 while every block of output channels passes over them.
constexpr std::size_t kStageFloats = std::size_t{1} << 15;

float* stage_buffer(std::size_t floats) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < floats) buffer.resize(floats);
    return buffer.data();
}

bool cpu_has_avx2_fma() {
#ifdef ETUDE_DIRECT_CONV_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

thread_local int direct_off_depth = 0;  // live DirectConvOff guards on this thread

bool direct_enabled() {
    static const bool enabled = [] {
        const char* env = std::getenv("ETUDE_CPU_DIRECT_CONV");
        if (env && std::strcmp(env, "0") == 0) return false;
        return cpu_has_avx2_fma();
    }();
    return enabled;
}

#ifdef ETUDE_DIRECT_CONV_X86
// One tile: rows R of output channels from `w` (rows w_stride apart, each
// [in][kernel]) over kTileColumns times of the staged input `xs` (rows
// xs_stride apart), written to `out` (rows out_stride apart), the first
// `keep` columns of each row.
template <int R, int V>
ETUDE_AVX2 void tile(const float* xs, std::size_t xs_stride, int in_channels, int kernel,
                     int dilation, const float* w, std::size_t w_stride, const float* bias,
                     float* out, std::size_t out_stride, int keep) {
    __m256 acc[R][V];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        const __m256 b = _mm256_set1_ps(bias ? bias[r] : 0.0f);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = b;
    }
    for (int ic = 0; ic < in_channels; ++ic) {
        const float* xr = xs + static_cast<std::size_t>(ic) * xs_stride;
        const float* wr = w + static_cast<std::size_t>(ic) * kernel;
        for (int k = 0; k < kernel; ++k) {
            const float* p = xr + static_cast<std::ptrdiff_t>(k) * dilation;
            __m256 x[V];
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) x[v] = _mm256_loadu_ps(p + 8 * v);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                const __m256 wv = _mm256_broadcast_ss(wr + r * w_stride + k);
#pragma GCC unroll 4
                for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(wv, x[v], acc[r][v]);
            }
        }
    }
    if (keep == 8 * V) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) _mm256_storeu_ps(out + r * out_stride + 8 * v, acc[r][v]);
        return;
    }
    // A last, partial tile: every accumulator stored by a fully unrolled
    // loop (an indexed one would keep them in memory through the whole sum).
    alignas(32) float rows[R][8 * V];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) _mm256_store_ps(rows[r] + 8 * v, acc[r][v]);
    for (int r = 0; r < R; ++r) std::memcpy(out + r * out_stride, rows[r], sizeof(float) * keep);
}

using TileFn = void (*)(const float*, std::size_t, int, int, int, const float*, std::size_t,
                        const float*, float*, std::size_t, int);
// kTiles[V - 1][R - 1]: the tile of R rows and V vectors.
constexpr TileFn kTiles[kVectors][kRows] = {{tile<1, 1>, tile<2, 1>, tile<3, 1>, tile<4, 1>},
                                            {tile<1, 2>, tile<2, 2>, tile<3, 2>, tile<4, 2>},
                                            {tile<1, 3>, tile<2, 3>, tile<3, 3>, tile<4, 3>}};
static_assert(kRows == 4 && kVectors == 3, "kTiles lists one tile per row and vector count");
#endif

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
    const std::size_t reach = static_cast<std::size_t>(s.kernel - 1) * s.dilation;
    const std::size_t width = kStageFloats / static_cast<std::size_t>(std::max(s.in_channels, 1));
    // At least a few tiles per chunk even for wide layers or long reaches.
    const std::size_t columns = width > reach + 4 * kTileColumns ? width - reach : 4 * kTileColumns;
    return static_cast<int>(columns / kTileColumns * kTileColumns);
}

void direct_conv1d(const Conv1dShape& s, const float* x, const float* w, const float* bias,
                   float* y, int t0, int count, int o0, int o1) {
#ifdef ETUDE_DIRECT_CONV_X86
    const int out_len = s.conv_out_length();
    const int reach = (s.kernel - 1) * s.dilation;
    const int tiles = (count + kTileColumns - 1) / kTileColumns;
    // The input of the chunk's outputs, zero outside the signal, a whole
    // number of tiles wide plus the taps' reach.
    const int width = tiles * kTileColumns + reach;
    float* stage = stage_buffer(static_cast<std::size_t>(s.in_channels) * width);
    const std::ptrdiff_t first = std::ptrdiff_t{t0} - s.padding;  // input of output t0, tap 0
    const std::ptrdiff_t lo = std::clamp<std::ptrdiff_t>(-first, 0, width);
    const std::ptrdiff_t hi = std::clamp<std::ptrdiff_t>(s.in_length - first, lo, width);
    for (int ic = 0; ic < s.in_channels; ++ic) {
        float* row = stage + static_cast<std::size_t>(ic) * width;
        const float* src = x + static_cast<std::size_t>(ic) * s.in_length;
        std::fill(row, row + lo, 0.0f);
        if (hi > lo) std::memcpy(row + lo, src + first + lo, sizeof(float) * (hi - lo));
        std::fill(row + hi, row + width, 0.0f);
    }
    const std::size_t w_stride = static_cast<std::size_t>(s.in_channels) * s.kernel;
    for (int o = o0; o < o1; o += kRows) {
        const int rows = std::min(kRows, o1 - o);
        const float* wo = w + static_cast<std::size_t>(o) * w_stride;
        const float* bo = bias ? bias + o : nullptr;
        float* yo = y + static_cast<std::size_t>(o) * out_len + t0;
        for (int c = 0; c < count;) {
            const int left = count - c;
            const int vectors = std::min(kVectors, (left + 7) / 8);
            const int keep = std::min(left, 8 * vectors);
            kTiles[vectors - 1][rows - 1](stage + c, static_cast<std::size_t>(width), s.in_channels,
                                          s.kernel, s.dilation, wo, w_stride, bo, yo + c,
                                          static_cast<std::size_t>(out_len), keep);
            c += keep;
        }
    }
#else
    (void)s, (void)x, (void)w, (void)bias, (void)y, (void)t0, (void)count, (void)o0, (void)o1;
#endif
}

}  // namespace etude::gpu::cpu
