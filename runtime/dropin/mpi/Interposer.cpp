//===- Interposer.cpp - libcoll_mpi.so: Coll under unmodified MPI programs ----===//
//
// A PMPI interposer: preloaded (LD_PRELOAD=libcoll_mpi.so) or linked before
// -lmpi, it defines MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather,
// MPI_Alltoall, MPI_Bcast and MPI_Reduce. Each call runs on Coll when
//   - the communicator is an intracommunicator,
//   - the datatype is predefined and Coll has it (reductions), or any
//     predefined type (data movement, moved as bytes),
//   - the op is MPI_SUM, MPI_PROD, MPI_MIN or MPI_MAX,
//   - the buffers are host memory,
//   - and the communicator's selection gives it an algorithm;
// everything else goes to PMPI_*, and COLL_DEBUG=INFO says so once per
// (collective, reason). A tuning rule whose target is `mpi` sends a size
// range to Open MPI on purpose (docs/DROPIN.md).
//
// One Coll communicator per MPI communicator, made on its first eligible
// call (collective over it, as the call itself is) and cached in an
// attribute; its bootstrap is MPI itself (PMPI_Allgather on a duplicate of
// the communicator). MPI_Comm_free and MPI_Finalize destroy them.
//
// A call that fails on Coll (the watchdog, a mismatch, a peer that died)
// returns MPI_ERR_OTHER through the communicator's error handler, and Coll
// retires from that communicator: every later call on it goes to Open MPI,
// with one WARN naming the failure. The ranks of a host agree on it before
// their next call through the runtime (Communicator retirement,
// docs/RUNTIME.md "Retiring"): a rank that did not see the failure learns it
// at its next call, before touching a buffer, and hands that call on too.
//
//===----------------------------------------------------------------------===//

#include "coll/runtime/Bootstrap.h"
#include "coll/runtime/Comm.h"
#include "coll/runtime/Debug.h"
#include "coll/dropin/DropIn.h"

#include "coll/interpreter/DataType.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <mpi.h>

using namespace coll;
using namespace coll::rt;

namespace {

//===----------------------------------------------------------------------===//
// A bootstrap over MPI
//===----------------------------------------------------------------------===//

class MpiBootstrap final : public Bootstrap {
public:
  static llvm::Expected<std::unique_ptr<MpiBootstrap>> create(MPI_Comm parent, PeerInfo self) {
    auto b = std::unique_ptr<MpiBootstrap>(new MpiBootstrap);
    if (PMPI_Comm_dup(parent, &b->comm) != MPI_SUCCESS)
      return collError(collSystemError, "MPI_Comm_dup failed");
    PMPI_Comm_rank(b->comm, &b->myRank);
    PMPI_Comm_size(b->comm, &b->numRanks);
    self.rank = b->myRank;
    b->table.resize(static_cast<size_t>(b->numRanks));
    if (PMPI_Allgather(&self, sizeof(PeerInfo), MPI_BYTE, b->table.data(), sizeof(PeerInfo),
                       MPI_BYTE, b->comm) != MPI_SUCCESS)
      return collError(collSystemError, "MPI_Allgather of the peer table failed");
    return b;
  }
  ~MpiBootstrap() override {
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (comm != MPI_COMM_NULL && !finalized)
      PMPI_Comm_free(&comm);
  }

  llvm::Error allgather(void *data, size_t bytes) override {
    if (bytes > static_cast<size_t>(INT_MAX))
      return collError(collInternalError, "bootstrap allgather block too large");
    auto *base = static_cast<char *>(data);
    if (PMPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, base, static_cast<int>(bytes), MPI_BYTE,
                       comm) != MPI_SUCCESS)
      return collError(collRemoteError, "MPI_Allgather failed");
    return llvm::Error::success();
  }

  uint64_t nonce() {
    uint64_t n = 0;
    if (myRank == 0) {
      std::random_device device;
      n = ((uint64_t(device()) << 32) ^ device()) | 1;
    }
    PMPI_Bcast(&n, 1, MPI_UINT64_T, 0, comm);
    return n;
  }

private:
  MpiBootstrap() = default;
  MPI_Comm comm = MPI_COMM_NULL;
};

