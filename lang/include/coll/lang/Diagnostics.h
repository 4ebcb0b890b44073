//===- Diagnostics.h - Located diagnostics on a SourceMgr -------*- C++ -*-===//
//
// The one diagnostic engine for everything user-facing about a .coll program:
// syntax errors, semantic errors, tracing errors, and errors that later
// stages find in what the program produced. A located diagnostic prints as
//
//   ring.coll:7:19: error: rank 9 is out of range (program has 8 ranks)
//       c = chunk((r + k) % N, input, r).reduce(c)
//                 ^
//
// (llvm::SourceMgr does the formatting); one without a location prints as
// `TOOL: error: message`. The engine counts errors so that a driver can exit
// non-zero when there were any.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_LANG_DIAGNOSTICS_H
#define COLL_LANG_DIAGNOSTICS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <utility>

namespace coll::lang {

class DiagnosticEngine {
public:
  /// Diagnostics go to `os`. `toolName` prefixes diagnostics that have no
  /// location (`collc: error: ...`); when empty they start with `error:`.
  DiagnosticEngine(llvm::SourceMgr &srcMgr, llvm::raw_ostream &os,
                   llvm::StringRef toolName = "")
      : srcMgr(srcMgr), os(os), toolName(toolName.str()) {}

  /// Reports a problem; an invalid `loc` reports it without a location.
  void error(llvm::SMLoc loc, const llvm::Twine &message);
  void warning(llvm::SMLoc loc, const llvm::Twine &message);
  /// Points at a place related to the preceding error or warning.
  void note(llvm::SMLoc loc, const llvm::Twine &message);

  unsigned errorCount() const { return numErrors; }
  bool hasErrors() const { return numErrors != 0; }

  llvm::SourceMgr &sourceMgr() const { return srcMgr; }
  /// 1-based line and column of a valid location.
  std::pair<unsigned, unsigned> lineAndColumn(llvm::SMLoc loc) const;

private:
  void report(llvm::SMLoc loc, llvm::SourceMgr::DiagKind kind,
              const llvm::Twine &message);

  llvm::SourceMgr &srcMgr;
  llvm::raw_ostream &os;
  std::string toolName;
  unsigned numErrors = 0;
};

} // namespace coll::lang

#endif // COLL_LANG_DIAGNOSTICS_H
