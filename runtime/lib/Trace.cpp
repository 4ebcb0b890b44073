//===- Trace.cpp - COLL_TRACE: one timeline per file ------------------------===//
//
// The ranks of a process that trace to one file add to one timeline.
//
//===----------------------------------------------------------------------===//

#include "CommImpl.h"

#include <unistd.h>

namespace coll::rt {

void TraceFile::write(int rank) {
  std::lock_guard<std::mutex> lock(mutex);
  if (llvm::Error err = timeline.writeJson(path))
    COLL_LOG(Warn, Coll, rank,
             "COLL_TRACE: cannot write " + path + ": " + llvm::toString(std::move(err)));
  else
    COLL_LOG(Info, Coll, rank,
             llvm::formatv("COLL_TRACE: wrote {0} calls, {1} step slices to {2}",
                           timeline.calls(), timeline.stepSlices(), path));
}

/// `pattern` with %h, %p and %r expanded; without %p or %r, ".rRANK" is
/// added before the extension so that the processes of a job do not
/// overwrite each other's file.
std::string tracePath(llvm::StringRef pattern, int commRank) {
  // The rank of the first communicator this process traces names its files
  // (usually the job's rank), so that communicators from splits agree.
  static std::atomic<int> first{-1};
  int expected = -1;
  first.compare_exchange_strong(expected, commRank);
  const int rank = first.load();
  std::string out;
  bool distinct = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char k = pattern[i + 1];
      if (k == 'h') {
        out += hostName();
        ++i;
        continue;
      }
      if (k == 'p' || k == 'r') {
        out += std::to_string(k == 'p' ? static_cast<long>(getpid()) : static_cast<long>(rank));
        distinct = true;
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  if (!distinct) {
    size_t dot = out.rfind('.');
    size_t slash = out.rfind('/');
    std::string suffix = ".r" + std::to_string(rank);
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
      out += suffix;
    else
      out.insert(dot, suffix);
  }
  return out;
}

std::shared_ptr<TraceFile> traceFileFor(const std::string &path) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<TraceFile>> files;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto existing = files[path].lock())
    return existing;
  auto made = std::make_shared<TraceFile>();
  made->path = path;
  files[path] = made;
  return made;
}

} // namespace coll::rt
