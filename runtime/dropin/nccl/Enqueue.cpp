//===- Enqueue.cpp - Collectives and send/recv of libcoll_nccl.so ---------===//
//
// Every collective and point-to-point call is an Op (makeOp), checked as
// NCCL checks it wherever it then runs, then given to Coll or to the real
// NCCL (COLL_FORCE_FALLBACK, the datatype and op, the communicator's
// selection), and issued at once or, inside a group, at its ncclGroupEnd
// (Group.cpp). Also here: the reduction ops of ncclRedOpCreatePreMulSum,
// which only the real NCCL runs.
//
//===----------------------------------------------------------------------===//

#include "Shim.h"

#include "coll/runtime/Debug.h"
#include "coll/dropin/DropIn.h"

#include "coll/interpreter/DataType.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>

using namespace coll;
using namespace coll::rt;
using namespace coll::rt::dropin::nccl;

namespace coll::rt::dropin::nccl {

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

namespace {

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
    std::lock_guard<std::mutex> lock(comm->mutex);
    auto own = comm->preMuls.find(c.redop);
    if (own != comm->preMuls.end() && own->second.datatype != c.datatype) // NCCL's check
      return failWith(comm, ncclInvalidArgument,
                      llvm::formatv("{0}: datatype {1} does not match the datatype {2} its "
                                    "PreMulSum op was made for",
                                    c.function, int(c.datatype), int(own->second.datatype)));
  }
  const size_t es = c.datatype >= ncclFloat8e4m3 ? 1 : interp::dataTypeSize(*dataTypeOf(
                                                           static_cast<collDataType_t>(c.datatype)));
  if (llvm::Error err = validateOp(op, comm->rank, comm->nranks, es, c.function)) {
    std::string message;
    return failWith(comm, toNccl(takeResult(std::move(err), message)), message);
  }
  return ncclSuccess;
}

/// Decides where a valid call runs, and says why at COLL_DEBUG=INFO.
void route(Call &c) {
  ncclComm_t comm = c.comm;
  auto fallback = [&](const std::string &why) {
    dropin::fallback(c.function, "NCCL", why, comm->rank);
    c.onColl = false;
  };
  if (!comm->retired.empty())
    return fallback("Coll stopped serving this communicator after a failed call: " +
                    comm->retired);
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
    if (!red) {
      std::lock_guard<std::mutex> lock(comm->mutex);
      auto own = comm->preMuls.find(c.redop);
      if (own == comm->preMuls.end())
        return fallback("a reduction op made by ncclRedOpCreatePreMulSum");
      c.preMul = own->second; // Coll's (no real NCCL): a sum of scaled inputs
      red = interp::ReduceOp::Sum;
    }
    c.op.op = *red;
  }
  c.onColl = dropin::collRuns(c.function, *impl, c.op, "NCCL", comm->rank);
  // Coll stages sends and receives on device buffers through host memory
  // (runtime/lib/PointToPoint.cpp; collRuns found where the buffers are); a
  // real NCCL moves them from GPU to GPU, faster, so it keeps them there.
  if (c.onColl && c.op.pointToPoint() && c.op.device >= 0 && comm->real)
    return fallback("point-to-point on device buffers: the real NCCL moves them from GPU to "
                    "GPU, where Coll stages them through host memory");
  if (c.onColl && c.op.device >= 0)
    c.op.stream = c.stream; // enqueued there, as the real NCCL would
}

/// A call Coll served failed on this rank: Coll serves no more calls of
/// `comm`, and says so once, naming the failure. The ranks agree on the last
/// failed call at their next call (agree), except where a peer died, which
/// cannot take part: the real NCCL then meets the dead peer as it would
/// without Coll. A peer that aborted the communicator is no failure to
/// recover from: the communicator stays broken, as NCCL's would be.
void retire(ncclComm_t comm, ncclResult_t result, const std::string &failure) {
  // The runtime's reports of a peer's abort (Comm.cpp, abort), of a peer
  // process gone (Round.cpp, pollPeers) and of a peer of another host lost
  // (NetProxy.cpp, through Setup.cpp's peerLost).
  // A revoke likewise (ncclCommRevoke; Liveness.cpp carries it to every
  // rank). A death: the liveness watch's "rank R (process P on H) exited"
  // and pollPeers' "... exited while rank ...".
  if (failure.find("aborted the communicator") != std::string::npos ||
      failure.find("revoked the communicator") != std::string::npos)
    return;
  const bool died = failure.find(") exited") != std::string::npos ||
                    failure.find("lost rank ") != std::string::npos;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (!comm->retired.empty())
      return;
    comm->retired = failure;
    comm->retiredResult = result;
    comm->failedAt = comm->calls;
    comm->agreed = died;
    comm->agreedUntil = comm->failedAt;
  }
  COLL_LOG(Warn, Coll, comm->rank,
           comm->real
               ? llvm::formatv("Coll stops serving this communicator after its call #{0} failed "
                               "({1}); the ranks agree on the last failed call at their next "
                               "call, and every later call goes to the real NCCL",
                               comm->failedAt, failure)
                     .str()
               : llvm::formatv("Coll stops serving this communicator after its call #{0} failed "
                               "({1}); there is no real NCCL to take its calls, so every later "
                               "call fails with this error: abort or destroy it",
                               comm->failedAt, failure)
                     .str());
}

