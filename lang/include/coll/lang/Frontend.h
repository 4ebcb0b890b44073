//===- Frontend.h - Parse and trace .coll programs --------------*- C++ -*-===//
//
// The entry points of the language front end:
//
//   parseProgram  source buffer -> checked AST (syntax and names)
//   traceProgram  AST -> ChunkDag (evaluates the program, records every chunk
//                 operation, checks the collective's postcondition)
//   compileToDag  both
//
// Every problem is reported through the DiagnosticEngine, located in the
// source; the functions return nothing when they reported an error. The dump
// functions write the stable text formats of `collc --emit=ast|dag`
// (documented in docs/LANGUAGE.md).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_LANG_FRONTEND_H
#define COLL_LANG_FRONTEND_H

#include "coll/lang/AST.h"
#include "coll/lang/ChunkDag.h"
#include "coll/lang/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>

namespace coll::lang {

/// A value given to a `param` from outside the program.
using ParamValue = std::variant<int64_t, bool>;

/// What the command line changes about a program before it is traced.
struct Overrides {
  /// `-D NAME=VALUE`. Each must name a `param` of the program and have the
  /// type of its default value.
  std::map<std::string, ParamValue> params;
  /// `--inplace`/`--outofplace`: replaces the collective's `inplace`.
  std::optional<bool> inplace;
  /// Evaluation steps a trace may take; 0 is the default limit (50 million).
  /// Tools that run many programs (the fuzzer) set a smaller one.
  uint64_t maxSteps = 0;
};

/// Parses `NAME=VALUE` (VALUE an integer, `true` or `false`) into
/// `overrides`; a later definition of the same name replaces an earlier one.
/// Reports a malformed definition and returns false.
bool addDefine(Overrides &overrides, llvm::StringRef text,
               DiagnosticEngine &diags);

/// Parses buffer `bufferId` of the engine's SourceMgr and resolves its names.
std::unique_ptr<ast::Program> parseProgram(unsigned bufferId,
                                           DiagnosticEngine &diags);

/// Evaluates a program returned by parseProgram.
std::optional<ChunkDag> traceProgram(const ast::Program &program,
                                     const Overrides &overrides,
                                     DiagnosticEngine &diags);

/// parseProgram, then traceProgram.
std::optional<ChunkDag> compileToDag(unsigned bufferId,
                                     const Overrides &overrides,
                                     DiagnosticEngine &diags);

/// One line per node, indented by depth, with `line:col` of each node.
void dumpAst(const ast::Program &program, const llvm::SourceMgr &srcMgr,
             llvm::raw_ostream &os);

/// The collective, options, scratch usage and one line per operation, with
/// the `line:col` of each operation's call.
void dumpDag(const ChunkDag &dag, const llvm::SourceMgr &srcMgr,
             llvm::raw_ostream &os);

} // namespace coll::lang

#endif // COLL_LANG_FRONTEND_H
