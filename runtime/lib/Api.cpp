//===- Api.cpp - coll.h: argument checks, groups, errors ----------------------===//

#include "coll.h"

#include "Tagged.h"

#include "coll/runtime/Bootstrap.h"
#include "coll/runtime/Comm.h"
#include "coll/runtime/Debug.h"
#include "coll/runtime/Device.h"

#include "coll/interpreter/DataType.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace coll;
using namespace coll::rt;

struct collRequest {
  std::shared_ptr<coll::rt::TaggedEngine> engine;
  std::shared_ptr<coll::rt::TaggedRequest> request;
};

struct collComm {
  std::unique_ptr<Communicator> impl;
};

Communicator *coll::rt::communicatorOf(collComm_t comm) {
  return comm ? comm->impl.get() : nullptr;
}

collComm_t coll::rt::wrapCommunicator(std::unique_ptr<Communicator> c) {
  return new collComm{std::move(c)};
}

namespace {

thread_local std::string threadError;

/// Records `message` as the last error of `comm` (or of this thread) and
/// returns `result`.
collResult_t failWith(collComm_t comm, collResult_t result, const std::string &message) {
  if (comm && comm->impl)
    comm->impl->setLastError(message);
  threadError = message;
  COLL_LOG(Warn, Coll, comm && comm->impl ? comm->impl->rank() : -1,
           llvm::formatv("{0}: {1}", collGetErrorString(result), message));
  return result;
}

/// The loopback port of an Open MPI job whose ranks all run on this host,
/// derived from the job id so that every rank computes the same one without
/// talking. It is taken below the kernel's ephemeral range
/// (/proc/sys/net/ipv4/ip_local_port_range, 32768 by default): a port in that
/// range may be any connection's local end at the moment rank 0 binds, so a
/// busy host would refuse it by chance. Every rank reads the same file.
unsigned derivedLoopbackPort(const std::string &job) {
  unsigned lo = 32768, hi = 60999;
  if (FILE *f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    unsigned l = 0, h = 0;
    if (std::fscanf(f, "%u %u", &l, &h) == 2 && l > 0 && l <= h && h < 65536)
      lo = l, hi = h;
    std::fclose(f);
  }
  unsigned first = 10000, end = lo; // below the ephemeral range
  if (end < first + 4096) {         // too little room there: above it
    first = std::max(hi + 1, 10000u);
    end = 65536;
  }
  if (end < first + 4096) // the whole space is ephemeral
    first = 10000, end = 65536;
  return first + static_cast<unsigned>(llvm::hash_value(job) % (end - first));
}

collResult_t failWith(collComm_t comm, llvm::Error err) {
  std::string message;
  collResult_t result = takeResult(std::move(err), message);
  return failWith(comm, result, message);
}

struct PendingInit {
  collComm_t *out;
  int nranks;
  collUniqueId id;
  int rank;
  Config config;
};
struct PendingSplit {
  collComm_t parent;
  int color, key;
  collComm_t *out;
  Config config;
};
struct GroupState {
  int depth = 0;
  std::vector<std::pair<collComm_t, Op>> ops;
  std::vector<PendingInit> inits;
  std::vector<PendingSplit> splits;
};
thread_local GroupState group;

/// Checks and queues or runs one operation.
collResult_t enqueue(collComm_t comm, Op op, collDataType_t datatype, collRedOp_t redop,
                     void *stream) {
  const char *name = opKindName(op.kind);
  if (!comm || !comm->impl)
    return failWith(nullptr, collInvalidArgument, std::string(name) + ": comm is NULL");
  Communicator &c = *comm->impl;
  auto type = dataTypeOf(datatype);
  if (!type)
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("{0}: datatype {1} is not supported (Coll supports int8, uint8, "
                                  "int32, uint32, int64, uint64, fp16, bf16, fp32, fp64)",
                                  name, int(datatype)));
  op.type = *type;
  if (ir::collectiveInfo(collectiveOf(op.kind)).reduces) {
    auto r = reduceOpOf(redop);
    if (!r)
      return failWith(comm, collInvalidArgument,
                      llvm::formatv("{0}: reduction op {1} is not collSum, collProd, collMax, "
                                    "collMin or collAvg",
                                    name, int(redop)));
    op.op = *r;
  }
  if (llvm::Error err = validateOp(op, c.rank(), c.nranks(), interp::dataTypeSize(op.type), name))
    return failWith(comm, std::move(err));
  if (auto conflict = locateBuffers(op, c.rank()))
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("{0}: {1}; both must be host memory or memory of the same "
                                  "device",
                                  name, *conflict));
  if (op.device >= 0) {
    if (auto why = c.deviceRefusal(op))
      return failWith(comm, collInvalidUsage, llvm::formatv("{0}: {1}", name, *why));
    if (c.boundDevice() < 0)
      c.bindDevice(op.device);
    op.stream = stream;
  } else if (stream && op.count > 0) { // 0 elements: nothing runs, wherever the buffers are
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("{0}: host buffers run on the host backend, synchronously; "
                                  "pass stream NULL",
                                  name));
  }
  if (int broken = c.asyncError(); broken != collSuccess) {
    // The cause: the host's first failure (a lost rank, say), where one
    // was recorded.
    std::optional<std::string> cause = c.firstFailure();
    return failWith(comm, static_cast<collResult_t>(broken),
                    cause ? "the communicator is broken by an earlier error (" + *cause +
                                "); abort or destroy it"
                          : std::string("the communicator is broken by an earlier error; abort "
                                        "or destroy it"));
  }
  if (group.depth > 0) {
    group.ops.emplace_back(comm, op);
    return collSuccess;
  }
  Communicator::Unit unit{&c, llvm::ArrayRef<Op>(&op, 1)};
  if (llvm::Error err = Communicator::runRound(unit)) {
    std::string message;
    collResult_t result = takeResult(std::move(err), message);
    threadError = message;
    return result;
  }
  return collSuccess;
}

