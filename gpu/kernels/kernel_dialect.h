// The few words that differ between the three languages kernel_bodies.h is
// compiled as: OpenCL C (embedded into the OpenCL program), CUDA (the .cu
// kernels) and host C++ (tests call the bodies directly).
//
//   ETUDE_BODY     qualifiers of a body function
//   ETUDE_GLOBAL   address space of a buffer pointer (OpenCL's __global)
//   etude_index    unsigned 64-bit element index (sizes can exceed 2^31)
//   etude_long     signed 64-bit integer
//   ETUDE_EXP ...  single-precision math functions
//
// OpenCL C has no namespaces, no <cmath> and no `static inline` rules of
// C++, so this header sticks to what all three accept: plain functions,
// #define and typedef. Quoted #includes are inlined by
// cmake/embed_opencl.cmake when the OpenCL program is embedded; the <...>
// ones below sit in branches the OpenCL compiler never reads.
#ifndef ETUDE_GPU_KERNELS_KERNEL_DIALECT_H
#define ETUDE_GPU_KERNELS_KERNEL_DIALECT_H

#if defined(__OPENCL_VERSION__)

#define ETUDE_BODY inline
#define ETUDE_GLOBAL __global
typedef ulong etude_index;
typedef long etude_long;
#define ETUDE_EXP(x) exp(x)
#define ETUDE_SIN(x) sin(x)
#define ETUDE_COS(x) cos(x)
#define ETUDE_TANH(x) tanh(x)
#define ETUDE_ERF(x) erf(x)
#define ETUDE_FMIN(a, b) fmin(a, b)

#elif defined(__CUDACC__)

#define ETUDE_BODY __device__ __forceinline__
#define ETUDE_GLOBAL
typedef unsigned long long etude_index;
typedef long long etude_long;
#define ETUDE_EXP(x) expf(x)
#define ETUDE_SIN(x) sinf(x)
#define ETUDE_COS(x) cosf(x)
#define ETUDE_TANH(x) tanhf(x)
#define ETUDE_ERF(x) erff(x)
#define ETUDE_FMIN(a, b) fminf(a, b)

#else  // host C++

#include <cmath>
#include <cstdint>
#define ETUDE_BODY inline
#define ETUDE_GLOBAL
typedef std::uint64_t etude_index;
typedef std::int64_t etude_long;
#define ETUDE_EXP(x) std::exp(x)
#define ETUDE_SIN(x) std::sin(x)
#define ETUDE_COS(x) std::cos(x)
#define ETUDE_TANH(x) std::tanh(x)
#define ETUDE_ERF(x) std::erf(x)
#define ETUDE_FMIN(a, b) std::fmin(a, b)

#endif

#endif  // ETUDE_GPU_KERNELS_KERNEL_DIALECT_H
