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
// Step costs (docs/CUDA.md, "Step costs"), when countStepCosts(true) was
// called before a launch: every GPU thread counts what it executes of the
// hardware primitives that order or synchronise (block and warp barriers,
// fences, release stores, strong loads and stores, atomics), attributed to
// the step the kernel announced last (noteStep). A spin loop's polls after
// its first are not counted (RetryScope): the counts are those of a run in
// which nothing had to wait, so they do not depend on the schedule. Each
// step execution keeps, per kind of operation, the most any one thread of
// the block executed (the threads run in parallel; the busiest one is the
// critical path: thread 0, which waits and publishes, or for LL128 the
// lanes that poll and release line flags). The counts live in the thread's
// context and its block, and reach the process-wide table when the block
// ends, under a mutex.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_EMU_SIMT_H
#define COLL_INTERPRETER_CUDA_EMU_SIMT_H

#include <cstddef>
#include <cstdint>
#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

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

/// What the step-cost counters count, per GPU thread.
enum Cost : int {
  BlockBarrier,  ///< __syncthreads, __syncthreads_or (bar.sync, bar.red)
  WarpBarrier,   ///< __syncwarp, __any_sync
  FenceGpu,      ///< fence.acq_rel.gpu
  FenceSys,      ///< fence.sc.sys (__threadfence_system)
  ReleaseStore,  ///< st.release.gpu
  StrongLoad,    ///< ld.relaxed.gpu, ld.volatile (a .v2 access is one)
  AcquireLoad,   ///< ld.acquire.gpu
  StrongStore,   ///< st.relaxed.gpu, st.volatile (a .v2 access is one)
  AtomicRmw,     ///< atom (relaxed or acq_rel)
  NumCosts
};

/// A step's kind when the kernel is in no step: its prologue and epilogue.
inline constexpr uint32_t NoStep = 0xff;

/// Counts of one kind of step under one protocol, summed over its
/// executions.
struct StepCost {
  uint64_t executions = 0;
  uint64_t counts[NumCosts] = {};
};
/// (protocol, step kind) -> counts; the kernel's own numbering (Proto,
/// StepKind; NoStep).
using StepCostTable = std::map<std::pair<uint32_t, uint32_t>, StepCost>;

/// Whether launches count step costs; read when a block starts.
inline std::atomic<bool> countingStepCosts{false};
/// Counts later launches' step costs (off: counts nothing, costs a relaxed
/// load per primitive).
void countStepCosts(bool on);
/// The counts of every launch that counted, since the last reset.
StepCostTable stepCosts(bool reset);

/// Counts one operation of the calling GPU thread.
void addCost(Cost c);
inline void cost(Cost c) {
  if (countingStepCosts.load(std::memory_order_relaxed))
    addCost(c);
}
/// The calling thread's later operations belong to a step of `kind` under
/// `protocol`.
void noteStep(uint32_t protocol, uint32_t kind);
/// A spin loop after its first failed poll: the calling thread's
/// operations are not counted until it ends.
void beginRetries();
void endRetries();

//===----------------------------------------------------------------------===//
// Traffic
//===----------------------------------------------------------------------===//
//
// The global-memory bytes a launch reads and writes (docs/CUDA.md,
// "Traffic"), when countTraffic(true) was called before it: every access of
// the kernel's data paths (the element loops: transform, and LL's and
// LL128's line pieces) and every strong access (flags, FIFO counters, LL
// lines, window descriptors, the control words), each attributed to the
// rank of the accessing block (noteRank), the step it runs (noteStep) and
// the region the address lies in (setTrafficRanges): the rank's own
// buffers, another rank's, FIFO slots, or flags and counters. A spin loop's
// polls after its first are not counted (RetryScope), so the counts are
// those of a run in which nothing waited. Not counted: the kernel's
// prologue, which copies its tb's steps to shared memory once per launch.

/// Where a counted access went.
enum Region : int {
  OwnBuffer,  ///< the accessing rank's input, output, scratch or windows
  PeerBuffer, ///< another rank's
  FifoSlot,   ///< a connection's FIFO slots (data in flight)
  Flag,       ///< FIFO heads and tails, dependency and signal flags, control words
  OtherMemory,
  NumRegions
};
/// Bytes read and written, per region.
struct TrafficCount {
  uint64_t read[NumRegions] = {};
  uint64_t written[NumRegions] = {};
};
/// (rank, protocol, step kind) -> bytes; kind NoStep: outside the steps.
using TrafficTable = std::map<std::tuple<int32_t, uint32_t, uint32_t>, TrafficCount>;
/// An address range and what it is; `rank` for buffers.
struct TrafficRange {
  uintptr_t begin = 0, end = 0;
  Region region = OtherMemory; ///< OwnBuffer for any rank's buffer (classified by rank)
  int32_t rank = -1;
};

