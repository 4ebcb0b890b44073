//===- Timeline.h - A trace of every step of a run --------------*- C++ -*-===//
//
// A Timeline collects what the host backend records while a call runs (one
// slice per executed step of every tb, one per wait inside it, one per call)
// and writes it as Chrome trace / Perfetto JSON: a process per rank, a track
// per tb (track 0 holds the calls), timestamps in microseconds of the steady
// clock, so files of ranks in different processes of one host line up.
// Open it in https://ui.perfetto.dev or chrome://tracing (docs/INTERPRETER.md,
// "Timelines").
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_TIMELINE_H
#define COLL_INTERPRETER_TIMELINE_H

#include "coll/interpreter/DataType.h"
#include "coll/interpreter/Plan.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace coll::interp {

namespace host {

/// One event of a timeline: a step or a wait of one tb, in nanoseconds of
/// the steady clock (the host backend records them, the CUDA backend
/// converts its device timestamps to them).
struct TraceEvent {
  int64_t begin = 0, end = 0;
  uint64_t iteration = 0;
  const PlanStep *step = nullptr; ///< the step it belongs to
  /// 0: the step; 1: waiting for data; 2: waiting for a free slot;
  /// 3: waiting for a dependency.
  uint8_t kind = 0;
  uint64_t elems = 0; ///< elements the step moved in this iteration
};

/// The timeline of one tb for one call.
struct TbTrace {
  std::vector<TraceEvent> events;
};

} // namespace host

class Timeline {
public:
  /// Adds rank `rank`'s part of one call of `plan` that ran from `begin` to
  /// `end`, with what its tbs recorded (one entry per tb of the rank).
  void addCall(const Plan &plan, int32_t rank, DataType type,
               std::chrono::steady_clock::time_point begin,
               std::chrono::steady_clock::time_point end, llvm::ArrayRef<host::TbTrace> tbs);
  /// Names the process of `rank` in the viewer (default "rank N").
  void setRankLabel(int32_t rank, std::string label);

  /// Step slices recorded so far (every step of every tb, every iteration).
  uint64_t stepSlices() const { return steps; }
  uint64_t calls() const { return callCount; }

  void writeJson(llvm::raw_ostream &os) const;
  llvm::Error writeJson(llvm::StringRef path) const;

private:
  struct Slice {
    int64_t begin, end; ///< ns, steady clock
    int32_t rank, track;
    std::string name;
    std::string args; ///< a JSON object's members, or empty
    const char *category;
  };
  struct Track {
    int32_t rank, track;
    std::string name;
  };
  std::vector<Slice> slices;
  std::vector<Track> tracks;
  std::vector<std::pair<int32_t, std::string>> rankLabels;
  uint64_t steps = 0, callCount = 0;
};

} // namespace coll::interp

#endif // COLL_INTERPRETER_TIMELINE_H
