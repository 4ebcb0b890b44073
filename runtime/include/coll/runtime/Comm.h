//===- Comm.h - A communicator: one rank of a job -----------------*- C++ -*-===//
//
// What a collComm_t is (docs/ARCHITECTURE.md §7): the bootstrap ring, the
// node shape, the registry and the selection rules, the host transport, and
// the engine that runs this rank's tbs on the calling thread (and a few
// workers). The C API (Api.cpp) validates arguments (Op.h) and groups
// calls; everything here assumes valid arguments. The sections of the
// implementation are listed in lib/CommImpl.h.
//
// Calls run in rounds: a round is, for each communicator it involves, one
// collective or every point-to-point operation of a group. All tasks of a
// round run in one engine launch, so ranks of one process driven by one
// thread (collCommInitAll + a group) progress together.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_COMM_H
#define COLL_RUNTIME_COMM_H

#include "coll.h"

#include "coll/runtime/Bootstrap.h"
#include "coll/runtime/Op.h"
#include "coll/runtime/Registry.h"

#include "coll/interpreter/DataType.h"
#include "coll/interpreter/Executor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace coll::rt {

/// An llvm::Error that carries a collResult_t.
class CollError : public llvm::ErrorInfo<CollError> {
public:
  static char ID;
  CollError(collResult_t result, std::string message)
      : result(result), message(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }
  collResult_t result;
  std::string message;
  /// Every rank of the call gets this error at the same point, before any
  /// of the call's work began (no algorithm serves it): a drop-in may hand
  /// the call to the library underneath.
  bool agreed = false;
  /// The communicator had retired before this call (docs/RUNTIME.md,
  /// "Retiring"): an earlier call failed, on this rank or on a peer of its
  /// host, and every rank of the host learns it at its next call. A drop-in
  /// hands this call and every later one to the library underneath. With
  /// `begun` clear the call was refused before it touched any buffer; set,
  /// it had begun before this rank learned of the failure and was stopped
  /// (its output, and an input it shares, may be partly written).
  bool retired = false;
  bool begun = false;
};

llvm::Error collError(collResult_t result, const llvm::Twine &message);
/// The result and message of `err` (success for no error); errors that are
/// not CollErrors become `otherwise`. `agreed`: CollError::agreed.
collResult_t takeResult(llvm::Error err, std::string &message,
                        collResult_t otherwise = collSystemError, bool *agreed = nullptr);

/// The settings of one communicator, from its collConfig_t and the
/// environment.
struct Config {
  uint32_t watchdogMs = interp::DefaultWatchdogMs;
  std::string algoDir, algoFiles, tuningFile;
  /// The program cache (COLL_CACHE_PATH, COLL_CACHE_DISABLE; docs/RUNTIME.md
  /// "The program cache"); empty: none.
  std::string cacheDir;
  /// COLL_TRACE: a Chrome trace / Perfetto JSON file of every collective
  /// (%h host, %p pid, %r rank; docs/RUNTIME.md).
  std::string traceFile;
  bool builtin = true;
  /// COLL_COMPILE_ON_FIRST_USE: 1 compiles the built-in programs at a
  /// call's first use of each, 0 at creation; unset (-1), on first use for
  /// more than FirstUseCompileRanks ranks (Registry.h).
  int compileOnFirstUse = -1;
  unsigned hostThreads = 0;
  /// COLL_EMULATED_DEVICE: collectives run the CUDA kernel on the CPU
  /// emulation of the GPU (docs/RUNTIME.md "The emulated device").
  bool emulatedDevice = false;
  /// COLL_TOPO_FILE: a topology (file, or "nvml") to synthesize programs
  /// for at creation; COLL_TOPO_GPUS: each rank's GPU in it (docs/SYNTHESIS.md).
  std::string topoFile, topoGpus;
  std::array<uint64_t, 3> slotBytes{128u << 10, 16u << 10, 120u * 256}; ///< Simple, LL, LL128
  /// COLL_COPY_ENGINE: device calls of at least this many bytes (a rank's
  /// larger buffer) on a direct program whose copies split from its
  /// signals run those copies on the GPU's copy engines, every rank's
  /// buffers staged in its area (docs/RUNTIME.md, "Copy engines"); 0: never
  /// (the default). Every rank must set the same (agreedHash).
  uint64_t copyEngineBytes = 0;
  /// Libraries underneath Coll that tuning rules may name (set by the
  /// drop-in libraries; empty for the C API).
  std::vector<std::string> underneath;