uint64_t randomNonce() {
  std::random_device device;
  return (uint64_t(device()) << 32) ^ device() ^
         uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
}

collResult_t initRank(collComm_t *out, int nranks, const collUniqueId &commId, int rank,
                      const Config &config) {
  auto id = decodeUniqueId(commId.internal);
  if (!id)
    return failWith(nullptr, collInvalidArgument, llvm::toString(id.takeError()));
  auto boot = connectBootstrap(*id, nranks, rank, selfPeerInfo(config.agreedHash()));
  if (!boot)
    return failWith(nullptr, collRemoteError,
                    llvm::formatv("rank {0}: bootstrap failed: {1}", rank,
                                  llvm::toString(boot.takeError())));
  auto comm = Communicator::create(std::move(*boot), config, id->nonce);
  if (!comm)
    return failWith(nullptr, comm.takeError());
  *out = new collComm{std::move(*comm)};
  return collSuccess;
}

collResult_t checkInitArgs(collComm_t *comm, int nranks, int rank) {
  if (!comm)
    return failWith(nullptr, collInvalidArgument, "comm (the output pointer) is NULL");
  if (nranks < 1)
    return failWith(nullptr, collInvalidArgument,
                    llvm::formatv("nranks {0} must be at least 1", nranks));
  if (rank < 0 || rank >= nranks)
    return failWith(nullptr, collInvalidArgument,
                    llvm::formatv("rank {0} is out of range for {1} ranks", rank, nranks));
  return collSuccess;
}

/// The settings of a communicator made from `comm` (split, shrink, grow):
/// `config` over the environment where it is given, else comm's own.
llvm::Expected<Config> configFor(collComm_t comm, const collConfig_t *config) {
  if (!config)
    return comm->impl->config();
  return resolveConfig(config);
}

/// collIsend and collIrecv.
collResult_t postTagged(bool send, void *buff, size_t count, collDataType_t datatype, int peer,
                        int tag, collComm_t comm, collRequest_t *request, const char *fn) {
  if (!comm || !comm->impl)
    return failWith(nullptr, collInvalidArgument, llvm::formatv("{0}: comm is NULL", fn));
  if (!request)
    return failWith(comm, collInvalidArgument, llvm::formatv("{0}: request is NULL", fn));
  *request = nullptr;
  auto type = dataTypeOf(datatype);
  if (!type)
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("{0}: datatype {1} is not one Coll has", fn,
                                  static_cast<int>(datatype)));
  const int n = comm->impl->nranks();
  if (!(peer >= 0 && peer < n) && !(peer == COLL_ANY_SOURCE && !send))
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("{0}: peer {1} is out of range for {2} ranks{3}", fn, peer, n,
                                  send ? "" : " (or COLL_ANY_SOURCE)"));
  if (tag < 0 && !(tag == COLL_ANY_TAG && !send))
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("{0}: tag {1} must be in [0, COLL_TAG_UB]{2}", fn, tag,
                                  send ? "" : " or COLL_ANY_TAG"));
  const uint64_t bytes = static_cast<uint64_t>(count) * interp::dataTypeSize(*type);
  if (bytes && !buff)
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("{0}: the buffer is NULL for {1} elements", fn, count));
  if (std::optional<std::string> failure = comm->impl->firstFailure())
    return failWith(comm, collRemoteError,
                    llvm::formatv("{0}: the communicator has failed: {1}", fn, *failure));
  auto engine = comm->impl->tagged();
  if (!engine)
    return failWith(comm, engine.takeError());
  auto r = std::make_shared<TaggedRequest>();
  r->send = send;
  r->peer = peer;
  r->tag = tag;
  r->type = *type;
  r->bytes = bytes;
  if (send)
    r->from = static_cast<const std::byte *>(buff);
  else
    r->to = static_cast<std::byte *>(buff);
  if (llvm::Error err = (*engine)->post(r))
    return failWith(comm, std::move(err));
  *request = new collRequest{*engine, std::move(r)};
  return collSuccess;
}

