//===- collc.cpp - The .coll compiler driver ------------------------------===//
//
//   collc PROGRAM.coll [-o OUT] [-D NAME=VALUE]...
//         [--emit=ast|dag|schedule|xml|dot|svg|mscclpp] [--svg-ranks N] [--instances N]
//         [--protocol Simple|LL|LL128] [--inplace|--outofplace]
//         [--min-bytes N] [--max-bytes N] [--target coll|msccl]
//
// Reads a program, traces it, compiles it to MSCCL XML (the default) or
// writes the requested stage's text dump. Exits 1 when any diagnostic was
// an error.
//
//===----------------------------------------------------------------------===//

#include "coll/compiler/Compiler.h"
#include "coll/ir/Mscclpp.h"
#include "coll/ir/Svg.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/XML.h"
#include "coll/lang/Frontend.h"
#include "coll/support/Heap.h"
#include "coll/support/PhaseTimer.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <optional>

using namespace coll;
namespace cl = llvm::cl;

namespace {

enum class Emit { Ast, Dag, Schedule, Xml, Dot, Svg, Mscclpp };

cl::OptionCategory category("collc options");

cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                               cl::desc("<program.coll>"), cl::cat(category));
cl::opt<std::string>
    outputFile("o", cl::init("-"), cl::value_desc("file"),
               cl::desc("Output file (default: standard output)"),
               cl::cat(category));
cl::list<std::string>
    defines("D", cl::Prefix, cl::value_desc("NAME=VALUE"),
            cl::desc("Override a param (an integer, true or false)"),
            cl::cat(category));
cl::opt<unsigned> svgRanks(
    "svg-ranks", cl::init(16),
    cl::desc("--emit=svg: ranks drawn in full, at least 2; the middle ones of a "
             "larger program are collapsed into one band, and the picture says so "
             "(default 16)"),
    cl::cat(category));

cl::opt<bool> timePhases(
    "time-phases",
    cl::desc("Print the time of each phase (parse, trace, passes, checks, "
             "write) to stderr at exit"),
    cl::cat(category));

cl::opt<Emit> emit(
    "emit", cl::init(Emit::Xml), cl::desc("What to write"),
    cl::values(clEnumValN(Emit::Ast, "ast", "the syntax tree"),
               clEnumValN(Emit::Dag, "dag", "the traced chunk DAG"),
               clEnumValN(Emit::Schedule, "schedule",
                          "the compiled schedule, with each step's source"),
               clEnumValN(Emit::Xml, "xml", "MSCCL XML (the default)"),
               clEnumValN(Emit::Dot, "dot", "the chunk DAG for Graphviz"),
               clEnumValN(Emit::Svg, "svg",
                          "the compiled schedule as a picture (SVG): a lane per rank "
                          "and tb, arrows for sends, each step's source on hover"),
               clEnumValN(Emit::Mscclpp, "mscclpp",
                          "an MSCCL++ v0.10 execution plan (JSON): direct and local "
                          "steps on memory channels, read back and compared before "
                          "it is written")),
    cl::cat(category));
cl::opt<compiler::Target> target(
    "target", cl::init(compiler::Target::Coll),
    cl::desc("The runtime whose limits the IR must respect"),
    cl::values(
        clEnumValN(compiler::Target::Coll, "coll",
                   "Coll's interpreter: no limits"),
        clEnumValN(compiler::Target::Msccl, "msccl",
                   "the MSCCL executor: at most 64 steps per tb, cnt "
                   "below 72, at most 32 tbs per channel and direction, no direct steps")),
    cl::cat(category));
cl::opt<int> instances("instances", cl::value_desc("n"),
                       cl::desc("Replace `option instances`"),
                       cl::cat(category));
cl::opt<ir::Protocol>
    protocol("protocol", cl::desc("Replace `option protocol`"),
             cl::values(clEnumValN(ir::Protocol::Simple, "Simple", "Simple"),
                        clEnumValN(ir::Protocol::LL, "LL", "LL"),
                        clEnumValN(ir::Protocol::LL128, "LL128", "LL128")),
             cl::cat(category));
