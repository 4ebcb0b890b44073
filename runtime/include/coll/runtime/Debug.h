//===- Debug.h - COLL_DEBUG logging, as NCCL_DEBUG ---------------*- C++ -*-===//
//
// COLL_DEBUG=VERSION|WARN|INFO|TRACE chooses what is printed (default WARN),
// COLL_DEBUG_SUBSYS a comma-separated list of subsystems (INIT, COLL, P2P,
// SHM, NET, TUNING, ENV, ALL; a leading ^ excludes the list; default ALL),
// COLL_DEBUG_FILE a file instead of stderr (%h host name, %p pid). Lines look
// like NCCL's: "host:pid:tid [rank] COLL INFO message".
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_DEBUG_H
#define COLL_RUNTIME_DEBUG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

namespace coll::rt {

enum class Level { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };

enum Subsys : unsigned {
  Init = 1u << 0,
  Coll = 1u << 1,
  P2P = 1u << 2,
  Shm = 1u << 3,
  Net = 1u << 4,
  Tuning = 1u << 5,
  Env = 1u << 6,
  AllSubsys = ~0u,
};

/// Whether a message of `level` and `subsys` would be printed (cheap: check
/// before building an expensive message).
bool logEnabled(Level level, unsigned subsys);
/// Prints one line (a trailing newline is not needed). `rank` < 0: no rank.
void log(Level level, unsigned subsys, int rank, const llvm::Twine &message);
/// The level from COLL_DEBUG (a config may raise or lower it per process).
Level configuredLevel();
/// Overrides COLL_DEBUG for this process (collConfig_t::debugLevel).
void setLevel(Level level);

} // namespace coll::rt

#define COLL_LOG(level, subsys, rank, msg)                                                   \
  do {                                                                                       \
    if (::coll::rt::logEnabled(::coll::rt::Level::level, ::coll::rt::subsys))                \
      ::coll::rt::log(::coll::rt::Level::level, ::coll::rt::subsys, rank, msg);              \
  } while (0)

#endif // COLL_RUNTIME_DEBUG_H