/// A complete request's status and result; frees it.
collResult_t finishTagged(collRequest_t *request, collStatus_t *status, const char *fn) {
  if (!*request) { // MPI_REQUEST_NULL: an empty status
    if (status)
      *status = collStatus_t{COLL_ANY_SOURCE, COLL_ANY_TAG, 0, collSuccess};
    return collSuccess;
  }
  const TaggedRequest &r = *(*request)->request;
  const uint64_t size = interp::dataTypeSize(r.type);
  if (status) {
    status->source = r.send ? COLL_ANY_SOURCE : r.source;
    status->tag = r.send ? r.tag : r.gotTag;
    status->count = static_cast<size_t>((r.send ? r.bytes : r.gotBytes) / size);
    status->error = r.result;
  }
  const collResult_t result = r.result;
  const std::string error = r.error;
  delete *request;
  *request = nullptr;
  if (result != collSuccess)
    return failWith(nullptr, result, llvm::formatv("{0}: {1}", fn, error));
  return collSuccess;
}

} // namespace

extern "C" {

collResult_t collGetVersion(int *version) {
  if (!version)
    return failWith(nullptr, collInvalidArgument, "version is NULL");
  *version = COLL_VERSION_CODE;
  return collSuccess;
}

const char *collGetErrorString(collResult_t result) {
  switch (result) {
  case collSuccess: return "no error";
  case collUnhandledCudaError: return "unhandled cuda error";
  case collSystemError: return "unhandled system error (memory, sockets, shared memory)";
  case collInternalError: return "internal error - please report this issue to the Coll developers";
  case collInvalidArgument: return "invalid argument";
  case collInvalidUsage: return "invalid usage";
  case collRemoteError: return "remote process exited or another rank failed";
  case collInProgress: return "Coll operation in progress";
  case collTimeout: return "the watchdog stopped a call that made no progress";
  default: return "unknown result code";
  }
}

collResult_t collCommQueryChoice(collComm_t comm, const char *collective, size_t bytes, int root,
                                 char *out, size_t outBytes) {
  if (!comm || !comm->impl)
    return failWith(nullptr, collInvalidArgument, "collCommQueryChoice: comm is NULL");
  if (!collective || !out || outBytes == 0)
    return failWith(comm, collInvalidArgument,
                    "collCommQueryChoice: collective and out must not be NULL, outBytes not 0");
  auto coll = ir::parseCollective(collective);
  if (!coll || *coll == ir::Collective::Custom)
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("collCommQueryChoice: '{0}' is not a collective", collective));
  if (root < 0 || root >= comm->impl->nranks())
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("collCommQueryChoice: root {0} is out of range", root));
  auto chosen = comm->impl->select(*coll, bytes, root);
  if (!chosen)
    return failWith(comm, chosen.takeError());
  const Choice *choice = *chosen;
  std::string text = choice->local ? std::string("local")
                     : choice->p2p  ? std::string("p2p")
                     : choice->algo ? choice->algo->name
                                    : "library:" + choice->library;
  text += " -- " + choice->why;
  std::snprintf(out, outBytes, "%s", text.c_str());
  return collSuccess;
}

collResult_t collDeviceBuffersSupported(int *supported, char *why, size_t whyBytes) {
  if (!supported)
    return failWith(nullptr, collInvalidArgument, "collDeviceBuffersSupported: supported is NULL");
  auto backend = gpuBackend();
  *supported = backend ? 1 : 0;
  std::string reason = backend ? std::string() : llvm::toString(backend.takeError());
  if (why && whyBytes)
    std::snprintf(why, whyBytes, "%s", reason.c_str());
  return collSuccess;
}

const char *collGetLastError(collComm_t comm) {
  if (comm && comm->impl)
    return comm->impl->lastError();
  return threadError.c_str();
}

collResult_t collGetUniqueId(collUniqueId *uniqueId) {
  if (!uniqueId)
    return failWith(nullptr, collInvalidArgument, "uniqueId is NULL");
  SockAddr address;
  if (const char *fixed = std::getenv("COLL_COMM_ID"); fixed && *fixed) {
    auto parsed = parseAddress(fixed);
    if (!parsed)
      return failWith(nullptr, collInvalidArgument,
                      "COLL_COMM_ID: " + llvm::toString(parsed.takeError()));
    address = *parsed;
  } else {
    auto picked = bootstrapAddress();
    if (!picked)
      return failWith(nullptr, collSystemError, llvm::toString(picked.takeError()));
    address = *picked;
  }
  auto id = startRoot(address);
  if (!id)
    return failWith(nullptr, collSystemError,
                    "cannot start the bootstrap root: " + llvm::toString(id.takeError()));
  encodeUniqueId(*id, uniqueId->internal);
  COLL_LOG(Info, Init, -1, "bootstrap root listening on " + id->root.str());
  return collSuccess;
}

