//===- ProgramCache.h - Verified programs kept between jobs -----*- C++ -*-===//
//
// docs/RUNTIME.md, "The program cache". Compiling a built-in program for a
// large job costs seconds (tracing, compiling and proving the whole job's
// program), and every rank of every job of that shape did it again. The
// cache keeps what a compilation produced, the verified IR or the error, in
// a file named by a SHA-256 of everything the result depends on:
//
//   - the build of Coll that compiled it (the ELF build id of the object this
//     code is linked into: a rebuild with another compiler changes it);
//   - the program's source text, the parameters it was compiled with and the
//     variant (protocol, name).
//
// An entry is the program's plan (interpreter/Plan.h), the runtime's own
// form, laid out so that one rank reads only its own part: a common part
// (the job's tbs, connections and scratch sizes, a few bytes per tb) and
// then every rank's steps and slices, each rank's a contiguous range with
// its own checksum. A rank of a 4096-rank job reads the common part and its
// range, never the other ranks' steps, and neither compiles, proves nor
// plans the program (docs/RUNTIME.md, "The program cache"). A damaged part
// (a checksum that does not match, a truncated file, an index out of range)
// is a miss and is rewritten. Entries are written to a temporary name
// and renamed, so ranks that compile the same program at once never read a
// partial file. The cache only ever holds what this build's compiler
// produced and proved, so a hit is trusted as the compilation would be; a
// file another user owns is never read.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_PROGRAMCACHE_H
#define COLL_RUNTIME_PROGRAMCACHE_H

#include "coll/interpreter/Plan.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace coll::rt {

/// The GNU build id of the object this function is linked into, in hex;
/// empty when it has none.
std::string selfBuildId();

class ProgramCache {
public:
  /// What a compilation gave: a plan, or why there is none.
  struct Entry {
    /// Stored: the whole job's plan. Loaded: the plan of the rank asked
    /// for (Plan::planRank, interp::slicePlan of the stored one).
    std::optional<interp::Plan> plan;
    uint64_t hash = 0;      ///< ir::hashAlgorithm of the program's IR
    int32_t maxChannel = 0; ///< its highest channel
    std::string error;
  };

  /// A cache in `dir` (created on the first store); disabled when `dir` is
  /// empty or this build has no build id.
  explicit ProgramCache(std::string dir);

  /// The directory COLL_CACHE_PATH names, else $XDG_CACHE_HOME/coll/programs,
  /// else $HOME/.cache/coll/programs; empty (no cache) when
  /// COLL_CACHE_DISABLE is set to anything but 0, or no home is known.
  static std::string fromEnvironment();

  bool enabled() const { return !dir.empty(); }
  const std::string &directory() const { return dir; }

  /// The key of compiling `source` with `parameters` (any text that tells
  /// the parameters and variant apart) by this build.
  std::string key(llvm::StringRef source, llvm::StringRef parameters) const;
  /// The entry stored under `key`, with `rank`'s plan; nothing when there
  /// is none, the parts it needs are damaged, or `rank` is -1 for a plan
  /// (a whole plan is not read back: compile it). An error entry is read
  /// for any rank.
  std::optional<Entry> load(llvm::StringRef key, int32_t rank) const;
  /// Stores `entry` (a whole plan, or an error) under `key`; a cache that cannot be written is skipped
  /// (the result is returned by the caller either way). Returns whether it
  /// was written.
  bool store(llvm::StringRef key, const Entry &entry) const;

  /// A short text a build derived from a source and keeps beside the plans
  /// (the parameters a program declares: the runtime needs them before it
  /// can look a plan up, and they cost a parse). Under its own key (key()
  /// with a `parameters` text no compilation uses); nothing when there is
  /// none or it is damaged.
  std::optional<std::string> loadNote(llvm::StringRef key) const;
  bool storeNote(llvm::StringRef key, llvm::StringRef text) const;

private:
  std::string dir;
  std::string buildId;
};

} // namespace coll::rt

#endif // COLL_RUNTIME_PROGRAMCACHE_H
