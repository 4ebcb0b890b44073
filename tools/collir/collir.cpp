//===- collir.cpp - Read, verify and emit MSCCL XML algorithms ------------===//
//
//   collir FILE.xml [--check] [--emit=none|text|xml|svg] [-o OUT]
//                   [--target=coll|msccl] [--max-warnings=N]
//
// Reads an algorithm, verifies it against the IR contract (and the limits of
// the chosen runtime), with --check also proves it free of races and
// deadlocks and computing its collective (coll/ir/Check.h), prints its
// diagnostics and, when it is valid, writes it out. Exit status: 0 valid, 1
// errors in the file, 2 bad usage or a file that cannot be read or written.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Check.h"
#include "coll/ir/Printer.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/Svg.h"
#include "coll/ir/XML.h"
#include "coll/support/Heap.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace coll::ir;

namespace {

enum class Emit { None, Text, Xml, Svg };
enum class Target { Coll, Msccl };

llvm::cl::OptionCategory category("collir options");

llvm::cl::opt<std::string>
    inputPath(llvm::cl::Positional, llvm::cl::Required,
              llvm::cl::desc("<algorithm.xml, MSCCL++ plan.json, or - for stdin>"),
              llvm::cl::cat(category));
llvm::cl::opt<Emit>
    emit("emit", llvm::cl::desc("What to write when the algorithm is valid"),
         llvm::cl::values(
             clEnumValN(Emit::None, "none", "nothing: only check (default)"),
             clEnumValN(Emit::Text, "text", "the text listing of docs/IR.md"),
             clEnumValN(Emit::Xml, "xml", "MSCCL XML in the canonical layout"),
             clEnumValN(Emit::Svg, "svg",
                        "the schedule as a picture (SVG): a lane per rank and tb, "
                        "arrows for sends")),
         llvm::cl::init(Emit::None), llvm::cl::cat(category));
llvm::cl::opt<unsigned> svgRanks(
    "svg-ranks", llvm::cl::init(16),
    llvm::cl::desc("--emit=svg: ranks drawn in full, at least 2; the middle ones of a "
                   "larger algorithm are collapsed into one band, and the picture says "
                   "so (default 16)"),
    llvm::cl::cat(category));
llvm::cl::opt<std::string>
    outputPath("o", llvm::cl::desc("Output file ('-': stdout)"),
               llvm::cl::value_desc("file"), llvm::cl::init("-"),
               llvm::cl::cat(category));
llvm::cl::opt<Target> target(
    "target", llvm::cl::desc("The runtime whose limits apply"),
    llvm::cl::values(
        clEnumValN(Target::Coll, "coll", "Coll's interpreter: no limits"),
        clEnumValN(Target::Msccl, "msccl",
                   "the MSCCL executor: at most 64 steps per tb, cnt below "
                   "72, at most 32 tbs per channel and direction, no direct steps")),
    llvm::cl::init(Target::Coll), llvm::cl::cat(category));
llvm::cl::opt<bool> checkAlgorithm(
    "check",
    llvm::cl::desc("Also check races, deadlocks with 8-slot FIFOs and the "
                   "result against the collective's definition"),
    llvm::cl::init(false), llvm::cl::cat(category));
llvm::cl::opt<unsigned> maxWarnings(
    "max-warnings", llvm::cl::desc("Print at most N warnings (default 5)"),
    llvm::cl::value_desc("N"), llvm::cl::init(5), llvm::cl::cat(category));

RuntimeLimits limitsFor(Target target) {
  return target == Target::Msccl ? mscclLimits() : RuntimeLimits();
}

} // namespace

int main(int argc, char **argv) {
  coll::tuneHeapForOneShotTool();
  llvm::InitLLVM initLLVM(argc, argv);
  llvm::cl::HideUnrelatedOptions(category);
  if (!llvm::cl::ParseCommandLineOptions(
          argc, argv, "read, verify and emit MSCCL XML algorithms (or MSCCL++ execution plans)\n",
          &llvm::errs()))
    return 2;

  if (svgRanks < 2) {
    llvm::errs() << "collir: error: --svg-ranks must be at least 2 (the first and last ranks "
                    "are drawn in full, those between collapsed)\n";
    return 2;
  }

  DiagnosticList diags(inputPath == "-" ? std::string("<stdin>") : inputPath);
  auto report = [&] {
    diags.print(llvm::errs(), Severity::Warning, maxWarnings);
    diags.print(llvm::errs(), Severity::Error);
  };
  llvm::Expected<Algorithm> alg = readAlgorithmFile(inputPath, diags);
  if (!alg) {
    // No diagnostics means the file itself could not be read.
    if (!diags.hasErrors()) {
      llvm::errs() << "collir: error: " << llvm::toString(alg.takeError())
                   << '\n';
      return 2;
    }
    llvm::consumeError(alg.takeError());
    report();
    return 1;
  }
  llvm::Expected<Analysis> analysis = verify(*alg, diags, limitsFor(target));
  if (!analysis) {
    report();
    llvm::consumeError(analysis.takeError());
    return 1;
  }
  bool checked = !checkAlgorithm || check(*alg, *analysis, diags);
  report();
  if (!checked)
    return 1;
  if (emit == Emit::None)
    return 0;

  std::error_code ec;
  llvm::raw_fd_ostream os(outputPath, ec);
  if (ec) {
    llvm::errs() << "collir: error: cannot write '" << outputPath
                 << "': " << ec.message() << '\n';
    return 2;
  }
  if (emit == Emit::Text) {
    printAlgorithm(*alg, os);
  } else if (emit == Emit::Svg) {
    // A step's tooltip names its line of the file.
    SvgOptions svg;
    svg.maxRanks = static_cast<int32_t>(svgRanks);
    svg.origin = [&](StepRef r) {
      uint32_t line = alg->gpus[r.gpu].tbs[r.tb].steps[r.step].line;
      return line ? diags.file() + ":" + std::to_string(line) : std::string();
    };
    writeScheduleSvg(*alg, *analysis, os, svg);
  } else {
    writeAlgorithm(*alg, os);
  }
  os.flush();
  if (os.has_error()) {
    llvm::errs() << "collir: error: cannot write '" << outputPath
                 << "': " << os.error().message() << '\n';
    os.clear_error();
    return 2;
  }
  return 0;
}
