//===- Simt.h - A CPU SIMT launcher for the CUDA kernels --------*- C++ -*-===//
//
// Runs a kernel written for the GPU (device/Kernel.cuh, through the host side
// of device/Hardware.h) on the CPU: a grid of blocks, all co-resident, each block
// on an OS thread of its own, and a block's threads as fibers on that thread
// (Fiber.h). Fibers make a block barrier a few context switches instead of
// dozens of futex wake-ups, give each block a thread whose thread_local
// storage is its shared memory, and keep ThreadSanitizer's view of every GPU
// thread separate (each fiber is a TSan fiber that synchronises with no other
// fiber of its block except through barriers and atomics).
//
// Warps are 32 consecutive threads. __syncthreads/__syncthreads_or and
// __syncwarp/__any_sync are counting barriers over the block's (warp's)
// threads that have not exited, with acquire/release edges between every
// arrival and every departure. Every spin loop of the kernel calls
// spinPause(), which yields the fiber; an OS thread whose fibers all wait
// gives its CPU away (sched_yield, then short sleeps).
//
// COLL_SIMT_SEED=n (n > 0) perturbs the schedule with a seeded generator:
// the order in which a block's fibers run changes every pass, and threads
// yield at random before barriers and inside spin loops, so that other
// interleavings than round-robin are explored.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_EMU_SIMT_H
#define COLL_INTERPRETER_CUDA_EMU_SIMT_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#if defined(__SANITIZE_THREAD__)
#define COLL_SIMT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COLL_SIMT_TSAN 1
#endif
#endif
#ifndef COLL_SIMT_TSAN
#define COLL_SIMT_TSAN 0
#endif

namespace coll::interp::cuda::simt {

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

class Block;

/// What a GPU thread (one fiber) knows about itself.
struct ThreadContext {
  Dim3 threadIdx, blockIdx, blockDim, gridDim;
  void *dynamicShared = nullptr;
  Block *block = nullptr;
  uint32_t linear = 0; ///< threadIdx as one number
  const std::function<void()> *kernel = nullptr;
  /// TSan: addresses of relaxed loads since the last acquire fence.
  static constexpr int MaxRelaxed = 8;
  const void *relaxed[MaxRelaxed] = {};
  int nrelaxed = 0;
};

/// The calling GPU thread.
ThreadContext &self();

/// Yields the calling GPU thread (a spin loop's iteration).
void spinPause();
/// A block barrier; returns whether any arriving thread passed a non-zero
/// predicate.
int syncThreads(int predicate);
/// A warp barrier over `mask`'s lanes; returns whether any passed a
/// non-zero predicate.
int syncWarp(unsigned mask, int predicate);

#if COLL_SIMT_TSAN
void noteRelaxedLoad(const void *address);
void acquireRelaxedLoads();
#else
inline void noteRelaxedLoad(const void *) {}
#endif

/// A kernel for the emulated cudaLaunchKernel: binds a copy of its
/// parameters from `args` (one pointer per parameter, as CUDA takes them).
struct KernelHandle {
  std::function<void()> (*bind)(void **args);
};

template <class... A, size_t... I>
std::function<void()> bindParams(void (*f)(A...), void **args, std::index_sequence<I...>) {
  std::tuple<std::decay_t<A>...> params{*static_cast<std::decay_t<A> *>(args[I])...};
  return [f, params] { std::apply(f, params); };
}
template <class... A> constexpr size_t arity(void (*)(A...)) { return sizeof...(A); }
template <auto F> std::function<void()> bindKernelOf(void **args) {
  return bindParams(F, args, std::make_index_sequence<arity(F)>{});
}
template <auto F> inline const KernelHandle kernelHandle = {&bindKernelOf<F>};

/// One launch: `kernel` run by every thread of `grid` x `block`, with
/// `sharedBytes` of dynamic shared memory per block. `coResident`: every
/// block at once, each on its own OS thread (a cooperative launch, which the
/// persistent kernel needs); otherwise a few blocks at a time, in order, as
/// a GPU runs a grid larger than it holds. Returns when every block has
/// finished: an empty string, or why it could not run.
std::string launch(const std::function<void()> &kernel, Dim3 grid, Dim3 block,
                   size_t sharedBytes, bool coResident = true);

} // namespace coll::interp::cuda::simt

#endif // COLL_INTERPRETER_CUDA_EMU_SIMT_H
