//===- NcclShim.cpp - libcoll_nccl.so: Coll under unmodified NCCL programs ===//
//
// The NCCL API of the nccl.h it is built against (2.28): every function that
// header declares, under both its nccl* and pnccl* names. A collective runs
// on Coll when
//   - COLL_FORCE_FALLBACK does not name it,
//   - the datatype and op are ones Coll has (no fp8, no ncclRedOpCreate*),
//   - and the communicator's selection gives it an algorithm (on host
//     buffers, or on device buffers enqueued on the call's stream);
// everything else goes to the real NCCL, loaded with dlopen(RTLD_DEEPBIND)
// from COLL_NCCL_LIB (default libnccl.so.2), and COLL_DEBUG=INFO says so
// once per (collective, reason). A tuning rule whose target is `nccl` sends a
// size range to the real NCCL on purpose.
//
// Communicators. ncclGetUniqueId makes Coll's id (the root's bootstrap
// address and a nonce). ncclCommInitRank joins Coll's bootstrap, exchanges
// over it every rank's CUDA device and rank 0's real ncclUniqueId, and then
// creates the real communicator eagerly, beside Coll's, when every rank has
// a CUDA device and no two share one; otherwise the communicator is
// Coll-only and says why, and a call that would need the real NCCL fails
// with that reason. With COLL_FORCE_FALLBACK set the real NCCL is needed,
// so init fails instead (docs/DROPIN.md).
//
// Windows. ncclMemAlloc gives Coll's GPU memory (collMemAllocDevice) and
// ncclCommWindowRegister registers windows with Coll, so that the calls
// Coll runs on them read and write the peers' buffers in place; what Coll
// cannot allocate or register goes to the real NCCL, and INFO says why.
//
// Groups keep NCCL's semantics: calls between ncclGroupStart and the
// outermost ncclGroupEnd are checked at once (an invalid one returns its
// error, and the group's ncclGroupEnd returns it too and runs nothing), and
// issued at ncclGroupEnd: the real NCCL's share inside one real group, then
// Coll's share, which returns complete.
//
//===----------------------------------------------------------------------===//

#include "coll/runtime/Bootstrap.h"
#include "coll/runtime/Comm.h"
#include "coll/runtime/Debug.h"
#include "coll/runtime/Device.h"
#include "coll/runtime/Op.h"
#include "coll/dropin/DropIn.h"

#include "coll/interpreter/DataType.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>

// ncclResetDebugInit is deprecated in nccl.h, yet declared: it is exported.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <nccl.h>

using namespace coll;
using namespace coll::rt;

//===----------------------------------------------------------------------===//
// The real NCCL
//===----------------------------------------------------------------------===//

/// Every function the shim forwards to the real library.
#define COLL_NCCL_REAL_FUNCTIONS(X)                                                            \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommInitAll)            \
  X(ncclCommFinalize) X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommRevoke) X(ncclCommSplit)   \
  X(ncclCommShrink) X(ncclGetErrorString) X(ncclGetLastError) X(ncclResetDebugInit)            \
  X(ncclCommGetAsyncError) X(ncclCommCount) X(ncclCommUserRank) X(ncclCommCuDevice) X(ncclCommRegister) X(ncclCommDeregister)       \
  X(ncclCommWindowRegister) X(ncclCommWindowDeregister) X(ncclMemAlloc) X(ncclMemFree)         \
  X(ncclRedOpCreatePreMulSum) X(ncclRedOpDestroy) X(ncclReduce) X(ncclBroadcast)               \
  X(ncclAllReduce) X(ncclReduceScatter) X(ncclAllGather) X(ncclAlltoAll) X(ncclGather)         \
  X(ncclScatter) X(ncclSend) X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd)                     \
  X(ncclGroupSimulateEnd) X(ncclCommInitRank) X(ncclCommInitRankScalable) X(ncclBcast)

namespace {

/// The real library's functions as dlsym gives them; RealNccl holds
/// wrappers of them that mark the calling thread as inside the real
/// library (realDepth) for the length of the call.
#define COLL_NCCL_RAW(name) decltype(&::name) raw_##name = nullptr;
COLL_NCCL_REAL_FUNCTIONS(COLL_NCCL_RAW)
#undef COLL_NCCL_RAW

/// Inside a call of the real NCCL on this thread: the real library's own
/// calls of the NCCL API land in this shim when the program loaded the real
/// library itself before the shim loaded it (PyTorch links libnccl.so.2, so
/// RTLD_DEEPBIND finds it already bound), and every entry point then
/// passes such a call, with the real library's own arguments, straight back
/// to it.
thread_local int realDepth = 0;

template <class F> struct Guarded;
template <class R, class... A> struct Guarded<R (*)(A...)> {
  template <R (**Raw)(A...)> static R call(A... args) {
    ++realDepth;
    struct Leave {
      ~Leave() { --realDepth; }
    } leave;
    return (*Raw)(args...);
  }
};

struct RealNccl {
  void *handle = nullptr;
  std::string path;
  std::string why; ///< why it is not loaded
#define COLL_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  COLL_NCCL_REAL_FUNCTIONS(COLL_NCCL_MEMBER)
#undef COLL_NCCL_MEMBER
};

/// The real NCCL, loaded on first use.
const RealNccl &real() {
  static RealNccl lib;
  static std::once_flag once;
  std::call_once(once, [] {
    const char *env = std::getenv("COLL_NCCL_LIB");
    lib.path = env && *env ? env : "libnccl.so.2";
    // RTLD_DEEPBIND: the real library's own calls to nccl* bind inside it,
    // never to this shim.
    lib.handle = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!lib.handle) {
      const char *err = dlerror();
      lib.why = "cannot load the real NCCL (COLL_NCCL_LIB=" + lib.path + "): " +
                (err ? err : "dlopen failed");
      return;
    }
    if (dlsym(lib.handle, "ncclGetVersion") == reinterpret_cast<void *>(&::ncclGetVersion)) {
      lib.why = "COLL_NCCL_LIB=" + lib.path + " is libcoll_nccl.so itself, not the real NCCL";
      dlclose(lib.handle);
      lib.handle = nullptr;
      return;
    }
#define COLL_NCCL_LOAD(name)                                                                   \
  raw_##name = reinterpret_cast<decltype(&::name)>(dlsym(lib.handle, #name));                  \
  if (raw_##name)                                                                              \
    lib.name = &Guarded<decltype(&::name)>::call<&raw_##name>;
    COLL_NCCL_REAL_FUNCTIONS(COLL_NCCL_LOAD)
#undef COLL_NCCL_LOAD
    COLL_LOG(Info, Init, -1, "the real NCCL underneath: " + lib.path);
  });
  return lib;
}

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
int currentDevice(std::string &why) { return coll::rt::currentCudaDevice(why); }

/// Waits for the work queued on `stream` before Coll touches host buffers
/// in its order (a copy to pinned host memory, say). Per call: cached entry
/// points, where a dlopen(RTLD_NOLOAD) of the runtime cost 16 us a call in
/// a program without CUDA.
void syncStream(cudaStream_t stream) { coll::rt::synchronizeCudaStream(stream); }

//===----------------------------------------------------------------------===//
// Results, errors, settings
//===----------------------------------------------------------------------===//

ncclResult_t toNccl(collResult_t r) {
  switch (r) {
  case collSuccess: return ncclSuccess;
  case collUnhandledCudaError: return ncclUnhandledCudaError;
  case collSystemError: return ncclSystemError;
  case collInternalError: return ncclInternalError;
  case collInvalidArgument: return ncclInvalidArgument;
  case collInvalidUsage: return ncclInvalidUsage;
  case collInProgress: return ncclInProgress;
  case collRemoteError:
  case collTimeout: return ncclRemoteError; // a peer stopped making progress
  default: return ncclInternalError;
  }
}

thread_local std::string threadError;

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

const ForcedFallback &forced() {
  static const ForcedFallback f = [] {
    ForcedFallback f;
    const char *env = std::getenv("COLL_FORCE_FALLBACK");
    if (!env)
      return f;
    f.text = env;
    static const std::set<std::string> known = {"allreduce", "allgather", "reducescatter",
                                                "alltoall",  "broadcast", "reduce",
                                                "gather",    "scatter",   "send",
                                                "recv"};
    llvm::SmallVector<llvm::StringRef, 8> parts;
    llvm::StringRef(env).split(parts, ',', -1, false);
    for (llvm::StringRef p : parts) {
      std::string name = p.trim().lower();
      if (name == "all")
        f.all = true;
      else if (name == "bcast")
        f.names.insert("broadcast");
      else if (known.count(name))
        f.names.insert(name);
      else if (!name.empty())
        log(Level::Warn, Env, -1,
            "COLL_FORCE_FALLBACK: '" + name +
                "' is not a collective (allreduce, allgather, reducescatter, alltoall, "
                "broadcast, reduce, gather, scatter, send, recv, all); ignored");
    }
    return f;
  }();
  return f;
}

} // namespace