collResult_t collCommInitRankConfig(collComm_t *comm, int nranks, collUniqueId commId, int rank,
                                    const collConfig_t *config) {
  if (collResult_t r = checkInitArgs(comm, nranks, rank))
    return r;
  auto resolved = resolveConfig(config);
  if (!resolved)
    return failWith(nullptr, resolved.takeError());
  *comm = nullptr;
  if (group.depth > 0) {
    group.inits.push_back({comm, nranks, commId, rank, *resolved});
    return collSuccess;
  }
  return initRank(comm, nranks, commId, rank, *resolved);
}

collResult_t collCommInitRank(collComm_t *comm, int nranks, collUniqueId commId, int rank) {
  return collCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

collResult_t collCommInitAll(collComm_t *comms, int nranks, const int *devices) {
  if (!comms)
    return failWith(nullptr, collInvalidArgument, "comms is NULL");
  if (nranks < 1)
    return failWith(nullptr, collInvalidArgument,
                    llvm::formatv("nranks {0} must be at least 1", nranks));
  // devices[r]: the CUDA device of rank r's device buffers (several ranks
  // may share one); NULL: bound by each rank's first call on device memory.
  if (devices)
    for (int r = 0; r < nranks; ++r)
      if (devices[r] < 0)
        return failWith(
            nullptr, collInvalidArgument,
            llvm::formatv("devices[{0}] is {1}, not a CUDA device ordinal", r, devices[r]));
  auto config = resolveConfig(nullptr);
  if (!config)
    return failWith(nullptr, config.takeError());
  LocalBootstrapGroup boot(nranks);
  const uint64_t nonce = randomNonce();
  const PeerInfo self = selfPeerInfo(config->agreedHash());
  std::vector<std::unique_ptr<Communicator>> made(static_cast<size_t>(nranks));
  std::vector<std::string> errors(static_cast<size_t>(nranks));
  std::vector<collResult_t> results(static_cast<size_t>(nranks), collSuccess);
  auto work = [&](int r) {
    auto b = boot.join(r, self);
    if (!b) {
      results[r] = takeResult(b.takeError(), errors[r]);
      return;
    }
    auto c = Communicator::create(std::move(*b), *config, nonce);
    if (!c) {
      results[r] = takeResult(c.takeError(), errors[r]);
      return;
    }
    made[r] = std::move(*c);
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < nranks; ++r)
    threads.emplace_back(work, r);
  work(0);
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < nranks; ++r)
    if (results[r] != collSuccess) {
      for (int i = 0; i < nranks; ++i)
        comms[i] = nullptr;
      return failWith(nullptr, results[r], llvm::formatv("rank {0}: {1}", r, errors[r]));
    }
  for (int r = 0; r < nranks; ++r) {
    if (devices)
      made[r]->bindDevice(devices[r]);
    comms[r] = new collComm{std::move(made[r])};
  }
  return collSuccess;
}

