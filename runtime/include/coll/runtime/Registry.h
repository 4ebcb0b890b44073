//===- Registry.h - The algorithms a communicator can run ---------*- C++ -*-===//
//
// docs/ARCHITECTURE.md §3 "Selection", made real. A communicator's registry holds:
//  - the files of COLL_ALGO_DIR (every *.xml and *.coll, in name order) and
//    COLL_ALGO_FILES (':' or ',' separated), in that order: user algorithms;
//  - the programs of algorithms/, embedded in the library at build time:
//    the built-in set (collConfig_t::embeddedAlgorithms = 0 leaves it out).
// XML files are used as they are. `.coll` programs are compiled for the
// communicator: `N` is set to its rank count, or `NODES` and `GPUS` to its
// node shape, and `root` to 0 (other roots are compiled on first use), so
// one program serves any job size. A program that does not trace for this
// shape (an `assert` fails, e.g. a power-of-two algorithm at 6 ranks), or a
// file for another rank count, is kept as a rejection with its reason, for
// COLL_DEBUG=INFO and for the message of a call that nothing serves.
//
// Compiled programs are cached per process (same source and parameters:
// the same algorithm), so InitAll and split do not recompile, and in the
// program cache on disk (ProgramCache.h, COLL_CACHE_PATH), so that the next
// job of the same shape does not compile or prove them again.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_REGISTRY_H
#define COLL_RUNTIME_REGISTRY_H

#include "coll/interpreter/Plan.h"
#include "coll/ir/Algorithm.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace coll::rt {

/// An algorithm ready to run: its IR and plan.
struct Compiled {
  /// The IR; empty when the plan was read from the program cache, which
  /// keeps plans only (and, for a communicator's rank, that rank's plan).
  ir::Algorithm alg;
  interp::Plan plan;
  uint64_t hash = 0;      ///< ir::hashAlgorithm: identical on every rank
  int32_t maxChannel = 0; ///< highest channel any tb uses
};

/// The shape the communicator's ranks form.
struct Shape {
  int nranks = 1;
  int nodes = 1; ///< hosts
  int gpus = 1;  ///< ranks per host when every host has the same number and
                 ///< ranks are numbered host by host; else 0
};

/// A built-in program loaded without compiling it (RegistryOptions::
/// deferBuiltins): what it needs to be compiled on first use, and then the
/// outcome, shared by every copy of the registry.
struct DeferredProgram {
  std::string source;
  std::vector<std::pair<std::string, int64_t>> params;
  std::optional<ir::Protocol> protocol; ///< the variant's protocol
  std::string variantName;              ///< the variant's name, or empty
  mutable std::mutex mutex;
  /// Set once it was compiled (or found not to compile) on every rank.
  std::atomic<bool> settled{false};
  std::shared_ptr<const Compiled> compiled;
  std::string error; ///< why it serves nothing, once settled without a program
};

struct LoadedAlgorithm {
  std::string name;
  std::string origin; ///< a path, or "built-in NAME.coll"
  bool builtin = false;
  ir::Collective collective = ir::Collective::Custom;
  ir::Protocol protocol = ir::Protocol::Simple;
  std::shared_ptr<const Compiled> compiled; ///< for root 0, or the file's root
  /// `.coll` programs that take a `root` parameter can be compiled for any
  /// root; XML files serve only theirs.
  bool anyRoot = false;
  std::string source; ///< the program, when anyRoot
  std::vector<std::pair<std::string, int64_t>> params;
  /// A program built in a second time with another protocol: the one that
  /// replaces its own (compiling it for another root keeps it).
  std::optional<ir::Protocol> protocolOverride;
  /// The plan's size range and root (-1: none), known before a deferred
  /// program is compiled: its `option min_bytes` and `max_bytes`.
  uint64_t minBytes = 0, maxBytes = 0;
  int root = -1;
  /// Set for a built-in program compiled on first use (`compiled` stays
  /// null; the program is deferred->compiled once it is settled).
  std::shared_ptr<DeferredProgram> deferred;

  /// The program for its own root: `compiled`, or the deferred program
  /// once compiled (null before, or when it did not compile).
  std::shared_ptr<const Compiled> program() const;
  /// Deferred and not yet compiled.
  bool pending() const { return deferred && !deferred->settled.load(std::memory_order_acquire); }
  /// Why a deferred program serves nothing (it did not compile); empty
  /// otherwise.
  std::string failure() const;
};

struct Rejection {
  std::string name;   ///< the algorithm's name, or the file name
  std::string origin;
  std::string reason;
};