//===----------------------------------------------------------------------===//
// Communicators
//===----------------------------------------------------------------------===//

/// What an ncclComm_t of this library is: Coll's communicator and the real
/// one beside it (either may be missing, with the reason).
struct ncclComm {
  collComm_t coll = nullptr;
  ncclComm_t real = nullptr;
  std::string noReal; ///< why `real` is null
  int rank = 0, nranks = 1, device = -1;
  std::mutex mutex;
  std::string lastError;
  std::set<int> userOps; ///< ops from ncclRedOpCreatePreMulSum on `real`

  Communicator *impl() const { return communicatorOf(coll); }
};

namespace {

/// Records `message` as the last error of `comm` (and of this thread) and
/// returns `result`.
ncclResult_t failWith(ncclComm_t comm, ncclResult_t result, const std::string &message) {
  threadError = message;
  if (comm) {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->lastError = message;
  }
  COLL_LOG(Warn, Coll, comm ? comm->rank : -1,
           llvm::formatv("{0}: {1}", ncclGetErrorString(result), message));
  return result;
}

/// A result of the real NCCL: its message becomes the last error.
ncclResult_t fromReal(ncclComm_t comm, const char *function, ncclResult_t result) {
  if (result == ncclSuccess || result == ncclInProgress)
    return result;
  const RealNccl &r = real();
  std::string detail = r.ncclGetLastError && comm && comm->real
                           ? r.ncclGetLastError(comm->real)
                           : (r.ncclGetLastError ? r.ncclGetLastError(nullptr) : "");
  return failWith(comm, result,
                  llvm::formatv("{0}: the real NCCL failed ({1}){2}{3}", function,
                                r.ncclGetErrorString ? r.ncclGetErrorString(result) : "",
                                detail.empty() ? "" : ": ", detail));
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

/// Each rank's part of the set-up exchange over Coll's bootstrap.
struct InitInfo {
  uint64_t hostHash = 0;
  int32_t device = -1;
  int32_t ready = 0; ///< can create a real communicator
  char busId[32] = {};
  char why[200] = {};
  ncclUniqueId realId{}; ///< rank 0's
};

struct InitResult {
  int32_t result = 0;
  char message[200] = {};
};

void copyText(char *out, size_t size, const std::string &text) {
  std::snprintf(out, size, "%s", text.c_str());
}

/// Why no real communicator can be made for these ranks ("" if one can).
std::string realObstacle(const std::vector<InitInfo> &infos) {
  for (size_t r = 0; r < infos.size(); ++r)
    if (!infos[r].ready)
      return llvm::formatv("rank {0}: {1}", r, infos[r].why).str();
  for (size_t a = 0; a < infos.size(); ++a)
    for (size_t b = a + 1; b < infos.size(); ++b)
      if (infos[a].hostHash == infos[b].hostHash &&
          std::strcmp(infos[a].busId, infos[b].busId) == 0)
        return llvm::formatv("ranks {0} and {1} share the GPU {2} (CUDA device {3}); the real "
                             "NCCL refuses duplicate GPUs in one communicator",
                             a, b, infos[a].busId, infos[a].device)
            .str();
  return "";
}

/// This rank's InitInfo; rank 0 also asks the real NCCL for its id.
InitInfo localInfo(int rank, int device, std::string why) {
  InitInfo info;
  info.hostHash = coll::rt::hostHash();
  info.device = device;
  const RealNccl &r = real();
  if (!r.handle)
    why = r.why;
  else if (!r.ncclCommInitRankConfig || !r.ncclGetUniqueId)
    why = "the real NCCL at " + r.path + " lacks ncclCommInitRankConfig or ncclGetUniqueId";
  if (why.empty() && device >= 0) {
    auto busId = cudart<int (*)(char *, int, int)>("cudaDeviceGetPCIBusId");
    if (!busId || busId(info.busId, sizeof info.busId, device) != 0)
      why = llvm::formatv("cannot get the PCI bus id of CUDA device {0}", device).str();
  }
  if (why.empty() && rank == 0) {
    ncclResult_t got = r.ncclGetUniqueId(&info.realId);
    if (got != ncclSuccess)
      why = std::string("the real ncclGetUniqueId failed: ") + r.ncclGetErrorString(got);
  }
  info.ready = why.empty();
  copyText(info.why, sizeof info.why, why);
  return info;
}

/// Creates the real communicator beside Coll's when every rank can; every
/// rank comes to the same outcome. `realConfig` may be null.
void makeReal(Bootstrap &boot, ncclComm_t comm, int device, const std::string &why,
              ncclConfig_t *realConfig) {
  const int rank = boot.rank(), nranks = boot.nranks();
  std::vector<InitInfo> infos(static_cast<size_t>(nranks));
  infos[rank] = localInfo(rank, device, why);
  if (llvm::Error err = boot.allgather(infos.data(), sizeof(InitInfo))) {
    comm->noReal = "the set-up exchange failed: " + llvm::toString(std::move(err));
    return;
  }
  comm->noReal = realObstacle(infos);
  if (!comm->noReal.empty())
    return;
  const RealNccl &r = real();
  std::vector<InitResult> results(static_cast<size_t>(nranks));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  if (realConfig)
    config = *realConfig;
  config.blocking = 1; // every rank must know the outcome here
  ncclResult_t made = r.ncclCommInitRankConfig(&comm->real, nranks, infos[0].realId, rank, &config);
  results[rank].result = made;
  if (made != ncclSuccess) {
    comm->real = nullptr;
    copyText(results[rank].message, sizeof results[rank].message,
             std::string(r.ncclGetErrorString(made)) + ": " + r.ncclGetLastError(nullptr));
  }
  if (llvm::Error err = boot.allgather(results.data(), sizeof(InitResult))) {
    consumeError(std::move(err));
    results[rank == 0 ? std::min(1, nranks - 1) : 0].result = ncclRemoteError;
  }
  for (int i = 0; i < nranks; ++i)
    if (results[i].result != ncclSuccess) {
      comm->noReal = llvm::formatv("rank {0}: the real ncclCommInitRank failed: {1}", i,
                                   results[i].message);
      if (comm->real && r.ncclCommAbort)
        r.ncclCommAbort(comm->real);
      comm->real = nullptr;
      return;
    }
}

/// The failure when the real NCCL is needed from the start and missing.
ncclResult_t realRequired(ncclComm_t comm) {
  const std::string message =
      llvm::formatv("rank {0}: COLL_FORCE_FALLBACK={1} sends calls to the real NCCL, but it "
                    "cannot make a communicator here: {2}",
                    comm->rank, forced().text, comm->noReal);
  return failWith(nullptr, ncclInvalidUsage, message);
}

void logNoReal(ncclComm_t comm) {
  if (comm->noReal.empty())
    COLL_LOG(Info, Init, comm->rank, "the real NCCL's communicator is made beside Coll's");
  else
    COLL_LOG(Info, Init, comm->rank,
             "no real NCCL communicator: " + comm->noReal +
                 "; calls Coll cannot serve will fail");
}

ncclResult_t initRank(ncclComm_t *out, int nranks, const ncclUniqueId &commId, int rank,
                      ncclConfig_t *realConfig, int device, const std::string &noDevice) {
  auto id = decodeUniqueId(commId.internal);
  if (!id)
    return failWith(nullptr, ncclInvalidArgument,
                    "ncclCommInitRank: " + llvm::toString(id.takeError()) +
                        " (use ncclGetUniqueId of libcoll_nccl.so)");
  auto config = resolveConfig(nullptr);
  if (!config) {
    std::string message;
    collResult_t r = takeResult(config.takeError(), message);
    return failWith(nullptr, toNccl(r), message);
  }
  config->underneath = {"nccl"};
  auto boot = connectBootstrap(*id, nranks, rank, selfPeerInfo(config->agreedHash()));
  if (!boot)
    return failWith(nullptr, ncclRemoteError,
                    llvm::formatv("rank {0}: bootstrap failed: {1}", rank,
                                  llvm::toString(boot.takeError())));
  auto comm = std::make_unique<ncclComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->device = device;
  makeReal(**boot, comm.get(), device, noDevice, realConfig);
  if (!comm->noReal.empty() && forced().any())
    return realRequired(comm.get());
  auto made = Communicator::create(std::move(*boot), *config, id->nonce);
  if (!made) {
    if (comm->real)
      real().ncclCommAbort(comm->real);
    std::string message;
    collResult_t r = takeResult(made.takeError(), message);
    return failWith(nullptr, toNccl(r), message);
  }
  comm->coll = wrapCommunicator(std::move(*made));
  if (device >= 0)
    comm->impl()->bindDevice(device); // the GPU NCCL would run this rank on
  logNoReal(comm.get());
  *out = comm.release();
  return ncclSuccess;
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

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
};

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
thread_local Group group;

bool needsOp(OpKind k) { return ir::collectiveInfo(collectiveOf(k)).reduces; }

const char *const TypeNames[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",     "ncclUint32",
                                 "ncclInt64",   "ncclUint64",  "ncclFloat16",   "ncclFloat32",
                                 "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};

/// NCCL's checks, made for every call wherever it then runs.
ncclResult_t validate(const Call &c) {
  const Op &op = c.op;
  if (!c.comm)
    return failWith(nullptr, ncclInvalidArgument, std::string(c.function) + ": comm is NULL");
  ncclComm_t comm = c.comm;
  if (c.datatype < 0 || c.datatype >= ncclNumTypes)
    return failWith(comm, ncclInvalidArgument,
                    llvm::formatv("{0}: datatype {1} is not an ncclDataType_t", c.function,
                                  int(c.datatype)));
  if (needsOp(op.kind) && (c.redop < 0 || c.redop >= ncclNumOps)) {
    bool made = false;
    {
      std::lock_guard<std::mutex> lock(comm->mutex);
      made = comm->userOps.count(c.redop) != 0;
    }
    if (!made)
      return failWith(comm, ncclInvalidArgument,
                      llvm::formatv("{0}: reduction op {1} is neither built in nor made by "
                                    "ncclRedOpCreatePreMulSum on this communicator",
                                    c.function, int(c.redop)));
  }
  const size_t es = c.datatype >= ncclFloat8e4m3 ? 1 : interp::dataTypeSize(*dataTypeOf(
                                                           static_cast<collDataType_t>(c.datatype)));
  if (llvm::Error err = validateOp(op, comm->rank, comm->nranks, es, c.function)) {
    std::string message;
    return failWith(comm, toNccl(takeResult(std::move(err), message)), message);
  }
  if (Communicator *impl = comm->impl())
    if (collResult_t broken = impl->asyncError(); broken != collSuccess)
      return failWith(comm, toNccl(broken),
                      llvm::formatv("{0}: the communicator is broken by an earlier error ({1}); "
                                    "abort or destroy it",
                                    c.function, collGetErrorString(broken)));
  return ncclSuccess;
}

/// Decides where a valid call runs, and says why at COLL_DEBUG=INFO.
void route(Call &c) {
  ncclComm_t comm = c.comm;
  auto fallback = [&](const std::string &why) {
    dropin::fallback(c.function, "NCCL", why, comm->rank);
    c.onColl = false;
  };
  if (forced().has(c.collective))
    return fallback("COLL_FORCE_FALLBACK=" + forced().text);
  Communicator *impl = comm->impl();
  if (!impl)
    return fallback("the communicator has no Coll side (it came from ncclCommShrink)");
  auto type = dataTypeOf(static_cast<collDataType_t>(c.datatype));
  if (!type)
    return fallback(std::string("datatype ") + TypeNames[c.datatype] + " is not one Coll has");
  c.op.type = *type;
  if (needsOp(c.op.kind)) {
    auto red = reduceOpOf(static_cast<collRedOp_t>(c.redop));
    if (!red)
      return fallback("a reduction op made by ncclRedOpCreatePreMulSum");
    c.op.op = *red;
  }
  c.onColl = dropin::collRuns(c.function, *impl, c.op, "NCCL", comm->rank);
  if (c.onColl && c.op.device >= 0)
    c.op.stream = c.stream; // enqueued there, as the real NCCL would
}

/// Issues a call to the real NCCL (inside a real group when one is open).
ncclResult_t issueReal(const Call &c) {
  ncclComm_t comm = c.comm;
  if (!comm->real)
    return failWith(comm, ncclInvalidUsage,
                    llvm::formatv("{0}: Coll cannot run this call and the real NCCL has no "
                                  "communicator here: {1}",
                                  c.function, comm->noReal.empty() ? real().why : comm->noReal));
  const RealNccl &r = real();
  const Op &o = c.op;
  ncclResult_t result = ncclInternalError;
  switch (o.kind) {
  case OpKind::AllReduce:
    result = r.ncclAllReduce(o.send, o.recv, o.count, c.datatype, c.redop, comm->real, c.stream);
    break;
  case OpKind::AllGather:
    result = r.ncclAllGather(o.send, o.recv, o.count, c.datatype, comm->real, c.stream);
    break;
  case OpKind::ReduceScatter:
    result = r.ncclReduceScatter(o.send, o.recv, o.count, c.datatype, c.redop, comm->real,
                                 c.stream);
    break;
  case OpKind::AllToAll:
    result = r.ncclAlltoAll(o.send, o.recv, o.count, c.datatype, comm->real, c.stream);
    break;
  case OpKind::Broadcast:
    result = r.ncclBroadcast(o.send, o.recv, o.count, c.datatype, o.root, comm->real, c.stream);
    break;
  case OpKind::Reduce:
    result = r.ncclReduce(o.send, o.recv, o.count, c.datatype, c.redop, o.root, comm->real,
                          c.stream);
    break;
  case OpKind::Gather:
    result = r.ncclGather(o.send, o.recv, o.count, c.datatype, o.root, comm->real, c.stream);
    break;
  case OpKind::Scatter:
    result = r.ncclScatter(o.send, o.recv, o.count, c.datatype, o.root, comm->real, c.stream);
    break;
  case OpKind::Send:
    result = r.ncclSend(o.send, o.count, c.datatype, o.root, comm->real, c.stream);
    break;
  case OpKind::Recv:
    result = r.ncclRecv(o.recv, o.count, c.datatype, o.root, comm->real, c.stream);
    break;
  }
  return fromReal(comm, c.function, result);
}

/// Runs Coll's share of a group (or one call): on host buffers complete on
/// return, on device buffers enqueued on the call's stream.
ncclResult_t runOnColl(const std::vector<Call> &calls) {
  std::vector<std::pair<Communicator *, Op>> ops;
  std::set<cudaStream_t> streams;
  for (const Call &c : calls) {
    ops.emplace_back(c.comm->impl(), c.op);
    if (c.op.device < 0)
      streams.insert(c.stream); // host buffers: the stream's earlier work first
  }
  if (ops.empty())
    return ncclSuccess;
  for (cudaStream_t s : streams)
    syncStream(s);
  if (llvm::Error err = Communicator::runQueued(ops)) {
    std::string message;
    bool agreed = false;
    collResult_t result = takeResult(std::move(err), message, collSystemError, &agreed);
    // Coll found, on every rank at once and before running anything, that
    // none of its programs can serve the call (an executor refused on its
    // devices): the real NCCL runs it, as it would have without Coll.
    if (agreed && calls.size() == 1 && calls[0].comm->real) {
      dropin::fallback(calls[0].function, "NCCL", message, calls[0].comm->rank);
      return issueReal(calls[0]);
    }
    return failWith(calls.size() == 1 ? calls[0].comm : nullptr, toNccl(result),
                    llvm::formatv("{0} on Coll failed ({1}): {2}", calls[0].function,
                                  collGetErrorString(result), message));
  }
  return ncclSuccess;
}

/// Issues a group's calls: the real NCCL's share in one real group, then
/// Coll's.
ncclResult_t issue(std::vector<Call> calls) {
  std::vector<Call> mine, theirs;
  for (Call &c : calls)
    (c.onColl ? mine : theirs).push_back(c);
  ncclResult_t status = ncclSuccess;
  if (!theirs.empty()) {
    const bool grouped = theirs.size() > 1 && real().ncclGroupStart && real().ncclGroupEnd;
    if (grouped)
      real().ncclGroupStart();
    for (const Call &c : theirs)
      if (ncclResult_t r = issueReal(c); r != ncclSuccess && status == ncclSuccess)
        status = r;
    if (grouped)
      if (ncclResult_t r = fromReal(nullptr, "ncclGroupEnd", real().ncclGroupEnd());
          r != ncclSuccess && status == ncclSuccess)
        status = r;
  }
  if (ncclResult_t r = runOnColl(mine); r != ncclSuccess && status == ncclSuccess)
    status = r;
  return status;
}

/// The entry of every collective and point-to-point call.
ncclResult_t call(Call c) {
  if (ncclResult_t r = validate(c); r != ncclSuccess) {
    if (group.depth > 0 && group.error == ncclSuccess)
      group.error = r;
    return r;
  }
  route(c);
  if (group.depth > 0) {
    group.calls.push_back(c);
    return ncclSuccess;
  }
  return issue({c});
}

/// Frees the shim's part of `comm` (the real one is the caller's).
void release(ncclComm_t comm, bool abort) {
  if (comm->coll)
    abort ? collCommAbort(comm->coll) : collCommDestroy(comm->coll);
  delete comm;
}

/// A buffer registration: the real NCCL's handle, when it has the comm.
struct Registration {
  ncclComm_t comm;
  void *realHandle;
  void *buff;
  size_t size;
};

/// An ncclWindow_t of this library: Coll's window, or the real NCCL's where
/// Coll refused the buffer.
struct ShimWindow {
  ncclComm_t comm;
  collWindow_t coll;
  ncclWindow_t real;
};

/// The blocks ncclMemAlloc took from Coll (collMemAllocDevice), which
/// ncclMemFree gives back to it; any other pointer is the real NCCL's.
std::mutex collMemoryMutex;
std::set<void *> collMemory;

} // namespace

//===----------------------------------------------------------------------===//
// The API (nccl.h), each function also under its pnccl name
//===----------------------------------------------------------------------===//

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  if (realDepth > 0 && real().ncclGetVersion)
    return real().ncclGetVersion(version);
  if (!version)
    return failWith(nullptr, ncclInvalidArgument, "ncclGetVersion: version is NULL");
  const RealNccl &r = real();
  if (r.ncclGetVersion)
    return fromReal(nullptr, "ncclGetVersion", r.ncclGetVersion(version));
  // No real library: the version of the NCCL API this library implements.
  COLL_LOG(Info, Init, -1,
           "ncclGetVersion: no real NCCL (" + r.why + "); reporting the API version of nccl.h");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  if (realDepth > 0 && real().ncclGetUniqueId)
    return real().ncclGetUniqueId(uniqueId);
  if (!uniqueId)
    return failWith(nullptr, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  static_assert(sizeof(ncclUniqueId) == sizeof(collUniqueId), "ids must have one size");
  collUniqueId id;
  if (collResult_t r = collGetUniqueId(&id); r != collSuccess)
    return failWith(nullptr, toNccl(r), std::string("ncclGetUniqueId: ") + collGetLastError(nullptr));
  std::memcpy(uniqueId->internal, id.internal, sizeof id.internal);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config) {
  if (realDepth > 0 && real().ncclCommInitRankConfig)
    return real().ncclCommInitRankConfig(comm, nranks, commId, rank, config);
  if (!comm)
    return failWith(nullptr, ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return failWith(nullptr, ncclInvalidArgument,
                    llvm::formatv("ncclCommInitRank: rank {0} of {1} ranks is invalid", rank,
                                  nranks));
  if (config && (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, blocking)))
    return failWith(nullptr, ncclInvalidArgument,
                    "ncclCommInitRankConfig: config was not set up with NCCL_CONFIG_INITIALIZER");
  std::string noDevice;
  const int device = currentDevice(noDevice);
  if (group.depth > 0) {
    group.inits.push_back({comm, nranks, commId, rank, config != nullptr,
                           config ? *config : ncclConfig_t{}, device, noDevice});
    return ncclSuccess;
  }
  return initRank(comm, nranks, commId, rank, config, device, noDevice);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  if (realDepth > 0 && real().ncclCommInitRank)
    return real().ncclCommInitRank(comm, nranks, commId, rank);
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config) {
  if (realDepth > 0 && real().ncclCommInitRankScalable)
    return real().ncclCommInitRankScalable(newcomm, nranks, myrank, nId, commIds, config);
  if (nId < 1 || !commIds)
    return failWith(nullptr, ncclInvalidArgument,
                    "ncclCommInitRankScalable: needs at least one unique id");
  // Coll's bootstrap needs one root: the first id's.
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  if (realDepth > 0 && real().ncclCommInitAll)
    return real().ncclCommInitAll(comms, ndev, devlist);
  if (!comms || ndev < 1)
    return failWith(nullptr, ncclInvalidArgument, "ncclCommInitAll: comms is NULL or ndev < 1");
  std::vector<collComm_t> colls(static_cast<size_t>(ndev));
  if (collResult_t r = collCommInitAll(colls.data(), ndev, nullptr); r != collSuccess)
    return failWith(nullptr, toNccl(r),
                    std::string("ncclCommInitAll: ") + collGetLastError(nullptr));
  // The real communicators, when the real library can make them.
  std::vector<int> devices(static_cast<size_t>(ndev));
  for (int i = 0; i < ndev; ++i)
    devices[i] = devlist ? devlist[i] : i;
  std::string noReal;
  std::string noDevice;
  const RealNccl &r = real();
  if (!r.handle)
    noReal = r.why;
  else if (!r.ncclCommInitAll)
    noReal = "the real NCCL at " + r.path + " lacks ncclCommInitAll";
  else if (currentDevice(noDevice) < 0)
    noReal = noDevice;
  for (int a = 0; a < ndev && noReal.empty(); ++a)
    for (int b = a + 1; b < ndev && noReal.empty(); ++b)
      if (devices[a] == devices[b])
        noReal = llvm::formatv("ranks {0} and {1} share CUDA device {2}; the real NCCL refuses "
                               "duplicate GPUs in one communicator",
                               a, b, devices[a]);
  std::vector<ncclComm_t> reals(static_cast<size_t>(ndev), nullptr);
  if (noReal.empty())
    if (ncclResult_t made = r.ncclCommInitAll(reals.data(), ndev, devlist); made != ncclSuccess) {
      noReal = std::string("the real ncclCommInitAll failed: ") + r.ncclGetErrorString(made);
      reals.assign(reals.size(), nullptr);
    }
  if (!noReal.empty() && forced().any()) {
    for (collComm_t c : colls)
      collCommDestroy(c);
    return failWith(nullptr, ncclInvalidUsage,
                    "ncclCommInitAll: COLL_FORCE_FALLBACK=" + forced().text +
                        " sends calls to the real NCCL, but it cannot make communicators here: " +
                        noReal);
  }
  for (int i = 0; i < ndev; ++i) {
    auto *c = new ncclComm;
    c->coll = colls[i];
    c->real = reals[i];
    c->noReal = noReal;
    c->rank = i;
    c->nranks = ndev;
    c->device = devices[i];
    if (Communicator *impl = c->impl())
      impl->bindDevice(devices[i]);
    comms[i] = c;
  }
  logNoReal(comms[0]);
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (realDepth > 0 && real().ncclCommFinalize)
    return real().ncclCommFinalize(comm);
  if (!comm)
    return failWith(nullptr, ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
  if (comm->coll)
    if (collResult_t r = collCommFinalize(comm->coll); r != collSuccess)
      return failWith(comm, toNccl(r),
                      std::string("ncclCommFinalize: ") + collGetLastError(comm->coll));
  if (comm->real && real().ncclCommFinalize)
    return fromReal(comm, "ncclCommFinalize", real().ncclCommFinalize(comm->real));
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (realDepth > 0 && real().ncclCommDestroy)
    return real().ncclCommDestroy(comm);
  if (!comm)
    return failWith(nullptr, ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
  ncclResult_t result = ncclSuccess;
  if (comm->real && real().ncclCommDestroy)
    result = fromReal(nullptr, "ncclCommDestroy", real().ncclCommDestroy(comm->real));
  release(comm, false);
  return result;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (realDepth > 0 && real().ncclCommAbort)
    return real().ncclCommAbort(comm);
  if (!comm)
    return failWith(nullptr, ncclInvalidArgument, "ncclCommAbort: comm is NULL");
  ncclResult_t result = ncclSuccess;
  if (comm->real && real().ncclCommAbort)
    result = fromReal(nullptr, "ncclCommAbort", real().ncclCommAbort(comm->real));
  release(comm, true);
  return result;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  if (realDepth > 0 && real().ncclCommRevoke)
    return real().ncclCommRevoke(comm, revokeFlags);
  if (!comm)
    return failWith(nullptr, ncclInvalidArgument, "ncclCommRevoke: comm is NULL");
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return failWith(comm, ncclInvalidArgument, "ncclCommRevoke: revokeFlags must be 0");
  // Coll's side stops its calls in flight; the communicator then reports the
  // error and can only be destroyed or aborted, as a revoked one.
  if (Communicator *impl = comm->impl())
    impl->abort();
  if (comm->real) {
    COLL_NEED_REAL(comm, ncclCommRevoke);
    return fromReal(comm, "ncclCommRevoke", real().ncclCommRevoke(comm->real, revokeFlags));
  }
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config) {
  if (realDepth > 0 && real().ncclCommSplit)
    return real().ncclCommSplit(comm, color, key, newcomm, config);
  if (!comm || !newcomm)
    return failWith(comm, ncclInvalidArgument, "ncclCommSplit: comm or newcomm is NULL");
  *newcomm = nullptr;
  if (!comm->coll)
    return failWith(comm, ncclInvalidUsage,
                    "ncclCommSplit: the communicator has no Coll side (it came from "
                    "ncclCommShrink)");
  collComm_t child = nullptr;
  if (collResult_t r = collCommSplit(comm->coll, color, key, &child, nullptr); r != collSuccess)
    return failWith(comm, toNccl(r), std::string("ncclCommSplit: ") + collGetLastError(comm->coll));
  ncclComm_t realChild = nullptr;
  std::string noReal = comm->noReal;
  if (comm->real) {
    if (!real().ncclCommSplit) {
      noReal = "the real NCCL lacks ncclCommSplit";
    } else if (ncclResult_t r =
                   real().ncclCommSplit(comm->real, color, key, &realChild, config);
               r != ncclSuccess) {
      if (child)
        collCommDestroy(child);
      return fromReal(comm, "ncclCommSplit", r);
    }
  }
  if (!child)
    return ncclSuccess; // NCCL_SPLIT_NOCOLOR
  auto *c = new ncclComm;
  c->coll = child;
  c->real = realChild;
  c->noReal = noReal;
  c->device = comm->device;
  collCommUserRank(child, &c->rank);
  collCommCount(child, &c->nranks);
  *newcomm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags) {
  if (realDepth > 0 && real().ncclCommShrink)
    return real().ncclCommShrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  if (!comm || !newcomm || (excludeRanksCount > 0 && !excludeRanksList))
    return failWith(comm, ncclInvalidArgument, "ncclCommShrink: NULL argument");
  *newcomm = nullptr;
  // Coll's communicators are remade only with every rank (split); the
  // excluded ranks do not call this, so the new communicator is the real
  // NCCL's alone.
  if (!comm->real)
    return failWith(comm, ncclInvalidUsage,
                    "ncclCommShrink: Coll cannot shrink a communicator without its excluded "
                    "ranks, and the real NCCL has none here: " +
                        (comm->noReal.empty() ? real().why : comm->noReal));
  COLL_NEED_REAL(comm, ncclCommShrink);
  ncclComm_t realChild = nullptr;
  if (ncclResult_t r = real().ncclCommShrink(comm->real, excludeRanksList, excludeRanksCount,
                                             &realChild, config, shrinkFlags);
      r != ncclSuccess)
    return fromReal(comm, "ncclCommShrink", r);
  auto *c = new ncclComm;
  c->real = realChild;
  c->device = comm->device;
  c->rank = -1;
  int count = 0, rank = 0;
  // Rank and size from the real communicator; excluded ranks get NULL.
  const RealNccl &r = real();
  if (realChild && r.ncclCommUserRank && r.ncclCommCount &&
      r.ncclCommUserRank(realChild, &rank) == ncclSuccess &&
      r.ncclCommCount(realChild, &count) == ncclSuccess) {
    c->rank = rank;
    c->nranks = count;
  }
  *newcomm = c;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t comm) {
  if (comm) {
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (!comm->lastError.empty())
      return comm->lastError.c_str();
    if (comm->real && real().ncclGetLastError)
      return real().ncclGetLastError(comm->real);
    return "";
  }
  if (!threadError.empty())
    return threadError.c_str();
  return real().ncclGetLastError ? real().ncclGetLastError(nullptr) : "";
}

void ncclResetDebugInit() {
  if (realDepth > 0 && real().ncclResetDebugInit)
    return real().ncclResetDebugInit();
  if (real().ncclResetDebugInit)
    real().ncclResetDebugInit();
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  if (realDepth > 0 && real().ncclCommGetAsyncError)
    return real().ncclCommGetAsyncError(comm, asyncError);
  if (!comm || !asyncError)
    return failWith(comm, ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
  *asyncError = ncclSuccess;
  if (Communicator *impl = comm->impl())
    *asyncError = toNccl(impl->checkAsyncError()); // kernels of Coll stopped by the watchdog too
  if (*asyncError == ncclSuccess && comm->real) {
    COLL_NEED_REAL(comm, ncclCommGetAsyncError);
    return fromReal(comm, "ncclCommGetAsyncError",
                    real().ncclCommGetAsyncError(comm->real, asyncError));
  }
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  if (realDepth > 0 && real().ncclCommCount)
    return real().ncclCommCount(comm, count);
  if (!comm || !count)
    return failWith(comm, ncclInvalidArgument, "ncclCommCount: NULL argument");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
  if (realDepth > 0 && real().ncclCommCuDevice)
    return real().ncclCommCuDevice(comm, device);
  if (!comm || !device)
    return failWith(comm, ncclInvalidArgument, "ncclCommCuDevice: NULL argument");
  if (comm->real) {
    COLL_NEED_REAL(comm, ncclCommCuDevice);
    return fromReal(comm, "ncclCommCuDevice", real().ncclCommCuDevice(comm->real, device));
  }
  if (comm->device < 0)
    return failWith(comm, ncclInvalidUsage,
                    "ncclCommCuDevice: this rank has no CUDA device (it runs on host memory)");
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  if (realDepth > 0 && real().ncclCommUserRank)
    return real().ncclCommUserRank(comm, rank);
  if (!comm || !rank)
    return failWith(comm, ncclInvalidArgument, "ncclCommUserRank: NULL argument");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
  if (realDepth > 0 && real().ncclCommRegister)
    return real().ncclCommRegister(comm, buff, size, handle);
  if (!comm || !buff || !handle)
    return failWith(comm, ncclInvalidArgument, "ncclCommRegister: NULL argument");
  // Coll needs no registration; the real NCCL gets it when it has the comm.
  auto reg = std::make_unique<Registration>(Registration{comm, nullptr, buff, size});
  if (comm->real) {
    COLL_NEED_REAL(comm, ncclCommRegister);
    if (ncclResult_t r = real().ncclCommRegister(comm->real, buff, size, &reg->realHandle);
        r != ncclSuccess)
      return fromReal(comm, "ncclCommRegister", r);
  }
  *handle = reg.release();
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) {
  if (realDepth > 0 && real().ncclCommDeregister)
    return real().ncclCommDeregister(comm, handle);
  if (!comm || !handle)
    return failWith(comm, ncclInvalidArgument, "ncclCommDeregister: NULL argument");
  auto *reg = static_cast<Registration *>(handle);
  if (reg->comm != comm)
    return failWith(comm, ncclInvalidArgument,
                    "ncclCommDeregister: the handle was registered on another communicator");
  ncclResult_t result = ncclSuccess;
  if (reg->realHandle && comm->real && real().ncclCommDeregister)
    result = fromReal(comm, "ncclCommDeregister",
                      real().ncclCommDeregister(comm->real, reg->realHandle));
  delete reg;
  return result;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags) {
  if (realDepth > 0 && real().ncclCommWindowRegister)
    return real().ncclCommWindowRegister(comm, buff, size, win, winFlags);
  if (!comm || !win)
    return failWith(comm, ncclInvalidArgument, "ncclCommWindowRegister: NULL argument");
  *win = nullptr;
  // Coll's window first (collective, as NCCL's: every rank registers, and
  // every rank learns when one could not); where Coll refuses it (memory
  // Coll did not allocate, say), on every rank, the real NCCL's.
  std::string collWhy;
  if (comm->coll) {
    collWindow_t w = nullptr;
    const collResult_t r =
        collCommWindowRegister(comm->coll, buff, size, &w, winFlags & NCCL_WIN_COLL_SYMMETRIC);
    if (r == collSuccess) {
      *win = reinterpret_cast<ncclWindow_t>(new ShimWindow{comm, w, nullptr});
      return ncclSuccess;
    }
    collWhy = collGetLastError(comm->coll);
    const char *noReal = !comm->real                         ? "has no communicator here"
                         : !real().ncclCommWindowRegister ? "lacks ncclCommWindowRegister"
                                                            : nullptr;
    if (noReal)
      return failWith(comm, toNccl(r),
                      "ncclCommWindowRegister: Coll refused the window (" + collWhy +
                          ") and the real NCCL " + noReal);
  }
  if (!comm->real)
    return failWith(comm, ncclInvalidUsage,
                    "ncclCommWindowRegister: the communicator has neither a Coll side nor the "
                    "real NCCL's: " +
                        (comm->noReal.empty() ? real().why : comm->noReal));
  COLL_NEED_REAL(comm, ncclCommWindowRegister);
  ncclWindow_t realWin = nullptr;
  if (ncclResult_t r = fromReal(comm, "ncclCommWindowRegister",
                                real().ncclCommWindowRegister(comm->real, buff, size, &realWin,
                                                              winFlags));
      r != ncclSuccess)
    return r;
  if (!collWhy.empty())
    COLL_LOG(Info, Init, comm->rank,
             "ncclCommWindowRegister: a window of the real NCCL's only (calls on it that Coll "
             "runs copy their buffers): Coll's refused it: " +
                 collWhy);
  *win = reinterpret_cast<ncclWindow_t>(new ShimWindow{comm, nullptr, realWin});
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  if (realDepth > 0 && real().ncclCommWindowDeregister)
    return real().ncclCommWindowDeregister(comm, win);
  if (!comm || !win)
    return failWith(comm, ncclInvalidArgument, "ncclCommWindowDeregister: NULL argument");
  auto *w = reinterpret_cast<ShimWindow *>(win);
  if (w->comm != comm)
    return failWith(comm, ncclInvalidArgument,
                    "ncclCommWindowDeregister: the window was registered on another communicator");
  if (w->coll) {
    if (collResult_t r = collCommWindowDeregister(comm->coll, w->coll); r != collSuccess)
      return failWith(comm, toNccl(r),
                      std::string("ncclCommWindowDeregister on Coll failed: ") +
                          collGetLastError(comm->coll));
  } else {
    COLL_NEED_REAL(comm, ncclCommWindowDeregister);
    if (ncclResult_t r = fromReal(comm, "ncclCommWindowDeregister",
                                  real().ncclCommWindowDeregister(comm->real, w->real));
        r != ncclSuccess)
      return r;
  }
  delete w;
  return ncclSuccess;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  if (realDepth > 0 && real().ncclMemAlloc)
    return real().ncclMemAlloc(ptr, size);
  if (!ptr)
    return failWith(nullptr, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  // Coll's GPU memory on the current device, which Coll's windows hold;
  // the real NCCL's where Coll has none to give (no CUDA device or no GPU
  // backend in this process).
  std::string why;
  if (currentDevice(why) >= 0) {
    void *p = nullptr;
    if (collMemAllocDevice(&p, size, -1) == collSuccess) {
      std::lock_guard<std::mutex> lock(collMemoryMutex);
      collMemory.insert(p);
      *ptr = p;
      return ncclSuccess;
    }
    why = collGetLastError(nullptr);
  }
  if (!real().handle || !real().ncclMemAlloc)
    return failWith(nullptr, ncclInvalidUsage,
                    "ncclMemAlloc: Coll cannot allocate GPU memory here (" + why +
                        ") and the real NCCL " +
                        (real().handle ? "at " + real().path + " lacks ncclMemAlloc"
                                       : "is missing: " + real().why));
  COLL_LOG(Info, Init, -1,
           "ncclMemAlloc: the real NCCL's memory (Coll's windows cannot hold it): " + why);
  return fromReal(nullptr, "ncclMemAlloc", real().ncclMemAlloc(ptr, size));
}

ncclResult_t ncclMemFree(void *ptr) {
  if (realDepth > 0 && real().ncclMemFree)
    return real().ncclMemFree(ptr);
  if (!ptr)
    return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(collMemoryMutex);
    if (collMemory.count(ptr)) {
      if (collResult_t r = collMemFree(ptr); r != collSuccess)
        return failWith(nullptr, toNccl(r),
                        std::string("ncclMemFree: ") + collGetLastError(nullptr));
      collMemory.erase(ptr);
      return ncclSuccess;
    }
  }
  COLL_NEED_REAL(nullptr, ncclMemFree);
  return fromReal(nullptr, "ncclMemFree", real().ncclMemFree(ptr));
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  if (realDepth > 0 && real().ncclRedOpCreatePreMulSum)
    return real().ncclRedOpCreatePreMulSum(op, scalar, datatype, residence, comm);
  if (!comm || !op)
    return failWith(comm, ncclInvalidArgument, "ncclRedOpCreatePreMulSum: NULL argument");
  // Coll has no pre-multiplied sum: calls with such an op go to the real NCCL.
  if (!comm->real)
    return failWith(comm, ncclInvalidUsage,
                    "ncclRedOpCreatePreMulSum: Coll has no pre-multiplied sum and the real NCCL "
                    "has no communicator here: " +
                        (comm->noReal.empty() ? real().why : comm->noReal));
  COLL_NEED_REAL(comm, ncclRedOpCreatePreMulSum);
  ncclResult_t r = real().ncclRedOpCreatePreMulSum(op, scalar, datatype, residence, comm->real);
  if (r == ncclSuccess) {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->userOps.insert(*op);
  }
  return fromReal(comm, "ncclRedOpCreatePreMulSum", r);
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (realDepth > 0 && real().ncclRedOpDestroy)
    return real().ncclRedOpDestroy(op, comm);
  if (!comm)
    return failWith(nullptr, ncclInvalidArgument, "ncclRedOpDestroy: comm is NULL");
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (!comm->userOps.erase(op))
      return failWith(nullptr, ncclInvalidArgument,
                      llvm::formatv("ncclRedOpDestroy: op {0} was not made by "
                                    "ncclRedOpCreatePreMulSum on this communicator",
                                    int(op)));
  }
  COLL_NEED_REAL(comm, ncclRedOpDestroy);
  return fromReal(comm, "ncclRedOpDestroy", real().ncclRedOpDestroy(op, comm->real));
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  if (realDepth > 0 && real().ncclReduce)
    return real().ncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  return call({"ncclReduce", "reduce", makeOp(OpKind::Reduce, sendbuff, recvbuff, count, root),
               datatype, op, comm, stream});
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  if (realDepth > 0 && real().ncclBcast)
    return real().ncclBcast(buff, count, datatype, root, comm, stream);
  return call({"ncclBcast", "broadcast", makeOp(OpKind::Broadcast, buff, buff, count, root),
               datatype, ncclSum, comm, stream});
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  if (realDepth > 0 && real().ncclBroadcast)
    return real().ncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
  return call({"ncclBroadcast", "broadcast",
               makeOp(OpKind::Broadcast, sendbuff, recvbuff, count, root), datatype, ncclSum,
               comm, stream});
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  if (realDepth > 0 && real().ncclAllReduce)
    return real().ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  return call({"ncclAllReduce", "allreduce",
               makeOp(OpKind::AllReduce, sendbuff, recvbuff, count), datatype, op, comm, stream});
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (realDepth > 0 && real().ncclReduceScatter)
    return real().ncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  return call({"ncclReduceScatter", "reducescatter",
               makeOp(OpKind::ReduceScatter, sendbuff, recvbuff, recvcount), datatype, op, comm,
               stream});
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (realDepth > 0 && real().ncclAllGather)
    return real().ncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
  return call({"ncclAllGather", "allgather",
               makeOp(OpKind::AllGather, sendbuff, recvbuff, sendcount), datatype, ncclSum, comm,
               stream});
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (realDepth > 0 && real().ncclAlltoAll)
    return real().ncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
  return call({"ncclAlltoAll", "alltoall", makeOp(OpKind::AllToAll, sendbuff, recvbuff, count),
               datatype, ncclSum, comm, stream});
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (realDepth > 0 && real().ncclGather)
    return real().ncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream);
  return call({"ncclGather", "gather", makeOp(OpKind::Gather, sendbuff, recvbuff, count, root),
               datatype, ncclSum, comm, stream});
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (realDepth > 0 && real().ncclScatter)
    return real().ncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream);
  return call({"ncclScatter", "scatter", makeOp(OpKind::Scatter, sendbuff, recvbuff, count, root),
               datatype, ncclSum, comm, stream});
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  if (realDepth > 0 && real().ncclSend)
    return real().ncclSend(sendbuff, count, datatype, peer, comm, stream);
  return call({"ncclSend", "send", makeOp(OpKind::Send, sendbuff, nullptr, count, peer),
               datatype, ncclSum, comm, stream});
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  if (realDepth > 0 && real().ncclRecv)
    return real().ncclRecv(recvbuff, count, datatype, peer, comm, stream);
  return call({"ncclRecv", "recv", makeOp(OpKind::Recv, nullptr, recvbuff, count, peer),
               datatype, ncclSum, comm, stream});
}

ncclResult_t ncclGroupStart() {
  if (realDepth > 0 && real().ncclGroupStart)
    return real().ncclGroupStart();
  ++group.depth;
  return ncclSuccess;
}

/// Ends the outermost group: its inits (each on a thread, as they are
/// collective with each other), then its calls. `simulate`: the real
/// NCCL's share is simulated, Coll's is not run.
static ncclResult_t endGroup(ncclSimInfo_t *simulate) {
  if (group.depth == 0)
    return failWith(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group.depth > 0)
    return ncclSuccess;
  Group state = std::move(group);
  group = Group();
  if (state.error != ncclSuccess) // NCCL: the group fails and runs nothing
    return state.error;
  if (!state.inits.empty()) {
    std::vector<ncclResult_t> results(state.inits.size(), ncclSuccess);
    std::vector<std::string> messages(state.inits.size());
    std::vector<std::thread> threads;
    auto setDevice = cudart<int (*)(int)>("cudaSetDevice");
    for (size_t i = 0; i < state.inits.size(); ++i)
      threads.emplace_back([&, i] {
        PendingInit &p = state.inits[i];
        if (p.device >= 0 && setDevice)
          setDevice(p.device);
        results[i] = initRank(p.out, p.nranks, p.id, p.rank, p.hasConfig ? &p.config : nullptr,
                              p.device, p.noDevice);
        messages[i] = threadError;
      });
    for (std::thread &t : threads)
      t.join();
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i] != ncclSuccess)
        return failWith(nullptr, results[i], messages[i]);
  }
  if (!simulate)
    return issue(std::move(state.calls));
  COLL_NEED_REAL(nullptr, ncclGroupSimulateEnd);
  real().ncclGroupStart();
  for (const Call &c : state.calls)
    if (!c.onColl)
      if (ncclResult_t r = issueReal(c); r != ncclSuccess) {
        real().ncclGroupEnd();
        return r;
      }
  return fromReal(nullptr, "ncclGroupSimulateEnd", real().ncclGroupSimulateEnd(simulate));
}

