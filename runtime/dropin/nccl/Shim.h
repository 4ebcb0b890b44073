//===- Shim.h - Inside libcoll_nccl.so --------------------------*- C++ -*-===//
//
// libcoll_nccl.so: the NCCL API of the nccl.h it is built against (2.28):
// every function that header declares, under both its nccl* and pnccl*
// names (COLL_NCCL_API). A collective runs on Coll when
//   - COLL_FORCE_FALLBACK does not name it,
//   - the datatype and op are ones Coll has (no fp8, no ncclRedOpCreate*),
//   - and the communicator's selection gives it an algorithm (on host
//     buffers, or on device buffers enqueued on the call's stream);
// everything else goes to the real NCCL, loaded with dlopen(RTLD_DEEPBIND)
// from COLL_NCCL_LIB (default libnccl.so.2), and COLL_DEBUG=INFO says so
// once per (collective, reason). A tuning rule whose target is `nccl` sends a
// size range to the real NCCL on purpose.
//
// What the files of the library share is here; each job is a file of its
// own, as NCCL's src/ has them:
//
//   RealNccl.cpp  the real NCCL: its dlopen, the table of its functions,
//                 the mark of a call inside it (realDepth), and what its
//                 results become (fromReal)
//   Init.cpp      communicators: unique ids, init (rank, config, scalable,
//                 all), finalize, destroy, abort, revoke, split, shrink,
//                 count, device, user rank, async error; results and the
//                 last error
//   Enqueue.cpp   collectives and send/recv: NCCL's checks, the choice
//                 between Coll and the real NCCL, issuing them; after a
//                 failed call, Coll retired on the communicator and the
//                 ranks' agreement; ncclRedOpCreatePreMulSum and
//                 ncclRedOpDestroy
//   PreMulSum.cpp ncclRedOpCreatePreMulSum's ops on Coll's side where no
//                 real NCCL is loaded: the inputs multiplied on the host
//   Group.cpp     ncclGroupStart, ncclGroupEnd, ncclGroupSimulateEnd
//   Memory.cpp    ncclMemAlloc and ncclMemFree, buffer registration,
//                 windows
//
//===----------------------------------------------------------------------===//

#ifndef COLL_DROPIN_NCCL_SHIM_H
#define COLL_DROPIN_NCCL_SHIM_H

#include "coll/runtime/Comm.h"
#include "coll/runtime/Device.h"
#include "coll/runtime/Op.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <dlfcn.h>

// ncclResetDebugInit is deprecated in nccl.h, yet declared: it is exported.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <nccl.h>

/// Every function the shim forwards to the real library.
#define COLL_NCCL_REAL_FUNCTIONS(X)                                                            \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommInitAll)            \
  X(ncclCommFinalize) X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommRevoke) X(ncclCommSplit)   \
  X(ncclCommShrink) X(ncclGetErrorString) X(ncclGetLastError) X(ncclResetDebugInit)            \
  X(ncclCommGetAsyncError) X(ncclCommCount) X(ncclCommUserRank) X(ncclCommCuDevice)            \
  X(ncclCommRegister) X(ncclCommDeregister) X(ncclCommWindowRegister)                          \
  X(ncclCommWindowDeregister) X(ncclMemAlloc) X(ncclMemFree) X(ncclRedOpCreatePreMulSum)       \
  X(ncclRedOpDestroy) X(ncclReduce) X(ncclBroadcast) X(ncclAllReduce) X(ncclReduceScatter)     \
  X(ncclAllGather) X(ncclAlltoAll) X(ncclGather) X(ncclScatter) X(ncclSend) X(ncclRecv)        \
  X(ncclGroupStart) X(ncclGroupEnd) X(ncclGroupSimulateEnd) X(ncclCommInitRank)                \
  X(ncclCommInitRankScalable) X(ncclBcast) COLL_NCCL_REAL_GROW(X)

/// NCCL 2.29's grow, where the nccl.h the shim is built against has it.
#if NCCL_VERSION_CODE >= 22900
#define COLL_NCCL_REAL_GROW(X) X(ncclCommGrow) X(ncclCommGetUniqueId)
#else
#define COLL_NCCL_REAL_GROW(X)
#endif

/// An op of ncclRedOpCreatePreMulSum made on Coll's side, where no real
/// NCCL is loaded (PreMulSum.cpp).
struct PreMulOp {
  ncclDataType_t datatype = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  unsigned char scalar[8] = {};       ///< host immediate: read at creation
  const void *deviceScalar = nullptr; ///< device: read at each call
};

/// What an ncclComm_t of this library is: Coll's communicator and the real
/// one beside it (either may be missing, with the reason).
struct ncclComm {
  collComm_t coll = nullptr;
  ncclComm_t real = nullptr;
  std::string noReal; ///< why `real` is null
  int rank = 0, nranks = 1, device = -1;
  std::mutex mutex;
  std::set<int> userOps; ///< ops from ncclRedOpCreatePreMulSum on `real`, or Coll's
  std::map<int, PreMulOp> preMuls; ///< Coll's (no real NCCL), by op
  int nextPreMul = ncclNumOps;

