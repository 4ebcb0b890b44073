//===- CudaError.h - cudaError_t to llvm::Error -----------------*- C++ -*-===//
//
// The one way host code of the CUDA backend reports a failed CUDA runtime
// call: COLL_CUDA_TRY(expr) returns, from the enclosing function, an
// llvm::Error naming the CUDA error, the expression, the file and the line.
// The enclosing function returns llvm::Error or llvm::Expected<T>.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_CUDAERROR_H
#define COLL_INTERPRETER_CUDA_CUDAERROR_H

#include "llvm/Support/Error.h"

#include "CudaRuntime.h"

namespace coll::interp::cuda {

/// "CUDA error cudaErrorMemoryAllocation (out of memory) in
/// cudaMalloc(&p, n) at Call.cpp:42".
llvm::Error cudaFailure(cudaError_t error, const char *expr, const char *file, int line);

} // namespace coll::interp::cuda

#define COLL_CUDA_TRY(expr)                                                                        \
  do {                                                                                             \
    if (cudaError_t collCudaError_ = (expr); collCudaError_ != cudaSuccess)                        \
      return ::coll::interp::cuda::cudaFailure(collCudaError_, #expr, __FILE__, __LINE__);         \
  } while (false)

#endif // COLL_INTERPRETER_CUDA_CUDAERROR_H