ncclResult_t ncclGroupEnd() {
  if (realDepth > 0 && real().ncclGroupEnd)
    return real().ncclGroupEnd();
  return endGroup(nullptr);
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  if (realDepth > 0 && real().ncclGroupSimulateEnd)
    return real().ncclGroupSimulateEnd(simInfo);
  if (!simInfo || simInfo->magic != 0x74685283) {
    if (group.depth > 0)
      --group.depth;
    return failWith(nullptr, ncclInvalidArgument,
                    "ncclGroupSimulateEnd: simInfo was not set up with NCCL_SIM_INFO_INITIALIZER");
  }
  return endGroup(simInfo);
}

//===----------------------------------------------------------------------===//
// The pnccl names: the same functions
//===----------------------------------------------------------------------===//

#define COLL_PNCCL(name) __attribute__((alias(#name)));
ncclResult_t pncclMemAlloc(void **ptr, size_t size) COLL_PNCCL(ncclMemAlloc)
ncclResult_t pncclMemFree(void *ptr) COLL_PNCCL(ncclMemFree)
ncclResult_t pncclGetVersion(int *version) COLL_PNCCL(ncclGetVersion)
ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId) COLL_PNCCL(ncclGetUniqueId)
ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config) COLL_PNCCL(ncclCommInitRankConfig)
ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
    COLL_PNCCL(ncclCommInitRank)
ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
    COLL_PNCCL(ncclCommInitAll)
