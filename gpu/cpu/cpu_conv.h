// The CPU backend's convolutions (CpuBackend::conv1d and conv_transpose1d),
// on host pointers, with the shapes and conventions of gpu/backend.h.
//
// How: any layer whose groups have more than one channel on either side runs
// as SGEMM on OpenBLAS, a chunk of the time axis at a time:
//   conv1d            im2col (the taps of each output time as a column),
//                     then W [out/g x in/g*kernel] * columns;
//   conv_transpose1d  W^T [out/g*kernel x in/g] * x, then col2im (each
//                     column scatter-added into the output at its stride).
// On AArch64 and on x86-64 CPUs with AVX2 and FMA, an ungrouped stride-1
// conv1d with more than one tap skips im2col and SGEMM: cpu_direct_conv.h
// computes it in register tiles from a staged copy of the input (1.2-1.5x
// faster on the vocoders' and the VITS flow's layers, on x86), and so does
// a transposed one whose weights fit in L2, one phase of its stride at a
// time. Depthwise layers (one
// channel in and out per group) are direct loops. The column buffer is per
// thread, kept between calls, and bounded by the layer's width, not the
// signal's length (1-3 MB for most of the vocoders' layers, 16 MB for 512
// channels x 16 taps).
//
// Threads: any thread. Each call shares its work out with
// gpu/cpu/cpu_parallel.h: conv1d a chunk of the time axis per job (its own
// im2col, single-threaded SGEMM and bias, or its direct tiles),
// conv_transpose1d a slice of the output channels per job (direct: a chunk
// of input steps), depthwise layers a range of channels per job. Allocates
// (the first call on a thread, or a wider layer than before).
#pragma once

#include "gpu/backend.h"

namespace etude::gpu::cpu {

// y = conv1d(x, w) (+ bias when not null). Throws std::invalid_argument for a
// shape the convolution is not defined for (groups not dividing the channels,
// stride or dilation below 1).
void conv1d(const Conv1dShape& s, const float* x, const float* w, const float* bias, float* y);
void conv_transpose1d(const Conv1dShape& s, const float* x, const float* w, const float* bias,
                      float* y);

}  // namespace etude::gpu::cpu
