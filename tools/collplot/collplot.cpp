//===- collplot.cpp - Plot measured points as SVG -------------------------===//
//
//   collplot [POINTS.tsv] [-o FILE.svg] [--title TEXT]
//
// Draws what a benchmark measured with the plot writer of collrun and
// collbench (tools/support/Plot.h): time per call and bus bandwidth against
// size on log axes, one line per series, references dashed. For benchmarks
// that are not C++ (tests/benchmarks/torch_vs_gloo.py). Each input line is
//
//   SERIES<TAB>REFERENCE<TAB>BYTES<TAB>SECONDS<TAB>BUSBW_GBPS
//
// (REFERENCE 1 draws the series dashed; BUSBW 0 leaves the point out of the
// bandwidth panel); empty lines and lines starting with '#' are skipped.
// Exit status: 0 written, 1 a malformed line (named), 2 bad usage or a file
// that cannot be read or written.
//
//===----------------------------------------------------------------------===//

#include "Plot.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace llvm;

namespace {
cl::OptionCategory category("collplot options");
cl::opt<std::string> input(cl::Positional, cl::init("-"), cl::desc("<points.tsv>"),
                           cl::cat(category));
cl::opt<std::string> output("o", cl::init("-"), cl::value_desc("file"),
                            cl::desc("Output SVG (default: standard output)"), cl::cat(category));
cl::opt<std::string> title("title", cl::init("measured"), cl::desc("The plot's title"),
                           cl::cat(category));
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Plots measured points as SVG\n");
  auto buffer = MemoryBuffer::getFileOrSTDIN(input);
  if (!buffer) {
    errs() << "collplot: error: cannot read '" << input << "': " << buffer.getError().message()
           << "\n";
    return 2;
  }
  std::vector<coll::tools::PlotPoint> points;
  SmallVector<StringRef, 8> lines, fields;
  (*buffer)->getBuffer().split(lines, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    StringRef line = lines[i].rtrim("\r");
    if (line.trim().empty() || line.startswith("#"))
      continue;
    fields.clear();
    line.split(fields, '\t');
    coll::tools::PlotPoint p;
    unsigned reference = 0;
    bool ok = fields.size() == 5 && !fields[0].empty() && !fields[1].getAsInteger(10, reference) &&
              reference <= 1 && !fields[2].getAsInteger(10, p.bytes) &&
              to_float(fields[3], p.seconds) && to_float(fields[4], p.busbw) && p.seconds >= 0 &&
              p.busbw >= 0;
    if (!ok) {
      errs() << "collplot: error: " << (input == "-" ? std::string("<stdin>") : input) << ":" << i + 1
             << ": expected SERIES<TAB>REFERENCE (0 or 1)<TAB>BYTES<TAB>SECONDS<TAB>BUSBW, got '"
             << line << "'\n";
      return 1;
    }
    p.series = fields[0].str();
    p.reference = reference == 1;
    points.push_back(std::move(p));
  }
  if (output == "-") {
    coll::tools::writePlot(outs(), title, points);
    return 0;
  }
  if (Error err = coll::tools::writePlotFile(output, title, points)) {
    errs() << "collplot: error: " << toString(std::move(err)) << "\n";
    return 2;
  }
  return 0;
}
