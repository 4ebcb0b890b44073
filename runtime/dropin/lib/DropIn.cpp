//===- DropIn.cpp - What the drop-in libraries share ---------------------===//

#include "coll/dropin/DropIn.h"

#include "coll/runtime/Device.h"

#include "coll/runtime/Debug.h"

#include "coll/ir/Algorithm.h"

#include "llvm/Support/FormatVariadic.h"

#include <mutex>
#include <set>

namespace coll::rt::dropin {

namespace {
std::mutex loggedMutex;
std::set<std::string> logged;

} // namespace

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
  if (logEnabled(Level::Info, Coll))
    onceAtInfo(rank, llvm::formatv("{0}: falls back to {1}: {2}", collective, library, reason));
}

bool collRuns(const char *collective, Communicator &c, Op &op, const char *library, int logRank) {
  if (auto conflict = locateBuffers(op, c.rank())) {
    fallback(collective, library, *conflict, logRank);
    return false;
  }
  if (op.device >= 0)
    if (auto why = c.deviceRefusal(op)) {
      fallback(collective, library, *why, logRank);
      return false;
    }
  if (op.count == 0 || op.pointToPoint())
    return true;
  const ir::Collective coll = collectiveOf(op.kind);
  const uint64_t bytes = op.selectionBytes(c.nranks());
  auto chosen = c.select(coll, bytes, ir::collectiveInfo(coll).hasRoot ? op.root : 0,
                         op.device >= 0);
  if (!chosen) {
    std::string message;
    takeResult(chosen.takeError(), message);
    fallback(collective, library, message, logRank);
    return false;
  }
  const Choice *choice = *chosen;
  if (choice->local) {
    if (logEnabled(Level::Info, Coll))
      onceAtInfo(logRank,
                 llvm::formatv("{0}: Coll runs it as a copy ({1})", collective, choice->why));
    return true;
  }
  if (choice->p2p) {
    if (logEnabled(Level::Info, Coll))
      onceAtInfo(logRank, llvm::formatv("{0}: Coll runs it as grouped sends and receives by {1}",
                                        collective, choice->why));
    return true;
  }
  if (!choice->algo) {
    // A tuning rule chose the library underneath for this size: a choice.
    if (logEnabled(Level::Info, Coll))
      onceAtInfo(logRank,
                 llvm::formatv("{0}: {1} runs it by {2}", collective, library, choice->why));
    return false;
  }
  // Formatted only where it may be said: this runs on every call.
  if (logEnabled(Level::Info, Coll))
    onceAtInfo(logRank, llvm::formatv("{0}: Coll runs it{5} with {1} ({2}, {3}) by {4}",
                                      collective, choice->algo->name,
                                      ir::protocolName(choice->algo->protocol),
                                      choice->algo->origin, choice->why,
                                      op.device >= 0 ? " on the GPU" : ""));
  if (op.device >= 0 && c.boundDevice() < 0)
    c.bindDevice(op.device);
  return true;
}

} // namespace coll::rt::dropin