/// Whether launches count traffic; read when a block starts.
inline std::atomic<bool> countingTraffic{false};
void countTraffic(bool on);
/// The counts of every launch that counted, since the last reset.
TrafficTable traffic(bool reset);
/// The memory of `owner`'s launches (an executor): later ranges of a set
/// override earlier ones where they overlap (a FIFO inside a state
/// allocation). Replaces what `owner` set before; an empty set removes it.
void setTrafficRanges(const void *owner, std::vector<TrafficRange> ranges);
/// Counts an access of `bytes` at `address` by the calling GPU thread.
void addTraffic(const void *address, uint64_t bytes, bool write);
inline void traffic(const void *address, uint64_t bytes, bool write) {
  if (countingTraffic.load(std::memory_order_relaxed))
    addTraffic(address, bytes, write);
}
/// The calling thread's block runs rank `rank`'s tb.
void noteRank(int32_t rank);

//===----------------------------------------------------------------------===//
// Scopes
//===----------------------------------------------------------------------===//
//
// Every scoped access of the kernel (Hardware.h: ld/st.relaxed, ld.acquire,
// st.release, the atomics, which are .gpu) is checked before it happens,
// for launches made through the emulated runtime (Runtime.h), which knows
// the launch's GPU and which GPU, or the host, owns each allocation. A .gpu
// access to memory another GPU or the host owns is a scope error: the PTX
// memory model does not make it synchronise with that memory's other users,
// whatever the emulation's CPU does. So is any synchronising access to a GPU
// this launch's GPU has no peer access to (P2P off). The first error of a
// launch is printed and fails it (simt::launch returns it), as a race
// report fails a ThreadSanitizer run.

/// Why a scoped access of `address` by a kernel on emulated GPU `device`
/// with scope .sys (`sys`) or .gpu is wrong, or "". Runtime.cpp's rule.
using ScopeRule = std::string (*)(const void *address, uint64_t device, bool sys);
void setScopeRule(ScopeRule rule);
/// Checks the calling GPU thread's scoped access `op` of `address`.
void checkScopeOf(const void *address, bool sys, const char *op);
/// The .sys-scoped accesses of checked launches since the process started,
/// a spin loop's polls of one word counted once (tests: a connection within
/// one GPU must run none).
inline std::atomic<uint64_t> sysScopedAccesses{0};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

class Block;
struct ScopeErrors;

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
  /// Step costs: whether this launch counts, inside a spin's retries, the
  /// step so far, the number of steps before it.
  bool counting = false;
  bool retrying = false;
  uint32_t protocol = NoStep, kind = NoStep;
  uint32_t seq = 0;
  uint32_t counts[NumCosts] = {};
  /// Traffic: whether this launch counts, the block's rank, and the bytes
  /// of the step so far (attributed to `protocol` and `kind`).
  bool countingTraffic = false;
  int32_t rank = -1;
  TrafficCount traffic;
  TrafficCount prologue; ///< before the first step, whose protocol it waits for
  /// Scopes: the launch's emulated GPU (0: unchecked) and where its first
  /// scope error goes.
  uint64_t device = 0;
  ScopeErrors *scopeErrors = nullptr;
  const void *scopeChecked = nullptr; ///< the last access checked, and its scope
  bool scopeCheckedSys = false;
};

/// The calling GPU thread.
ThreadContext &self();

/// Each GPU thread checks an address and scope once in a row: a spin loop's
/// polls of one word are one check (memory does not change owners while a
/// launch runs).
inline void checkScope(const void *address, bool sys, const char *op) {
  ThreadContext &t = self();
  if (!t.device || (address == t.scopeChecked && sys == t.scopeCheckedSys))
    return;
  t.scopeChecked = address;
  t.scopeCheckedSys = sys;
  if (sys)
    sysScopedAccesses.fetch_add(1, std::memory_order_relaxed);
  checkScopeOf(address, sys, op);
}

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

/// The registers per thread a kernel's build uses (its launch bound), as the
/// kernel tables describe them; `fallback` for a kernel never described.
void describeKernelRegisters(const void *kernel, int registersPerThread);
int kernelRegisters(const void *kernel, int fallback);

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
/// finished: an empty string, or why it could not run (or the first scope
/// error of its accesses). `device`: the emulated GPU it runs on (Runtime.h),
/// 0 for none, whose accesses are not checked.
std::string launch(const std::function<void()> &kernel, Dim3 grid, Dim3 block,
                   size_t sharedBytes, bool coResident = true, uint64_t device = 0);

} // namespace coll::interp::cuda::simt

#endif // COLL_INTERPRETER_CUDA_EMU_SIMT_H
