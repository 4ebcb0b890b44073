//===- Mscclpp.h - MSCCL++ execution plans ----------------------*- C++ -*-===//
//
// MSCCL++ (github.com/microsoft/mscclpp) writes its collectives as JSON
// *execution plans*: its Python DSL (python/mscclpp/language/) writes them
// and its executor (src/core/executor/) runs them. This header holds a
// faithful in-memory model of the plan format of MSCCL++ v0.10.0 (commit
// 6231b4f38ddcff0ef5da7bcc117ae99f2cb06e69), the reader that fills it, and
// the translation of the plans Coll's IR can express into an Algorithm
// (docs/IR.md, "MSCCL++ plans").
//
// Diagnostics name the JSON path of the offending value, e.g.
//   plan.json: error: gpus[3].threadblocks[2].ops[7].name: unknown op 'xyz'
// (the JSON reader keeps no line numbers, so every diagnostic has line 0).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_MSCCLPP_H
#define COLL_IR_MSCCLPP_H

#include "coll/ir/Algorithm.h"
#include "coll/ir/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coll::ir::mscclpp {

/// `channel_type`: memory channels load and store a peer's memory from the
/// GPU's own threads and signal through a semaphore in the peer's memory;
/// port channels hand each put, signal and flush to a host proxy thread that
/// performs it later (RDMA or a copy engine); switch channels are NVLink
/// SHARP (NVLS) multicast groups. "none" is what the DSL writes on ops that
/// use no channel.
enum class ChannelType : uint8_t { Memory, Port, Switch, None };
llvm::StringRef channelTypeName(ChannelType type);

/// Every op name the v0.10 executor accepts (execution_plan.cc, getOpType),
/// with what it does in the kernel (execution_kernel.hpp).
enum class OpKind : uint8_t {
  Nop,                 ///< "nop": __syncthreads() of the threadblock
  Barrier,             ///< "barrier": a DeviceSyncer barrier of num_threadblocks tbs
  Put,                 ///< "put": copy local src[i] to the peer's dst[i]
  PutWithSignal,       ///< "pws": a port channel's put, then signal
  PutWithSignalFlush,  ///< "pwsf": the same, then flush
  Get,                 ///< "get": copy the peer's src[i] to local dst[i]
  Copy,                ///< "copy": local src[0] to local dst[0]
  Signal,              ///< "signal": release-signal each channel's peer
  Wait,                ///< "wait": acquire-wait for each channel's peer
  RelaxedSignal,       ///< "rlxsignal": the signal with relaxed ordering
  RelaxedWait,         ///< "rlxwait": the wait with relaxed ordering
  Flush,               ///< "flush": wait until a port channel's proxy is done
  Reduce,              ///< "re": dst[0] = src[0] + src[1] + ... (all local)
  ReduceSend,          ///< "res": the same, and the result also to the peers' dst[1..]
  ReadReduce,          ///< "rre": dst[0] = src[0] + peers' src[1..]
  ReadReduceSend,      ///< "rres": the same, and the result also to the peers' dst[1..]
  PutPackets,          ///< "ppkt": LL packets of local src into the peer's dst
  ReadPutPackets,      ///< "rppkt": LL packets read from local scratch, put to the peer
  ReduceSendPackets,   ///< "respkt": reduce packets, result to local dst and peers
  CopyPackets,         ///< "cpkt": local data into local packets
  UnpackPackets,       ///< "upkt": local packets into local data
  ReducePackets,       ///< "repkt": reduce local packets into local data
  ReduceCopyPackets,   ///< "recpkt": reduce, then copy the result as packets
  ReduceCopySendPackets, ///< "recspkt": reduce, copy as packets, send to peers
  Pipeline,            ///< "pipeline": its ops, once per unit of the chunks
  SemAcquire,          ///< "sem_acquire": acquire device semaphores of this rank
  SemRelease,          ///< "sem_release": release them
  MultiLoadReduceStore, ///< "glres": switch channel (refused)
  MultiLoadReduce,     ///< "glre": switch channel (refused)
  MultiStore,          ///< "gstore": switch channel (refused)
  MultiStorePackets,   ///< "gstorepkt": switch channel (refused)
};
llvm::StringRef opName(OpKind kind);
std::optional<OpKind> parseOpName(llvm::StringRef name);

/// One entry of an op's `src_buff` or `dst_buff`: `size` chunks from chunk
/// `index` of a local buffer (`type`), of a peer's buffer (`buffer_id`, an
/// index into the tb's memory- or port-channel remote buffers, chosen by the
/// op's channel_type) or of a switch channel's buffer (`switch_channel_id`).
struct BufferRef {
  std::optional<BufferKind> local;
  int32_t remoteBufferId = -1;
  int32_t switchChannelId = -1;
  int32_t index = 0;
  int32_t size = 0;
  std::string path; ///< its JSON path, for diagnostics
};

/// `tbg_info`: the op is shared by the `tbg_size` tbs of a threadblock group,
/// of which this tb is number `tb_id`; each does its own slice of the data.
struct TbgInfo {
  int32_t tbId = 0;
  int32_t tbgSize = 1;
};

