//===- Interp.cpp - Evaluating .coll programs -----------------------------===//
//
// Running a program: Interp's budget and nesting checks, the frames of
// calls and the chain of calls in progress, and the entry points of
// coll/lang/Frontend.h (-D definitions; tracing a program on a thread of
// its own; parsing, then tracing). Interp.h describes the evaluator.
//
//===----------------------------------------------------------------------===//

#include "Interp.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/thread.h"

using namespace coll;
using namespace coll::lang;
using namespace coll::lang::ast;

Interp::Interp(const Program &program, const Overrides &overrides,
               DiagnosticEngine &diags)
    : program(program), overrides(overrides), diags(diags), tracer(diags) {
  for (const StmtPtr &item : program.items) {
    if (auto *decl = llvm::dyn_cast<CollectiveDecl>(item.get()))
      collective = decl;
    if (auto *param = llvm::dyn_cast<ParamDecl>(item.get()))
      paramNames.push_back(param->name);
  }
}

std::optional<ChunkDag> Interp::run() {
  char base;
  stackBase = reinterpret_cast<uintptr_t>(&base);
  for (const auto &[name, value] : overrides.params)
    if (!llvm::is_contained(paramNames, name))
      diags.error(llvm::SMLoc(),
                  "-D " + name + ": the program has no parameter named '" +
                      name + "'");
  if (diags.hasErrors())
    return std::nullopt;
  globals.resize(program.numGlobals);
  if (execBlock(program.items, globals) == Flow::Fail)
    return std::nullopt;
  return tracer.finish(options);
}

bool Interp::tickFailed(llvm::SMLoc loc, uint64_t maxSteps,
                        uintptr_t stackUse) {
  if (steps > maxSteps)
    diags.error(loc, "the program runs too long (more than " +
                         llvm::Twine(maxSteps) +
                         " evaluation steps); does a loop never end?");
  else if (depth > MaxEvalDepth || stackUse > MaxStackUse)
    diags.error(loc, "evaluation is nested too deeply (recursive calls "
                     "inside deeply nested code)");
  else
    return true;
  return false;
}

Interp::Frame Interp::takeFrame(size_t slots) {
  if (spareFrames.empty())
    return Frame(slots);
  Frame frame = std::move(spareFrames.back());
  spareFrames.pop_back();
  frame.resize(slots);
  return frame;
}

void Interp::releaseFrame(Frame frame) {
  frame.clear();
  spareFrames.push_back(std::move(frame));
}

uint32_t Interp::currentCall() {
  uint32_t parent = ChunkOp::NoCall;
  for (ActiveCall &active : activeCalls) {
    if (active.entry == ChunkOp::NoCall)
      active.entry = tracer.call(active.loc, parent);
    parent = active.entry;
  }
  return parent;
}

bool coll::lang::addDefine(Overrides &overrides, llvm::StringRef text,
                           DiagnosticEngine &diags) {
  auto [name, value] = text.split('=');
  bool isIdentifier =
      !name.empty() && !llvm::isDigit(name.front()) &&
      llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
  if (!text.contains('=') || !isIdentifier) {
    diags.error(llvm::SMLoc(), "-D " + text + ": expected NAME=VALUE");
    return false;
  }
  int64_t number = 0;
  if (value == "true" || value == "false")
    overrides.params[name.str()] = value == "true";
  else if (!value.getAsInteger(10, number))
    overrides.params[name.str()] = number;
  else {
    diags.error(llvm::SMLoc(),
                "-D " + text + ": the value must be an integer, true or false");
    return false;
  }
  return true;
}

std::optional<ChunkDag> coll::lang::traceProgram(const Program &program,
                                                 const Overrides &overrides,
                                                 DiagnosticEngine &diags) {
  // Evaluate on a thread of our own so that the stack the recursion limits
  // were sized for does not depend on the caller's thread.
  std::optional<ChunkDag> dag;
  llvm::thread evaluator(llvm::Optional<unsigned>(EvalStackSize), [&] {
    dag = Interp(program, overrides, diags).run();
  });
  evaluator.join();
  return dag;
}

std::optional<ChunkDag> coll::lang::compileToDag(unsigned bufferId,
                                                 const Overrides &overrides,
                                                 DiagnosticEngine &diags) {
  std::unique_ptr<Program> program = parseProgram(bufferId, diags);
  if (!program)
    return std::nullopt;
  return traceProgram(*program, overrides, diags);
}
