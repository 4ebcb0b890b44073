//===- ToolSupport.cpp - What collrun and collbench share ------------------===//

#include "ToolSupport.h"

#include "coll/interpreter/Check.h"
#include "coll/ir/Check.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/XML.h"
#include "coll/support/Bytes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

namespace coll::tools {

int fail(llvm::StringRef tool, ExitCode code, const llvm::Twine &message) {
  llvm::errs() << tool << ": " << message << "\n";
  return code;
}

std::optional<std::vector<uint64_t>> parseSizes(llvm::ArrayRef<std::string> texts,
                                                std::string &error) {
  std::vector<uint64_t> sizes;
  for (const std::string &text : texts) {
    std::optional<uint64_t> bytes = parseBytes(text, MaxSize);
    if (!bytes) {
      error = "bad --size '" + text + "' (bytes, optionally with K, M or G)";
      return std::nullopt;
    }
    sizes.push_back(*bytes);
  }
  return sizes;
}

std::optional<RunRequest> parseRunRequest(llvm::StringRef dtype, llvm::StringRef op,
                                          llvm::StringRef mode, std::string &error) {
  RunRequest request;
  std::optional<interp::DataType> type = interp::parseDataType(dtype);
  std::optional<interp::ReduceOp> reduceOp = interp::parseReduceOp(op);
  if (!type)
    error = "unknown --dtype '" + dtype.str() + "'";
  else if (!reduceOp)
    error = "unknown --op '" + op.str() + "'";
  else if (!mode.empty() && mode != "inplace" && mode != "outofplace")
    error = "--mode must be inplace or outofplace, not '" + mode.str() + "'";
  if (!error.empty())
    return std::nullopt;
  request.type = *type;
  request.op = *reduceOp;
  request.mode = mode.str();
  return request;
}

std::optional<LoadedAlgorithm> loadAlgorithm(llvm::StringRef file, unsigned maxWarnings,
                                             bool check) {
  ir::DiagnosticList readDiags(file.str());
  auto alg = ir::readAlgorithmFile(file, readDiags);
  readDiags.print(llvm::errs(), ir::Severity::Warning, maxWarnings);
  if (!alg) {
    llvm::logAllUnhandledErrors(alg.takeError(), llvm::errs());
    return std::nullopt;
  }
  ir::DiagnosticList verifyDiags(file.str());
  auto analysis = ir::verify(*alg, verifyDiags);
  verifyDiags.print(llvm::errs(), ir::Severity::Warning, maxWarnings);
  if (!analysis) {
    llvm::logAllUnhandledErrors(analysis.takeError(), llvm::errs());
    return std::nullopt;
  }
  if (check) {
    ir::DiagnosticList checkDiags(file.str());
    bool ok = ir::check(*alg, *analysis, checkDiags);
    checkDiags.print(llvm::errs(), ir::Severity::Warning, maxWarnings);
    checkDiags.print(llvm::errs(), ir::Severity::Error);
    if (!ok) {
      llvm::errs() << file << ": the algorithm fails its check and is not run "
                   << "(--no-check runs it anyway)\n";
      return std::nullopt;
    }
  }
  auto plan = interp::buildPlan(*alg, *analysis, file);
  if (!plan) {
    llvm::logAllUnhandledErrors(plan.takeError(), llvm::errs());
    return std::nullopt;
  }
  return LoadedAlgorithm{std::move(*alg), std::move(*plan)};
}

ModeSelection selectModes(llvm::StringRef tool, const LoadedAlgorithm &loaded,
                          const RunRequest &request) {
  ModeSelection selection;
  const interp::Plan &plan = loaded.plan;
  auto notApplicable = [&](const llvm::Twine &why) {
    selection.modes.clear();
    selection.exitCode = fail(tool, NotApplicable, plan.fileName + ": " + why);
    return selection;
  };
  if (!interp::CollectiveDesc::of(plan).checkable())
    return notApplicable("collective '" + loaded.alg.collectiveSpelling +
                         "' has no built-in definition and the file carries no <condition>, "
                         "so its results cannot be checked");
  if (plan.collective == ir::Collective::Custom && request.op == interp::ReduceOp::Avg)
    return notApplicable("--op avg is not defined for a custom collective (the runtime "
                         "divides only the results of built-in reducing collectives)");
  for (bool inplace : {false, true}) {
    bool supported = inplace ? plan.inplace : plan.outofplace;
    bool requested =
        request.mode.empty() || request.mode == (inplace ? "inplace" : "outofplace");
    if (requested && supported)
      selection.modes.push_back(inplace);
    else if (requested && !request.mode.empty())
      return notApplicable(llvm::Twine("the algorithm does not support ") +
                           (inplace ? "in-place" : "out-of-place") + " calls");
  }
  if (selection.modes.empty())
    return notApplicable("the algorithm declares neither in-place nor out-of-place support");
  return selection;
}

double busBandwidthFactor(const interp::Plan &plan) {
  ir::CollectiveInfo info = ir::collectiveInfo(plan.collective);
  return double(info.busMulN * plan.nranks + info.busOffset) / plan.nranks;
}

void printTableHeader(llvm::raw_ostream &os, llvm::ArrayRef<std::string> extra) {
  auto line = [&](const std::string &text) { os << llvm::StringRef(text).rtrim() << "\n"; };
  std::string names, units;
  for (const std::string &e : extra)
    names += llvm::formatv(" {0,9}", e).str();
  if (extra.empty())
    names = llvm::formatv(" {0,8}", "#wrong").str();
  line(llvm::formatv("# {0,-12} {1,12} {2,12} {3,6} {4,6} {5,10} {6,8} {7,8}{8}", "place",
                     "size", "count", "type", "redop", "time", "algbw", "busbw", names));
  line(llvm::formatv("# {0,-12} {1,12} {2,12} {3,6} {4,6} {5,10} {6,8} {7,8}", "", "(B)",
                     "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)"));
}

std::string rowPrefix(bool inplace, uint64_t bytes, uint64_t count, const RunRequest &request) {
  return llvm::formatv("  {0,-12} {1,12} {2,12} {3,6} {4,6}",
                       inplace ? "in-place" : "out-of-place", bytes, count,
                       interp::dataTypeName(request.type), interp::reduceOpName(request.op))
      .str();
}

} // namespace coll::tools