  /// Hash of the settings every rank must share.
  uint64_t agreedHash() const;
};

/// `config` (may be null) over the environment over the defaults; fails on
/// an invalid config struct or environment value.
llvm::Expected<Config> resolveConfig(const collConfig_t *config);

/// Whether `p` is CUDA device memory (deviceOfPointer, Device.h).
bool isDevicePointer(const void *p);

/// Which algorithm (or library underneath) serves a call, and why.
struct Choice {
  const LoadedAlgorithm *algo = nullptr;
  std::string library; ///< when a rule names the library underneath
  std::string why;
  /// A communicator of one rank: recvbuff gets sendbuff (as NCCL does).
  bool local = false;
  /// An alltoall run as grouped sends and receives, with no program (the
  /// tuning target `p2p`).
  bool p2p = false;
  /// The algorithm's program for the call's root (Registry::forRoot).
  std::shared_ptr<const Compiled> program;
};

class TaggedEngine;

class Communicator {
public:
  /// Sets up rank `boot->rank()` of a communicator whose ranks found each
  /// other through `boot`; `nonce` names its shared segments.
  static llvm::Expected<std::unique_ptr<Communicator>>
  create(std::unique_ptr<Bootstrap> boot, const Config &config, uint64_t nonce);
  ~Communicator();

  int rank() const;
  int nranks() const;
  const Config &config() const;

  /// One unit per communicator: a collective, or point-to-point operations.
  struct Unit {
    Communicator *comm;
    llvm::ArrayRef<Op> ops;
  };
  /// Runs one round; the error is the first failure (every failed
  /// communicator records its own).
  static llvm::Error runRound(llvm::ArrayRef<Unit> units);
  /// Runs the calls of a group, queued in call order: per communicator in
  /// that order, round k running the k-th unit of every communicator (a
  /// collective, or a run of consecutive sends and receives).
  static llvm::Error runQueued(llvm::ArrayRef<std::pair<Communicator *, Op>> ops);

  /// Which algorithm serves `coll` for `bytes` (nccl-tests' size) and
  /// `root`; the error names every candidate and why it was rejected. The
  /// choice is the communicator's cached one, valid until the next select.
  llvm::Expected<const Choice *> select(ir::Collective coll, uint64_t bytes, int root,
                                        bool device = false);

  /// The engine of tagged sends and receives (collIsend, collIrecv;
  /// docs/RUNTIME.md "Tagged point-to-point"), started at the first.
  llvm::Expected<std::shared_ptr<TaggedEngine>> tagged();

