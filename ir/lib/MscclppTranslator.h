//===- MscclppTranslator.h - The translator of MSCCL++ plans ------*- C++ -*-===//
//
// Private to ir/lib: the state and the steps of the translation of one
// MSCCL++ plan into Coll's IR (docs/IR.md, "MSCCL++ plans"). Its ops and
// data movement are in MscclppTranslate.cpp; signals, semaphores, barriers
// and how they pair across tbs and ranks are in MscclppSync.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_LIB_MSCCLPPTRANSLATOR_H
#define COLL_IR_LIB_MSCCLPPTRANSLATOR_H

#include "coll/ir/Mscclpp.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace coll::ir::mscclpp::detail {

/// A region of one rank's memory, with in-place aliasing resolved: `buffer`
/// is the buffer that holds it (input chunks of an in-place call are named as
/// the output chunks they are, and so on).
struct Region {
  int32_t rank = 0;
  BufferKind buffer = BufferKind::Input;
  int64_t begin = 0, end = 0; ///< chunks [begin, end)

  bool overlaps(const Region &o) const {
    return rank == o.rank && buffer == o.buffer && begin < o.end && o.begin < end;
  }
  bool operator==(const Region &o) const {
    return rank == o.rank && buffer == o.buffer && begin == o.begin && end == o.end;
  }
};

struct Access {
  Region region;
  bool write = false;
};

/// One operand of a data op, resolved: which rank's buffer, and where.
struct Operand {
  int32_t rank = 0;
  BufferKind buffer = BufferKind::Input;
  int32_t index = 0, size = 0;
  std::string path;
};

/// A memory or port channel: rank `rank`'s channel to `peer` with
/// connection tag `tag` (one count per peer over both types, so that a
/// memory channel and a port channel never share one).
struct Conn {
  int32_t rank = 0, peer = 0, tag = 0;
  bool port = false; ///< a port channel (not part of the order: tags differ)
  int32_t nth = 0;   ///< the how-manieth channel of its type to `peer` (for messages)
  bool operator<(const Conn &o) const {
    return std::tie(rank, peer, tag) < std::tie(o.rank, o.peer, o.tag);
  }
};

/// Where a signal, wait, release or acquire runs: outside any pipeline
/// (chunks 0), or in a pipeline of `chunks` chunks in units of `unit`
/// bytes, as the at-th of the `of` uses of its channel or semaphore in one
/// iteration of that pipeline's ops.
struct PipePlace {
  int64_t unit = 0, chunks = 0;
  int32_t at = 0, of = 1;
  bool operator==(const PipePlace &o) const {
    return unit == o.unit && chunks == o.chunks && at == o.at && of == o.of;
  }
  bool operator!=(const PipePlace &o) const { return !(*this == o); }
};

/// One signal or wait on a memory channel, in its tb's program order.
struct SyncUse {
  int32_t tb = 0;
  bool relaxed = false;
  uint64_t order = 0; ///< program order within the tb
  std::string path;
  PipePlace place;
  int32_t step = -1; ///< its Coll step in tb `tb`
};
class Translator {
public:
  Translator(const Plan &plan, DiagnosticList &diags) : plan(plan), diags(diags) {}

  llvm::Expected<Algorithm> run();

private:
  const Plan &plan;
  DiagnosticList &diags;
  Algorithm alg;
  int32_t nranks = 0;
  /// Whether the plan names a collective Coll knows (else it is read as a
  /// custom one without a condition).
  bool knownCollective = false;

  struct Tb2 {
    std::vector<int32_t> memChannels;   ///< the tb's memory channels: ids into Gpu2::memConns
    std::vector<int32_t> portChannels;  ///< the same for port channels
    std::vector<int32_t> memRemote;     ///< memory-channel remote buffers: ids into remote_buffers
    std::vector<int32_t> portRemote;
  };
  struct Gpu2 {
    std::vector<Conn> memConns;  ///< the executor's memoryChannels, in order
    int32_t portConns = 0;       ///< how many port channels
    std::vector<Conn> portConnList; ///< the executor's portChannels, in order
    std::vector<Tb2> tbs;
  };
  std::vector<Gpu2> state;
  /// Signals and waits per memory channel, in program order.
  std::map<Conn, std::vector<SyncUse>> signals, waits;
  /// Releases and acquires of each semaphore (rank, id), in program order:
  /// the tb, the Coll step (-1 for an acquire that the initial value
  /// satisfies) and the op's path.
  struct SemUse {
    int32_t tb = 0, step = -1;
    std::string path;
    PipePlace place;
  };
  std::map<std::pair<int32_t, int32_t>, std::vector<SemUse>> releases, acquires;
  uint64_t nextOrder = 0;
  /// Each barrier's uses per (rank, barrier_id), per tb in program order:
  /// its arrive nop and the nops after it that wait for the other tbs'
  /// (their dependencies set by pairBarriers).
  struct BarrierUse {
    int32_t arrive = -1; ///< the arrive nop's step
    int32_t count = 0;   ///< num_threadblocks
    std::string path;
  };
  std::map<std::pair<int32_t, int32_t>, std::map<int32_t, std::vector<BarrierUse>>> barriers;
  /// The proxy tb of each port channel (rank, index into portConnList):
  /// it carries out the channel's puts and signals (portOp).
  std::map<std::pair<int32_t, int32_t>, int32_t> proxies;
  /// The pipeline whose ops are being translated, if any.
  const Op *currentPipe = nullptr;

