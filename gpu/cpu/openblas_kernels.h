// Which of its kernels OpenBLAS runs on this CPU, named in the CPU device's
// platform (`etude devices`, benchmark lines): OpenBLAS picks them once,
// when it is loaded (DYNAMIC_ARCH), from the CPU, unless OPENBLAS_CORETYPE
// names a set. They decide OpenBLAS's share of a Piper voice's time on the
// CPU (the text encoder, the large upsamplers, the flow's 1x1 layers): on
// a CPU with AVX-512, its AVX2 set (Haswell) made 4-11% less speech per
// second than its AVX-512 one (docs/benchmarks.md), so a figure is
// quoted with the set that made it.
#pragma once

#include <string>

namespace etude::gpu::cpu {

// OpenBLAS's name for the kernels it runs ("Haswell", "SkylakeX", ...).
std::string openblas_kernels();

}  // namespace etude::gpu::cpu