collResult_t collCommInitFromEnv(collComm_t *comm) {
  if (!comm)
    return failWith(nullptr, collInvalidArgument, "comm (the output pointer) is NULL");
  auto get = [](const char *name) -> std::optional<long> {
    const char *v = std::getenv(name);
    if (!v || !*v)
      return std::nullopt;
    char *end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (end == v || *end)
      return std::nullopt;
    return x;
  };
  std::optional<long> rank, size;
  std::string launcher, job;
  if ((rank = get("OMPI_COMM_WORLD_RANK")) && (size = get("OMPI_COMM_WORLD_SIZE"))) {
    launcher = "Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)";
    for (const char *v : {"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"})
      if (const char *j = std::getenv(v))
        job = j;
  } else if ((rank = get("SLURM_PROCID")) && (size = get("SLURM_NTASKS"))) {
    launcher = "Slurm (SLURM_PROCID, SLURM_NTASKS)";
    if (const char *j = std::getenv("SLURM_JOB_ID"))
      job = std::string(j) + "." + (std::getenv("SLURM_STEP_ID") ? std::getenv("SLURM_STEP_ID") : "");
  } else if ((rank = get("RANK")) && (size = get("WORLD_SIZE"))) {
    launcher = "torchrun (RANK, WORLD_SIZE)";
    if (const char *j = std::getenv("TORCHELASTIC_RUN_ID"))
      job = j;
  } else if ((rank = get("PMI_RANK")) && (size = get("PMI_SIZE"))) {
    launcher = "PMI (PMI_RANK, PMI_SIZE)";
  } else {
    return failWith(nullptr, collInvalidUsage,
                    "collCommInitFromEnv: no launcher variables found: set OMPI_COMM_WORLD_RANK "
                    "and OMPI_COMM_WORLD_SIZE (mpirun), SLURM_PROCID and SLURM_NTASKS (srun), or "
                    "RANK and WORLD_SIZE (torchrun)");
  }
  if (collResult_t r = checkInitArgs(comm, static_cast<int>(*size), static_cast<int>(*rank)))
    return r;
  // The root's address.
  std::string root;
  if (const char *fixed = std::getenv("COLL_COMM_ID"); fixed && *fixed) {
    root = fixed;
  } else if (const char *addr = std::getenv("MASTER_ADDR"); addr && get("MASTER_PORT")) {
    // torch.distributed's store owns MASTER_PORT; Coll's root takes the next.
    root = llvm::formatv("{0}:{1}", addr, *get("MASTER_PORT") + 1).str();
  } else if (auto local = get("OMPI_COMM_WORLD_LOCAL_SIZE"); local && *local == *size && !job.empty()) {
    // Every rank on this host: loopback, a port derived from the job id.
    root = llvm::formatv("127.0.0.1:{0}", derivedLoopbackPort(job)).str();
  } else {
    return failWith(nullptr, collInvalidUsage,
                    llvm::formatv("collCommInitFromEnv: rank {0} of {1} from {2}, but no root "
                                  "address: set COLL_COMM_ID=host:port (rank 0's host; rank 0 "
                                  "listens there), or MASTER_ADDR and MASTER_PORT",
                                  *rank, *size, launcher));
  }
  auto address = parseAddress(root);
  if (!address)
    return failWith(nullptr, collInvalidArgument,
                    "collCommInitFromEnv: " + llvm::toString(address.takeError()));
  if (address->port() == 0)
    return failWith(nullptr, collInvalidArgument,
                    "collCommInitFromEnv: the root address " + root + " needs a port");
  UniqueId id;
  id.root = *address;
  id.nonce = llvm::hash_combine(root, *size, job) | 1;
  if (*rank == 0) {
    auto started = startRoot(*address, id.nonce);
    if (!started)
      return failWith(nullptr, collSystemError,
                      "collCommInitFromEnv: rank 0 cannot listen on " + root + ": " +
                          llvm::toString(started.takeError()) +
                          " (set COLL_COMM_ID=host:port to a free port on rank 0's host)");
  }
  collUniqueId raw;
  encodeUniqueId(id, raw.internal);
  COLL_LOG(Info, Env, static_cast<int>(*rank),
           llvm::formatv("collCommInitFromEnv: rank {0} of {1} from {2}; root {3}", *rank, *size,
                         launcher, root));
  return collCommInitRank(comm, static_cast<int>(*size), raw, static_cast<int>(*rank));
}

collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t *newcomm,
                           const collConfig_t *config) {
  if (!comm || !comm->impl)
    return failWith(nullptr, collInvalidArgument, "collCommSplit: comm is NULL");
  if (!newcomm)
    return failWith(comm, collInvalidArgument, "collCommSplit: newcomm is NULL");
  if (color < 0 && color != COLL_SPLIT_NOCOLOR)
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("collCommSplit: color {0} must be non-negative or "
                                  "COLL_SPLIT_NOCOLOR",
                                  color));
  auto resolved = configFor(comm, config);
  if (!resolved)
    return failWith(comm, resolved.takeError());
  *newcomm = nullptr;
  if (group.depth > 0) {
    group.splits.push_back({comm, color, key, newcomm, *resolved});
    return collSuccess;
  }
  auto made = comm->impl->split(color, key, *resolved);
  if (!made)
    return failWith(comm, made.takeError());
  if (*made)
    *newcomm = new collComm{std::move(*made)};
  return collSuccess;
}

collResult_t collCommFinalize(collComm_t comm) {
  if (!comm || !comm->impl)
    return failWith(nullptr, collInvalidArgument, "collCommFinalize: comm is NULL");
  if (llvm::Error err = comm->impl->finalize())
    return failWith(comm, std::move(err));
  return collSuccess;
}

collResult_t collCommDestroy(collComm_t comm) {
  if (!comm)
    return failWith(nullptr, collInvalidArgument, "collCommDestroy: comm is NULL");
  delete comm;
  return collSuccess;
}

collResult_t collCommAbort(collComm_t comm) {
  if (!comm)
    return failWith(nullptr, collInvalidArgument, "collCommAbort: comm is NULL");
  if (comm->impl)
    comm->impl->abort();
  delete comm;
  return collSuccess;
}

collResult_t collCommGetAsyncError(collComm_t comm, collResult_t *asyncError) {
  if (!comm || !comm->impl || !asyncError)
    return failWith(comm, collInvalidArgument, "collCommGetAsyncError: NULL argument");
  *asyncError = comm->impl->checkAsyncError();
  return collSuccess;
}

