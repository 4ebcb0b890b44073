//===- Hardware.h - The kernel's hardware primitives, two ways --*- C++ -*-===//
//
// Everything the kernel (Kernel.cuh, Prims*.h) touches that is not plain
// C++: scoped loads, stores and fences, 8- and 16-byte volatile accesses,
// atomics, block and warp barriers, the global timer, thread and block
// indices, shared memory.
//
// Under nvcc these are the inline PTX statements and CUDA intrinsics the
// kernel always used (the generated code is unchanged). Otherwise they are
// host C++ for the CPU SIMT launcher (emu/Simt.h), with the same orderings:
//
//  * ld/st.relaxed.gpu are relaxed std::atomic_ref accesses, st.release.gpu
//    a release store, fence.acq_rel.gpu an acq_rel fence;
//  * ld/st.volatile of 4 or 8 bytes are relaxed atomic accesses, and a
//    16-byte .v2.u64 access is two 8-byte relaxed atomic accesses: exactly
//    the per-element single-copy atomicity the PTX ISA promises for vector
//    accesses, and no more, so the LL protocol is tested for the property it
//    relies on;
//  * atomicAdd/atomicCAS/atomicExch are relaxed read-modify-writes, as the
//    PTX `atom` they compile to (no .sem qualifier: relaxed);
//    atom.acq_rel.gpu.add is an acq_rel fetch_add;
//  * %globaltimer is a monotonic clock in nanoseconds.
//
// The host side also feeds the emulation's step-cost and traffic counters
// (Simt.h, docs/CUDA.md "Step costs" and "Traffic"): each primitive that
// orders or synchronises counts itself for the calling GPU thread, and the
// bytes it reads or writes; the element loops count theirs (traffic(),
// called under COLL_CUDA_EMULATION only, so that the GPU's code is the same
// source); noteStep (the step the kernel starts), noteRank (the rank of the
// block's tb) and RetryScope (a spin loop's polls after its first)
// attribute and exclude. On a GPU they are empty and the code is unchanged.
//
// ThreadSanitizer does not model stand-alone fences, so under TSan a relaxed
// load followed by an acquire fence would look like a race. There every
// relaxed load records its address for the calling GPU thread, and the fence
// announces an acquire of each recorded address (__tsan_acquire), which
// synchronises with the release stores to it: the same edges the fence
// creates, on the addresses that were really read. The non-TSan build keeps
// the plain fence.
//
// Shared memory: the kernel's __shared__ variables become thread_local,
// which is one per block because the launcher runs each block's threads as
// fibers on one OS thread of its own; the dynamic area is dynamicShared<T>().
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_DEVICE_HARDWARE_H
#define COLL_INTERPRETER_CUDA_DEVICE_HARDWARE_H

#include "DeviceTypes.h"

#include <cstdint>

#if defined(__CUDACC__)

//===----------------------------------------------------------------------===//
// nvcc: PTX
//===----------------------------------------------------------------------===//