//===----------------------------------------------------------------------===//
// Communicators per MPI communicator
//===----------------------------------------------------------------------===//

/// What the attribute of an MPI communicator holds.
struct Entry {
  MPI_Comm owner = MPI_COMM_NULL;     ///< the MPI communicator it is attached to
  std::unique_ptr<Communicator> comm; ///< null: Coll cannot serve this communicator
  std::string why;                    ///< when comm is null or retired
  /// Coll failed a call on it (or a peer did): every call goes to Open MPI.
  /// The Coll communicator stays until MPI_Comm_free (peers may still map
  /// its shared memory).
  bool retired = false;
  /// In-place MPI_Reduce_scatter_block's result, which Coll writes here
  /// so that recvbuf past the result keeps its contents (as Open MPI does).
  std::vector<char> scratch;
};

std::mutex stateMutex;
MPI_Comm packComm = MPI_COMM_NULL; ///< packingComm()
int keyval = MPI_KEYVAL_INVALID;
std::set<Entry *> live; ///< every entry, destroyed at MPI_Finalize at the latest

int deleteEntry(MPI_Comm, int, void *value, void *) {
  auto *e = static_cast<Entry *>(value);
  {
    std::lock_guard<std::mutex> lock(stateMutex);
    live.erase(e);
  }
  delete e;
  return MPI_SUCCESS;
}

int worldRank() {
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

/// Logs once per (collective, reason) that a call fell back to MPI.
void fallback(const char *collective, const std::string &reason) {
  dropin::fallback(collective, "Open MPI", reason, worldRank());
}

/// The entry of `comm`, its Coll communicator made on first use; null with
/// `why` for an intercommunicator. Its `comm` is null (and `why` says why)
/// when Coll cannot serve it.
Entry *entryFor(MPI_Comm comm, std::string &why) {
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) {
    why = "an intercommunicator";
    return nullptr;
  }
  if (keyval == MPI_KEYVAL_INVALID &&
      PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, deleteEntry, &keyval, nullptr) !=
          MPI_SUCCESS) {
    why = "MPI_Comm_create_keyval failed";
    return nullptr;
  }
  void *value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, keyval, &value, &found);
  if (found) {
    auto *e = static_cast<Entry *>(value);
    why = e->why;
    return e;
  }
  // First use on this communicator: every rank is in this same call.
  auto *e = new Entry;
  e->owner = comm;
  llvm::Expected<Config> config = resolveConfig(nullptr);
  std::string error;
  if (!config) {
    error = llvm::toString(config.takeError());
  } else {
    config->underneath = {"mpi"};
    auto boot = MpiBootstrap::create(comm, selfPeerInfo(config->agreedHash()));
    if (!boot) {
      error = llvm::toString(boot.takeError());
    } else {
      uint64_t nonce = (*boot)->nonce();
      auto made = Communicator::create(std::move(*boot), *config, nonce);
      if (made)
        e->comm = std::move(*made);
      else
        error = llvm::toString(made.takeError());
    }
  }
  if (!e->comm) {
    e->why = "Coll could not set up a communicator: " + error;
    log(Level::Warn, Init, -1, e->why);
  }
  {
    std::lock_guard<std::mutex> lock(stateMutex);
    live.insert(e);
  }
  PMPI_Comm_set_attr(comm, keyval, e);
  why = e->why;
  return e;
}

/// Coll stops serving `e`'s communicator: said once, at WARN, with the
/// failure (`collective` the call that met it).
void retire(Entry &e, const char *collective, int rank, const std::string &failure) {
  e.retired = true;
  e.why = "Coll retired from this communicator at a failed call: " + failure;
  log(Level::Warn, Coll, rank,
      llvm::formatv("{0}: Coll failed on this communicator ({1}); every later call on it goes "
                    "to Open MPI",
                    collective, failure));
}

