// The few words that differ between the four languages kernel_bodies.h is
// compiled as: OpenCL C (embedded into the OpenCL program), CUDA (the .cu
// kernels), GLSL for Vulkan (gpu/vulkan/shaders/*.comp, compiled to SPIR-V
// by glslc) and host C++ (tests call the bodies directly).
//
//   ETUDE_BODY        qualifiers of a body function
//   ETUDE_PTR         a float buffer a body writes (a pointer parameter)
//   ETUDE_CPTR        a float buffer a body only reads
//   ETUDE_AT(p, i)    element i of buffer p, readable and assignable
//   ETUDE_OFFSET(p,n) buffer p advanced by n floats
//   etude_index       unsigned 64-bit element index (sizes can exceed 2^31)
//   etude_long        signed 64-bit integer
//   ETUDE_INDEX(x), ETUDE_LONG(x), ETUDE_INT(x), ETUDE_FLOAT(x)
//                     conversions: GLSL has no C casts, OpenCL C no
//                     functional ones, so bodies convert only through these
//   ETUDE_EXP ...     single-precision math functions (ETUDE_SQRT: sqrt)
//
// GLSL has no pointers. A buffer is its device address (uint64_t, from
// Vulkan's buffer device address), and an element is read or written
// through a one-float buffer_reference at that address plus 4*i: 64-bit
// indices, pointer arithmetic and buffers passed to functions, which plain
// GLSL storage buffers allow none of. GLSL also has no erf, and Vulkan only
// bounds exp, sin, cos and tanh loosely (sin and cos to 2^-11 absolute within
// [-pi, pi] and nothing outside it), so the GLSL dialect uses the functions
// of device_math.h, which host tests check against double precision.
//
// OpenCL C has no namespaces, no <cmath> and no `static inline` rules of
// C++, so this header sticks to what all four accept: plain functions,
// #define and typedef. Quoted #includes are inlined by
// cmake/embed_opencl.cmake when the OpenCL program is embedded, and read
// by glslc through GL_GOOGLE_include_directive; the <...> ones below sit in
// branches those compilers never read.
#ifndef ETUDE_GPU_KERNELS_KERNEL_DIALECT_H
#define ETUDE_GPU_KERNELS_KERNEL_DIALECT_H

#if defined(__OPENCL_VERSION__)

#define ETUDE_BODY inline
#define ETUDE_PTR __global float*
#define ETUDE_CPTR __global const float*
typedef ulong etude_index;
typedef long etude_long;
#define ETUDE_EXP(x) exp(x)
#define ETUDE_SIN(x) sin(x)
#define ETUDE_COS(x) cos(x)
#define ETUDE_TANH(x) tanh(x)
#define ETUDE_ERF(x) erf(x)
#define ETUDE_FMIN(a, b) fmin(a, b)
#define ETUDE_SQRT(x) sqrt(x)

#elif defined(__CUDACC__)

#define ETUDE_BODY __device__ __forceinline__
#define ETUDE_PTR float*
#define ETUDE_CPTR const float*
typedef unsigned long long etude_index;
typedef long long etude_long;
#define ETUDE_EXP(x) expf(x)
#define ETUDE_SIN(x) sinf(x)
#define ETUDE_COS(x) cosf(x)
#define ETUDE_TANH(x) tanhf(x)
#define ETUDE_ERF(x) erff(x)
#define ETUDE_FMIN(a, b) fminf(a, b)
#define ETUDE_SQRT(x) sqrtf(x)

#elif defined(VULKAN)  // GLSL for Vulkan (glslc defines VULKAN)

#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(buffer_reference, std430, buffer_reference_align = 4) buffer EtudeFloat {
    float v;
};
#define ETUDE_BODY
#define ETUDE_PTR uint64_t
#define ETUDE_CPTR uint64_t
#define etude_index uint64_t
#define etude_long int64_t
#define ETUDE_AT(p, i) EtudeFloat((p) + 4ul * uint64_t(i)).v
#define ETUDE_OFFSET(p, n) ((p) + 4ul * uint64_t(n))
#define ETUDE_INDEX(x) uint64_t(x)
#define ETUDE_LONG(x) int64_t(x)
#define ETUDE_INT(x) int(x)
#define ETUDE_FLOAT(x) float(x)
#define ETUDE_FABS(x) abs(x)
#define ETUDE_FLOOR(x) floor(x)
#define ETUDE_LDEXP(x, e) ldexp(x, e)
#define ETUDE_EXP(x) etude_exp(x)
#define ETUDE_SIN(x) etude_sin(x)
#define ETUDE_COS(x) etude_cos(x)
#define ETUDE_TANH(x) etude_tanh(x)
#define ETUDE_ERF(x) etude_erf(x)
#define ETUDE_FMIN(a, b) min(a, b)
#define ETUDE_SQRT(x) sqrt(x)

#else  // host C++

#include <cmath>
#include <cstdint>
#define ETUDE_BODY inline
#define ETUDE_PTR float*
#define ETUDE_CPTR const float*
typedef std::uint64_t etude_index;
typedef std::int64_t etude_long;
#define ETUDE_EXP(x) std::exp(x)
#define ETUDE_SIN(x) std::sin(x)
#define ETUDE_COS(x) std::cos(x)
#define ETUDE_TANH(x) std::tanh(x)
#define ETUDE_ERF(x) std::erf(x)
#define ETUDE_FMIN(a, b) std::fmin(a, b)
#define ETUDE_SQRT(x) std::sqrt(x)
// device_math.h's helpers, so that the host tests can run its functions.
#define ETUDE_FABS(x) std::fabs(x)
#define ETUDE_FLOOR(x) std::floor(x)
#define ETUDE_LDEXP(x, e) std::ldexp(x, e)

#endif

// The pointer-like words, the same in every language that has pointers.
#if !defined(VULKAN)
#define ETUDE_AT(p, i) (p)[i]
#define ETUDE_OFFSET(p, n) ((p) + (n))
#define ETUDE_INDEX(x) ((etude_index)(x))
#define ETUDE_LONG(x) ((etude_long)(x))
#define ETUDE_INT(x) ((int)(x))
#define ETUDE_FLOAT(x) ((float)(x))
#endif

#endif  // ETUDE_GPU_KERNELS_KERNEL_DIALECT_H
