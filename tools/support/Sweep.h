//===- Sweep.h - Sizes x modes on one backend, checked and timed -*- C++ -*-===//
//
// What collrun and collbench share: for every size and mode, one call whose
// inputs are seeded, run once and checked against the collective's
// definition (interp::CheckedCall), then timed, and a row of an
// nccl-tests-style table. The backend is an Executor: the host backend runs
// the call on its host buffers; a device (a GPU, or its CPU emulation) on
// buffers staged to it (DeviceBackend::stage), timed call by call or, for
// benchmarks, launch after launch (DeviceExecutor::timeLaunches).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TOOLS_SWEEP_H
#define COLL_TOOLS_SWEEP_H

#include "Plot.h"
#include "Report.h"
#include "ToolSupport.h"

#include "coll/interpreter/Check.h"
#include "coll/interpreter/DeviceExecutor.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace coll::tools {

/// What a sweep runs: the message sizes, the file and the modes to run it
/// in; or, where something is wrong, the exit status after saying what.
struct RunInput {
  std::vector<uint64_t> sizes;
  std::optional<LoadedAlgorithm> loaded; ///< empty where something is wrong
  std::vector<bool> modes;               ///< true: in place
  int exitCode = Verified;               ///< BadInput or NotApplicable where `loaded` is empty
};

/// A tool's own reading of the message sizes (collbench's --sweep); nullopt
/// with `error` saying what is wrong.
using SizesFromOptions = std::optional<std::vector<uint64_t>> (*)(std::string &error);

/// The options of the tools that sweep a file (collrun, collbench),
/// registered in the tool's category ("TOOL options", which --help shows and
/// the tool registers its own options in) when the tool constructs this
/// (once, at namespace scope, as llvm::cl options are).
struct RunOptions {
  struct Defaults {
    const char *sizes;     ///< the --size list without --size
    unsigned iters;
    const char *itersHelp; ///< what --iters times
    const char *watchdogHelp;
  };
  /// `tool` names the tool in its messages; `overview` heads its --help.
  RunOptions(const char *tool, const char *overview, const Defaults &defaults);

private:
  std::string categoryName; ///< outlives the category (it keeps a reference)
  std::string sizesHelp;    ///< outlives the option that shows it (cl::desc keeps a reference)

public:
  llvm::cl::OptionCategory category;
  llvm::cl::opt<std::string> inputFile;
  llvm::cl::list<std::string> sizes;
  llvm::cl::opt<std::string> dtypeName, opName, modeName;
  llvm::cl::opt<unsigned> iters;
  llvm::cl::opt<uint64_t> seed;
  llvm::cl::opt<unsigned> watchdogMs, slotBytes;
  llvm::cl::opt<bool> noCheck;
  llvm::cl::opt<unsigned> maxWarnings;
  llvm::cl::opt<std::string> plotFile, reportFile;
  const char *defaultSizes;
  const char *tool;
  const char *overview;

  /// Parses the command line (--help shows the tool's category alone) and
  /// returns its request (request()). Where the request is wrong, prints
  /// "TOOL: what is wrong" and exits with status BadInput, as
  /// llvm::cl::ParseCommandLineOptions exits on an unknown option.
  RunRequest parseCommandLine(int argc, char **argv);

  /// The message sizes (`sizes`, or byteSizes() where it is null), then
  /// the file read, verified, checked unless --no-check, and planned
  /// (loadAlgorithm), then the modes of `request` it runs in (selectModes).
  RunInput input(const RunRequest &request, SizesFromOptions sizes = nullptr) const;

  /// --dtype, --op and --mode as a request, with --iters at least 1;
  /// nullopt with `error` saying what is wrong.
  std::optional<RunRequest> request(std::string &error) const;
  /// --size, or the default list; nullopt with `error`.
  std::optional<std::vector<uint64_t>> byteSizes(std::string &error) const;
  /// The backend options --watchdog-ms and --slot-bytes give.
  template <class Options> Options backendOptions() const {
    Options options;
    options.watchdogMs = watchdogMs;
    options.setSlotBytes(slotBytes);
    return options;
  }
};

/// The GPU backend as collrun and collbench reach it: the plugin
/// libcoll_cuda.so named by COLL_CUDA_PLUGIN, else in this program's
/// ../lib, else wherever the loader finds it (loadDeviceBackend), as
/// libcoll.so finds it.
llvm::Expected<interp::DeviceBackend *> gpuBackendPlugin(const char *argv0);

