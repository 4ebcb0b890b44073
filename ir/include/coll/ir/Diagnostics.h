//===- Diagnostics.h - Located diagnostics for IR files ---------*- C++ -*-===//
//
// Every problem found in an IR file is reported as
//
//   FILE:LINE: error: gpu 0 tb 1 step 3: srcoff 5 + cnt 4 exceeds i_chunks 8
//
// naming the file, the line of the offending element and the element itself.
// A DiagnosticList collects them in the order they were found.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_DIAGNOSTICS_H
#define COLL_IR_DIAGNOSTICS_H

#include "coll/ir/Algorithm.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace coll::ir {

enum class Severity : uint8_t { Error, Warning };

struct Diagnostic {
  Severity severity = Severity::Error;
  uint32_t line = 0;  ///< 0 when not known
  StepRef where;      ///< the element: any of gpu/tb/step may be -1
  std::string message;
};

/// Collects the diagnostics for one file (or one in-memory algorithm, whose
/// name is then something like "<generated>").
class DiagnosticList {
public:
  explicit DiagnosticList(std::string fileName) : fileName(std::move(fileName)) {}

  void error(uint32_t line, StepRef where, const llvm::Twine &message);
  void warning(uint32_t line, StepRef where, const llvm::Twine &message);

  const std::string &file() const { return fileName; }
  const std::vector<Diagnostic> &all() const { return diags; }
  unsigned errorCount() const { return numErrors; }
  unsigned warningCount() const { return static_cast<unsigned>(diags.size()) - numErrors; }
  bool hasErrors() const { return numErrors != 0; }

  /// "FILE:LINE: error: gpu G tb T step S: message" (parts that are unknown
  /// are left out).
  std::string format(const Diagnostic &diag) const;
  /// Prints the diagnostics of `severity`, at most `limit` of them, then a
  /// line saying how many more there were.
  void print(llvm::raw_ostream &os, Severity severity, size_t limit = SIZE_MAX) const;
  /// An llvm::Error whose message is every error, formatted, one per line;
  /// success when there are none.
  llvm::Error takeErrors() const;

private:
  std::string fileName;
  std::vector<Diagnostic> diags;
  unsigned numErrors = 0;
};

} // namespace coll::ir

#endif // COLL_IR_DIAGNOSTICS_H