collResult_t collCommRevoke(collComm_t comm, int revokeFlags) {
  if (!comm || !comm->impl)
    return failWith(nullptr, collInvalidArgument, "collCommRevoke: comm is NULL");
  if (revokeFlags != COLL_REVOKE_DEFAULT)
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("collCommRevoke: revokeFlags {0} must be COLL_REVOKE_DEFAULT (0)",
                                  revokeFlags));
  comm->impl->revoke();
  return collSuccess;
}

collResult_t collCommShrink(collComm_t comm, int *excludeRanks, int excludeRanksCount,
                            collComm_t *newcomm, const collConfig_t *config, int shrinkFlags) {
  if (!comm || !comm->impl)
    return failWith(nullptr, collInvalidArgument, "collCommShrink: comm is NULL");
  if (!newcomm)
    return failWith(comm, collInvalidArgument, "collCommShrink: newcomm is NULL");
  *newcomm = nullptr;
  if (shrinkFlags != COLL_SHRINK_DEFAULT && shrinkFlags != COLL_SHRINK_ABORT)
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("collCommShrink: shrinkFlags {0} must be COLL_SHRINK_DEFAULT (0) "
                                  "or COLL_SHRINK_ABORT (1)",
                                  shrinkFlags));
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanks))
    return failWith(comm, collInvalidArgument,
                    "collCommShrink: excludeRanks is NULL or excludeRanksCount negative");
  const int n = comm->impl->nranks(), me = comm->impl->rank();
  std::vector<int> exclude;
  for (int i = 0; i < excludeRanksCount; ++i) {
    const int r = excludeRanks[i];
    if (r < 0 || r >= n)
      return failWith(comm, collInvalidArgument,
                      llvm::formatv("collCommShrink: excluded rank {0} is out of range for {1} "
                                    "ranks",
                                    r, n));
    if (r == me)
      return failWith(comm, collInvalidArgument,
                      llvm::formatv("collCommShrink: rank {0} is in excludeRanks; excluded ranks "
                                    "do not call collCommShrink",
                                    me));
    if (std::find(exclude.begin(), exclude.end(), r) != exclude.end())
      return failWith(comm, collInvalidArgument,
                      llvm::formatv("collCommShrink: rank {0} is excluded twice", r));
    exclude.push_back(r);
  }
  auto resolved = configFor(comm, config);
  if (!resolved)
    return failWith(comm, resolved.takeError());
  auto made = comm->impl->shrink(exclude, *resolved, shrinkFlags == COLL_SHRINK_ABORT);
  if (!made)
    return failWith(comm, made.takeError());
  *newcomm = new collComm{std::move(*made)};
  return collSuccess;
}

collResult_t collCommGetUniqueId(collComm_t comm, collUniqueId *uniqueId) {
  if (!comm || !comm->impl)
    return failWith(nullptr, collInvalidArgument, "collCommGetUniqueId: comm is NULL");
  return collGetUniqueId(uniqueId);
}

collResult_t collCommGrow(collComm_t comm, int nRanks, const collUniqueId *uniqueId, int rank,
                          collComm_t *newcomm, const collConfig_t *config) {
  if (!newcomm)
    return failWith(comm, collInvalidArgument, "collCommGrow: newcomm is NULL");
  *newcomm = nullptr;
  if (!comm) {
    // A new rank: as collCommInitRankConfig.
    if (!uniqueId)
      return failWith(nullptr, collInvalidArgument,
                      "collCommGrow: a new rank (comm NULL) needs the root's uniqueId");
    return collCommInitRankConfig(newcomm, nRanks, *uniqueId, rank, config);
  }
  if (!comm->impl)
    return failWith(nullptr, collInvalidArgument, "collCommGrow: comm is not a communicator");
  if (rank != -1)
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("collCommGrow: rank {0}: a rank of comm keeps its number and "
                                  "passes -1",
                                  rank));
  if (nRanks <= comm->impl->nranks())
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("collCommGrow: nRanks {0} must be larger than comm's {1} ranks",
                                  nRanks, comm->impl->nranks()));
  auto resolved = configFor(comm, config);
  if (!resolved)
    return failWith(comm, resolved.takeError());
  auto made = comm->impl->grow(nRanks, uniqueId ? uniqueId->internal : nullptr, *resolved);
  if (!made)
    return failWith(comm, made.takeError());
  *newcomm = new collComm{std::move(*made)};
  return collSuccess;
}

collResult_t collIsend(const void *sendbuff, size_t count, collDataType_t datatype, int peer,
                       int tag, collComm_t comm, collRequest_t *request) {
  return postTagged(true, const_cast<void *>(sendbuff), count, datatype, peer, tag, comm, request,
                    "collIsend");
}

collResult_t collIrecv(void *recvbuff, size_t count, collDataType_t datatype, int peer, int tag,
                       collComm_t comm, collRequest_t *request) {
  return postTagged(false, recvbuff, count, datatype, peer, tag, comm, request, "collIrecv");
}

