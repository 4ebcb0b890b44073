//===- PhaseTimer.h - Wall and CPU time per phase of a tool ------*- C++ -*-===//
//
// `collc --time-phases` prints how long each phase of a compilation took
// (parsing, tracing, every pass, every check, writing), summed over the
// times a phase ran, when the tool exits. A PhaseTimer times the scope it
// lives in; it costs nothing while timing is off.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SUPPORT_PHASETIMER_H
#define COLL_SUPPORT_PHASETIMER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Timer.h"

namespace coll {

/// Whether PhaseTimers record (off by default).
inline bool &phaseTimingEnabled() {
  static bool enabled = false;
  return enabled;
}

class PhaseTimer {
public:
  PhaseTimer(llvm::StringRef name, llvm::StringRef description)
      : timer(name, description, "coll", "Time per phase",
              phaseTimingEnabled()) {}

private:
  llvm::NamedRegionTimer timer;
};

} // namespace coll

#endif // COLL_SUPPORT_PHASETIMER_H
