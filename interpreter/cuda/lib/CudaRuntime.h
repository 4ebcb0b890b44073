//===- CudaRuntime.h - The CUDA runtime calls the backend makes -*- C++ -*-===//
//
// The one door between the backend's host side (lib/, the CUDA
// tests) and a CUDA runtime: allocation, copies and sets, streams and
// events, graph capture and replay, device queries, the occupancy query and
// kernel launch. In a build for a GPU it is the CUDA runtime API itself; with
// COLL_CUDA_EMULATION=1 it is emu/Runtime.h, the same calls on the CPU SIMT
// launcher, in coll::interp::cuda::rt. Code that includes this header and
// names the calls unqualified from within coll::interp (or after `using
// namespace coll::interp::cuda::rt`) compiles unchanged against either.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_CUDARUNTIME_H
#define COLL_INTERPRETER_CUDA_CUDARUNTIME_H

#include "coll/interpreter/Config.h" // COLL_CUDA_EMULATION

#if COLL_CUDA_EMULATION
#include "emu/Runtime.h"
namespace coll::interp::cuda {
using namespace rt;
} // namespace coll::interp::cuda
#else
#include <cuda_runtime_api.h>
namespace coll::interp::cuda::rt {} // the calls are the global ones
#endif

#endif // COLL_INTERPRETER_CUDA_CUDARUNTIME_H
