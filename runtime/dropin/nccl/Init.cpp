//===- Init.cpp - Communicators of libcoll_nccl.so ------------------------===//
//
// ncclGetUniqueId makes Coll's id (the root's bootstrap address and a
// nonce). ncclCommInitRank joins Coll's bootstrap, exchanges over it every
// rank's CUDA device and rank 0's real ncclUniqueId, and then creates the
// real communicator eagerly, beside Coll's, when every rank has a CUDA
// device and no two share one; otherwise the communicator is Coll-only and
// says why, and a call that would need the real NCCL fails with that
// reason. With COLL_FORCE_FALLBACK set the real NCCL is needed, so init
// fails instead (docs/DROPIN.md).
//
// Also here: ncclGetVersion; finalize, destroy, abort, revoke, split and
// shrink; a communicator's count, device, user rank and async error;
// results, their strings, the last error and ncclResetDebugInit.
//
//===----------------------------------------------------------------------===//

#include "Shim.h"

#include "coll/runtime/Bootstrap.h"
#include "coll/runtime/Debug.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

using namespace coll;
using namespace coll::rt;
using namespace coll::rt::dropin::nccl;

//===----------------------------------------------------------------------===//
// Results and errors
//===----------------------------------------------------------------------===//

namespace coll::rt::dropin::nccl {

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

namespace {

/// The newest error of the process, as NCCL keeps one (its `ncclLastError`,
/// which every WARN overwrites, whatever the communicator). Beside it, what
/// the real NCCL's ncclGetLastError read when it was written: when that has
/// changed since, the real NCCL failed later (a call passed to it whole),
/// and its message is the newest. A fixed buffer, as NCCL's, so that a
/// pointer ncclGetLastError gave stays readable.
struct NewestError {
  std::mutex mutex;
  char text[1024] = "";
  std::string realAtText;
};

NewestError &newestError() {
  static NewestError *newest = new NewestError; // used by atexit handlers too
  return *newest;
}

std::string realLastError() {
  const RealNccl &r = real();
  return r.ncclGetLastError ? r.ncclGetLastError(nullptr) : "";
}

} // namespace

ncclResult_t failWith(ncclComm_t comm, ncclResult_t result, const std::string &message) {
  threadError = message;
  {
    NewestError &newest = newestError();
    std::string realNow = realLastError();
    std::lock_guard<std::mutex> lock(newest.mutex);
    std::snprintf(newest.text, sizeof newest.text, "%s", message.c_str());
    newest.realAtText = std::move(realNow);
  }
  COLL_LOG(Warn, Coll, comm ? comm->rank : -1,
           llvm::formatv("{0}: {1}", ncclGetErrorString(result), message));
  return result;
}

//===----------------------------------------------------------------------===//
// Making a communicator
//===----------------------------------------------------------------------===//

namespace {

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

/// ncclCommDestroy, or ncclCommAbort with `abort`: the real communicator
/// first, then Coll's, then the shim's part of `comm`.
ncclResult_t closeComm(ncclComm_t comm, bool abort) {
  const char *function = abort ? "ncclCommAbort" : "ncclCommDestroy";
  if (!comm) // nothing to close: NCCL returns ncclSuccess, and teardown code relies on it
    return ncclSuccess;
  ncclResult_t result = ncclSuccess;
  if (!abort && owesAgreement(comm)) // the peers wait for it (Enqueue.cpp, agree)
    result = agree({comm}, function);
  if (comm->real)
    if (auto closeReal = abort ? real().ncclCommAbort : real().ncclCommDestroy)
      result = fromReal(nullptr, function, closeReal(comm->real));
  if (comm->coll)
    abort ? collCommAbort(comm->coll) : collCommDestroy(comm->coll);
  delete comm;
  return result;
}

} // namespace

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

} // namespace coll::rt::dropin::nccl

//===----------------------------------------------------------------------===//
// The API: ids and init
//===----------------------------------------------------------------------===//

