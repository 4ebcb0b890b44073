//===- CommCreation.cpp - What a rank builds at communicator creation -----===//
//
// Not a test: numbers go to docs/performance/creation.md with the command that made
// them. Builds, once, what one rank of a communicator of the given shape
// builds at creation (Registry::load with the built-in programs, as
// Setup.cpp calls it: every program compiled for the shape, verified and
// planned, or read from the program cache as COLL_CACHE_PATH and
// COLL_CACHE_DISABLE say), and prints the wall time, the peak resident
// memory of the process, and how many algorithms were loaded and rejected.
//
//   build/bin/comm-creation RANKS [GPUS_PER_NODE] [--rank R] [--program FILE.coll]
//                           [--at-creation | --first-use]
//
// --rank R builds rank R's registry (0 by default): a program read from the
// program cache holds that rank's steps only, as at a communicator's
// creation. --program loads FILE.coll alone instead of the built-in set.
// As the runtime does with COLL_COMPILE_ON_FIRST_USE unset, the built-ins
// are compiled on first use above 64 ranks (Registry.h), so creation only
// parses them; --at-creation compiles them all at creation, as
// COLL_COMPILE_ON_FIRST_USE=0 does. --first-use then compiles each
// deferred program as a call's first use would, one after the other, and
// prints the time of each (the peak memory is then that of them all).
//
// COLL_TIME_PHASES=1 adds the compiler's time per phase (collc
// --time-phases), summed over the programs.
//
//===----------------------------------------------------------------------===//

#include "coll/runtime/Registry.h"
#include "coll/support/PhaseTimer.h"

#include "llvm/Support/ManagedStatic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <sys/resource.h>

int main(int argc, char **argv) {
  llvm::llvm_shutdown_obj shutdown; // prints the phase times at exit
  std::vector<const char *> positional;
  int rank = 0;
  const char *program = nullptr;
  bool usage = false, atCreation = false, firstUse = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--at-creation"))
      atCreation = true;
    else if (!std::strcmp(argv[i], "--first-use"))
      firstUse = true;
    else if (!std::strcmp(argv[i], "--rank") && i + 1 < argc)
      rank = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--program") && i + 1 < argc)
      program = argv[++i];
    else if (argv[i][0] == '-')
      usage = true;
    else
      positional.push_back(argv[i]);
  }
  if (usage || positional.empty() || positional.size() > 2 || (atCreation && firstUse)) {
    llvm::errs() << "usage: comm-creation RANKS [GPUS_PER_NODE] [--rank R] [--program FILE.coll] "
                    "[--at-creation | --first-use]\n";
    return 2;
  }
  coll::rt::Shape shape;
  shape.nranks = std::atoi(positional[0]);
  int gpus = positional.size() == 2 ? std::atoi(positional[1]) : 0;
  if (shape.nranks < 1 || gpus < 0 || (gpus && shape.nranks % gpus) || rank < 0 ||
      rank >= shape.nranks) {
    llvm::errs() << "comm-creation: RANKS must be positive and a multiple of GPUS_PER_NODE, "
                    "and R one of the ranks\n";
    return 2;
  }
  shape.gpus = gpus ? gpus : shape.nranks;
  shape.nodes = shape.nranks / shape.gpus;
  const char *timing = std::getenv("COLL_TIME_PHASES");
  coll::phaseTimingEnabled() = timing && *timing && *timing != '0';
  auto start = std::chrono::steady_clock::now();
  coll::rt::RegistryOptions options;
  options.cacheDir = coll::rt::programCacheFromEnvironment();
  options.rank = rank;
  options.deferBuiltins = !atCreation && shape.nranks > coll::rt::FirstUseCompileRanks;
  if (program) {
    options.algoFiles = program;
    options.builtin = false;
  }
  auto registry = coll::rt::Registry::load(options, shape);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!registry) {
    llvm::errs() << "comm-creation: " << llvm::toString(registry.takeError()) << "\n";
    return 1;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  size_t steps = 0;
  for (const coll::rt::LoadedAlgorithm &a : registry->algorithms())
    if (a.compiled)
      steps += a.compiled->plan.steps.size();
  llvm::outs() << llvm::format("ranks %d nodes %d rank %d: %.3f s, %ld MB peak, %zu algorithms "
                               "(%zu plan steps held), %zu rejected; %d programs compiled, %d "
                               "from the program cache, %d parsed for their parameters, %d "
                               "compiled on first use\n",
                               shape.nranks, shape.nodes, rank, seconds, ru.ru_maxrss / 1024,
                               registry->algorithms().size(), steps,
                               registry->rejections().size(),
                               registry->programsCompiled(), registry->programsFromCache(),
                               registry->programsInspected(), registry->programsDeferred());
  for (const coll::rt::Rejection &r : registry->rejections())
    llvm::outs() << "  rejected " << r.name << ": " << r.reason.substr(0, 120) << "\n";
  if (!firstUse)
    return 0;
  int failed = 0;
  for (const coll::rt::LoadedAlgorithm &a : registry->algorithms()) {
    if (!a.deferred)
      continue;
    auto begin = std::chrono::steady_clock::now();
    auto compiled = registry->compileDeferred(a);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    getrusage(RUSAGE_SELF, &ru);
    if (!compiled) {
      ++failed;
      llvm::outs() << llvm::format("  first use of %s: %.3f s, does not serve: ", a.name.c_str(),
                                   took)
                   << llvm::toString(compiled.takeError()).substr(0, 120) << "\n";
      continue;
    }
    llvm::outs() << llvm::format("  first use of %s: %.3f s, %zu plan steps, %ld MB peak so far\n",
                                 a.name.c_str(), took, (*compiled)->plan.steps.size(),
                                 ru.ru_maxrss / 1024);
    // Released, as a communicator holds only the programs its calls use.
    coll::rt::Registry::settle(a, nullptr, "released by comm-creation");
  }
  return failed ? 1 : 0;
}