/// At MPI_Finalize: the communicators still alive (MPI_COMM_WORLD and
/// those never freed) lose their attribute, which destroys their Coll
/// communicator while MPI still works.
void destroyAll() {
  std::vector<MPI_Comm> owners;
  {
    std::lock_guard<std::mutex> lock(stateMutex);
    for (Entry *e : live)
      owners.push_back(e->owner);
  }
  for (MPI_Comm c : owners)
    PMPI_Comm_delete_attr(c, keyval);
  if (keyval != MPI_KEYVAL_INVALID) {
    PMPI_Comm_free_keyval(&keyval);
    keyval = MPI_KEYVAL_INVALID;
  }
  if (packComm != MPI_COMM_NULL)
    PMPI_Comm_free(&packComm);
}

//===----------------------------------------------------------------------===//
// Types, ops, and running a call
//===----------------------------------------------------------------------===//

std::optional<interp::DataType> reductionType(MPI_Datatype t) {
  if (t == MPI_FLOAT) return interp::DataType::Float32;
  if (t == MPI_DOUBLE) return interp::DataType::Float64;
  if (t == MPI_INT || t == MPI_INT32_T) return interp::DataType::Int32;
  if (t == MPI_UNSIGNED || t == MPI_UINT32_T) return interp::DataType::Uint32;
  if (t == MPI_INT64_T || t == MPI_LONG_LONG || (t == MPI_LONG && sizeof(long) == 8))
    return interp::DataType::Int64;
  if (t == MPI_UINT64_T || t == MPI_UNSIGNED_LONG_LONG ||
      (t == MPI_UNSIGNED_LONG && sizeof(long) == 8))
    return interp::DataType::Uint64;
  if (t == MPI_INT8_T || t == MPI_SIGNED_CHAR) return interp::DataType::Int8;
  if (t == MPI_UINT8_T || t == MPI_UNSIGNED_CHAR) return interp::DataType::Uint8;
  return std::nullopt;
}

std::optional<interp::ReduceOp> reductionOp(MPI_Op op) {
  if (op == MPI_SUM) return interp::ReduceOp::Sum;
  if (op == MPI_PROD) return interp::ReduceOp::Prod;
  if (op == MPI_MIN) return interp::ReduceOp::Min;
  if (op == MPI_MAX) return interp::ReduceOp::Max;
  return std::nullopt;
}

/// MPI_COMM_SELF's duplicate with MPI_ERRORS_RETURN, for PMPI_Pack and
/// PMPI_Unpack: an error there (a datatype not committed) is for the
/// drop-in to see, not for the program's error handler. Made at first use.
MPI_Comm packingComm() {
  std::lock_guard<std::mutex> lock(stateMutex);
  if (packComm == MPI_COMM_NULL && PMPI_Comm_dup(MPI_COMM_SELF, &packComm) == MPI_SUCCESS)
    PMPI_Comm_set_errhandler(packComm, MPI_ERRORS_RETURN);
  return packComm;
}

/// How the calls that only move data (allgather, alltoall, bcast) move
/// elements of a datatype: as `size` bytes each, read and written in place
/// where they lie without gaps from the buffer's start, else packed into
/// contiguous bytes and unpacked (`packed`: PMPI_Pack, PMPI_Unpack). Every
/// committed datatype moves, so that the decision depends on the bytes
/// alone: MPI lets ranks pass different datatypes with the same type
/// signature (MPICH's coll tests do, a vector on the root and a contiguous
/// type elsewhere), and they must all take Coll, or all Open MPI.
struct Movable {
  size_t size = 0;
  bool packed = false;
};
std::optional<Movable> movable(MPI_Datatype t, std::string &why) {
  if (t == MPI_DATATYPE_NULL) { // Open MPI's error, its handler called once
    why = "MPI_DATATYPE_NULL (MPI reports the error)";
    return std::nullopt;
  }
  int ints = 0, addrs = 0, types = 0, combiner = 0;
  if (PMPI_Type_get_envelope(t, &ints, &addrs, &types, &combiner) != MPI_SUCCESS) {
    why = "an invalid datatype (MPI reports the error)";
    return std::nullopt;
  }
  int size = 0;
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_size(t, &size);
  PMPI_Type_get_extent(t, &lb, &extent);
  // A predefined datatype's data start at its lower bound.
  MPI_Aint trueLb = lb, trueExtent = extent;
  if (combiner != MPI_COMBINER_NAMED) {
    PMPI_Type_get_true_extent(t, &trueLb, &trueExtent);
    // Committed? Packing none of it says (MPI_ERR_TYPE otherwise).
    char none = 0;
    int position = 0;
    MPI_Comm self = packingComm();
    if (self == MPI_COMM_NULL ||
        PMPI_Pack(&none, 0, t, &none, 0, &position, self) != MPI_SUCCESS) {
      why = "a datatype MPI does not take (not committed: MPI reports the error)";
      return std::nullopt;
    }
  }
  Movable m;
  m.size = static_cast<size_t>(std::max(size, 0));
  m.packed = !(lb == 0 && trueLb == 0 && extent == size && trueExtent == size);
  return m;
}