cl::opt<bool> inplace("inplace", cl::desc("Trace the in-place variant"),
                      cl::cat(category));
cl::opt<bool> outofplace("outofplace",
                         cl::desc("Trace the out-of-place variant"),
                         cl::cat(category));
cl::opt<uint64_t> minBytes("min-bytes", cl::value_desc("n"),
                           cl::desc("Replace `option min_bytes`"),
                           cl::cat(category));
cl::opt<uint64_t> maxBytes("max-bytes", cl::value_desc("n"),
                           cl::desc("Replace `option max_bytes`"),
                           cl::cat(category));

/// What the command line asks for, gathered in one place so that every
/// stage of the pipeline reads the same values.
struct Request {
  std::string input, output;
  Emit emit = Emit::Xml;
  compiler::Target target = compiler::Target::Coll;
  lang::Overrides overrides;
  std::optional<int32_t> instances;
  std::optional<ir::Protocol> protocol;
  std::optional<uint64_t> minBytes, maxBytes;

  /// Command-line values replace the program's options.
  void applyTo(lang::ProgramOptions &options) const {
    options.instances = instances.value_or(options.instances);
    if (protocol)
      options.protocol = protocol;
    options.minBytes = minBytes.value_or(options.minBytes);
    options.maxBytes = maxBytes.value_or(options.maxBytes);
  }
};

template <typename T> std::optional<T> given(const cl::opt<T> &opt) {
  return opt.getNumOccurrences() ? std::optional<T>(opt.getValue())
                                 : std::nullopt;
}

/// Validates the options into a Request; reports problems through `diags`.
std::optional<Request> makeRequest(lang::DiagnosticEngine &diags) {
  Request req;
  req.input = inputFile;
  req.output = outputFile;
  req.emit = emit;
  req.target = target;
  for (const std::string &define : defines)
    lang::addDefine(req.overrides, define, diags);
  if (inplace && outofplace)
    diags.error(llvm::SMLoc(), "--inplace and --outofplace exclude each other");
  else if (inplace || outofplace)
    req.overrides.inplace = bool(inplace);
  req.instances = given(instances);
  if (req.instances && *req.instances < 1)
    diags.error(llvm::SMLoc(), "--instances must be at least 1");
  if (svgRanks < 2)
    diags.error(llvm::SMLoc(), "--svg-ranks must be at least 2 (the first and last "
                               "ranks are drawn in full, those between collapsed)");
  req.protocol = given(protocol);
  req.minBytes = given(minBytes);
  req.maxBytes = given(maxBytes);
  if (diags.hasErrors())
    return std::nullopt;
  return req;
}

