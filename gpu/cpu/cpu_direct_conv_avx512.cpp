// The direct convolutions' AVX-512F tile set (cpu_direct_conv_tiles.h),
// compiled for AVX-512F by attribute alone: the binary still runs on any
// x86-64, and cpu_direct_conv.cpp calls this set only where the CPU has it.
//
// Why 8 rows x 3 vectors of 16 columns: 24 accumulators, 3 input loads and
// one broadcast weight fill 28 of the 32 registers, and a step of 24 fused
// multiply-adds needs 11 loads, as AVX2's 4 x 3 tile needs 7 for 12. Its 48
// columns are twice AVX2's 24 (kDirectChunkAlign), so the VITS flow's
// pushes of 32-47 frames are one tile wide and chunks stay whole tiles for
// both sets.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "gpu/cpu/cpu_direct_conv.h"
#include "gpu/cpu/cpu_direct_conv_tiles.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define ETUDE_TILE_CODE __attribute__((target("avx512f")))
#define ETUDE_LANES inline __attribute__((always_inline)) ETUDE_TILE_CODE

namespace etude::gpu::cpu::tiles {
namespace avx512 {

constexpr int kLanes = 16;
constexpr int kRows = 8;
constexpr int kVectors = 3;
static_assert(kRows <= kMaxTileRows);

struct Lanes {
    __m512 v;
};
ETUDE_LANES Lanes splat(float a) {
    return {_mm512_set1_ps(a)};
}
// The weights of a tile's R rows for one (input channel, tap): each is
// broadcast from memory where it is used, one register at a time.
struct RowWeights {
    const float* first;
    std::ptrdiff_t stride;
};
template <int R>
ETUDE_LANES RowWeights load_row_weights(const float* first, std::ptrdiff_t stride) {
    return {first, stride};
}
ETUDE_LANES Lanes row_weight(const RowWeights& w, int r) {
    return {_mm512_set1_ps(w.first[r * w.stride])};
}
ETUDE_LANES Lanes load(const float* p) {
    return {_mm512_loadu_ps(p)};
}
ETUDE_LANES void store(float* p, Lanes a) {
    _mm512_storeu_ps(p, a.v);
}
// acc + w x, rounded once.
ETUDE_LANES Lanes fused_multiply_add(Lanes w, Lanes x, Lanes acc) {
    return {_mm512_fmadd_ps(w.v, x.v, acc.v)};
}

#include "gpu/cpu/cpu_direct_conv_tile_body.h"

static_assert(kDirectChunkAlign % kTileColumns == 0,
              "chunks are whole AVX-512 tiles (cpu_direct_conv.h)");

}  // namespace avx512

void tile_rows_avx512(const float* stage, int width, const Taps& taps, const float* w,
                      const float* bias, int rows, int count, float* out, std::size_t out_stride) {
    avx512::tile_rows_body(stage, width, taps, w, bias, rows, count, out, out_stride);
}

}  // namespace etude::gpu::cpu::tiles
#endif