collResult_t collTest(collRequest_t *request, int *flag, collStatus_t *status) {
  if (!request || !flag)
    return failWith(nullptr, collInvalidArgument, "collTest: request or flag is NULL");
  *flag = 0;
  if (*request && !(*request)->engine->test(*(*request)->request))
    return collSuccess;
  *flag = 1;
  return finishTagged(request, status, "collTest");
}

collResult_t collWait(collRequest_t *request, collStatus_t *status) {
  if (!request)
    return failWith(nullptr, collInvalidArgument, "collWait: request is NULL");
  if (*request)
    (*request)->engine->wait(*(*request)->request);
  return finishTagged(request, status, "collWait");
}

collResult_t collWaitAll(int count, collRequest_t *requests, collStatus_t *statuses) {
  if (count < 0 || (count > 0 && !requests))
    return failWith(nullptr, collInvalidArgument,
                    "collWaitAll: requests is NULL or count negative");
  collResult_t first = collSuccess;
  for (int i = 0; i < count; ++i) {
    collResult_t r = collWait(&requests[i], statuses ? &statuses[i] : nullptr);
    if (first == collSuccess)
      first = r;
  }
  return first;
}

collResult_t collCommCount(const collComm_t comm, int *count) {
  if (!comm || !comm->impl || !count)
    return failWith(comm, collInvalidArgument, "collCommCount: NULL argument");
  *count = comm->impl->nranks();
  return collSuccess;
}

collResult_t collCommUserRank(const collComm_t comm, int *rank) {
  if (!comm || !comm->impl || !rank)
    return failWith(comm, collInvalidArgument, "collCommUserRank: NULL argument");
  *rank = comm->impl->rank();
  return collSuccess;
}

collResult_t collAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           collDataType_t datatype, collRedOp_t op, collComm_t comm,
                           void *stream) {
  return enqueue(comm, makeOp(OpKind::AllReduce, sendbuff, recvbuff, count), datatype, op, stream);
}

collResult_t collAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           collDataType_t datatype, collComm_t comm, void *stream) {
  return enqueue(comm, makeOp(OpKind::AllGather, sendbuff, recvbuff, sendcount), datatype, collSum,
                 stream);
}

collResult_t collReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               collDataType_t datatype, collRedOp_t op, collComm_t comm,
                               void *stream) {
  return enqueue(comm, makeOp(OpKind::ReduceScatter, sendbuff, recvbuff, recvcount), datatype,
                 op, stream);
}

collResult_t collAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          collDataType_t datatype, collComm_t comm, void *stream) {
  return enqueue(comm, makeOp(OpKind::AllToAll, sendbuff, recvbuff, count), datatype, collSum,
                 stream);
}

collResult_t collBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           collDataType_t datatype, int root, collComm_t comm, void *stream) {
  return enqueue(comm, makeOp(OpKind::Broadcast, sendbuff, recvbuff, count, root), datatype,
                 collSum, stream);
}

collResult_t collReduce(const void *sendbuff, void *recvbuff, size_t count,
                        collDataType_t datatype, collRedOp_t op, int root, collComm_t comm,
                        void *stream) {
  return enqueue(comm, makeOp(OpKind::Reduce, sendbuff, recvbuff, count, root), datatype, op,
                 stream);
}

collResult_t collGather(const void *sendbuff, void *recvbuff, size_t count,
                        collDataType_t datatype, int root, collComm_t comm, void *stream) {
  return enqueue(comm, makeOp(OpKind::Gather, sendbuff, recvbuff, count, root), datatype,
                 collSum, stream);
}

collResult_t collScatter(const void *sendbuff, void *recvbuff, size_t count,
                         collDataType_t datatype, int root, collComm_t comm, void *stream) {
  return enqueue(comm, makeOp(OpKind::Scatter, sendbuff, recvbuff, count, root), datatype,
                 collSum, stream);
}

collResult_t collSend(const void *sendbuff, size_t count, collDataType_t datatype, int peer,
                      collComm_t comm, void *stream) {
  return enqueue(comm, makeOp(OpKind::Send, sendbuff, nullptr, count, peer), datatype, collSum,
                 stream);
}

collResult_t collRecv(void *recvbuff, size_t count, collDataType_t datatype, int peer,
                      collComm_t comm, void *stream) {
  return enqueue(comm, makeOp(OpKind::Recv, nullptr, recvbuff, count, peer), datatype, collSum,
                 stream);
}

collResult_t collGroupStart(void) {
  ++group.depth;
  return collSuccess;
}

