//===- Config.h - Host/device portability macros ----------------*- C++ -*-===//
//
// Headers with step semantics are compiled by the host compiler for the host
// backend and by nvcc for the CUDA backend; these macros mark what is shared.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CONFIG_H
#define COLL_INTERPRETER_CONFIG_H

#if defined(__CUDACC__)
#define COLL_HOST_DEVICE __host__ __device__
#define COLL_DEVICE __device__
#define COLL_INLINE __forceinline__
#else
#define COLL_HOST_DEVICE
#define COLL_DEVICE
#define COLL_INLINE inline __attribute__((always_inline))
#endif

#if defined(__CUDA_ARCH__)
#define COLL_DEVICE_CODE 1
#else
#define COLL_DEVICE_CODE 0
#endif

/// Before a loop that the device compiler should not unroll: one whose
/// unrolled remainder it computes ahead of every use, on the path of steps
/// that never run the loop (StepSemantics.h).
#if defined(__CUDA_ARCH__)
#define COLL_NO_UNROLL _Pragma("unroll 1")
#else
#define COLL_NO_UNROLL
#endif

/// 1 in code compiled for the CPU emulation of the CUDA backend (the CUDA
/// runtime calls of emu/Runtime.h, the kernels on the SIMT launcher).
#ifndef COLL_CUDA_EMULATION
#define COLL_CUDA_EMULATION 0
#endif

#endif // COLL_INTERPRETER_CONFIG_H
