//===- Sema.h - Name resolution and static checks ---------------*- C++ -*-===//
//
// Semantic analysis runs on the fresh AST before anything is evaluated, so
// that mistakes in code the program never reaches are still reported:
// unknown names, calls with the wrong arguments, assignments to constants,
// misplaced `return`, unknown options or collective arguments.
//
// Scoping: a `let` is visible from its statement to the end of its block; a
// loop variable in its loop's body. Top-level code sees the parameters and
// top-level variables declared before it. A function body sees its
// arguments, its own variables, every parameter and every function (functions
// may be called before their definition); not the top-level variables.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_LANG_SEMA_H
#define COLL_LANG_SEMA_H

#include "coll/lang/AST.h"
#include "coll/lang/Diagnostics.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace coll::lang {

/// Resolves every name of `program` in place and reports what is wrong.
bool checkProgram(ast::Program &program, DiagnosticEngine &diags);

/// The parameters of a built-in function or method: the first `minArgs` of
/// the positional ones are required, the named ones optional. An argument's
/// ast::Arg::param indexes `params`.
struct Signature {
  llvm::StringRef name;
  unsigned minArgs = 0;
  unsigned numPositional = 0;
  llvm::SmallVector<llvm::StringRef, 6> params; ///< positional, then named
};
const Signature &signature(ast::Builtin builtin);
const Signature &signature(ast::Method method);
llvm::StringRef spelling(ast::Property property);

/// Arguments of a `collective` declaration; ast::Arg::param holds one of
/// these.
enum class CollectiveArg : uint8_t {
  Ranks,
  Chunks,
  Inplace,
  Root,
  Input,
  Output
};

} // namespace coll::lang

#endif // COLL_LANG_SEMA_H