collResult_t collGroupEnd(void) {
  if (group.depth == 0)
    return failWith(nullptr, collInvalidUsage, "collGroupEnd without collGroupStart");
  if (--group.depth > 0)
    return collSuccess;
  GroupState state = std::move(group);
  group = GroupState();

  // Communicator set-up first, every request on its own thread: they are
  // collective with each other.
  if (!state.inits.empty() || !state.splits.empty()) {
    size_t total = state.inits.size() + state.splits.size();
    std::vector<collResult_t> results(total, collSuccess);
    std::vector<std::string> messages(total);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < state.inits.size(); ++i)
      threads.emplace_back([&, i] {
        const PendingInit &p = state.inits[i];
        results[i] = initRank(p.out, p.nranks, p.id, p.rank, p.config);
        messages[i] = threadError;
      });
    for (size_t i = 0; i < state.splits.size(); ++i)
      threads.emplace_back([&, i] {
        const PendingSplit &p = state.splits[i];
        size_t slot = state.inits.size() + i;
        auto made = p.parent->impl->split(p.color, p.key, p.config);
        if (!made)
          results[slot] = takeResult(made.takeError(), messages[slot]);
        else if (*made)
          *p.out = new collComm{std::move(*made)};
      });
    for (std::thread &t : threads)
      t.join();
    for (size_t i = 0; i < total; ++i)
      if (results[i] != collSuccess)
        return failWith(nullptr, results[i], messages[i]);
  }

  std::vector<std::pair<Communicator *, Op>> ops;
  ops.reserve(state.ops.size());
  for (auto &[comm, op] : state.ops)
    ops.emplace_back(comm->impl.get(), op);
  if (llvm::Error err = Communicator::runQueued(ops)) {
    std::string message;
    collResult_t status = takeResult(std::move(err), message);
    threadError = message;
    return status;
  }
  return collSuccess;
}

} // extern "C"

//===----------------------------------------------------------------------===//
// Windows (docs/RUNTIME.md, "Windows")
//===----------------------------------------------------------------------===//

struct collWindow {
  collComm_t comm;
  int id;
};

collResult_t collMemAlloc(void **ptr, size_t size) {
  if (!ptr)
    return failWith(nullptr, collInvalidArgument, "collMemAlloc: ptr is NULL");
  *ptr = nullptr;
  auto p = coll::rt::allocateWindowMemory(size);
  if (!p)
    return failWith(nullptr, p.takeError());
  *ptr = *p;
  return collSuccess;
}

collResult_t collMemAllocDevice(void **ptr, size_t size, int device) {
  if (!ptr)
    return failWith(nullptr, collInvalidArgument, "collMemAllocDevice: ptr is NULL");
  *ptr = nullptr;
  auto p = coll::rt::allocateDeviceWindowMemory(size, device);
  if (!p)
    return failWith(nullptr, p.takeError());
  *ptr = *p;
  return collSuccess;
}

collResult_t collMemFree(void *ptr) {
  if (!ptr)
    return collSuccess; // as free(NULL)
  if (llvm::Error err = coll::rt::freeWindowMemory(ptr))
    return failWith(nullptr, std::move(err));
  return collSuccess;
}

collResult_t collCommWindowRegister(collComm_t comm, void *buff, size_t size, collWindow_t *win,
                                    int winFlags) {
  if (!comm || !comm->impl)
    return failWith(nullptr, collInvalidArgument, "collCommWindowRegister: comm is NULL");
  if (!win)
    return failWith(comm, collInvalidArgument, "collCommWindowRegister: win is NULL");
  *win = nullptr;
  if (winFlags & ~COLL_WIN_COLL_SYMMETRIC)
    return failWith(comm, collInvalidArgument,
                    llvm::formatv("collCommWindowRegister: unknown flags {0:x} (COLL_WIN_DEFAULT "
                                  "or COLL_WIN_COLL_SYMMETRIC)",
                                  winFlags));
  if (group.depth > 0)
    return failWith(comm, collInvalidUsage,
                    "collCommWindowRegister inside collGroupStart/collGroupEnd: register "
                    "windows outside groups");
  auto id = comm->impl->registerWindow(buff, size);
  if (!id)
    return failWith(comm, id.takeError());
  *win = new collWindow{comm, *id};
  return collSuccess;
}

collResult_t collCommWindowDeregister(collComm_t comm, collWindow_t win) {
  if (!comm || !comm->impl)
    return failWith(nullptr, collInvalidArgument, "collCommWindowDeregister: comm is NULL");
  if (!win)
    return failWith(comm, collInvalidArgument, "collCommWindowDeregister: win is NULL");
  if (win->comm != comm)
    return failWith(comm, collInvalidArgument,
                    "collCommWindowDeregister: the window was registered with another "
                    "communicator");
  if (group.depth > 0)
    return failWith(comm, collInvalidUsage,
                    "collCommWindowDeregister inside collGroupStart/collGroupEnd");
  if (llvm::Error err = comm->impl->deregisterWindow(win->id))
    return failWith(comm, std::move(err));
  delete win;
  return collSuccess;
}