/// How a sweep runs a call.
class SweepTarget {
public:
  virtual ~SweepTarget();
  /// Runs `call` once; its outputs are back in the call's host buffers.
  /// `fresh`: the first run of this call.
  virtual llvm::Expected<interp::CallResult> run(interp::CheckedCall &call, bool fresh) = 0;
  /// The seconds of `iters` timed runs of `call`, from its original inputs.
  virtual llvm::Expected<std::vector<double>> time(interp::CheckedCall &call, unsigned iters) = 0;
  /// After a watchdog stop: makes the target usable again.
  virtual llvm::Error recover() { return llvm::Error::success(); }
};

/// The host backend (its executor is remade after a watchdog stop).
std::unique_ptr<SweepTarget> hostTarget(const interp::Plan &plan,
                                        const interp::HostOptions &options,
                                        interp::Timeline *timeline,
                                        llvm::Error &err);

/// A device executor over staged buffers. With `launches`, time() is
/// DeviceExecutor::timeLaunches (`warmup` launches first, CUDA graph
/// replays with `graph`), and `onPrepared` is told the launch once;
/// otherwise every timed run is a run() of its own.
struct DeviceTiming {
  bool launches = false;
  unsigned warmup = 0;
  bool graph = false;
  std::function<void(const interp::LaunchShape &)> onPrepared;
};
std::unique_ptr<SweepTarget> deviceTarget(interp::DeviceBackend &backend,
                                          std::unique_ptr<interp::DeviceExecutor> executor,
                                          DeviceTiming timing = {});

/// A reference: for a size in bytes, its seconds and bandwidth (GB/s), or
/// nullopt where it does not apply to that size.
struct SweepReference {
  std::string name;
  std::function<llvm::Expected<std::optional<std::pair<double, double>>>(uint64_t bytes)> time;
  /// Set instead of `time` for a reference timed per size and mode (true:
  /// in place), as collbench --against times another program of the same
  /// call: its row comes just before the mode's row of that size.
  std::function<llvm::Expected<std::optional<std::pair<double, double>>>(uint64_t bytes,
                                                                         bool inplace)>
      timeInMode;
};

struct SweepOptions {
  SweepOptions(const char *tool, std::vector<uint64_t> sizes, RunRequest request,
               std::vector<bool> modes, unsigned iters, uint64_t seed)
      : tool(tool), sizes(std::move(sizes)), request(std::move(request)),
        modes(std::move(modes)), iters(iters), seed(seed) {}
  const char *tool = "";
  std::vector<uint64_t> sizes;
  RunRequest request;
  std::vector<bool> modes; ///< true: in place
  unsigned iters = 1;
  uint64_t seed = 1;
  /// References timed per size in the same run (collbench's d2d copy and
  /// one-launch kernels, collrun's memcpy). Each is printed as a row named
  /// after it before the size's rows, and each of the size's rows ends with
  /// a column "t/NAME": the row's time over the reference's (instead of the
  /// count of wrong elements).
  std::vector<SweepReference> references;
  /// False: the references are timed for the plot only, and the table stays
  /// as without them.
  bool referencesInTable = true;
};

struct SweepOutcome {
  unsigned rows = 0, verified = 0;
  bool crossRankDiffs = false; ///< some float reduction differs in its bits between ranks
  /// "error: ...", "warning: ...", "note: ..." lines for after the table.
  std::vector<std::string> notes;
  /// Every timed row and reference, for --plot.
  std::vector<PlotPoint> points;
  bool failed() const;
};

/// Prints the table's header and rows for `plan` to `os`.
SweepOutcome runSweep(const interp::Plan &plan, const SweepOptions &options, SweepTarget &target,
                      llvm::raw_ostream &os);

/// What --plot and --report say a run was.
struct RunDescription {
  const char *tool = "";
  int argc = 0;
  char **argv = nullptr;
  std::string where;    ///< "the host backend", a GPU's name: ends the plot's title
  std::string backend;  ///< the report's backend line
  std::string printed;  ///< the table as printed (TeeStream), for --report
  std::string timeline; ///< the --trace file, or empty
};

/// Writes the --plot and --report files `run` asks for, saying so on
/// standard output; false once it has printed why one could not be written.
bool writeRunFiles(const RunOptions &run, const interp::Plan &plan, const ir::Algorithm &alg,
                   const SweepOutcome &outcome, const RunDescription &what);

/// The median of `v` (0 when empty).
double median(std::vector<double> v);

/// One thread copying `bytes` between two host buffers: the median of
/// `iters` copies' seconds, and its bandwidth in GB/s (bytes / seconds).
llvm::Expected<std::pair<double, double>> hostCopyReference(uint64_t bytes, unsigned iters);

} // namespace coll::tools

#endif // COLL_TOOLS_SWEEP_H