/// Runs Coll's share of a group (or one call): on host buffers complete on
/// return, on device buffers enqueued on the call's stream.
ncclResult_t runOnColl(const std::vector<Call> &calls) {
  std::vector<std::pair<Communicator *, Op>> ops;
  std::set<cudaStream_t> streams;
  PreMulStaging preMuls; // PreMulSum.cpp
  for (const Call &c : calls) {
    ops.emplace_back(c.comm->impl(), c.op);
    if (c.preMul)
      if (ncclResult_t r = preMuls.stageIn(c, ops.back().second); r != ncclSuccess)
        return r;
    if (c.op.device < 0)
      streams.insert(c.stream); // host buffers: the stream's earlier work first
  }
  if (ops.empty())
    return ncclSuccess;
  // Waits for the work queued on each stream before Coll touches host
  // buffers in its order (a copy to pinned host memory, say). Per call:
  // cached entry points, where a dlopen(RTLD_NOLOAD) of the runtime cost
  // 16 us a call in a program without CUDA.
  for (cudaStream_t s : streams)
    coll::rt::synchronizeCudaStream(s);
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
    const std::string failure = llvm::formatv("{0} on Coll failed ({1}): {2}", calls[0].function,
                                              collGetErrorString(result), message);
    const ncclResult_t failed =
        failWith(calls.size() == 1 ? calls[0].comm : nullptr, toNccl(result), failure);
    for (const Call &c : calls)
      retire(c.comm, failed, failure);
    return failed;
  }
  return preMuls.stageOut();
}

/// Fails a call on a communicator Coll's side of which an earlier error
/// broke where no call of this rank failed: a kernel that stopped on a GPU
/// after its call returned, a peer's abort. The call fails with that error,
/// as NCCL's calls do on a communicator with an asynchronous error, and
/// Coll serves no more calls (retire; not after a peer's abort).
ncclResult_t failIfBroken(const Call &c) {
  ncclComm_t comm = c.comm;
  Communicator *impl = comm->impl();
  if (!impl || !comm->retired.empty())
    return ncclSuccess;
  const collResult_t broken = impl->asyncError();
  if (broken == collSuccess)
    return ncclSuccess;
  std::optional<std::string> cause = impl->stopReport();
  const std::string failure =
      llvm::formatv("{0}: the communicator is broken by an earlier error ({1}: {2})",
                    c.function, collGetErrorString(broken), cause ? *cause : impl->lastError());
  retire(comm, toNccl(broken), failure);
  return failWith(comm, toNccl(broken),
                  failure + (comm->retired.empty() ? std::string("; abort or destroy it")
                                                   : std::string("; Coll serves no more calls "
                                                                 "of it")));
}

/// A call the ranks agreed fails (agree): a peer's call of this number
/// failed on Coll after this rank's earlier one had.
ncclResult_t failAgreed(const Call &c) {
  return failWith(c.comm, c.comm->retiredResult,
                  llvm::formatv("{0}: call #{1} on this communicator failed on Coll on another "
                                "rank after this rank's earlier call failed ({2}); it fails here "
                                "too, so that the ranks stay in step",
                                c.function, c.number, c.comm->retired));
}