  /// Collective over this communicator (color COLL_SPLIT_NOCOLOR: null).
  llvm::Expected<std::unique_ptr<Communicator>> split(int color, int key, const Config &config);
  llvm::Error finalize();
  /// Stops every call in flight on this communicator's local ranks, and
  /// tells the other ranks (the liveness ring, docs/RUNTIME.md "Lost
  /// ranks").
  void abort();
  /// collCommRevoke: ends the calls in flight on every rank of this
  /// communicator with an error (this host's at once, the others' through
  /// the liveness ring) and breaks it, so that later calls fail at once;
  /// returns when this rank's calls have ended. Resources stay until
  /// destroy.
  void revoke();
  /// collCommShrink, called by the ranks not in `exclude` (each a rank
  /// here, this one not among them): a communicator of those ranks,
  /// renumbered densely in their order here, made over the listeners they
  /// opened at creation (no unique id). `abortFirst`: the calls in flight
  /// here end first, as revoke() ends them.
  llvm::Expected<std::unique_ptr<Communicator>>
  shrink(const std::vector<int> &exclude, const Config &config, bool abortFirst);
  /// collCommGrow for a rank of this communicator: `id` (the root's, from
  /// growId(); null on the others, which receive it from the root over
  /// this communicator) names the new communicator of `nranks` ranks, where
  /// this rank keeps its number. Collective over this communicator, and
  /// with the new ranks, which join as collCommInitRank does.
  llvm::Expected<std::unique_ptr<Communicator>> grow(int nranks, const char *id,
                                                     const Config &config);
  /// collSuccess, or the error that broke this communicator.
  collResult_t asyncError() const;
  /// The report of the call that set this host's stop word (a failure of
  /// any of its ranks), whether or not this rank's own calls met it (a rank
  /// that had finished the call before a peer failed it has not); nullopt
  /// while none did. The NCCL drop-in asks before it leaves a communicator
  /// (docs/DROPIN.md, "After a failed call").
  std::optional<std::string> stopReport() const;
  /// The first failure recorded on this communicator's host, as its
  /// reporter wrote it (a lost rank: "rank 1 (process P on H) exited"),
  /// whether or not any call was stopped by it; nullopt while none was.
  std::optional<std::string> firstFailure() const;
  /// Looks whether kernels it enqueued on a GPU have ended, and breaks the
  /// communicator when one stopped at its watchdog (without waiting; not
  /// while a call runs on another thread); then asyncError().
  collResult_t checkAsyncError();
  /// The CUDA device this rank's device buffers must be on: given to
  /// collCommInitAll, else that of its first call with device buffers; -1
  /// until then.
  int boundDevice() const;
  /// Waits until the kernels this rank enqueued on a GPU have ended (for
  /// callers whose calls must be complete on return, as MPI's are); a
  /// watchdog stop is the error, and breaks the communicator.
  llvm::Error waitDevice();
  void bindDevice(int device);
  /// Why this rank cannot run `op`, whose buffers are on a CUDA device
  /// (op.device >= 0), on that device: the emulated device, no GPU backend,
  /// another device bound; nullopt when it can (point-to-point calls are
  /// staged through host memory, PointToPoint.cpp). The C API turns the
  /// reason into an error, the drop-ins into a fallback.
  std::optional<std::string> deviceRefusal(const Op &op) const;

  /// Collective (collCommWindowRegister): [buff, buff + bytes), memory of
  /// allocateWindowMemory, becomes a window every rank of the host maps;
  /// its number on this communicator.
  llvm::Expected<int> registerWindow(void *buff, size_t bytes);
  /// Collective: window `id` is unmapped everywhere.
  llvm::Error deregisterWindow(int id);

  /// The message of the last error on this communicator.
  const char *lastError();
  void setLastError(const std::string &message);

  class Impl;

private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// collMemAlloc and collMemFree: host memory that windows can hold (a memfd
/// of this process, which the peers map); freeing fails while it is
/// registered with a communicator.
llvm::Expected<void *> allocateWindowMemory(size_t bytes);
/// collMemAllocDevice: memory of CUDA device `device` (-1: the calling
/// thread's current one) that windows can hold (an allocation of its own,
/// which the peers' processes map with CUDA IPC).
llvm::Expected<void *> allocateDeviceWindowMemory(size_t bytes, int device);
llvm::Error freeWindowMemory(void *ptr);

/// The communicator behind a collComm_t (null for NULL), and a collComm_t
/// that owns `c` (Api.cpp), for the drop-in libraries, which use both.
Communicator *communicatorOf(collComm_t comm);
collComm_t wrapCommunicator(std::unique_ptr<Communicator> c);

} // namespace coll::rt

#endif // COLL_RUNTIME_COMM_H
