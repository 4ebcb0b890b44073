//===- XML.h - Reading and writing MSCCL XML --------------------*- C++ -*-===//
//
// The reader accepts the MSCCL dialect of docs/ARCHITECTURE.md §3: both header forms
// (without `outofplace`/`minBytes`/`maxBytes` the defaults are
// outofplace = !inplace, minBytes = 0, maxBytes = 0), comments, and unknown
// attributes (each warned about once per element kind and name). It checks
// the file's structure: well-formed XML, one <algo>, required attributes that
// parse as integers in range, known step types, buffers, protocols, and ids
// (gpu id, tb id, step s) that are present, unique and dense. It does not
// check cross-references; that is the verifier's job (Verifier.h).
//
// The writer emits every attribute in one fixed order, so that
// read(write(a)) == a and equal algorithms give byte-identical files.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_XML_H
#define COLL_IR_XML_H

#include "coll/ir/Algorithm.h"
#include "coll/ir/Diagnostics.h"

#include "llvm/Support/Error.h"

#include <string>

namespace llvm {
class raw_ostream;
}

namespace coll::ir {

/// Parses `text` as an algorithm; diagnostics name `diags.file()`. On failure
/// the error holds every error found (also recorded in `diags`); warnings
/// are only in `diags`.
llvm::Expected<Algorithm> parseAlgorithm(llvm::StringRef text, DiagnosticList &diags);

/// Reads and parses the file at `path` (a diagnostics list for that file is
/// the caller's, so that it can print the warnings). "-" reads stdin. When
/// the file cannot be read at all, the error says so and nothing is added to
/// `diags`, which tells an unreadable file from an invalid one.
llvm::Expected<Algorithm> readAlgorithmFile(llvm::StringRef path, DiagnosticList &diags);

/// `value` with the characters XML reserves written as entities (&amp;
/// &lt; &gt; &quot; &apos;) and tab, newline and carriage return as
/// character references, for attribute values; for text (`attribute`
/// false), only & < > are, and whitespace stays as it is.
std::string xmlEscaped(llvm::StringRef value, bool attribute = true);

/// The XML text of `alg`.
std::string writeAlgorithm(const Algorithm &alg);
/// The same, written to `os` as it is made (a large algorithm's text is
/// never held whole).
void writeAlgorithm(const Algorithm &alg, llvm::raw_ostream &os);

/// Writes `alg` to `path` ("-" for stdout).
llvm::Error writeAlgorithmFile(const Algorithm &alg, llvm::StringRef path);

} // namespace coll::ir

#endif // COLL_IR_XML_H