  /// After a failed call (Enqueue.cpp, retire): Coll serves no more calls
  /// of this communicator. Written by the calling thread under `mutex`.
  uint64_t calls = 0;       ///< the calls made on it, each its number
  std::string retired;      ///< the first failure; empty while Coll serves
  ncclResult_t retiredResult = ncclSuccess;
  uint64_t failedAt = 0;    ///< the number of the call that failed here
  bool agreed = false;      ///< the ranks' agreement on the last failed call
  uint64_t agreedUntil = 0; ///< calls up to this number fail, on every rank
  /// ncclCommGetAsyncError has said the error that broke Coll's side (as
  /// NCCL's WARN, once: the newest error's message from then on).
  bool asyncSaid = false;

  ::coll::rt::Communicator *impl() const { return ::coll::rt::communicatorOf(coll); }
};

namespace coll::rt::dropin::nccl {

//===----------------------------------------------------------------------===//
// The real NCCL (RealNccl.cpp)
//===----------------------------------------------------------------------===//

/// Inside a call of the real NCCL on this thread: the real library's own
/// calls of the NCCL API land in this shim when the program loaded the real
/// library itself before the shim loaded it (PyTorch links libnccl.so.2, so
/// RTLD_DEEPBIND finds it already bound), and every entry point then
/// passes such a call, with the real library's own arguments, straight back
/// to it (COLL_NCCL_API).
extern thread_local constinit int realDepth;

/// The real library's functions, each a wrapper that marks the calling
/// thread as inside the real library (realDepth) for the length of the
/// call; null where the library lacks one.
struct RealNccl {
  void *handle = nullptr;
  std::string path;
  std::string why; ///< why it is not loaded
#define COLL_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  COLL_NCCL_REAL_FUNCTIONS(COLL_NCCL_MEMBER)
#undef COLL_NCCL_MEMBER
};

/// The real NCCL, loaded on first use.
const RealNccl &real();

/// A result of the real NCCL: its message becomes the last error.
ncclResult_t fromReal(ncclComm_t comm, const char *function, ncclResult_t result);

/// Why `comm` has no real communicator: its own reason, else why the real
/// library is not loaded.
inline const std::string &whyNoReal(const ncclComm *comm) {
  return comm->noReal.empty() ? real().why : comm->noReal;
}

/// Fails unless the real library has `fn`.
#define COLL_NEED_REAL(comm, fn)                                                               \
  do {                                                                                         \
    if (!real().handle)                                                                        \
      return failWith(comm, ncclInvalidUsage, std::string(#fn ": needs the real NCCL: ") +     \
                                                  real().why);                                 \
    if (!real().fn)                                                                            \
      return failWith(comm, ncclInvalidUsage,                                                  \
                      std::string(#fn ": the real NCCL at ") + real().path + " lacks it");     \
  } while (0)

//===----------------------------------------------------------------------===//
// The CUDA runtime the program has loaded, if any
//===----------------------------------------------------------------------===//

/// Functions of the CUDA runtime, looked up only in one the process has
/// already loaded (the shim never loads it: a program that never touched
/// CUDA has no device and no device buffers).
template <typename Fn> Fn cudart(const char *name) {
  for (const char *lib : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"})
    if (void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD)) {
      void *f = dlsym(h, name);
      dlclose(h);
      if (f)
        return reinterpret_cast<Fn>(f);
    }
  return nullptr;
}

/// The calling thread's CUDA device, or -1 with `why` (Device.h: the
/// runtime's or the driver's, looked up once per change of the loader).
inline int currentDevice(std::string &why) { return coll::rt::currentCudaDevice(why); }

//===----------------------------------------------------------------------===//
// Results and errors (Init.cpp)
//===----------------------------------------------------------------------===//

ncclResult_t toNccl(collResult_t r);

/// This thread's last error, which ncclGetLastError(NULL) gives.
extern thread_local std::string threadError;

/// Records `message` as the newest error of the process (ncclGetLastError's,
/// whatever communicator it is given) and of this thread, logs it as a WARN
/// of `comm`'s rank, and returns `result`.
ncclResult_t failWith(ncclComm_t comm, ncclResult_t result, const std::string &message);

//===----------------------------------------------------------------------===//
// Communicators (Init.cpp)
//===----------------------------------------------------------------------===//

/// Makes this rank's communicator: joins Coll's bootstrap, makes the real
/// communicator beside Coll's when every rank can, then Coll's.
/// `realConfig` may be null; `device` is the rank's CUDA device, or -1
/// with the reason in `noDevice`.
ncclResult_t initRank(ncclComm_t *out, int nranks, const ncclUniqueId &commId, int rank,
                      ncclConfig_t *realConfig, int device, const std::string &noDevice);

//===----------------------------------------------------------------------===//
// Calls (Enqueue.cpp)
//===----------------------------------------------------------------------===//

/// COLL_FORCE_FALLBACK: collectives (NCCL's names without the prefix, any
/// case: allreduce, allgather, reducescatter, alltoall, broadcast, reduce,
/// gather, scatter, send, recv) or `all`, that go to the real NCCL.
struct ForcedFallback {
  std::string text;
  std::set<std::string> names;
  bool all = false;
  bool any() const { return all || !names.empty(); }
  bool has(llvm::StringRef name) const { return all || names.count(name.lower()); }
};

const ForcedFallback &forced();

/// One collective or point-to-point call as the program made it.
struct Call {
  const char *function;   ///< "ncclAllReduce"
  const char *collective; ///< COLL_FORCE_FALLBACK's name
  Op op;                  ///< kind, buffers, count, root/peer (makeOp)
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t redop = ncclSum;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  bool onColl = false; ///< decided by route()
  uint64_t number = 0; ///< its number on the communicator (ncclComm::calls)
  std::optional<PreMulOp> preMul = std::nullopt; ///< its op, where Coll's (route())
};

/// Makes an op of ncclRedOpCreatePreMulSum on Coll's side, where `comm` has
/// no real communicator (PreMulSum.cpp).
ncclResult_t createPreMulOnColl(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                ncclScalarResidence_t residence, ncclComm_t comm);

/// The inputs of calls whose op is a PreMulOp, multiplied by its scalar
/// into copies the calls then sum, on the host (PreMulSum.cpp): on device
/// buffers through host memory, the result copied back after the call.
class PreMulStaging {
public:
  /// Makes `op` (c's Op, to run on Coll) sum c's scaled inputs.
  ncclResult_t stageIn(const Call &c, Op &op);
  /// The results of device calls to their buffers, after the calls ran.
  ncclResult_t stageOut();

private:
  struct Staged {
    std::vector<std::byte> in, out;
    void *deviceOut = nullptr;
    cudaStream_t stream = nullptr;
    ncclComm_t comm = nullptr;
  };
  std::vector<std::unique_ptr<Staged>> staged;
};

/// Issues a call to the real NCCL (inside a real group when one is open).
ncclResult_t issueReal(const Call &c);

/// Issues a group's calls: the real NCCL's share in one real group, then
/// Coll's.
ncclResult_t issue(std::vector<Call> calls);

/// Whether `comm` still waits for its ranks' agreement after a failed call
/// (retired, and not yet agreed), or has a peer on this host whose call
/// failed where this rank's did not: then it must take part in the
/// agreement before it leaves the communicator (finalize, destroy).
bool owesAgreement(ncclComm_t comm);

/// The ranks' agreement after a failed call on Coll, for each of `comms`
/// that owes it: every rank's number of its failed call, the largest over
/// the real communicator (several communicators in one real group). Calls
/// up to that number then fail on every rank, later ones go to the real
/// NCCL.
ncclResult_t agree(llvm::ArrayRef<ncclComm_t> comms, const char *function);

//===----------------------------------------------------------------------===//
// Groups (Group.cpp)
//===----------------------------------------------------------------------===//

/// An ncclCommInitRank* inside a group, made at its ncclGroupEnd.
struct PendingInit {
  ncclComm_t *out;
  int nranks;
  ncclUniqueId id;
  int rank;
  bool hasConfig;
  ncclConfig_t config;
  int device;
  std::string noDevice;
};

struct Group {
  int depth = 0;
  ncclResult_t error = ncclSuccess; ///< the first error of a call in the group
  std::vector<Call> calls;
  std::vector<PendingInit> inits;
};

/// This thread's group: what its ncclGroupEnd makes and issues.
extern thread_local Group group;

} // namespace coll::rt::dropin::nccl

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

/// Exports `func` of nccl.h (its definition follows, with `params`) and
/// p`func`, an alias of it, as NCCL's own NCCL_API declares each function
/// once.
#define COLL_NCCL_EXPORT(ret, func, params)                                                    \
  extern "C" ret p##func params __attribute__((alias(#func)));                                \
  extern "C" ret func params

/// COLL_NCCL_API(ret, func, (params), (args)) { body }: an entry point
/// (COLL_NCCL_EXPORT) that passes a call made from inside the real NCCL
/// (realDepth) straight back to it, with the real library's own arguments,
/// and runs `body` for any other call. `args` names `params` in order.
#define COLL_NCCL_API(ret, func, params, args)                                                 \
  static ret func##OnShim params;                                                              \
  COLL_NCCL_EXPORT(ret, func, params) {                                                        \
    if (::coll::rt::dropin::nccl::realDepth > 0 && ::coll::rt::dropin::nccl::real().func)      \
      return ::coll::rt::dropin::nccl::real().func args;                                       \
    return func##OnShim args;                                                                  \
  }                                                                                            \
  static ret func##OnShim params

#endif // COLL_DROPIN_NCCL_SHIM_H