/// The entry of every collective and point-to-point call.
ncclResult_t call(Call c) {
  auto failed = [](ncclResult_t r) {
    if (group.depth > 0 && group.error == ncclSuccess)
      group.error = r;
    return r;
  };
  if (ncclResult_t r = validate(c); r != ncclSuccess)
    return failed(r);
  ncclComm_t comm = c.comm;
  // NCCL discards an empty collective once its arguments are checked
  // (src/enqueue.cc, taskAppend: "Empty collectives can be discarded"):
  // nothing runs and nothing is touched, whatever the datatype and op, so
  // that fp8 or a PreMulSum op with count 0 succeeds without a real NCCL.
  // It counts for no call number. (An error that broke the communicator
  // comes first, as NCCL's ncclCommEnsureReady's.)
  const bool empty = c.op.count == 0 && !c.op.pointToPoint();
  if (!empty)
    c.number = ++comm->calls;
  if (ncclResult_t r = failIfBroken(c); r != ncclSuccess)
    return failed(r);
  if (empty)
    return ncclSuccess;
  if (!comm->retired.empty()) {
    if (!comm->real)
      return failed(failWith(comm, comm->retiredResult,
                             llvm::formatv("{0}: Coll stopped serving this communicator after a "
                                           "failed call ({1}), and there is no real NCCL to take "
                                           "its calls: abort or destroy it",
                                           c.function, comm->retired)));
    // Inside a group the ranks agree at its ncclGroupEnd, with the group's
    // other communicators (issue): one thread may drive several ranks.
    if (group.depth == 0) {
      if (ncclResult_t r = agree({comm}, c.function); r != ncclSuccess)
        return failed(r);
      if (c.number <= comm->agreedUntil)
        return failed(failAgreed(c));
    }
  }
  route(c);
  if (group.depth > 0) {
    group.calls.push_back(c);
    return ncclSuccess;
  }
  return issue({c});
}

} // namespace

bool owesAgreement(ncclComm_t comm) {
  if (!comm->real || comm->agreed)
    return false;
  if (!comm->retired.empty())
    return true;
  // A peer of this host failed a call this rank had finished: Coll's side
  // is broken all the same, and this rank's number is its last call's.
  Communicator *impl = comm->impl();
  std::optional<std::string> report = impl ? impl->stopReport() : std::nullopt;
  if (!report)
    return false;
  retire(comm, ncclRemoteError,
         llvm::formatv("a peer on this host failed a call after this rank's call #{0} had "
                       "finished: {1}",
                       comm->calls, *report));
  return !comm->retired.empty() && !comm->agreed;
}

ncclResult_t agree(llvm::ArrayRef<ncclComm_t> comms, const char *function) {
  std::vector<ncclComm_t> owed;
  for (ncclComm_t comm : comms)
    if (!comm->agreed && comm->real && llvm::find(owed, comm) == owed.end())
      owed.push_back(comm);
  if (owed.empty())
    return ncclSuccess;
  COLL_NEED_REAL(owed.front(), ncclAllReduce);
  // The real NCCL reduces device memory: each rank's GPU's when it has one.
  // Several communicators (ranks one thread drives) agree in one real
  // group, as their calls would run.
  auto cudaMalloc = cudart<cudaError_t (*)(void **, size_t)>("cudaMalloc");
  auto cudaMemcpy = cudart<cudaError_t (*)(void *, const void *, size_t, cudaMemcpyKind)>(
      "cudaMemcpy");
  auto cudaFree = cudart<cudaError_t (*)(void *)>("cudaFree");
  auto cudaGetDevice = cudart<cudaError_t (*)(int *)>("cudaGetDevice");
  auto cudaSetDevice = cudart<cudaError_t (*)(int)>("cudaSetDevice");
  const bool cuda = cudaMalloc && cudaMemcpy && cudaFree && cudaGetDevice && cudaSetDevice;
  int current = -1;
  if (cuda)
    cudaGetDevice(&current);
  struct Slot {
    int64_t number;
    void *device = nullptr;
  };
  std::vector<Slot> slots(owed.size());
  ncclResult_t r = ncclSuccess;
  for (size_t i = 0; i < owed.size() && r == ncclSuccess; ++i) {
    slots[i].number = static_cast<int64_t>(owed[i]->failedAt);
    if (owed[i]->device >= 0 && cuda &&
        (cudaSetDevice(owed[i]->device) != cudaSuccess ||
         cudaMalloc(&slots[i].device, sizeof(int64_t)) != cudaSuccess ||
         cudaMemcpy(slots[i].device, &slots[i].number, sizeof(int64_t),
                    cudaMemcpyHostToDevice) != cudaSuccess))
      r = failWith(owed[i], ncclUnhandledCudaError,
                   std::string(function) + ": cannot stage the ranks' agreement after a failed "
                                           "call in device memory");
  }
  const bool grouped = owed.size() > 1 && real().ncclGroupStart && real().ncclGroupEnd;
  if (r == ncclSuccess) {
    if (grouped)
      real().ncclGroupStart();
    for (size_t i = 0; i < owed.size(); ++i) {
      void *buffer = slots[i].device ? slots[i].device : &slots[i].number;
      ncclResult_t one =
          real().ncclAllReduce(buffer, buffer, 1, ncclInt64, ncclMax, owed[i]->real, nullptr);
      if (one != ncclSuccess && r == ncclSuccess)
        r = fromReal(owed[i], function, one);
    }
    if (grouped)
      if (ncclResult_t end = real().ncclGroupEnd(); end != ncclSuccess && r == ncclSuccess)
        r = fromReal(nullptr, function, end);
  }
  for (size_t i = 0; i < owed.size(); ++i) {
    if (!slots[i].device) {
      coll::rt::synchronizeCudaStream(nullptr);
      continue;
    }
    cudaSetDevice(owed[i]->device);
    coll::rt::synchronizeCudaStream(nullptr);
    if (r == ncclSuccess && cudaMemcpy(&slots[i].number, slots[i].device, sizeof(int64_t),
                                       cudaMemcpyDeviceToHost) != cudaSuccess)
      r = failWith(owed[i], ncclUnhandledCudaError,
                   std::string(function) + ": cannot read the ranks' agreement back");
    cudaFree(slots[i].device);
  }
  if (cuda && current >= 0)
    cudaSetDevice(current);
  if (r != ncclSuccess)
    return r;
  for (size_t i = 0; i < owed.size(); ++i) {
    ncclComm_t comm = owed[i];
    {
      std::lock_guard<std::mutex> lock(comm->mutex);
      comm->agreedUntil = static_cast<uint64_t>(slots[i].number);
      comm->agreed = true;
    }
    COLL_LOG(Info, Coll, comm->rank,
             llvm::formatv("the ranks agree: calls up to #{0} on this communicator failed (this "
                           "rank's failed at #{1}); later calls go to the real NCCL",
                           slots[i].number, comm->failedAt));
  }
  return ncclSuccess;
}

