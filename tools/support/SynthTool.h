//===- SynthTool.h - What collsynth, collcost and colltune share -*- C++ -*-===//
//
// The tools over the synthesis library share their command line's frame:
// the tool's option category (all --help shows), --topology and --ranks (a
// topology, or the part of it a job gets), --coll (the collectives to work
// on), how they say what is wrong ("TOOL: error: MESSAGE", exit status 1
// for bad input, 2 for bad usage or I/O) and how they write a file.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TOOLS_SYNTHTOOL_H
#define COLL_TOOLS_SYNTHTOOL_H

#include "coll/synth/Synthesis.h"
#include "coll/synth/Topology.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::tools {

/// A synthesis tool's name, category, --topology and --ranks, registered
/// in the category when the tool constructs this (once, at namespace
/// scope, as llvm::cl options are).
class SynthTool {
public:
  /// The tools' own words for --topology and --ranks.
  struct Help {
    const char *topology;
    const char *ranks;
  };
  SynthTool(const char *name, llvm::cl::OptionCategory &category, const Help &help);

  const char *name;
  llvm::cl::OptionCategory &category;
  llvm::cl::opt<std::string> topologyPath;
  llvm::cl::list<int32_t> ranks;

  /// Parses the command line; --help shows the tool's category alone, under
  /// `overview`.
  void parseCommandLine(int argc, char **argv, const char *overview) const;
  /// Prints "NAME: error: MESSAGE" to stderr and returns `code`.
  int fail(int code, const llvm::Twine &message) const;
  /// --topology, restricted to --ranks unless it is empty
  /// (synth::readTopologyFile).
  llvm::Expected<synth::Topology> readTopology() const;
  /// Writes `text` to `path` ("-": standard output); false once it has said
  /// why it could not (exit status 2).
  bool writeFile(llvm::StringRef path, llvm::StringRef text) const;
};

/// --coll, registered in the tool's category: the collectives to work on,
/// `all` (in this order, which its help lists) where it names none.
class CollectivesOption {
public:
  CollectivesOption(const SynthTool &tool, std::vector<synth::CollKind> all);

  /// The collectives named. A name that is not a collective's is a usage
  /// error: the tool says so and exits with status 2, as
  /// llvm::cl::ParseCommandLineOptions exits on an unknown option.
  std::vector<synth::CollKind> kinds() const;

private:
  const SynthTool &tool;
  std::vector<synth::CollKind> all;
  std::string help; ///< outlives the option that shows it (cl::desc keeps a reference)
  llvm::cl::list<std::string> names;
};

/// -o FILE and --out-dir DIR, registered in the tool's category: where the
/// tool writes its one result, and the folder it writes programs into
/// (programPath). Each tool says what they hold.
struct OutputOptions {
  struct Help {
    const char *outputDefault; ///< -o without the option
    const char *output;        ///< -o's help
    const char *outDir;        ///< --out-dir's help
  };
  OutputOptions(const SynthTool &tool, const Help &help);
  llvm::cl::opt<std::string> output;
  llvm::cl::opt<std::string> outDir;
};

/// Where --out-dir DIR puts the program NAME: DIR/NAME.coll, with DIR
/// created where it is missing.
std::string programPath(llvm::StringRef dir, llvm::StringRef name);

} // namespace coll::tools

#endif // COLL_TOOLS_SYNTHTOOL_H