int run(llvm::SourceMgr &srcMgr, lang::DiagnosticEngine &diags) {
  std::optional<Request> req = makeRequest(diags);
  if (!req)
    return 1;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFileOrSTDIN(req->input, /*IsText=*/true);
  if (!file) {
    diags.error(llvm::SMLoc(), "cannot read '" + req->input +
                                   "': " + file.getError().message());
    return 1;
  }
  unsigned bufferId =
      srcMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());

  std::optional<PhaseTimer> parseTimer(std::in_place, "parse", "parsing");
  std::unique_ptr<lang::ast::Program> program =
      lang::parseProgram(bufferId, diags);
  parseTimer.reset();
  if (!program)
    return 1;
  std::optional<lang::ChunkDag> dag;
  if (req->emit != Emit::Ast) {
    PhaseTimer timer("trace", "tracing");
    dag = lang::traceProgram(*program, req->overrides, diags);
    if (!dag)
      return 1;
    req->applyTo(dag->options);
    if (dag->options.maxBytes != 0 &&
        dag->options.minBytes > dag->options.maxBytes) {
      diags.error(llvm::SMLoc(), "min_bytes (" +
                                     llvm::Twine(dag->options.minBytes) +
                                     ") is larger than max_bytes (" +
                                     llvm::Twine(dag->options.maxBytes) + ")");
      return 1;
    }
  }

  std::optional<compiler::Schedule> schedule;
  if (req->emit == Emit::Schedule || req->emit == Emit::Xml || req->emit == Emit::Svg ||
      req->emit == Emit::Mscclpp) {
    // An algorithm without a name is named after its file.
    if (dag->options.name.empty() && req->input != "-")
      dag->options.name = llvm::sys::path::stem(req->input).str();
    compiler::CompileOptions options;
    options.target = req->target;
    schedule = compiler::compileSchedule(*dag, options, diags);
    if (!schedule)
      return 1;
  }

  std::error_code ec;
  llvm::ToolOutputFile out(req->output, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    diags.error(llvm::SMLoc(),
                "cannot write '" + req->output + "': " + ec.message());
    return 1;
  }
  PhaseTimer timer("write", "writing the output");
  switch (req->emit) {
  case Emit::Ast:
    lang::dumpAst(*program, srcMgr, out.os());
    break;
  case Emit::Dag:
    lang::dumpDag(*dag, srcMgr, out.os());
    break;
  case Emit::Dot:
    compiler::dumpDot(*dag, srcMgr, out.os());
    break;
  case Emit::Schedule:
    compiler::dumpSchedule(*schedule, *dag, srcMgr, out.os());
    break;
  case Emit::Xml:
    ir::writeAlgorithm(schedule->algorithm, out.os());
    break;
  case Emit::Mscclpp: {
    // Written to a string first: the plan is read back, and written only
    // when its steps are the program's (a writer bug is an internal error,
    // never a plan that runs something else).
    const ir::Algorithm &alg = schedule->algorithm;
    std::string text;
    llvm::raw_string_ostream os(text);
    ir::DiagnosticList list(req->input == "-" ? "<stdin>" : req->input);
    if (llvm::Error err = ir::mscclpp::writePlan(alg, os, list)) {
      diags.error(llvm::SMLoc(), "--emit=mscclpp: " + llvm::toString(std::move(err)));
      return 1;
    }
    os.flush();
    ir::DiagnosticList back("<written plan>");
    llvm::Expected<ir::Algorithm> read = ir::mscclpp::parsePlanAlgorithm(text, back);
    if (!read) {
      diags.error(llvm::SMLoc(), "internal compiler error: the written MSCCL++ plan does not "
                                 "read back: " + llvm::toString(read.takeError()));
      return 1;
    }
    if (std::optional<std::string> diff = ir::mscclpp::stepDifference(alg, *read)) {
      diags.error(llvm::SMLoc(), "internal compiler error: the written MSCCL++ plan reads back "
                                 "as other steps: " + *diff);
      return 1;
    }
    out.os() << text;
    break;
  }
  case Emit::Svg: {
    const ir::Algorithm &alg = schedule->algorithm;
    ir::DiagnosticList list("<compiled>");
    llvm::Expected<ir::Analysis> analysis = ir::verify(alg, list);
    if (!analysis) { // the compiler verified it: not reached
      diags.error(llvm::SMLoc(), "internal compiler error: the compiled IR does not verify: " +
                                     llvm::toString(analysis.takeError()));
      return 1;
    }
    ir::SvgOptions svg;
    svg.maxRanks = static_cast<int32_t>(svgRanks);
    // The places --emit=schedule prints, as FILE:LINE:COL (a fused step's
    // second one only where it differs).
    svg.origin = [&](ir::StepRef r) {
      std::string text, last;
      for (const compiler::SourcePlace &place : compiler::stepSources(*schedule, *dag, srcMgr, r)) {
        std::string here = llvm::sys::path::filename(place.file).str() + ":" +
                           std::to_string(place.line) + ":" + std::to_string(place.column);
        if (!place.line || here == last)
          continue;
        text += (text.empty() ? "" : " then ") + here;
        last = here;
      }
      return text;
    };
    ir::writeScheduleSvg(alg, *analysis, out.os(), svg);
    break;
  }
  }
  out.keep();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  coll::tuneHeapForOneShotTool();
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Coll compiler: .coll programs to MSCCL IR\n");
  phaseTimingEnabled() = timePhases;
  llvm::SourceMgr srcMgr;
  lang::DiagnosticEngine diags(srcMgr, llvm::errs(), "collc");
  return run(srcMgr, diags);
}