struct RegistryOptions {
  std::string algoDir;   ///< COLL_ALGO_DIR
  std::string algoFiles; ///< COLL_ALGO_FILES
  bool builtin = true;
  /// The program cache's directory (ProgramCache::fromEnvironment); empty:
  /// programs are compiled every time.
  std::string cacheDir;
  /// The communicator's rank: a program read from the program cache holds
  /// this rank's part only (interp::Plan::planRank), read without the
  /// other ranks'. -1: every rank's, so programs are compiled (and stored)
  /// rather than read (programs compiled here keep every rank's either
  /// way).
  int rank = -1;
  /// The algorithms the user's tuning rules name: the built-ins that only
  /// a tuning table picks (isTuningOnlyBuiltin) are compiled only then.
  std::vector<std::string> namedByRules;
  /// Built-in programs are loaded without compiling them, and compiled on
  /// a call's first use (compileDeferred): creation then parses them only
  /// (docs/RUNTIME.md, "Compiling on first use"). The built-ins for
  /// windows and those a tuning rule names are compiled at load still.
  bool deferBuiltins = false;
};

/// Communicators of more than this many ranks compile their built-in
/// programs on first use unless COLL_COMPILE_ON_FIRST_USE says otherwise.
constexpr int FirstUseCompileRanks = 64;

class ProgramCache;

class Registry {
public:
  static llvm::Expected<Registry> load(const RegistryOptions &options, const Shape &shape);

  const std::vector<LoadedAlgorithm> &algorithms() const { return algos; }
  const std::vector<Rejection> &rejections() const { return rejected; }
  /// Hash of every loaded algorithm (names and IR): ranks must agree.
  uint64_t fingerprint() const;
  /// The highest channel of any loaded algorithm.
  int32_t maxChannel() const;

  /// `algo` compiled for `root` (its own compilation when it already has
  /// that root); an error says why it cannot be.
  llvm::Expected<std::shared_ptr<const Compiled>> forRoot(const LoadedAlgorithm &algo,
                                                          int root) const;

  /// Compiles a deferred program (`algo.deferred`) for this rank, or gives
  /// what an earlier call found: the same on every rank, as the compile is
  /// (the caller agrees with the other ranks before settle()). Checks what
  /// load() checks of a compiled program, and that its channels fit those
  /// maxChannel() promised.
  llvm::Expected<std::shared_ptr<const Compiled>> compileDeferred(const LoadedAlgorithm &algo) const;
  /// Records the ranks' agreed outcome of a deferred program: `program`, or
  /// (null) that it serves nothing, because of `error`.
  static void settle(const LoadedAlgorithm &algo, std::shared_ptr<const Compiled> program,
                     std::string error);
  /// Whether any deferred program is not compiled yet.
  bool anyPending() const;

  /// Adds a program synthesized for this communicator (docs/SYNTHESIS.md,
  /// COLL_TOPO_FILE) as a candidate like a loaded file, from `origin`.
  llvm::Error addSynthesized(const ir::Algorithm &alg, const std::string &origin);

  /// Whether this build compiles `.coll` programs.
  static bool compilesPrograms();

  /// Programs read from the program cache, and compiled here, by load().
  int programsFromCache() const { return fromCache; }
  /// Built-in programs loaded without compiling (deferBuiltins).
  int programsDeferred() const { return deferredHere; }
  int programsCompiled() const { return compiledHere; }
  /// Programs parsed for the parameters they declare, by load(): those the
  /// program cache did not know yet (it keeps them beside the plans).
  int programsInspected() const { return inspectedHere; }
  /// The program cache's directory; empty when there is none.
  std::string cacheDirectory() const;

private:
  /// The highest channel a program compiled on first use may have.
  int32_t deferredChannelLimit() const;

  std::vector<LoadedAlgorithm> algos;
  std::vector<Rejection> rejected;
  Shape shape;
  int rank = -1; ///< RegistryOptions::rank
  std::shared_ptr<const ProgramCache> disk;
  int fromCache = 0, compiledHere = 0, inspectedHere = 0, deferredHere = 0;
};

/// The program cache's directory as the environment sets it
/// (COLL_CACHE_PATH, else $XDG_CACHE_HOME/coll/programs, else
/// $HOME/.cache/coll/programs; empty when COLL_CACHE_DISABLE is set to
/// anything but 0).
std::string programCacheFromEnvironment();

/// Reads, verifies and plans XML text (for files, and for tests).
llvm::Expected<std::shared_ptr<const Compiled>> compileXml(llvm::StringRef text,
                                                           llvm::StringRef origin);
/// Reads an MSCCL++ execution plan (JSON, docs/IR.md "MSCCL++ plans"),
/// translates, verifies and plans it.
llvm::Expected<std::shared_ptr<const Compiled>> compilePlan(llvm::StringRef text,
                                                            llvm::StringRef origin);

} // namespace coll::rt

#endif // COLL_RUNTIME_REGISTRY_H
