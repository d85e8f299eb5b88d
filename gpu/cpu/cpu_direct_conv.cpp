#include "gpu/cpu/cpu_direct_conv.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "gpu/cpu/cpu_direct_conv_tiles.h"
#include "gpu/cpu/cpu_parallel.h"

// The 8-lane tile set is written over Lanes, eight output columns: one AVX2
// register on x86-64 (with FMA, checked at run time), two NEON registers on
// AArch64 (where Advanced SIMD and its fused multiply-add are part of the
// base architecture, so nothing is checked). Either way every step is one
// fused multiply-add per column, so both give the same floats, as does the
// AVX-512 set (cpu_direct_conv_avx512.cpp) where the CPU has it.
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

#ifdef ETUDE_DIRECT_CONV_TILES
namespace tiles {
namespace lanes8 {

// The main tile, 4 rows x 3 vectors, holds 12 accumulators plus 3 input
// loads and one broadcast weight in AVX2's 16 registers (on NEON, twice as
// many of half the width: 24 + 6 + 1 of its 32); every (input channel, tap)
// step does 12 fused multiply-adds of 8 columns for 3 loads and 4
// broadcasts, which two load ports keep up with. The last columns of a
// chunk take a tile of 2 or 1 vectors, so a short signal computes at most 7
// columns it throws away. Channel counts that are not a multiple of kRows
// finish with fewer rows.
constexpr int kLanes = 8;
constexpr int kRows = 4;
constexpr int kVectors = 3;
static_assert(kRows <= kMaxTileRows && kMaxTileRows % kRows == 0);

#define ETUDE_LANES inline __attribute__((always_inline)) ETUDE_TILE_CODE
#ifdef __x86_64__
struct Lanes {
    __m256 v;
};
ETUDE_LANES Lanes splat(float a) {
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
ETUDE_LANES Lanes row_weight(const RowWeights& w, int r) {
    return {_mm256_broadcast_ss(w.first + r * w.stride)};
}
ETUDE_LANES Lanes load(const float* p) {
    return {_mm256_loadu_ps(p)};
}
ETUDE_LANES void store(float* p, Lanes a) {
    _mm256_storeu_ps(p, a.v);
}
// acc + w x, rounded once.
ETUDE_LANES Lanes fused_multiply_add(Lanes w, Lanes x, Lanes acc) {
    return {_mm256_fmadd_ps(w.v, x.v, acc.v)};
}
#else
struct Lanes {
    float32x4_t lo, hi;
};
ETUDE_LANES Lanes splat(float a) {
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
ETUDE_LANES Lanes row_weight(const RowWeights& w, int r) {
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
ETUDE_LANES Lanes load(const float* p) {
    return {vld1q_f32(p), vld1q_f32(p + 4)};
}
ETUDE_LANES void store(float* p, Lanes a) {
    vst1q_f32(p, a.lo);
    vst1q_f32(p + 4, a.hi);
}
ETUDE_LANES Lanes fused_multiply_add(Lanes w, Lanes x, Lanes acc) {
    return {vfmaq_f32(acc.lo, w.lo, x.lo), vfmaq_f32(acc.hi, w.hi, x.hi)};
}
#endif

#include "gpu/cpu/cpu_direct_conv_tile_body.h"

static_assert(kDirectChunkAlign % kTileColumns == 0, "chunks are whole tiles (cpu_direct_conv.h)");

}  // namespace lanes8

void tile_rows_lanes8(const float* stage, int width, const Taps& taps, const float* w,
                      const float* bias, int rows, int count, float* out, std::size_t out_stride) {
    lanes8::tile_rows_body(stage, width, taps, w, bias, rows, count, out, out_stride);
}

}  // namespace tiles
#endif

namespace {

using tiles::Taps;

// Staged input per chunk (floats): 128 KB, so the input rows a tile reads
// stay in L2 while every block of output channels passes over them.
constexpr std::size_t kStageFloats = std::size_t{1} << 15;

// Largest transposed layer (weights, floats) the direct path takes: 256 KB,
// half of a small L2 (see direct_conv_transpose1d_applies).
constexpr std::size_t kTransposeWeightFloats = std::size_t{1} << 16;

bool cpu_has(DirectConvTiles set) {
#if defined(ETUDE_DIRECT_CONV_TILES) && defined(__x86_64__)
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return set == DirectConvTiles::Lanes8 ? avx2 : avx2 && __builtin_cpu_supports("avx512f");
#elif defined(ETUDE_DIRECT_CONV_TILES)
    return set == DirectConvTiles::Lanes8;
#else
    (void)set;
    return false;
#endif
}

thread_local int direct_off_depth = 0;  // live DirectConvOff guards on this thread

bool direct_enabled() {
    static const bool enabled = [] {
        const char* env = std::getenv("ETUDE_CPU_DIRECT_CONV");
        if (env && std::strcmp(env, "0") == 0) return false;
        return cpu_has(DirectConvTiles::Lanes8);
    }();
    return enabled;
}

// The set the CPU and ETUDE_CPU_TILES choose, read once.
DirectConvTiles default_tiles() {
    static const DirectConvTiles tiles = [] {
        const char* env = std::getenv("ETUDE_CPU_TILES");
        const bool avx2 = env && std::strcmp(env, "avx2") == 0;
        return !avx2 && cpu_has(DirectConvTiles::Avx512) ? DirectConvTiles::Avx512
                                                         : DirectConvTiles::Lanes8;
    }();
    return tiles;
}

// A DirectConvTilesOverride's set, or -1: process-wide, as a convolution's
// jobs run on the pool's threads too.
std::atomic<int> forced_tiles{-1};

#ifdef ETUDE_DIRECT_CONV_TILES
tiles::TileRowsFn tile_rows() {
#ifdef __x86_64__
    if (direct_conv_tiles() == DirectConvTiles::Avx512) return tiles::tile_rows_avx512;
#endif
    return tiles::tile_rows_lanes8;
}

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

// Columns [0, count) rounded up to whole kDirectChunkAlign: what the
// stage holds before the taps' reach, so every tile reads inside it.
int staged_columns(int count) {
    return (count + kDirectChunkAlign - 1) / kDirectChunkAlign * kDirectChunkAlign;
}
#endif

// Columns per chunk whose staged input (channels x (columns + reach))
// stays near kStageFloats: a whole number of kDirectChunkAlign, at least
// two (four of AVX2's tiles).
int chunk_for(int channels, std::size_t reach) {
    constexpr std::size_t align = kDirectChunkAlign;
    const std::size_t width = kStageFloats / static_cast<std::size_t>(std::max(channels, 1));
    const std::size_t columns = width > reach + 2 * align ? width - reach : 2 * align;
    return static_cast<int>(columns / align * align);
}

// Taps of phase r of a transposed convolution with stride u: kernel taps
// r, r + u, r + 2u, ... below `kernel`.
int phase_taps(int kernel, int stride, int r) {
    return r < kernel ? (kernel - r + stride - 1) / stride : 0;
}

}  // namespace

DirectConvTiles direct_conv_tiles() {
    const int forced = forced_tiles.load(std::memory_order_relaxed);
    return forced >= 0 ? static_cast<DirectConvTiles>(forced) : default_tiles();
}

bool direct_conv_tiles_supported(DirectConvTiles tiles) {
    return cpu_has(tiles);
}

DirectConvTilesOverride::DirectConvTilesOverride(DirectConvTiles tiles)
    : previous_(forced_tiles.load()) {
    if (!cpu_has(tiles))
        throw std::invalid_argument(
            "DirectConvTilesOverride: this CPU does not run the requested tile set");
    forced_tiles.store(static_cast<int>(tiles));
}
DirectConvTilesOverride::~DirectConvTilesOverride() {
    forced_tiles.store(previous_);
}

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
    const int width = staged_columns(count) + (s.kernel - 1) * s.dilation;
    const float* stage =
        stage_input(x, s.in_channels, s.in_length, std::ptrdiff_t{t0} - s.padding, width);
    Taps taps;
    taps.in_channels = s.in_channels;
    taps.taps = s.kernel;
    taps.x_step = s.dilation;
    taps.w_in = s.kernel;
    taps.w_row = std::ptrdiff_t{s.in_channels} * s.kernel;
    tile_rows()(stage, width, taps, w + o0 * taps.w_row, bias ? bias + o0 : nullptr, o1 - o0, count,
                y + static_cast<std::size_t>(o0) * out_len + t0, static_cast<std::size_t>(out_len));
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
    const int width = staged_columns(count) + most - 1;
    const float* stage =
        stage_input(x, s.in_channels, s.in_length, std::ptrdiff_t{q0} - (most - 1), width);
    const tiles::TileRowsFn tile_rows_fn = tile_rows();
    constexpr int kBlockRows = tiles::kMaxTileRows, kBlockColumns = kDirectChunkAlign;
    alignas(64) float block[kBlockRows * kBlockColumns];
    for (int o = o0; o < o1; o += kBlockRows) {
        const int rows = std::min(kBlockRows, o1 - o);
        for (int c = 0; c < count; c += kBlockColumns) {
            const int n = std::min(kBlockColumns, count - c);
            for (int r = 0; r < u; ++r) {
                const int taps_r = phase_taps(s.kernel, u, r);
                if (taps_r == 0) {
                    for (int i = 0; i < rows; ++i)
                        std::fill_n(block + i * kBlockColumns, n, bias ? bias[o + i] : 0.0f);
                } else {
                    Taps taps;
                    taps.in_channels = s.in_channels;
                    taps.taps = taps_r;
                    taps.x_step = 1;
                    taps.w_in = std::ptrdiff_t{s.out_channels} * s.kernel;
                    taps.w_row = s.kernel;
                    taps.w_tap = -u;
                    tile_rows_fn(stage + c + (most - taps_r), width, taps,
                                 w + std::ptrdiff_t{o} * s.kernel + r + (taps_r - 1) * u,
                                 bias ? bias + o : nullptr, rows, n, block, kBlockColumns);
                }
                // Step q0 + c + j of phase r is output (q0 + c + j) u + r - padding.
                for (int i = 0; i < rows; ++i) {
                    float* yr = y + static_cast<std::size_t>(o + i) * out_len;
                    for (int j = 0; j < n; ++j) {
                        const long t = long(q0 + c + j) * u + r - s.padding;
                        if (t >= 0 && t < out_len) yr[t] = block[i * kBlockColumns + j];
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