ncclResult_t pncclCommFinalize(ncclComm_t comm) COLL_PNCCL(ncclCommFinalize)
ncclResult_t pncclCommDestroy(ncclComm_t comm) COLL_PNCCL(ncclCommDestroy)
ncclResult_t pncclCommAbort(ncclComm_t comm) COLL_PNCCL(ncclCommAbort)
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) COLL_PNCCL(ncclCommRevoke)
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                            ncclConfig_t *config) COLL_PNCCL(ncclCommSplit)
ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                             ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
    COLL_PNCCL(ncclCommShrink)
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId *commIds, ncclConfig_t *config)
    COLL_PNCCL(ncclCommInitRankScalable)
const char *pncclGetErrorString(ncclResult_t result) COLL_PNCCL(ncclGetErrorString)
const char *pncclGetLastError(ncclComm_t comm) COLL_PNCCL(ncclGetLastError)
void pncclResetDebugInit() COLL_PNCCL(ncclResetDebugInit)
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
    COLL_PNCCL(ncclCommGetAsyncError)
ncclResult_t pncclCommCount(const ncclComm_t comm, int *count) COLL_PNCCL(ncclCommCount)
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device) COLL_PNCCL(ncclCommCuDevice)
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank) COLL_PNCCL(ncclCommUserRank)
ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
    COLL_PNCCL(ncclCommRegister)
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
    COLL_PNCCL(ncclCommDeregister)
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                     int winFlags) COLL_PNCCL(ncclCommWindowRegister)
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
    COLL_PNCCL(ncclCommWindowDeregister)
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm)
    COLL_PNCCL(ncclRedOpCreatePreMulSum)
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) COLL_PNCCL(ncclRedOpDestroy)
ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream) COLL_PNCCL(ncclReduce)
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) COLL_PNCCL(ncclBcast)
ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream) COLL_PNCCL(ncclBroadcast)
ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream) COLL_PNCCL(ncclAllReduce)
ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream) COLL_PNCCL(ncclReduceScatter)
ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
    COLL_PNCCL(ncclAllGather)
ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
    COLL_PNCCL(ncclAlltoAll)
ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
    COLL_PNCCL(ncclGather)
ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
    COLL_PNCCL(ncclScatter)
ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream) COLL_PNCCL(ncclSend)
ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream) COLL_PNCCL(ncclRecv)
ncclResult_t pncclGroupStart() COLL_PNCCL(ncclGroupStart)
ncclResult_t pncclGroupEnd() COLL_PNCCL(ncclGroupEnd)
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo) COLL_PNCCL(ncclGroupSimulateEnd)
#undef COLL_PNCCL

} // extern "C"
