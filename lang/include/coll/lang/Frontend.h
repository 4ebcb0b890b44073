//===- Frontend.h - Parse and trace .coll programs --------------*- C++ -*-===//
//
// The entry points of the language front end:
//
//   parseProgram  source buffer -> checked AST (syntax and names)
//
// Every problem is reported through the DiagnosticEngine, located in the
// source; the functions return nothing when they reported an error. The dump
// functions write the stable text formats of `collc --emit=ast`
// (documented in docs/LANGUAGE.md).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_LANG_FRONTEND_H
#define COLL_LANG_FRONTEND_H

#include "coll/lang/AST.h"
#include "coll/lang/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

namespace coll::lang {

/// Parses buffer `bufferId` of the engine's SourceMgr and resolves its names.
std::unique_ptr<ast::Program> parseProgram(unsigned bufferId,
                                           DiagnosticEngine &diags);

/// One line per node, indented by depth, with `line:col` of each node.
void dumpAst(const ast::Program &program, const llvm::SourceMgr &srcMgr,
             llvm::raw_ostream &os);

} // namespace coll::lang

#endif // COLL_LANG_FRONTEND_H
