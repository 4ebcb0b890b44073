//===- DeviceTypes.h - Records shared by the CUDA kernel and its host -*- C++ -*-===//
//
// Everything the kernel and the host side of the CUDA backend must agree on:
// the kernel's parameters, the layout of the device state, the dependency
// flag encoding and the watchdog's report. Plain C++ (no CUDA types, no LLVM)
// so that both nvcc and the host compiler include it, and host tests can
// check the encodings without a GPU.
//
// Device state: one allocation, zeroed when the executor is created and
// after a watchdog stop, never between calls:
//
//   [0, 128)                      DeviceControl
//   [128, 128 + 128*ntbs)         one dependency flag per tb, 128 bytes apart
//   then per connection c, ConnectionLayout::stride bytes:
//     [0, 128) head   [128, 256) tail, slot sizes   [256, ...) FifoDepth slots
//   then one signal flag per Plan::signals entry, 128 bytes apart (direct
//   steps: docs/CUDA.md, "Direct steps")
//
// An executor of one rank (CudaOptions::rank) keeps the connections it
// receives on in an allocation of their own, in Plan::connections order,
// then the flags of the signals it receives (waits on), in Plan::signals
// order, 128 bytes apart; the senders map it (KernelParams::connections,
// KernelParams::signalFlags).
//
// Counters and flags sit on their own 128-byte lines so that a waiter's
// polling does not contend with unrelated stores.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_DEVICETYPES_H
#define COLL_INTERPRETER_CUDA_DEVICETYPES_H

#include "coll/interpreter/Config.h"
#include "coll/interpreter/PlanTypes.h"
#include "coll/interpreter/Protocol.h"

#include <cstdint>

namespace coll::interp::cuda {

/// The scope of a synchronising access (PTX's .gpu and .sys): the threads
/// it synchronises with. A connection's scope follows from where its two
/// ends run (docs/CUDA.md, "Scopes"): .gpu when the sender and the receiver
/// run on the GPU whose memory holds the FIFO, .sys otherwise (another
/// GPU, host memory, a proxy thread). Dependency flags and the launch's
/// control words are touched only by blocks of one launch: .gpu.
enum class Scope : uint32_t { Gpu, Sys };

/// ir::Protocol's values, for code that cannot include the IR headers
/// (checked against ir::Protocol in lib/Executor.cpp).
enum class Proto : uint8_t { Simple, LL, LL128 };

/// ReduceOp's values (same .def file, so the same order).
enum class DeviceOp : uint8_t {
#define COLL_REDUCE_OP(Enum, Name) Enum,
#include "coll/interpreter/DataTypes.def"
};

/// The most threads a block may have (the kernels' launch bound).
inline constexpr uint32_t MaxThreadsPerBlock = 512;
/// A block copies its steps and, where both fit in this many bytes, its
/// slices into shared memory, so that a step reads neither from global
/// memory on its critical path; 16 KiB a block leaves the occupancy alone.
inline constexpr uint64_t MaxSharedSliceBytes = 16384;
/// Where the slices start in a block's dynamic shared memory, after
/// `maxSteps` steps.
COLL_HOST_DEVICE inline uint64_t sharedSliceOffset(uint32_t maxSteps) {
  return (uint64_t(maxSteps) * sizeof(PlanStep) + alignof(CallSlice) - 1) / alignof(CallSlice) *
         alignof(CallSlice);
}
/// Bytes between separately polled words of the device state.
inline constexpr uint64_t PollStride = 128;
inline constexpr uint64_t FlagStrideWords = PollStride / sizeof(uint64_t);

/// Launch-wide state at the start of the device state allocation.
/// One event of a block's timeline (DeviceControl::traceEvents), stamped by
/// its thread 0 with %globaltimer: a step from its start to the next one's
/// (kind 0), or a wait of the whole block (kinds as host::TraceEvent's: 1
/// data, 2 a free slot, 3 a dependency).
struct DeviceTraceEvent {
  uint64_t begin, end; ///< ns
  uint64_t iteration;
  uint64_t elems; ///< steps: elements moved
  int32_t step;   ///< index of the step among its tb's steps
  uint32_t kind;
};

struct DeviceControl {
  uint32_t generation; ///< launches finished; the last block of each advances it
  uint32_t finished;   ///< blocks of the running launch that have finished
  uint32_t abort;      ///< set after a watchdog report; every wait polls it
  uint32_t claimed;    ///< 0 until a block claims the watchdog report
  /// A timeline, read only by the kernels that record one (here rather than
  /// in KernelParams, which the other kernels keep a copy of): block b
  /// writes up to traceCapacity events from traceEvents + b *
  /// traceCapacity, their number (dropped ones included) to
  /// traceCounts[2b], and keeps 1 + its open step's in traceCounts[2b+1]
  /// (zeroed before the launch). Null: none.
  DeviceTraceEvent *traceEvents;
  uint32_t *traceCounts;
  uint32_t traceCapacity;
};
static_assert(sizeof(DeviceControl) <= PollStride, "the device state's first line holds it");

/// Where one connection's counters and FIFO lie within its stride.
struct ConnectionLayout {
  static constexpr uint64_t HeadOffset = 0;          ///< slots the receiver freed
  static constexpr uint64_t TailOffset = PollStride; ///< slots the sender filled
  /// After the tail, in its line: per slot, the data bytes the sender put
  /// in it (uint32_t[FifoDepth]), stored before the tail by the CrossGpu
  /// kernels only, for a network proxy that forwards the slot (NetProxy.h).
  static constexpr uint64_t SizesOffset = TailOffset + 8;
  static constexpr uint64_t FifoOffset = 2 * PollStride;