  void error(const std::string &path, const llvm::Twine &message) {
    diags.error(0, StepRef{}, path.empty() ? message : path + ": " + message);
  }
  void unsupported(const std::string &path, const llvm::Twine &what) {
    error(path, "not yet supported: " + what);
  }

  //===--------------------------------------------------------------------===//
  // The header, regions and channels (MscclppTranslate.cpp)
  //===--------------------------------------------------------------------===//

  void header();
  Region region(int32_t rank, BufferKind buffer, int64_t index, int64_t size) const;
  Region regionOf(const Operand &o) const { return region(o.rank, o.buffer, o.index, o.size); }
  std::string describe(const Region &r) const;
  void flattenChannels();
  void tbLists(int32_t r, int32_t t);

  //===--------------------------------------------------------------------===//
  // Ops and pipelines (MscclppTranslate.cpp)
  //===--------------------------------------------------------------------===//

  /// What the current run of ops since the last nop has done.
  struct Epoch {
    std::vector<std::pair<std::vector<Access>, std::string>> dataOps;
    std::string lastWait;   ///< path of a wait in this run, if any
  };

  /// What an op of a pipeline's body is, for the check of the body's end
  /// against its start (pipeline).
  struct BodyOp {
    enum Kind { Nop, Release, Wait, Data } kind = Nop;
    bool relaxed = false; ///< a relaxed signal
    std::vector<Access> accesses;
    std::string path, name;
  };

  void threadblock(int32_t r, int32_t t);
  void oneOp(int32_t r, int32_t t, const Op &op, Epoch &epoch, std::string &firstData,
             std::string &firstWait, std::vector<BodyOp> *body);
  void pipeline(int32_t r, int32_t t, const Op &pipe, Epoch &epoch, std::string &firstData,
                std::string &firstWait);
  bool afterNop(const Op &op, const std::string &name, const Epoch &epoch,
                llvm::StringRef afterData, llvm::StringRef afterWait);
  PipePlace pipePlace() const;
  static std::string describePlace(const PipePlace &p);
  bool pipeSized(const Op &op, const std::string &name);
  std::optional<std::string> conflict(const std::vector<Access> &a,
                                      const std::vector<Access> &b) const;
  bool dataOp(int32_t r, int32_t t, const Op &op, std::vector<Access> &accesses);
  std::optional<Operand> local(int32_t r, const BufferRef &ref);
  std::optional<Operand> remote(int32_t r, int32_t t, const BufferRef &ref,
                                ChannelType through = ChannelType::Memory);
  std::optional<Operand> checked(Operand o);
  bool sameSizes(const Op &op, const std::vector<const Operand *> &all);
  void emit(int32_t r, int32_t t, StepType type, const Operand &src, const Operand &dst,
            int32_t peer);

  //===--------------------------------------------------------------------===//
  // Signals, semaphores and barriers, and their pairing (MscclppSync.cpp)
  //===--------------------------------------------------------------------===//

  void syncOp(int32_t r, int32_t t, const Op &op, bool signal, bool relaxed);
  int32_t syncStep(int32_t r, int32_t tb, const Conn &conn, bool signal, bool relaxed,
                   const std::string &path);
  void portOp(int32_t r, int32_t t, const Op &op, Epoch &epoch, std::string &firstWait);
  int32_t proxyTb(int32_t r, int32_t conn);
  static std::string channelName(const Conn &c);
  void semaphoreOp(int32_t r, int32_t t, const Op &op, bool release);
  void barrierOp(int32_t r, int32_t t, const Op &op, Epoch &epoch, std::string &firstWait);
  int32_t helperTb(int32_t r);
  void splitStreams();
  void pairBarriers();
  void pairSemaphores();
  void pairSignals();
};

} // namespace coll::ir::mscclpp::detail

#endif // COLL_IR_LIB_MSCCLPPTRANSLATOR_H
