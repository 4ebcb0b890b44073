//===- ToolSupport.h - What collrun and collbench share ---------*- C++ -*-===//
//
// The drivers that run an IR file agree on exit codes, on how message sizes
// and data types are spelled, on how a file is read, verified and planned
// (and its diagnostics printed), on which modes a file can run in, and on
// the columns of their nccl-tests-style tables.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TOOLS_TOOLSUPPORT_H
#define COLL_TOOLS_TOOLSUPPORT_H

#include "coll/interpreter/DataType.h"
#include "coll/interpreter/Plan.h"
#include "coll/ir/Algorithm.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace coll::tools {

enum ExitCode {
  Verified = 0,      ///< every size verified
  Failed = 1,        ///< a wrong result or a failed call
  BadInput = 2,      ///< bad usage, an unreadable or invalid file
  NotApplicable = 3, ///< the file cannot be checked or lacks the mode
};

/// Prints "TOOL: message" to stderr and returns `code`.
int fail(llvm::StringRef tool, ExitCode code, const llvm::Twine &message);

/// The largest message size the tools take: 1 TiB.
inline constexpr uint64_t MaxSize = uint64_t(1) << 40;

/// Sizes from a list of byte counts (coll::parseBytes, at most MaxSize);
/// `error` says which is bad.
std::optional<std::vector<uint64_t>> parseSizes(llvm::ArrayRef<std::string> texts,
                                                std::string &error);

/// The element type, operator and modes a run asks for.
struct RunRequest {
  interp::DataType type = interp::DataType::Float32;
  interp::ReduceOp op = interp::ReduceOp::Sum;
  std::string mode; ///< "inplace", "outofplace" or empty for every mode
};

/// Validates --dtype, --op and --mode spellings; `error` says what is wrong.
std::optional<RunRequest> parseRunRequest(llvm::StringRef dtype, llvm::StringRef op,
                                          llvm::StringRef mode, std::string &error);

/// A file read, verified and planned.
struct LoadedAlgorithm {
  ir::Algorithm alg;
  interp::Plan plan;
};

/// Reads, verifies, checks (coll/ir/Check.h, unless `check` is false) and
/// plans `file`, printing at most `maxWarnings` warnings of each stage and
/// every error to stderr; nullopt on failure (BadInput).
std::optional<LoadedAlgorithm> loadAlgorithm(llvm::StringRef file, unsigned maxWarnings,
                                             bool check = true);

/// The modes to run (true = in place) for `request.mode`, or the exit code
/// after saying why the file does not apply.
struct ModeSelection {
  std::vector<bool> modes;
  int exitCode = Verified; ///< NotApplicable when `modes` is empty
};
ModeSelection selectModes(llvm::StringRef tool, const LoadedAlgorithm &loaded,
                          const RunRequest &request);

/// busbw / algbw for the plan's collective, as nccl-tests defines it.
double busBandwidthFactor(const interp::Plan &plan);

/// The two header lines of the result table; `extra` names the columns
/// after busbw; without any, the last column is "#wrong".
void printTableHeader(llvm::raw_ostream &os, llvm::ArrayRef<std::string> extra = {});
/// The first columns of a row: place, size, count, type, redop.
std::string rowPrefix(bool inplace, uint64_t bytes, uint64_t count, const RunRequest &request);

} // namespace coll::tools

#endif // COLL_TOOLS_TOOLSUPPORT_H