  uint64_t slotStride = 0; ///< bytes between FIFO slots, a multiple of 128
  uint64_t stride = 0;     ///< bytes between connections

  /// The layout for slots carrying `slotBytes` data bytes under `proto`.
  COLL_HOST_DEVICE static ConnectionLayout of(Proto proto, uint64_t slotBytes) {
    uint64_t raw = proto == Proto::Simple ? slotBytes
                   : proto == Proto::LL   ? llLines(slotBytes) * LLLineBytes
                                          : ll128Lines(slotBytes) * LL128LineWords * 8;
    ConnectionLayout layout;
    layout.slotStride = (raw + PollStride - 1) / PollStride * PollStride;
    layout.stride = FifoOffset + FifoDepth * layout.slotStride;
    return layout;
  }
};

static_assert(ConnectionLayout::SizesOffset + FifoDepth * sizeof(uint32_t) <=
                  ConnectionLayout::FifoOffset,
              "the slot sizes fit in the tail's line");

/// Offsets of the parts of the device state.
struct StateLayout {
  uint64_t flagsOffset = PollStride;
  uint64_t connectionsOffset = 0;
  uint64_t signalsOffset = 0;
  uint64_t bytes = 0;

  COLL_HOST_DEVICE static StateLayout of(uint64_t ntbs, uint64_t nconnections,
                                         const ConnectionLayout &conn, uint64_t nsignals = 0) {
    StateLayout layout;
    layout.connectionsOffset = layout.flagsOffset + ntbs * PollStride;
    layout.signalsOffset = layout.connectionsOffset + nconnections * conn.stride;
    layout.bytes = layout.signalsOffset + nsignals * PollStride;
    return layout;
  }
};

//===----------------------------------------------------------------------===//
// Dependency flags
//===----------------------------------------------------------------------===//
//
// A tb's flag is (generation << 32) | progress, where progress is
// iteration * span + irStep + 1 for the last `hasdep` step it completed (0:
// nothing yet in this generation) and generation counts the launches the
// device has finished. A waiter for (iteration, irStep) waits until the flag
// has the current generation and progress >= the goal. Flags are never reset:
// a flag left by an earlier launch carries an older generation, so it never
// satisfies a wait, and the generation advances on the device, so a launch
// captured in a CUDA graph replays correctly. Comparing generations for
// equality (not order) keeps this right when the 32-bit generation wraps.

/// The progress value for (iteration, irStep) with `span` steps per
/// iteration. The caller keeps iteration * span + span below 2^32.
COLL_HOST_DEVICE COLL_INLINE uint32_t flagProgress(uint64_t iteration, uint32_t span,
                                                   int32_t irStep) {
  return static_cast<uint32_t>(iteration * span + static_cast<uint64_t>(irStep) + 1);
}
COLL_HOST_DEVICE COLL_INLINE uint64_t makeFlag(uint32_t generation, uint32_t progress) {
  return (static_cast<uint64_t>(generation) << 32) | progress;
}
COLL_HOST_DEVICE COLL_INLINE bool flagReached(uint64_t flag, uint32_t generation,
                                              uint32_t progress) {
  return static_cast<uint32_t>(flag >> 32) == generation && static_cast<uint32_t>(flag) >= progress;
}
/// Signal flags (direct steps) hold the same encoding, written by the
/// signalling tb, but compare in order: a flag at a later generation has
/// reached every goal of an earlier one. An executor of one rank counts its
/// own launches, and a peer's executor may finish a call and signal in the
/// next before this one's wait of the call before has seen the flag; the
/// peer only signals there after this rank's signals of the same call, so
/// what it overwrites has been sent. The difference of generations is read
/// as a signed 32-bit number, so that this holds across the wrap; a flag
/// never written (0) reads as behind every generation below 2^31, and every
/// launch after the first writes every flag it waits on.
COLL_HOST_DEVICE COLL_INLINE bool signalReached(uint64_t flag, uint32_t generation,
                                                uint32_t progress) {
  const int32_t ahead = static_cast<int32_t>(static_cast<uint32_t>(flag >> 32) - generation);
  return ahead > 0 || (ahead == 0 && static_cast<uint32_t>(flag) >= progress);
}
/// The most pipeline iterations a call may have so that progress fits.
COLL_HOST_DEVICE COLL_INLINE uint64_t maxFlagIterations(uint32_t span) { return UINT32_MAX / span; }

//===----------------------------------------------------------------------===//
// LL128 lanes
//===----------------------------------------------------------------------===//
//
// Eight lanes of a warp move one 128-byte line: lane j (0..6) the data words
// 2j and 2j+1, lane 7 data word 14 and then the flag word 15. A warp moves
// four lines at a time.

inline constexpr uint32_t LL128LanesPerLine = 8;
inline constexpr uint32_t LL128LinesPerWarp = 32 / LL128LanesPerLine;

/// Data bytes [begin, begin + bytes) of a line that lane `j` moves.
struct LaneSegment {
  uint32_t begin, bytes;
};
COLL_HOST_DEVICE COLL_INLINE LaneSegment ll128Segment(uint32_t j) {
  return j + 1 < LL128LanesPerLine ? LaneSegment{16 * j, 16} : LaneSegment{16 * j, 8};
}

//===----------------------------------------------------------------------===//
// Kernel parameters and the watchdog's report
//===----------------------------------------------------------------------===//

/// One rank's buffers for the current call.
struct RankPointers {
  void *input;
  void *output;
  void *scratch;
};

/// Direct steps on windows (KernelParams::windowDescriptors; docs/CUDA.md,
/// "Windows"): where a rank's buffers of the current call lie, per buffer
/// (input, output, scratch) the window's slot + 1 above WindowOffsetBits
/// and the byte offset in it below; 0: not in a window (no peer reaches it).
struct WindowDescriptor {
  uint64_t at[3];
};
inline constexpr uint32_t WindowOffsetBits = 48;
COLL_HOST_DEVICE COLL_INLINE uint64_t windowPlace(uint32_t slot, uint64_t offset) {
  return (static_cast<uint64_t>(slot + 1) << WindowOffsetBits) | offset;
}

/// What a wait was waiting for. Window: not a wait: a direct step found its
/// peer's descriptor naming no window of the peer (WatchdogReport::depTb the
/// peer, depStep the buffer, observed what the descriptor held).
/// Stopped: the wait saw KernelParams::hostStop raised (no watchdog).
enum class WaitKind : uint32_t {
  FreeSlot,
  SimpleData,
  LLLine,
  LL128Line,
  Dependency,
  Signal,
  Window,
  Stopped
};

/// Written once, by the first block whose wait times out, into host-mapped
/// memory; the host turns it into the same text as the host backend's.
struct WatchdogReport {
  uint32_t valid; ///< stored last, after the fields below
  WaitKind kind;
  int32_t tb;   ///< global tb index
  int32_t step; ///< index of the step among its tb's steps
  uint64_t iteration;
  int32_t connection;  ///< Plan::connections index, or -1
  int32_t depTb;       ///< Dependency: the global tb waited for; Signal: the Plan::signals index
  int32_t depStep;     ///< Dependency: the IR step waited for
  uint32_t line;       ///< LL/LL128: line within the slot
  uint64_t slot;       ///< sequence number of the FIFO slot waited for
  uint64_t head, tail; ///< the connection's counters as the waiter saw them
  uint64_t expected;   ///< flag waited for (LL: 32 bits; dependency: progress)
  uint64_t observed;   ///< last flag seen (LL: second flag << 32 | first)
};

/// collbench's references (device/References.cuh): how long a wait may
/// last before it gives up, and their parameters.
inline constexpr uint64_t ReferenceWaitNs = 2000000000ull;
inline constexpr int32_t MaxReferenceRanks = 16;
struct ReferenceRanks {
  const float *in[MaxReferenceRanks];
  float *out[MaxReferenceRanks];
};
struct ReferenceFifo {
  const unsigned char *src;
  unsigned char *dst;
  unsigned char *slots; ///< FifoDepth slots of slotBytes
  uint64_t *head, *tail;
  uint64_t bytes, slotBytes;
  uint64_t base; ///< slots moved by earlier launches: where head and tail stand
  uint32_t *stalled;
};
/// The step floors (referenceSteps, referenceHops).
struct ReferenceSteps {
  const unsigned char *src;
  unsigned char *dst;
  uint64_t bytes;  ///< steps: the message, split over the steps; hops: the message bounced
  uint32_t steps;  ///< steps or hops, at least 1
  /// hops: each block's inbox, bytes / 4 LL words (4 data bytes, 4 flag
  /// bytes); hop t carries flag `flag + t`, never 0 (the inboxes start zero)
  uint64_t *inbox[2];
  uint32_t flag;
  uint32_t *stalled;
};

/// The kernel's only parameter.
struct KernelParams {
  const PlanTb *tbs;
  const PlanStep *steps;
  const PlanDep *deps; ///< Plan::deps (steps that wait on several)
  const CallSlice *slices;
  const RankPointers *ranks;
  unsigned char *state; ///< the device state (layout above)
  /// Per Plan::connections index, where its head, tail and FIFO lie: in the
  /// device state for an executor of every rank; for an executor of one
  /// rank, in the receiving rank's memory (mapped by CUDA IPC when that rank
  /// is another process's).
  unsigned char *const *connections;
  /// Per Plan::connections index, the scope of the accesses that synchronise
  /// its two ends; read only by the CrossGpu build (Kernels.h), whose
  /// launches have a connection to another GPU. The other builds know that
  /// every scope is .gpu, and their code is what it was before scopes.
  const Scope *connectionScopes;
  int32_t firstTb; ///< block b runs tb firstTb + b
  WatchdogReport *report;
  uint64_t flagsOffset; ///< StateLayout
  /// Direct steps: per plan step its peer, signal pair and ordinal
  /// (Plan::stepPeers), the pairs (Plan::signals) and per pair where its
  /// flag lies: in the state for an executor of every rank; for an
  /// executor of one rank, in the receiving rank's memory (mapped as its
  /// FIFOs are), for the pairs this rank signals or waits on. Null when the
  /// plan has none.
  const PlanStepPeer *stepPeers;
  const int32_t *memberPeers; ///< Plan::memberPeers (fused steps' peers)
  const PlanMemberSignal *memberSignals; ///< Plan::memberSignals (fused signals' and waits' pairs)
  const PlanSignal *signals;
  uint64_t *const *signalFlags;
  /// Direct steps on windows (an executor of one rank given
  /// setPeerWindows; else null): per rank where its WindowDescriptor lies,
  /// mapped here; per rank and slot (rank * windowSlots + slot) where its
  /// windows are mapped here; this rank's descriptor of the call, which each
  /// signal stores (relaxed) into windowDescriptors[windowRank] before its
  /// release, and a direct step reads its peer's (relaxed) after the waits
  /// that ordered it after a signal of the peer's call.
  WindowDescriptor *const *windowDescriptors;
  unsigned char *const *windowBases;
  WindowDescriptor windowOwn;
  uint32_t windowSlots;
  int32_t windowRank;
  ConnectionLayout connection;
  uint64_t iterations;
  uint64_t sliceElems;
  uint64_t watchdogNs;
  /// The stop word of the ranks of this host (CudaOptions::hostStop), mapped
  /// here; null: none. Every wait reads it where it reads `abort`, and ends
  /// the launch once it is raised: another rank of the host failed, aborted
  /// or found a peer dead, and this launch cannot complete.
  const uint32_t *hostStop;
  uint32_t span;     ///< Plan::maxIrSteps, at least 1
  uint32_t maxSteps; ///< steps of the longest tb: the shared-memory copy
  /// Slices of the tb with the most: copied to shared memory after the
  /// steps (at sharedSliceOffset(maxSteps)); 0: read from `slices`.
  uint32_t maxSlices;
  DeviceOp op;
};

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICETYPES_H