/// A buffer of `count` elements of a datatype that Coll moves as bytes:
/// the buffer itself, or (Movable::packed) its bytes packed into `bytes`.
struct Staged {
  void *buffer = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  bool packed = false;
  std::vector<char> bytes;

  /// Where Coll reads or writes the elements' bytes (`total` of them).
  void *at(size_t total) {
    if (!packed)
      return buffer;
    bytes.resize(total);
    return bytes.data();
  }
  /// The elements into `bytes`; false where MPI refuses.
  bool pack(size_t total) {
    if (!packed || !total)
      return true;
    bytes.resize(total);
    int position = 0;
    return PMPI_Pack(buffer, count, type, bytes.data(), static_cast<int>(total), &position,
                     packingComm()) == MPI_SUCCESS;
  }
  /// `bytes` back into the elements.
  bool unpack() {
    if (!packed || bytes.empty())
      return true;
    int position = 0;
    return PMPI_Unpack(bytes.data(), static_cast<int>(bytes.size()), &position, buffer, count,
                       type, packingComm()) == MPI_SUCCESS;
  }
};

/// Whether `s` is to be packed but lies in device memory, which the drop-in
/// does not pack (Open MPI, CUDA-aware or not, decides).
bool onDevice(const Staged &s, const char *name) {
  if (!s.packed || !s.buffer || !isDevicePointer(s.buffer))
    return false;
  fallback(name, "a datatype with gaps on device buffers");
  return true;
}

/// Whether `bytes` can be packed (MPI counts bytes in an int).
bool packable(const Movable &m, size_t bytes, const char *name) {
  if (!m.packed || bytes <= static_cast<size_t>(INT_MAX))
    return true;
  fallback(name, "a datatype with gaps, over 2 GiB to pack");
  return false;
}

const char *typeName(MPI_Datatype t) {
  static thread_local char name[MPI_MAX_OBJECT_NAME];
  int len = 0;
  if (PMPI_Type_get_name(t, name, &len) != MPI_SUCCESS || len == 0)
    std::snprintf(name, sizeof name, "a derived datatype");
  return name;
}

/// What runOnColl did. Fallback: Coll did not run the call and touched
/// none of its buffers; the caller hands it to Open MPI. Stopped: Coll had
/// retired (a peer failed an earlier call) when the call began, and stopped
/// it: the peers run it on Open MPI, so the caller must too, from its
/// inputs as they were (`rerun`). Spoiled: the same, but its input may be
/// partly overwritten (in place): the caller still makes the call on Open
/// MPI with its peers, so that later calls match, and returns
/// MPI_ERR_OTHER (spoiled()). Failed: the call failed on Coll; the MPI
/// error handler has been called.
enum class Outcome { Ran, Fallback, Stopped, Spoiled, Failed };