ncclResult_t issueReal(const Call &c) {
  ncclComm_t comm = c.comm;
  if (!comm->real)
    return failWith(comm, ncclInvalidUsage,
                    llvm::formatv("{0}: Coll cannot run this call and the real NCCL has no "
                                  "communicator here: {1}",
                                  c.function, whyNoReal(comm)));
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

ncclResult_t issue(std::vector<Call> calls) {
  ncclResult_t status = ncclSuccess;
  // Calls made in a group on communicators whose ranks owe their agreement
  // after a failed call: they agree first, all together, and the calls the
  // agreement covers fail.
  std::vector<ncclComm_t> owing;
  for (const Call &c : calls)
    if (!c.comm->retired.empty() && !c.comm->agreed)
      owing.push_back(c.comm);
  if (!owing.empty()) {
    if (ncclResult_t r = agree(owing, "ncclGroupEnd"); r != ncclSuccess)
      return r;
    llvm::erase_if(calls, [&](const Call &c) {
      if (c.comm->retired.empty() || c.number > c.comm->agreedUntil)
        return false;
      if (ncclResult_t r = failAgreed(c); status == ncclSuccess)
        status = r;
      return true;
    });
  }
  std::vector<Call> mine, theirs;
  for (Call &c : calls)
    (c.onColl ? mine : theirs).push_back(c);
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

} // namespace coll::rt::dropin::nccl

//===----------------------------------------------------------------------===//
// The API: reduction ops
//===----------------------------------------------------------------------===//

COLL_NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum,
              (ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
               ncclScalarResidence_t residence, ncclComm_t comm),
              (op, scalar, datatype, residence, comm)) {
  if (!comm || !op)
    return failWith(comm, ncclInvalidArgument, "ncclRedOpCreatePreMulSum: NULL argument");
  // Where a real NCCL is loaded its op serves, on the GPU; else Coll's
  // (PreMulSum.cpp).
  if (!comm->real)
    return createPreMulOnColl(op, scalar, datatype, residence, comm);
  COLL_NEED_REAL(comm, ncclRedOpCreatePreMulSum);
  ncclResult_t r = real().ncclRedOpCreatePreMulSum(op, scalar, datatype, residence, comm->real);
  if (r == ncclSuccess) {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->userOps.insert(*op);
  }
  return fromReal(comm, "ncclRedOpCreatePreMulSum", r);
}

