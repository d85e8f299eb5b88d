// A direct conv1d for the CPU backend on AVX2 + FMA or AVX-512F (x86-64)
// or NEON (AArch64): the output computed in register tiles straight from
// the input, without im2col or SGEMM.
//
// Why: the vocoders' and the VITS flow's convolutions have few channels (32
// to 384) and long or short time axes. As im2col + SGEMM each call copied
// its input once per tap into the column matrix, OpenBLAS then repacked
// both operands, and only then multiplied: `perf` of a Piper voice put 26%
// of all cycles in those copies against 43% in the multiply itself, the
// copies costing most where the channels are fewest. Here the input is
// copied once per call (a chunk of it, zero-extended at the edges), and the
// weights are read where they lie (PyTorch's [out][in][kernel]).
//
// Each output is bias + the sum over input channels, then taps, of
// w * x, one fused multiply-add at a time in that order, whatever the chunk
// or tile it falls in: a streamed layer gives the same floats as the whole.
//
// Threads: any; the caller shares the work out (cpu_conv.cpp). The input
// is staged in the calling thread's job_scratch (cpu_parallel.h), which
// grows on its first call or a wider chunk.
#pragma once

#include "gpu/backend.h"

namespace etude::gpu::cpu {

// Whether this CPU runs the direct path (x86-64: AVX2 and FMA, checked once;
// AArch64: always, NEON being part of the base architecture) and the shape
// is one it handles: one group, stride 1. ETUDE_CPU_DIRECT_CONV=0 turns it
// off (the im2col + SGEMM path then runs every layer).
bool direct_conv1d_applies(const Conv1dShape& s);

// For tests: while one lives, direct_conv1d_applies is false on the thread
// that made it, so the im2col + SGEMM path can be checked on any CPU.
class DirectConvOff {
  public:
    DirectConvOff();
    ~DirectConvOff();
    DirectConvOff(const DirectConvOff&) = delete;
    DirectConvOff& operator=(const DirectConvOff&) = delete;
};

// The register tile sets (cpu_direct_conv_tiles.h): Lanes8 is 4 rows x 24
// columns in vectors of 8 (AVX2 + FMA on x86-64, NEON on AArch64), Avx512
// 8 rows x 48 columns in vectors of 16 (AVX-512F). Both give the same
// floats; Avx512 is faster where the CPU has it.
enum class DirectConvTiles { Lanes8, Avx512 };

// The set the direct convolutions use now: Avx512 where the CPU has
// AVX-512F, unless ETUDE_CPU_TILES=avx2 (read once) keeps Lanes8.
DirectConvTiles direct_conv_tiles();

// Whether this CPU runs `tiles` (Lanes8: wherever the direct path runs).
bool direct_conv_tiles_supported(DirectConvTiles tiles);

// For tests and benchmarks: while one lives, every thread's direct
// convolutions use `tiles` (process-wide, as a convolution's jobs run on
// the pool's threads: one at a time, made while no convolution runs).
// Throws std::invalid_argument where the CPU does not run `tiles`.
class DirectConvTilesOverride {
  public:
    explicit DirectConvTilesOverride(DirectConvTiles tiles);
    ~DirectConvTilesOverride();
    DirectConvTilesOverride(const DirectConvTilesOverride&) = delete;
    DirectConvTilesOverride& operator=(const DirectConvTilesOverride&) = delete;

  private:
    int previous_;
};

// Outputs [t0, t0 + count) of output channels [o0, o1), batch item 0 of
// x (in_channels x in_length) into y (out_channels x out_len, the
// layer's conv_out_length()). The caller checked direct_conv1d_applies.
void direct_conv1d(const Conv1dShape& s, const float* x, const float* w, const float* bias,
                   float* y, int t0, int count, int o0, int o1);

// Columns per chunk the caller should hand direct_conv1d for this shape:
// the chunk's staged input stays in the core's L2 cache. A whole number of
// kDirectChunkAlign columns (a whole number of every set's main tiles: 2 of
// Lanes8's, 1 of Avx512's), as a caller that shortens a chunk should keep
// it: a chunk's last columns take a narrower tile.
int direct_conv1d_chunk(const Conv1dShape& s);
constexpr int kDirectChunkAlign = 48;

// The transposed convolution the same way, one phase of the stride at a
// time: output t = q * stride + r - padding sums x[q - j] * w[in][out][r +
// j * stride] over input channels, then taps j from the last to the first.
// Ungrouped, undilated, stride above 1 (HiFi-GAN's upsamplers).
bool direct_conv_transpose1d_applies(const Conv1dShape& s);
// The input steps q whose outputs lie in the layer's output: [first, first
// + the count returned).
int direct_conv_transpose1d_steps(const Conv1dShape& s, int& first);
// Every output of steps [q0, q0 + count), output channels [o0, o1),
// batch item 0 (x in_channels x in_length, y out_channels x the layer's
// transpose_out_length()).
void direct_conv_transpose1d(const Conv1dShape& s, const float* x, const float* w,
                             const float* bias, float* y, int q0, int count, int o0, int o1);
// Steps per chunk the caller should hand direct_conv_transpose1d.
int direct_conv_transpose1d_chunk(const Conv1dShape& s);

}  // namespace etude::gpu::cpu
