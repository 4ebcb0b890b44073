//===- Diagnostics.cpp - Located diagnostics on a SourceMgr ---------------===//

#include "coll/lang/Diagnostics.h"

namespace coll::lang {

void DiagnosticEngine::report(llvm::SMLoc loc, llvm::SourceMgr::DiagKind kind,
                              const llvm::Twine &message) {
  if (kind == llvm::SourceMgr::DK_Error)
    ++numErrors;
  if (loc.isValid()) {
    srcMgr.PrintMessage(os, loc, kind, message, {}, {}, /*ShowColors=*/false);
    return;
  }
  llvm::SMDiagnostic(/*filename=*/"", kind, message.str())
      .print(toolName.empty() ? nullptr : toolName.c_str(), os,
             /*ShowColors=*/false);
}

void DiagnosticEngine::error(llvm::SMLoc loc, const llvm::Twine &message) {
  report(loc, llvm::SourceMgr::DK_Error, message);
}

void DiagnosticEngine::warning(llvm::SMLoc loc, const llvm::Twine &message) {
  report(loc, llvm::SourceMgr::DK_Warning, message);
}

void DiagnosticEngine::note(llvm::SMLoc loc, const llvm::Twine &message) {
  report(loc, llvm::SourceMgr::DK_Note, message);
}

std::pair<unsigned, unsigned>
DiagnosticEngine::lineAndColumn(llvm::SMLoc loc) const {
  return srcMgr.getLineAndColumn(loc);
}

} // namespace coll::lang