COLL_NCCL_API(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm), (op, comm)) {
  if (!comm)
    return failWith(nullptr, ncclInvalidArgument, "ncclRedOpDestroy: comm is NULL");
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (!comm->userOps.erase(op))
      return failWith(nullptr, ncclInvalidArgument,
                      llvm::formatv("ncclRedOpDestroy: op {0} was not made by "
                                    "ncclRedOpCreatePreMulSum on this communicator",
                                    int(op)));
    if (comm->preMuls.erase(op)) // Coll's own
      return ncclSuccess;
  }
  COLL_NEED_REAL(comm, ncclRedOpDestroy);
  return fromReal(comm, "ncclRedOpDestroy", real().ncclRedOpDestroy(op, comm->real));
}

//===----------------------------------------------------------------------===//
// The API: collectives and send/recv
//===----------------------------------------------------------------------===//

COLL_NCCL_API(ncclResult_t, ncclReduce,
              (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, count, datatype, op, root, comm, stream)) {
  return call({"ncclReduce", "reduce", makeOp(OpKind::Reduce, sendbuff, recvbuff, count, root),
               datatype, op, comm, stream});
}

COLL_NCCL_API(ncclResult_t, ncclBcast,
              (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
               cudaStream_t stream),
              (buff, count, datatype, root, comm, stream)) {
  return call({"ncclBcast", "broadcast", makeOp(OpKind::Broadcast, buff, buff, count, root),
               datatype, ncclSum, comm, stream});
}

COLL_NCCL_API(ncclResult_t, ncclBroadcast,
              (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, count, datatype, root, comm, stream)) {
  return call({"ncclBroadcast", "broadcast",
               makeOp(OpKind::Broadcast, sendbuff, recvbuff, count, root), datatype, ncclSum,
               comm, stream});
}

COLL_NCCL_API(ncclResult_t, ncclAllReduce,
              (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, count, datatype, op, comm, stream)) {
  return call({"ncclAllReduce", "allreduce",
               makeOp(OpKind::AllReduce, sendbuff, recvbuff, count), datatype, op, comm, stream});
}

COLL_NCCL_API(ncclResult_t, ncclReduceScatter,
              (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, recvcount, datatype, op, comm, stream)) {
  return call({"ncclReduceScatter", "reducescatter",
               makeOp(OpKind::ReduceScatter, sendbuff, recvbuff, recvcount), datatype, op, comm,
               stream});
}

COLL_NCCL_API(ncclResult_t, ncclAllGather,
              (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
               ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, sendcount, datatype, comm, stream)) {
  return call({"ncclAllGather", "allgather",
               makeOp(OpKind::AllGather, sendbuff, recvbuff, sendcount), datatype, ncclSum, comm,
               stream});
}

COLL_NCCL_API(ncclResult_t, ncclAlltoAll,
              (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
               ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, count, datatype, comm, stream)) {
  return call({"ncclAlltoAll", "alltoall", makeOp(OpKind::AllToAll, sendbuff, recvbuff, count),
               datatype, ncclSum, comm, stream});
}

COLL_NCCL_API(ncclResult_t, ncclGather,
              (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, count, datatype, root, comm, stream)) {
  return call({"ncclGather", "gather", makeOp(OpKind::Gather, sendbuff, recvbuff, count, root),
               datatype, ncclSum, comm, stream});
}

COLL_NCCL_API(ncclResult_t, ncclScatter,
              (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream),
              (sendbuff, recvbuff, count, datatype, root, comm, stream)) {
  return call({"ncclScatter", "scatter", makeOp(OpKind::Scatter, sendbuff, recvbuff, count, root),
               datatype, ncclSum, comm, stream});
}

COLL_NCCL_API(ncclResult_t, ncclSend,
              (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
               ncclComm_t comm, cudaStream_t stream),
              (sendbuff, count, datatype, peer, comm, stream)) {
  return call({"ncclSend", "send", makeOp(OpKind::Send, sendbuff, nullptr, count, peer),
               datatype, ncclSum, comm, stream});
}

COLL_NCCL_API(ncclResult_t, ncclRecv,
              (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
               cudaStream_t stream),
              (recvbuff, count, datatype, peer, comm, stream)) {
  return call({"ncclRecv", "recv", makeOp(OpKind::Recv, nullptr, recvbuff, count, peer),
               datatype, ncclSum, comm, stream});
}