/// The Coll communicator that runs `op` on `mcomm`, with `entry`; null
/// (after saying why) when the call goes to Open MPI.
Communicator *collFor(const char *collective, MPI_Comm mcomm, Op &op, Entry *&entry) {
  std::string why;
  entry = entryFor(mcomm, why);
  Communicator *c = entry && !entry->retired ? entry->comm.get() : nullptr;
  if (!c) {
    fallback(collective, why);
    return nullptr;
  }
  // MPI reports its own errors (a NULL buffer, a root out of range): such
  // calls go to it.
  if (llvm::Error err = validateOp(op, c->rank(), c->nranks(), interp::dataTypeSize(op.type),
                                   collective)) {
    std::string message;
    takeResult(std::move(err), message);
    fallback(collective, message);
    return nullptr;
  }
  if (!dropin::collRuns(collective, *c, op, "Open MPI", worldRank()))
    return nullptr;
  return c;
}

/// Runs `op` on `c` (collFor's). `rerun`: whether the call's inputs are
/// intact after Coll began it (or the caller restores them), so that a call
/// stopped by a peer's earlier failure can go to Open MPI (Stopped); else
/// it is Spoiled.
Outcome runOn(const char *collective, MPI_Comm mcomm, Communicator &c, Entry &entry, Op op,
              bool rerun, int &mpiResult) {
  // Device buffers (a CUDA-aware call): after the legacy default stream's
  // work, complete on return as MPI's calls are.
  op.stream = nullptr;
  Communicator::Unit unit{&c, llvm::ArrayRef<Op>(&op, 1)};
  llvm::Error err = Communicator::runRound(unit);
  if (!err && op.device >= 0)
    err = c.waitDevice();
  if (!err) {
    mpiResult = MPI_SUCCESS;
    return Outcome::Ran;
  }
  std::unique_ptr<CollError> e;
  llvm::handleAllErrors(
      std::move(err), [&](std::unique_ptr<CollError> ce) { e = std::move(ce); },
      [&](const llvm::ErrorInfoBase &other) {
        e = std::make_unique<CollError>(collSystemError, other.message());
      });
  retire(entry, collective, c.rank(),
         llvm::formatv("{0}: {1}", collGetErrorString(e->result), e->message));
  if (e->retired)
    return !e->begun ? Outcome::Fallback : rerun ? Outcome::Stopped : Outcome::Spoiled;
  mpiResult = MPI_ERR_OTHER;
  PMPI_Comm_call_errhandler(mcomm, mpiResult);
  return Outcome::Failed;
}

/// Whether the call is over (Ran or Failed); else it goes to Open MPI.
bool over(Outcome o) { return o == Outcome::Ran || o == Outcome::Failed; }

/// The result of a call that went to Open MPI after `o`: Open MPI's `rc`,
/// or for a Spoiled call MPI_ERR_OTHER (through the error handler).
int spoiled(Outcome o, int rc, MPI_Comm comm) {
  if (o != Outcome::Spoiled)
    return rc;
  rc = MPI_ERR_OTHER;
  PMPI_Comm_call_errhandler(comm, rc);
  return rc;
}

/// collFor, then runOn: Fallback when Coll does not run it.
Outcome runOnColl(const char *collective, MPI_Comm mcomm, Op op, bool rerun, int &mpiResult) {
  Entry *entry = nullptr;
  Communicator *c = collFor(collective, mcomm, op, entry);
  if (!c)
    return Outcome::Fallback;
  return runOn(collective, mcomm, *c, *entry, op, rerun, mpiResult);
}

bool countOk(int count, const char *collective) {
  if (count < 0) {
    fallback(collective, "a negative count (MPI reports the error)");
    return false;
  }
  return true;
}

