// The register tile sets behind cpu_direct_conv.cpp, one per instruction
// set, all with one signature so the convolutions pick a set per call:
// - tile_rows_lanes8: 4 rows x 3 vectors of 8 columns (AVX2 + FMA on
//   x86-64, two NEON registers a vector on AArch64), in
//   cpu_direct_conv.cpp;
// - tile_rows_avx512: 8 rows x 3 vectors of 16 columns (AVX-512F, x86-64
//   only), in cpu_direct_conv_avx512.cpp.
// Both are the one body in cpu_direct_conv_tile_body.h: every output is
// bias + one fused multiply-add per (input channel, tap) in that order, so
// the sets give the same floats.
#pragma once

#include <cstddef>

namespace etude::gpu::cpu::tiles {

// Where a tile finds its taps: tap j of input channel ic reads the staged
// input j * x_step columns on, with the weight of output row r at
// w[ic * w_in + r * w_row + j * w_tap].
struct Taps {
    int in_channels = 0, taps = 0;
    std::ptrdiff_t x_step = 1, w_in = 0, w_row = 0, w_tap = 1;
};

// Output rows [0, rows) over staged columns [0, count): row r's weights
// start at w + r * taps.w_row, its bias at bias[r] (none when null), its
// output at out + r * out_stride. `stage` holds the input channels as rows
// of `width` floats, each at least count rounded up to kDirectChunkAlign
// plus the taps' reach.
using TileRowsFn = void (*)(const float* stage, int width, const Taps& taps, const float* w,
                            const float* bias, int rows, int count, float* out,
                            std::size_t out_stride);

// The most rows of any set's tile: the transposed path computes blocks of
// this many rows (a multiple of every set's rows).
constexpr int kMaxTileRows = 8;

void tile_rows_lanes8(const float* stage, int width, const Taps& taps, const float* w,
                      const float* bias, int rows, int count, float* out, std::size_t out_stride);
#if defined(__x86_64__) && defined(__GNUC__)
void tile_rows_avx512(const float* stage, int width, const Taps& taps, const float* w,
                      const float* bias, int rows, int count, float* out, std::size_t out_stride);
#endif

}  // namespace etude::gpu::cpu::tiles
