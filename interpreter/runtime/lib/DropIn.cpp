//===- DropIn.cpp - What the drop-in libraries share ---------------------===//

#include "DropIn.h"

#include "Debug.h"

#include "coll/ir/Algorithm.h"

#include "llvm/Support/FormatVariadic.h"

#include <mutex>
#include <set>

namespace coll::rt::dropin {

namespace {
std::mutex loggedMutex;
std::set<std::string> logged;

ir::Collective collectiveOf(OpKind kind) {
  switch (kind) {
  case OpKind::AllReduce: return ir::Collective::AllReduce;
  case OpKind::AllGather: return ir::Collective::AllGather;
  case OpKind::ReduceScatter: return ir::Collective::ReduceScatter;
  case OpKind::AllToAll: return ir::Collective::AllToAll;
  case OpKind::Broadcast: return ir::Collective::Broadcast;
  case OpKind::Gather: return ir::Collective::Gather;
  case OpKind::Scatter: return ir::Collective::Scatter;
  default: return ir::Collective::Reduce;
  }
}
} // namespace

const char *const DeviceBuffersReason = "device buffers: the runtime's CUDA path is not built yet";

void onceAtInfo(int rank, const std::string &message) {
  if (!logEnabled(Level::Info, Coll))
    return;
  {
    std::lock_guard<std::mutex> lock(loggedMutex);
    if (!logged.insert(message).second)
      return;
  }
  log(Level::Info, Coll, rank, message + " (said once)");
}

void fallback(const char *collective, const char *library, const std::string &reason, int rank) {
  onceAtInfo(rank, llvm::formatv("{0}: falls back to {1}: {2}", collective, library, reason));
}

bool collRuns(const char *collective, Communicator &c, const Op &op, const char *library,
              int logRank) {
  if (isDevicePointer(op.send) || isDevicePointer(op.recv)) {
    fallback(collective, library, DeviceBuffersReason, logRank);
    return false;
  }
  if (op.count == 0 || op.pointToPoint())
    return true;
  const ir::Collective coll = collectiveOf(op.kind);
  const ir::CollectiveInfo info = ir::collectiveInfo(coll);
  const uint64_t n = static_cast<uint64_t>(c.nranks());
  const uint64_t bytes = op.count * interp::dataTypeSize(op.type) *
                         (info.inputPerRank || info.outputPerRank ? n : 1);
  auto choice = c.select(coll, bytes, info.hasRoot ? op.root : 0);
  if (!choice) {
    std::string message;
    takeResult(choice.takeError(), message);
    fallback(collective, library, message, logRank);
    return false;
  }
  if (!choice->algo) {
    // A tuning rule chose the library underneath for this size: a choice.
    onceAtInfo(logRank, llvm::formatv("{0}: {1} runs it by {2}", collective, library, choice->why));
    return false;
  }
  onceAtInfo(logRank, llvm::formatv("{0}: Coll runs it with {1} ({2}, {3}) by {4}", collective,
                                    choice->algo->name, ir::protocolName(choice->algo->protocol),
                                    choice->algo->origin, choice->why));
  return true;
}

} // namespace coll::rt::dropin