/// The datatype and op of a reduction (MPI_Allreduce, MPI_Reduce,
/// MPI_Reduce_scatter_block) in Coll's terms; nullopt where Coll does not
/// reduce them, saying why once, or where the count is negative (countOk).
struct Reduction {
  interp::DataType type;
  interp::ReduceOp op;
};
std::optional<Reduction> reductionFor(const char *name, int count, MPI_Datatype datatype,
                                      MPI_Op op) {
  // Null handles: Open MPI's error, and its error handler called once (a
  // query of them here would call it too).
  if (datatype == MPI_DATATYPE_NULL || op == MPI_OP_NULL)
    return std::nullopt;
  auto type = reductionType(datatype);
  auto red = reductionOp(op);
  // Where Open MPI's result is not the arithmetic one, the drop-in gives
  // Open MPI's (it is the library replaced), and Open MPI runs the call.
  // Open MPI 4.1's vectorized ops (its op/avx component, used from a count
  // that depends on the CPU's vector width) saturate 8-bit sums (100 + 100
  // is 127 as MPI_INT8_T from 16 elements on an AVX-512 machine, -56 below)
  // and compare MPI_UNSIGNED_LONG as signed in MPI_MIN and MPI_MAX (max(1,
  // 2^63) is 1); dropin-mpi-Conformance-* finds both.
  if (type && red) {
    const char *own = nullptr;
    if (*red == interp::ReduceOp::Sum &&
        (*type == interp::DataType::Int8 || *type == interp::DataType::Uint8))
      own = "Open MPI's 8-bit MPI_SUM saturates from some count on (its op/avx); its result is "
            "the one given";
    else if (datatype == MPI_UNSIGNED_LONG &&
             (*red == interp::ReduceOp::Min || *red == interp::ReduceOp::Max))
      own = "Open MPI's MPI_MIN and MPI_MAX of MPI_UNSIGNED_LONG compare as signed (its "
            "op/avx); its result is the one given";
    if (own) {
      if (count >= 0)
        fallback(name, own);
      return std::nullopt;
    }
  }
  if (type && red) {
    if (!countOk(count, name))
      return std::nullopt;
    return Reduction{*type, *red};
  }
  if (count >= 0)
    fallback(name, !type ? std::string("datatype ") + typeName(datatype) +
                               " is not one Coll reduces"
                         : "a reduction op other than MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX");
  return std::nullopt;
}

/// Whether `sendbuf` is `recvbuf` without MPI_IN_PLACE, which MPI forbids
/// and Open MPI reports (MPI_ERR_BUFFER for an allreduce): such calls go to
/// it, said once.
bool aliased(const char *name, const void *sendbuf, const void *recvbuf) {
  if (sendbuf != recvbuf || sendbuf == MPI_IN_PLACE || !sendbuf)
    return false;
  fallback(name, "sendbuf and recvbuf are one buffer without MPI_IN_PLACE (MPI reports the "
                 "error)");
  return true;
}

