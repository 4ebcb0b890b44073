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
//
// --rank R builds rank R's registry (0 by default): a program read from the
// program cache holds that rank's steps only, as at a communicator's
// creation. --program loads FILE.coll alone instead of the built-in set.
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
  bool usage = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rank") && i + 1 < argc)
      rank = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--program") && i + 1 < argc)
      program = argv[++i];
    else if (argv[i][0] == '-')
      usage = true;
    else
      positional.push_back(argv[i]);
  }
  if (usage || positional.empty() || positional.size() > 2) {
    llvm::errs() << "usage: comm-creation RANKS [GPUS_PER_NODE] [--rank R] [--program FILE.coll]\n";
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
    steps += a.compiled->plan.steps.size();
  llvm::outs() << llvm::format("ranks %d nodes %d rank %d: %.3f s, %ld MB peak, %zu algorithms "
                               "(%zu plan steps held), %zu rejected; %d programs compiled, %d "
                               "from the program cache, %d parsed for their parameters\n",
                               shape.nranks, shape.nodes, rank, seconds, ru.ru_maxrss / 1024,
                               registry->algorithms().size(), steps,
                               registry->rejections().size(),
                               registry->programsCompiled(), registry->programsFromCache(),
                               registry->programsInspected());
  for (const coll::rt::Rejection &r : registry->rejections())
    llvm::outs() << "  rejected " << r.name << ": " << r.reason.substr(0, 120) << "\n";
  return 0;
}