struct Op {
  OpKind kind = OpKind::Nop;
  std::optional<ChannelType> channelType;
  std::vector<int32_t> channelIds; ///< into the tb's channels of channelType
  std::vector<BufferRef> src, dst;
  std::string reduceOp; ///< `reduce_op` ("sum"), empty when absent
  std::optional<TbgInfo> tbg;
  int32_t barrierId = -1, numThreadblocks = 0; ///< barrier
  std::vector<int32_t> semaphoreIds;           ///< sem_acquire, sem_release
  /// pipeline: `iter_context` and the ops run once per unit.
  int64_t unitSize = 0, numChunks = 0;
  std::vector<Op> ops;
  std::string path;
};

/// A tb's `channels` (or `remote_buffer_refs`) entry: ids into the rank's
/// channels of that type (or into its remote_buffers).
struct IdList {
  ChannelType type = ChannelType::Memory;
  std::vector<int32_t> ids;
  std::string path;
};

struct Threadblock {
  std::vector<Op> ops;
  std::vector<IdList> channels;
  std::vector<IdList> remoteBufferRefs;
  std::string path;
};

/// A rank's `channels` entry: one channel of `type` to each of
/// `connectedTo` (memory and port), or a switch channel over `buffer_type`.
struct Channel {
  ChannelType type = ChannelType::Memory;
  std::vector<int32_t> connectedTo;
  std::string path;
};

/// A rank's `remote_buffers` entry: buffer `type` of rank `rank`, which it
/// registers for this rank to reach through channels of the listed types.
struct RemoteBuffer {
  int32_t rank = 0;
  BufferKind type = BufferKind::Input;
  std::vector<ChannelType> accessChannelTypes;
  std::string path;
};

struct Gpu {
  int32_t inputChunks = 0, outputChunks = 0, scratchChunks = 0;
  std::vector<Threadblock> threadblocks;
  std::vector<Channel> channels;
  std::vector<RemoteBuffer> remoteBuffers;
  std::vector<int64_t> semaphoreInitValues; ///< `semaphores[i].init_value`
  std::string path;
};

/// The whole plan. Defaults are the executor's for absent optional fields.
struct Plan {
  std::string name;
  std::string collective; ///< as written: allreduce, allgather, test, ...
  Protocol protocol = Protocol::Simple; ///< "Simple" or "LL"
  bool inplace = false;
  bool reuseResources = false;       ///< scratch shared across plans, wrapping
  bool useDoubleScratchBuffer = false; ///< two scratch halves, alternating per call
  int64_t numThreadsPerBlock = 1024;
  int64_t bufferAlignment = 16; ///< bytes; chunks are multiples of it
  uint64_t minMessageSize = 0;
  /// The DSL writes 2^64-1 for no limit, which LLVM 14's JSON parser reads
  /// as 2^63-1: the translation takes either as no limit.
  uint64_t maxMessageSize = UINT64_MAX;
  std::vector<Gpu> gpus; ///< gpus[r] is rank r (the executor requires id == r)
};

/// Whether `text` is a JSON object (its first non-blank character is '{'),
/// which is how the file readers tell a plan from MSCCL XML.
bool looksLikePlan(llvm::StringRef text);

/// Parses `text` into a Plan. Every problem is an error in `diags` naming
/// its JSON path; on failure the error holds them all.
llvm::Expected<Plan> parsePlan(llvm::StringRef text, DiagnosticList &diags);

/// Translates a plan into Coll's IR where Coll's IR expresses exactly what
/// the executor does; everything else is an error naming its JSON path and
/// why ("not yet supported: ..."). The result still has to be verified.
llvm::Expected<Algorithm> translatePlan(const Plan &plan, DiagnosticList &diags);

/// parsePlan, then translatePlan.
llvm::Expected<Algorithm> parsePlanAlgorithm(llvm::StringRef text, DiagnosticList &diags);

/// Writes `alg` as a plan in the format MSCCL++ v0.10's DSL writes
/// (MscclppWriter.cpp; docs/IR.md, "Writing plans"): direct and local steps
/// only, each an op on a memory channel or a local op, dependencies between
/// tbs as device semaphores, and a `nop` wherever the executor's threads
/// would otherwise run two ops at once. Anything the format cannot carry
/// (FIFO steps, LL128, a root, a custom condition, a signal pair raised or
/// waited on by several tbs, a `get` between different chunks) is an error
/// naming the step, and nothing is written.
llvm::Error writePlan(const Algorithm &alg, llvm::raw_ostream &os, DiagnosticList &diags);

/// Where the steps of `a` and `b` differ, nops left out (the ones that a
/// plan's semaphores and `nop`s add or take away), and tb channels (which the
/// translation assigns afresh); none when each tb of each rank has the same
/// steps in the same order.
std::optional<std::string> stepDifference(const Algorithm &a, const Algorithm &b);

} // namespace coll::ir::mscclpp

#endif // COLL_IR_MSCCLPP_H