/// The signature of MPI_Allgather and MPI_Alltoall.
using BlockCall = int (*)(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                          void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

/// MPI_Allgather (`kind` AllGather) or MPI_Alltoall (AllToAll), which send
/// each peer one block and receive `recvcount` elements from each: on Coll,
/// as bytes (Movable), where the count is not negative and a send block has
/// as many bytes as a receive block (MPI_IN_PLACE: the blocks to send are
/// in recvbuf); else by `mpi`, the PMPI call, after fallback has said why.
int runBlocks(const char *name, OpKind kind, BlockCall mpi, const void *sendbuf, int sendcount,
              MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
              MPI_Comm comm) {
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  if (comm == MPI_COMM_NULL || aliased(name, sendbuf, recvbuf))
    return mpi(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  std::string why;
  auto rtype = movable(recvtype, why);
  std::optional<Movable> stype = inPlace ? rtype : movable(sendtype, why);
  if (!rtype || !stype || !countOk(recvcount, name) || (!inPlace && !countOk(sendcount, name)) ||
      (!inPlace && stype->size * size_t(sendcount) != rtype->size * size_t(recvcount))) {
    if (rtype && stype && recvcount >= 0 && (inPlace || sendcount >= 0))
      why = "send and receive sizes differ (MPI reports the error)";
    if (recvcount >= 0 && (inPlace || sendcount >= 0))
      fallback(name, why);
    return mpi(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  int rank = 0, size = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  const size_t n = static_cast<size_t>(size);
  const size_t block = static_cast<size_t>(recvcount) * rtype->size;
  const bool allToAll = kind == OpKind::AllToAll;
  if (!packable(*rtype, block * n, name) || !packable(*stype, block * n, name))
    return mpi(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  Op o;
  o.kind = kind;
  o.type = interp::DataType::Uint8;
  o.count = block;
  // What this rank sends: sendbuf, or with MPI_IN_PLACE recvbuf's own block
  // (allgather) or all of recvbuf (alltoall). Coll reads its bytes in
  // place, or packed.
  MPI_Aint lb = 0, rextent = 0;
  PMPI_Type_get_extent(recvtype, &lb, &rextent);
  Staged in{const_cast<void *>(sendbuf), allToAll ? sendcount * size : sendcount, sendtype,
            stype->packed, {}};
  if (inPlace) {
    in.buffer = allToAll ? recvbuf
                         : static_cast<char *>(recvbuf) +
                               static_cast<MPI_Aint>(rank) * recvcount * rextent;
    in.count = allToAll ? recvcount * size : recvcount;
    in.type = recvtype;
  }
  Staged out{recvbuf, recvcount * size, recvtype, rtype->packed, {}};
  if (onDevice(in, name) || onDevice(out, name))
    return mpi(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  o.send = in.at(allToAll ? block * n : block);
  o.recv = out.at(block * n);
  Entry *entry = nullptr;
  Communicator *c = collFor(name, comm, o, entry);
  std::vector<char> copy;
  if (c && !in.pack(allToAll ? block * n : block)) {
    fallback(name, "PMPI_Pack failed");
    c = nullptr;
  }
  o.send = in.packed ? in.bytes.data() : o.send;
  if (c && inPlace && allToAll && !in.packed) {
    // In place, the blocks that arrive overwrite what is still to be
    // sent: Coll reads a copy.
    copy.assign(static_cast<char *>(recvbuf), static_cast<char *>(recvbuf) + block * n);
    o.send = copy.data();
  }
  int result = MPI_SUCCESS;
  const Outcome outcome =
      c ? runOn(name, comm, *c, *entry, o, /*rerun=*/true, result) : Outcome::Fallback;
  if (outcome == Outcome::Stopped && !copy.empty())
    std::memcpy(recvbuf, copy.data(), copy.size()); // the input Open MPI reads
  if (outcome == Outcome::Ran && !out.unpack()) {
    result = MPI_ERR_INTERN;
    PMPI_Comm_call_errhandler(comm, result);
  }
  if (over(outcome))
    return result;
  return mpi(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

} // namespace

//===----------------------------------------------------------------------===//
// The intercepted calls
//===----------------------------------------------------------------------===//

extern "C" {

int MPI_Finalize(void) {
  destroyAll();
  return PMPI_Finalize();
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  const char *name = "MPI_Allreduce";
  auto reduction = comm != MPI_COMM_NULL && !aliased(name, sendbuf, recvbuf)
                       ? reductionFor(name, count, datatype, op)
                       : std::nullopt;
  if (!reduction)
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  Op o;
  o.kind = OpKind::AllReduce;
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  o.send = inPlace ? recvbuf : sendbuf;
  o.recv = recvbuf;
  o.count = static_cast<size_t>(count);
  o.type = reduction->type;
  o.op = reduction->op;
  int result = MPI_SUCCESS;
  // In place, a stopped call may have reduced into its input (Spoiled).
  const Outcome outcome = runOnColl(name, comm, o, /*rerun=*/!inPlace, result);
  if (over(outcome))
    return result;
  return spoiled(outcome, PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm), comm);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
  const char *name = "MPI_Reduce";
  if (comm == MPI_COMM_NULL)
    return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  int size = 0, rank = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  // (recvbuf matters at the root only.)
  auto reduction = rank == root && aliased(name, sendbuf, recvbuf)
                       ? std::nullopt
                       : reductionFor(name, count, datatype, op);
  if (!reduction || root < 0 || root >= size)
    return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  Op o;
  o.kind = OpKind::Reduce;
  const bool inPlace = sendbuf == MPI_IN_PLACE; // MPI_IN_PLACE: only at the root
  o.send = inPlace ? recvbuf : sendbuf;
  o.recv = rank == root ? recvbuf : nullptr;
  o.count = static_cast<size_t>(count);
  o.type = reduction->type;
  o.op = reduction->op;
  o.root = root;
  int result = MPI_SUCCESS;
  const Outcome outcome = runOnColl(name, comm, o, /*rerun=*/!inPlace, result);
  if (over(outcome))
    return result;
  return spoiled(outcome, PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm), comm);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  const char *name = "MPI_Reduce_scatter_block";
  auto reduction = comm != MPI_COMM_NULL && !aliased(name, sendbuf, recvbuf)
                       ? reductionFor(name, recvcount, datatype, op)
                       : std::nullopt;
  if (!reduction)
    return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  Op o;
  o.kind = OpKind::ReduceScatter;
  o.count = static_cast<size_t>(recvcount);
  o.type = reduction->type;
  o.op = reduction->op;
  o.send = sendbuf;
  o.recv = recvbuf;
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  if (inPlace)
    o.send = recvbuf;
  Entry *entry = nullptr;
  Communicator *c = collFor(name, comm, o, entry);
  const size_t resultBytes = o.count * interp::dataTypeSize(o.type);
  if (c && inPlace) {
    // MPI_IN_PLACE: the input is all of recvbuf and the result its first
    // recvcount elements; the rest of recvbuf keeps its contents, as Open
    // MPI and MPICH leave it (the standard does not say; programs check).
    // Coll runs it out of place, reading recvbuf (which it does not write)
    // into scratch, and the result is copied to the start of recvbuf.
    entry->scratch.resize(std::max(entry->scratch.size(), resultBytes));
    o.recv = entry->scratch.data();
  }
  int result = MPI_SUCCESS;
  const Outcome outcome = c ? runOn(name, comm, *c, *entry, o, /*rerun=*/true, result)
                            : Outcome::Fallback;
  if (outcome == Outcome::Ran && inPlace && resultBytes)
    std::memcpy(recvbuf, entry->scratch.data(), resultBytes);
  if (over(outcome))
    return result;
  return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return runBlocks("MPI_Allgather", OpKind::AllGather, PMPI_Allgather, sendbuf, sendcount,
                   sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return runBlocks("MPI_Alltoall", OpKind::AllToAll, PMPI_Alltoall, sendbuf, sendcount,
                   sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  const char *name = "MPI_Bcast";
  if (comm == MPI_COMM_NULL)
    return PMPI_Bcast(buffer, count, datatype, root, comm);
  std::string why;
  auto type = movable(datatype, why);
  int size = 0, rank = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  if (!type || !countOk(count, name) || root < 0 || root >= size) {
    if (!type && count >= 0)
      fallback(name, why);
    return PMPI_Bcast(buffer, count, datatype, root, comm);
  }
  const size_t bytes = static_cast<size_t>(count) * type->size;
  if (!packable(*type, bytes, name))
    return PMPI_Bcast(buffer, count, datatype, root, comm);
  Staged data{buffer, count, datatype, type->packed, {}};
  if (onDevice(data, name))
    return PMPI_Bcast(buffer, count, datatype, root, comm);
  Op o;
  o.kind = OpKind::Broadcast;
  o.type = interp::DataType::Uint8;
  o.count = bytes;
  o.send = o.recv = data.at(bytes);
  o.root = root;
  Entry *entry = nullptr;
  Communicator *c = collFor(name, comm, o, entry);
  if (c && rank == root && !data.pack(bytes)) {
    fallback(name, "PMPI_Pack failed");
    c = nullptr;
  }
  int result = MPI_SUCCESS;
  // The root's buffer is only read, the others' only written.
  const Outcome outcome =
      c ? runOn(name, comm, *c, *entry, o, /*rerun=*/true, result) : Outcome::Fallback;
  if (outcome == Outcome::Ran && rank != root && !data.unpack()) {
    result = MPI_ERR_INTERN;
    PMPI_Comm_call_errhandler(comm, result);
  }
  if (over(outcome))
    return result;
  return PMPI_Bcast(buffer, count, datatype, root, comm);
}

} // extern "C"