namespace coll::interp::cuda::ptx {

// Scoped accesses: the scope is an argument (DeviceTypes.h's Scope), a
// constant where the kernel knows it (dependency flags: .gpu) and the
// connection's where it follows from the placement of its ends. A constant
// folds to one instruction; a connection's scope is a uniform predicate.

__device__ __forceinline__ uint64_t ldRelaxed(const uint64_t *p, Scope scope) {
  uint64_t v;
  if (scope == Scope::Sys)
    asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
/// An acquire load: the waits' poll (a relaxed poll followed by
/// fence.acq_rel costs about twice as much on Hopper).
__device__ __forceinline__ uint64_t ldAcquire(const uint64_t *p, Scope scope) {
  uint64_t v;
  if (scope == Scope::Sys)
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void stRelaxed(uint64_t *p, uint64_t v, Scope scope) {
  if (scope == Scope::Sys)
    asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else
    asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void stRelease(uint64_t *p, uint64_t v, Scope scope) {
  if (scope == Scope::Sys)
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else
    asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void fenceAcquire() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
__device__ __forceinline__ uint32_t ldVolatile(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.volatile.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ldVolatile(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.volatile.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void stVolatile(uint64_t *p, uint64_t v) {
  asm volatile("st.volatile.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void stVolatile(uint32_t *p, uint32_t v) {
  asm volatile("st.volatile.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
/// 16 bytes as two 64-bit elements, each single-copy atomic.
__device__ __forceinline__ void ldVolatile2(const uint64_t *p, uint64_t &a, uint64_t &b) {
  asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}
__device__ __forceinline__ void stVolatile2(uint64_t *p, uint64_t a, uint64_t b) {
  asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ uint32_t atomicAddAcqRel(uint32_t *p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/// Once per iteration of a spin loop: nothing on a GPU, whose warps are
/// scheduled by the hardware.
__device__ __forceinline__ void spinPause() {}
/// The CPU emulation's step-cost counters (docs/CUDA.md, "Step costs"):
/// nothing on a GPU. (Its traffic counters are called under
/// COLL_CUDA_EMULATION only.)
inline constexpr uint32_t NoStep = 0xff;
__device__ __forceinline__ void noteStep(uint32_t, uint32_t) {}
/// The emulation's occupancy model (the registers a kernel's build has):
/// nothing on a GPU, whose driver knows them.
inline void describeKernels(const void *const *, int, int) {}
struct RetryScope {
  __device__ __forceinline__ RetryScope() {}
};

} // namespace coll::interp::cuda::ptx

namespace coll::interp::cuda {
/// The block's dynamic shared memory (the launch's sharedMem bytes).
template <class T> __device__ __forceinline__ T *dynamicShared() {
  extern __shared__ __align__(16) unsigned char collDynamicShared[];
  return reinterpret_cast<T *>(collDynamicShared);
}
} // namespace coll::interp::cuda

/// A kernel as cudaLaunchKernel takes it.
#define COLL_KERNEL_HANDLE(...) reinterpret_cast<const void *>(&__VA_ARGS__)

#else

//===----------------------------------------------------------------------===//
// Host C++ for the CPU SIMT launcher
//===----------------------------------------------------------------------===//

#include "coll/interpreter/Config.h"
#include "emu/Simt.h"

#include <atomic>
#include <chrono>

#if !COLL_CUDA_EMULATION
#error "the host primitives are for the CPU emulation (COLL_CUDA_EMULATION=1)"
#endif

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __shared__ thread_local
#define threadIdx (::coll::interp::cuda::simt::self().threadIdx)
#define blockIdx (::coll::interp::cuda::simt::self().blockIdx)
#define blockDim (::coll::interp::cuda::simt::self().blockDim)
#define gridDim (::coll::interp::cuda::simt::self().gridDim)

namespace coll::interp::cuda {

namespace ptx {

template <class T> inline std::atomic_ref<T> atomicAt(const T *p) {
  return std::atomic_ref<T>(*const_cast<T *>(p));
}

/// Every scoped access tells the scope checker (Simt.h, "Scopes") where it
/// went and with which scope, before it happens.
inline uint64_t ldRelaxed(const uint64_t *p, Scope scope) {
  simt::cost(simt::StrongLoad);
  simt::traffic(p, sizeof *p, false);
  simt::checkScope(p, scope == Scope::Sys, "ld.relaxed");
  uint64_t v = atomicAt(p).load(std::memory_order_relaxed);
  simt::noteRelaxedLoad(p);
  return v;
}
inline uint64_t ldAcquire(const uint64_t *p, Scope scope) {
  simt::cost(simt::AcquireLoad);
  simt::traffic(p, sizeof *p, false);
  simt::checkScope(p, scope == Scope::Sys, "ld.acquire");
  return atomicAt(p).load(std::memory_order_acquire);
}
inline void stRelaxed(uint64_t *p, uint64_t v, Scope scope) {
  simt::cost(simt::StrongStore);
  simt::traffic(p, sizeof *p, true);
  simt::checkScope(p, scope == Scope::Sys, "st.relaxed");
  atomicAt(p).store(v, std::memory_order_relaxed);
}
inline void stRelease(uint64_t *p, uint64_t v, Scope scope) {
  simt::cost(simt::ReleaseStore);
  simt::traffic(p, sizeof *p, true);
  simt::checkScope(p, scope == Scope::Sys, "st.release");
  atomicAt(p).store(v, std::memory_order_release);
}
inline void fenceAcquire() {
  simt::cost(simt::FenceGpu);
#if COLL_SIMT_TSAN
  simt::acquireRelaxedLoads();
#else
  std::atomic_thread_fence(std::memory_order_acq_rel);
#endif
}
template <class U> inline U loadVolatile(const U *p) {
  U v = atomicAt(p).load(std::memory_order_relaxed);
  simt::noteRelaxedLoad(p);
  return v;
}
inline uint32_t ldVolatile(const uint32_t *p) {
  simt::cost(simt::StrongLoad);
  simt::traffic(p, sizeof *p, false);
  return loadVolatile(p);
}
inline uint64_t ldVolatile(const uint64_t *p) {
  simt::cost(simt::StrongLoad);
  simt::traffic(p, sizeof *p, false);
  return loadVolatile(p);
}
inline void stVolatile(uint64_t *p, uint64_t v) {
  simt::cost(simt::StrongStore);
  simt::traffic(p, sizeof *p, true);
  atomicAt(p).store(v, std::memory_order_relaxed);
}
inline void stVolatile(uint32_t *p, uint32_t v) {
  simt::cost(simt::StrongStore);
  simt::traffic(p, sizeof *p, true);
  atomicAt(p).store(v, std::memory_order_relaxed);
}
/// Two 8-byte single-copy-atomic halves, in no particular order (one
/// instruction: counted once).
inline void ldVolatile2(const uint64_t *p, uint64_t &a, uint64_t &b) {
  simt::cost(simt::StrongLoad);
  simt::traffic(p, 2 * sizeof *p, false);
  a = loadVolatile(p);
  b = loadVolatile(p + 1);
}
inline void stVolatile2(uint64_t *p, uint64_t a, uint64_t b) {
  simt::cost(simt::StrongStore);
  simt::traffic(p, 2 * sizeof *p, true);
  atomicAt(p).store(a, std::memory_order_relaxed);
  atomicAt(p + 1).store(b, std::memory_order_relaxed);
}
inline uint32_t atomicAddAcqRel(uint32_t *p, uint32_t v) {
  simt::cost(simt::AtomicRmw);
  simt::traffic(p, sizeof *p, false);
  simt::traffic(p, sizeof *p, true);
  simt::checkScope(p, false, "atom.acq_rel.gpu");
  return atomicAt(p).fetch_add(v, std::memory_order_acq_rel);
}
inline uint64_t globalTimer() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
/// Lets the block's other threads (fibers) run: a spinning thread never
/// holds up its block.
inline void spinPause() { simt::spinPause(); }
/// The registers per thread of `n` kernels, for the emulated occupancy query.
inline void describeKernels(const void *const *handles, int n, int registersPerThread) {
  for (int i = 0; i < n; ++i)
    simt::describeKernelRegisters(handles[i], registersPerThread);
}
/// The kind of a step-cost counter's "step" outside the interpreter loop.
inline constexpr uint32_t NoStep = simt::NoStep;
/// Whether launches count step costs or traffic.
inline bool counting() {
  return simt::countingStepCosts.load(std::memory_order_relaxed) ||
         simt::countingTraffic.load(std::memory_order_relaxed);
}
/// The calling thread's later operations belong to a step of `kind` (a
/// StepKind, or NoStep) under protocol `protocol` (a Proto).
inline void noteStep(uint32_t protocol, uint32_t kind) {
  if (counting())
    simt::noteStep(protocol, kind);
}
/// The calling thread's block runs a tb of rank `rank` (traffic).
inline void noteRank(int32_t rank) {
  if (simt::countingTraffic.load(std::memory_order_relaxed))
    simt::noteRank(rank);
}
/// An access of the element loops: `bytes` at `p`, read or written.
inline void traffic(const void *p, uint64_t bytes, bool write) { simt::traffic(p, bytes, write); }
/// Alive while a spin loop polls again: its operations are not counted.
struct RetryScope {
  RetryScope() : on(counting()) {
    if (on)
      simt::beginRetries();
  }
  ~RetryScope() {
    if (on)
      simt::endRetries();
  }
  RetryScope(const RetryScope &) = delete;
  RetryScope &operator=(const RetryScope &) = delete;
  const bool on;
};

} // namespace ptx

template <class T> inline T *dynamicShared() { return static_cast<T *>(simt::self().dynamicShared); }

inline void __syncthreads() { simt::syncThreads(0); }
inline int __syncthreads_or(int predicate) { return simt::syncThreads(predicate != 0 ? 1 : 0); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { simt::syncWarp(mask, 0); }
inline int __any_sync(unsigned mask, int predicate) {
  return simt::syncWarp(mask, predicate != 0 ? 1 : 0);
}
inline unsigned atomicAdd(unsigned *p, unsigned v) {
  simt::cost(simt::AtomicRmw);
  simt::traffic(p, sizeof *p, false);
  simt::traffic(p, sizeof *p, true);
  simt::checkScope(p, false, "atom.add");
  return ptx::atomicAt(p).fetch_add(v, std::memory_order_relaxed);
}
inline unsigned atomicCAS(unsigned *p, unsigned expected, unsigned desired) {
  simt::cost(simt::AtomicRmw);
  simt::traffic(p, sizeof *p, false);
  simt::traffic(p, sizeof *p, true);
  simt::checkScope(p, false, "atom.cas");
  ptx::atomicAt(p).compare_exchange_strong(expected, desired, std::memory_order_relaxed);
  return expected;
}
inline unsigned atomicExch(unsigned *p, unsigned v) {
  simt::cost(simt::AtomicRmw);
  simt::traffic(p, sizeof *p, false);
  simt::traffic(p, sizeof *p, true);
  simt::checkScope(p, false, "atom.exch");
  return ptx::atomicAt(p).exchange(v, std::memory_order_relaxed);
}
inline void __threadfence_system() {
  simt::cost(simt::FenceSys);
#if !COLL_SIMT_TSAN // TSan ignores fences; the only reader is the host, after the launch
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

} // namespace coll::interp::cuda

/// A kernel as the emulated cudaLaunchKernel takes it: a handle that can
/// bind the kernel's parameters from `void **args`.
#define COLL_KERNEL_HANDLE(...)                                                                    \
  static_cast<const void *>(&::coll::interp::cuda::simt::kernelHandle<&__VA_ARGS__>)

#endif

#endif // COLL_INTERPRETER_CUDA_DEVICE_HARDWARE_H