COLL_NCCL_API(ncclResult_t, ncclGetVersion, (int *version), (version)) {
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

COLL_NCCL_API(ncclResult_t, ncclGetUniqueId, (ncclUniqueId *uniqueId), (uniqueId)) {
  if (!uniqueId)
    return failWith(nullptr, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  static_assert(sizeof(ncclUniqueId) == sizeof(collUniqueId), "ids must have one size");
  collUniqueId id;
  if (collResult_t r = collGetUniqueId(&id); r != collSuccess)
    return failWith(nullptr, toNccl(r), std::string("ncclGetUniqueId: ") + collGetLastError(nullptr));
  std::memcpy(uniqueId->internal, id.internal, sizeof id.internal);
  return ncclSuccess;
}

COLL_NCCL_API(ncclResult_t, ncclCommInitRankConfig,
              (ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config),
              (comm, nranks, commId, rank, config)) {
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

COLL_NCCL_API(ncclResult_t, ncclCommInitRank,
              (ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank),
              (comm, nranks, commId, rank)) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

COLL_NCCL_API(ncclResult_t, ncclCommInitRankScalable,
              (ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
               ncclConfig_t *config),
              (newcomm, nranks, myrank, nId, commIds, config)) {
  if (nId < 1 || !commIds)
    return failWith(nullptr, ncclInvalidArgument,
                    "ncclCommInitRankScalable: needs at least one unique id");
  // Coll's bootstrap needs one root: the first id's.
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

COLL_NCCL_API(ncclResult_t, ncclCommInitAll, (ncclComm_t *comms, int ndev, const int *devlist),
              (comms, ndev, devlist)) {
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

//===----------------------------------------------------------------------===//
// The API: finalize, destroy, abort, revoke, split, shrink
//===----------------------------------------------------------------------===//

COLL_NCCL_API(ncclResult_t, ncclCommFinalize, (ncclComm_t comm), (comm)) {
  if (!comm) // as NCCL's: nothing to finalize
    return ncclSuccess;
  if (owesAgreement(comm)) // the peers wait for it (Enqueue.cpp, agree)
    if (ncclResult_t r = agree({comm}, "ncclCommFinalize"); r != ncclSuccess)
      return r;
  if (!comm->retired.empty()) // Coll's side is broken: nothing of it to finalize
    return comm->real && real().ncclCommFinalize
               ? fromReal(comm, "ncclCommFinalize", real().ncclCommFinalize(comm->real))
               : ncclSuccess;
  if (comm->coll)
    if (collResult_t r = collCommFinalize(comm->coll); r != collSuccess)
      return failWith(comm, toNccl(r),
                      std::string("ncclCommFinalize: ") + collGetLastError(comm->coll));
  if (comm->real && real().ncclCommFinalize)
    return fromReal(comm, "ncclCommFinalize", real().ncclCommFinalize(comm->real));
  return ncclSuccess;
}

COLL_NCCL_API(ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm)) {
  return closeComm(comm, false);
}

COLL_NCCL_API(ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm)) {
  return closeComm(comm, true);
}

COLL_NCCL_API(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags),
              (comm, revokeFlags)) {
  if (!comm) // as NCCL's: nothing to revoke
    return ncclSuccess;
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return failWith(comm, ncclInvalidArgument, "ncclCommRevoke: revokeFlags must be 0");
  // Coll's side ends its calls in flight on every rank (collCommRevoke);
  // the communicator then reports the error, and can be shrunk, split's
  // successor, or destroyed.
  if (comm->coll)
    if (collResult_t r = collCommRevoke(comm->coll, COLL_REVOKE_DEFAULT); r != collSuccess)
      return failWith(comm, toNccl(r), std::string("ncclCommRevoke: ") +
                                           collGetLastError(comm->coll));
  if (comm->real && real().ncclCommRevoke)
    return fromReal(comm, "ncclCommRevoke", real().ncclCommRevoke(comm->real, revokeFlags));
  return ncclSuccess;
}

COLL_NCCL_API(ncclResult_t, ncclCommSplit,
              (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config),
              (comm, color, key, newcomm, config)) {
  if (!comm || !newcomm)
    return failWith(comm, ncclInvalidArgument, "ncclCommSplit: comm or newcomm is NULL");
  *newcomm = nullptr;
  if (owesAgreement(comm)) // the ranks agree first (Enqueue.cpp, agree)
    if (ncclResult_t r = agree({comm}, "ncclCommSplit"); r != ncclSuccess)
      return r;
  const bool retired = !comm->retired.empty();
  if (!comm->coll)
    return failWith(comm, ncclInvalidUsage,
                    "ncclCommSplit: the communicator has no Coll side (it came from "
                    "ncclCommShrink)");
  if (retired && !comm->real)
    return failWith(comm, comm->retiredResult,
                    "ncclCommSplit: Coll stopped serving this communicator after a failed call (" +
                        comm->retired + "), and there is no real NCCL to split it");
  // After a failed call Coll's side is broken: the new communicator is the
  // real NCCL's alone, as ncclCommShrink's.
  collComm_t child = nullptr;
  if (!retired)
    if (collResult_t r = collCommSplit(comm->coll, color, key, &child, nullptr); r != collSuccess)
      return failWith(comm, toNccl(r),
                      std::string("ncclCommSplit: ") + collGetLastError(comm->coll));
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
  if (!child && !(retired && realChild))
    return ncclSuccess; // NCCL_SPLIT_NOCOLOR
  auto *c = new ncclComm;
  c->coll = child;
  c->real = realChild;
  c->noReal = noReal;
  c->device = comm->device;
  if (child) {
    collCommUserRank(child, &c->rank);
    collCommCount(child, &c->nranks);
  } else if (!real().ncclCommUserRank || !real().ncclCommCount ||
             real().ncclCommUserRank(realChild, &c->rank) != ncclSuccess ||
             real().ncclCommCount(realChild, &c->nranks) != ncclSuccess) {
    c->rank = -1;
  }
  *newcomm = c;
  return ncclSuccess;
}

COLL_NCCL_API(ncclResult_t, ncclCommShrink,
              (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
               ncclConfig_t *config, int shrinkFlags),
              (comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags)) {
  if (!comm || !newcomm || (excludeRanksCount > 0 && !excludeRanksList))
    return failWith(comm, ncclInvalidArgument, "ncclCommShrink: NULL argument");
  *newcomm = nullptr;
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return failWith(comm, ncclInvalidArgument,
                    "ncclCommShrink: shrinkFlags must be NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT");
  // Coll's side shrinks over its own bootstrap (collCommShrink), whether
  // or not a call failed on it: the new communicator is Coll's again. The
  // real NCCL's, where there is one, shrinks beside it.
  collComm_t child = nullptr;
  std::string noColl;
  if (!comm->coll) {
    noColl = "the communicator has no Coll side";
  } else if (collResult_t r =
                 collCommShrink(comm->coll, excludeRanksList, excludeRanksCount, &child, nullptr,
                                shrinkFlags == NCCL_SHRINK_ABORT ? COLL_SHRINK_ABORT
                                                                 : COLL_SHRINK_DEFAULT);
             r != collSuccess) {
    if (!comm->real)
      return failWith(comm, toNccl(r),
                      std::string("ncclCommShrink: ") + collGetLastError(comm->coll));
    noColl = collGetLastError(comm->coll);
  }
  ncclComm_t realChild = nullptr;
  std::string noReal = comm->noReal;
  if (comm->real) {
    if (!real().ncclCommShrink) {
      noReal = "the real NCCL at " + real().path + " lacks ncclCommShrink";
    } else if (ncclResult_t r = real().ncclCommShrink(comm->real, excludeRanksList,
                                                      excludeRanksCount, &realChild, config,
                                                      shrinkFlags);
               r != ncclSuccess) {
      if (!child)
        return fromReal(comm, "ncclCommShrink", r);
      noReal = std::string("the real ncclCommShrink failed: ") + real().ncclGetErrorString(r);
      realChild = nullptr;
    }
  }
  if (!child && !realChild)
    return failWith(comm, ncclInvalidUsage,
                    "ncclCommShrink: neither Coll (" + noColl + ") nor the real NCCL (" + noReal +
                        ") could shrink the communicator");
  auto *c = new ncclComm;
  c->coll = child;
  c->real = realChild;
  c->noReal = realChild ? std::string() : noReal;
  c->device = comm->device;
  if (child) {
    collCommUserRank(child, &c->rank);
    collCommCount(child, &c->nranks);
    if (Communicator *impl = c->impl(); impl && comm->device >= 0 && comm->impl() &&
                                        comm->impl()->boundDevice() >= 0)
      impl->bindDevice(comm->impl()->boundDevice());
  } else {
    // Rank and size from the real communicator.
    c->rank = -1;
    int count = 0, rank = 0;
    const RealNccl &r = real();
    if (r.ncclCommUserRank && r.ncclCommCount &&
        r.ncclCommUserRank(realChild, &rank) == ncclSuccess &&
        r.ncclCommCount(realChild, &count) == ncclSuccess) {
      c->rank = rank;
      c->nranks = count;
    }
  }
  *newcomm = c;
  return ncclSuccess;
}

#if NCCL_VERSION_CODE >= 22900
// NCCL 2.29's grow, where nccl.h declares it. Coll's communicator grows
// (collCommGrow: the existing ranks keep their numbers, the root's id,
// made by ncclCommGetUniqueId, reaches the others over the communicator);
// the real NCCL's does not, since its grow needs its own id, which the one
// id the program hands round cannot carry beside Coll's: the grown
// communicator is Coll's alone, and a call Coll cannot serve on it fails
// with ncclInvalidUsage saying so.
COLL_NCCL_API(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId *uniqueId),
              (comm, uniqueId)) {
  if (!comm || !uniqueId || !comm->coll)
    return failWith(comm, ncclInvalidArgument,
                    "ncclCommGetUniqueId: NULL argument, or a communicator without Coll's side");
  collUniqueId id;
  if (collResult_t r = collCommGetUniqueId(comm->coll, &id); r != collSuccess)
    return failWith(comm, toNccl(r),
                    std::string("ncclCommGetUniqueId: ") + collGetLastError(comm->coll));
  std::memcpy(uniqueId->internal, id.internal, sizeof id.internal);
  return ncclSuccess;
}

COLL_NCCL_API(ncclResult_t, ncclCommGrow,
              (ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
               ncclComm_t *newcomm, ncclConfig_t *config),
              (comm, nRanks, uniqueId, rank, newcomm, config)) {
  (void)config;
  if (!newcomm)
    return failWith(comm, ncclInvalidArgument, "ncclCommGrow: newcomm is NULL");
  *newcomm = nullptr;
  collUniqueId id;
  if (uniqueId)
    std::memcpy(id.internal, uniqueId->internal, sizeof id.internal);
  if (comm && !comm->coll)
    return failWith(comm, ncclInvalidUsage, "ncclCommGrow: the communicator has no Coll side");
  collComm_t child = nullptr;
  if (collResult_t r = collCommGrow(comm ? comm->coll : nullptr, nRanks, uniqueId ? &id : nullptr,
                                    rank, &child, nullptr);
      r != collSuccess)
    return failWith(comm, toNccl(r),
                    std::string("ncclCommGrow: ") + collGetLastError(comm ? comm->coll : nullptr));
  auto *c = new ncclComm;
  c->coll = child;
  c->noReal = "ncclCommGrow makes Coll's communicator alone (the real NCCL's grow needs an id of "
              "its own)";
  std::string noDevice;
  c->device = comm ? comm->device : currentDevice(noDevice);
  collCommUserRank(child, &c->rank);
  collCommCount(child, &c->nranks);
  *newcomm = c;
  return ncclSuccess;
}
#endif

//===----------------------------------------------------------------------===//
// The API: results, errors, what a communicator is
//===----------------------------------------------------------------------===//

// Neither ncclGetErrorString nor ncclGetLastError passes calls from inside
// the real NCCL back to it.
COLL_NCCL_EXPORT(const char *, ncclGetErrorString, (ncclResult_t result)) {
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

// The newest error of the process, whatever `comm` is: NCCL's ignores its
// argument (docs: "currently unused and can be set to NULL") and gives the
// last WARN of any call, so a failed call that names no communicator, or
// another one, is what the next ncclGetLastError(comm) reads.
COLL_NCCL_EXPORT(const char *, ncclGetLastError, (ncclComm_t)) {
  NewestError &newest = newestError();
  const RealNccl &r = real();
  const char *realNow = r.ncclGetLastError ? r.ncclGetLastError(nullptr) : "";
  std::lock_guard<std::mutex> lock(newest.mutex);
  if (newest.text[0] == '\0' || (realNow && newest.realAtText != realNow))
    return realNow ? realNow : "";
  return newest.text;
}

COLL_NCCL_API(void, ncclResetDebugInit, (), ()) {
  if (real().ncclResetDebugInit)
    real().ncclResetDebugInit();
}

COLL_NCCL_API(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError),
              (comm, asyncError)) {
  if (!comm || !asyncError)
    return failWith(comm, ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
  *asyncError = ncclSuccess;
  bool retired = false;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    retired = !comm->retired.empty();
    if (retired && !comm->real)
      *asyncError = comm->retiredResult; // its calls fail with it
  }
  // After a failed call, Coll serves no more calls: the real NCCL's state
  // is the communicator's.
  if (Communicator *impl = comm->impl(); impl && !retired) {
    *asyncError = toNccl(impl->checkAsyncError()); // kernels of Coll stopped by the watchdog too
    // An error found between calls (a peer lost, a kernel stopped): NCCL's
    // thread that finds it WARNs, which makes it ncclGetLastError's
    // message; so here, once.
    bool say = false;
    if (*asyncError != ncclSuccess) {
      std::lock_guard<std::mutex> lock(comm->mutex);
      say = !comm->asyncSaid;
      comm->asyncSaid = true;
    }
    if (say) {
      std::optional<std::string> cause = impl->firstFailure();
      (void)failWith(comm, *asyncError,
                     "ncclCommGetAsyncError: " +
                         (cause ? *cause : std::string(ncclGetErrorString(*asyncError))));
    }
  }
  if (*asyncError == ncclSuccess && comm->real) {
    COLL_NEED_REAL(comm, ncclCommGetAsyncError);
    return fromReal(comm, "ncclCommGetAsyncError",
                    real().ncclCommGetAsyncError(comm->real, asyncError));
  }
  return ncclSuccess;
}

COLL_NCCL_API(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count), (comm, count)) {
  if (!comm || !count)
    return failWith(comm, ncclInvalidArgument, "ncclCommCount: NULL argument");
  *count = comm->nranks;
  return ncclSuccess;
}

COLL_NCCL_API(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device),
              (comm, device)) {
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

COLL_NCCL_API(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank), (comm, rank)) {
  if (!comm || !rank)
    return failWith(comm, ncclInvalidArgument, "ncclCommUserRank: NULL argument");
  *rank = comm->rank;
  return ncclSuccess;
}
