//===- SynthTool.cpp - What collsynth, collcost and colltune share --------===//

#include "SynthTool.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace coll::tools {

namespace cl = llvm::cl;

SynthTool::SynthTool(const char *name, cl::OptionCategory &category, const Help &help)
    : name(name), category(category),
      topologyPath("topology", cl::Required, cl::value_desc("file"), cl::desc(help.topology),
                   cl::cat(category)),
      ranks("ranks", cl::CommaSeparated, cl::value_desc("a,b,..."), cl::desc(help.ranks),
            cl::cat(category)) {}

void SynthTool::parseCommandLine(int argc, char **argv, const char *overview) const {
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, overview);
}

int SynthTool::fail(int code, const llvm::Twine &message) const {
  llvm::errs() << name << ": error: " << message << "\n";
  return code;
}

llvm::Expected<synth::Topology> SynthTool::readTopology() const {
  return synth::readTopologyFile(topologyPath, {ranks.begin(), ranks.end()});
}

bool SynthTool::writeFile(llvm::StringRef path, llvm::StringRef text) const {
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  if (ec) {
    fail(2, "cannot write '" + path + "': " + ec.message());
    return false;
  }
  out << text;
  return true;
}

namespace {
/// "NAME, NAME, ... (default: all)" for `all`.
std::string collectivesHelp(const std::vector<synth::CollKind> &all) {
  std::string help;
  for (synth::CollKind kind : all)
    help += (help.empty() ? "" : ", ") + synth::collKindName(kind).str();
  return help + " (default: all)";
}
} // namespace

CollectivesOption::CollectivesOption(const SynthTool &tool, std::vector<synth::CollKind> all)
    : tool(tool), all(std::move(all)), help(collectivesHelp(this->all)),
      names("coll", cl::CommaSeparated, cl::value_desc("c,..."), cl::desc(help),
            cl::cat(tool.category)) {}

std::vector<synth::CollKind> CollectivesOption::kinds() const {
  std::vector<synth::CollKind> kinds;
  for (const std::string &name : names) {
    std::optional<synth::CollKind> kind = synth::parseCollKind(name);
    if (!kind)
      std::exit(tool.fail(2, "unknown collective '" + name + "'"));
    kinds.push_back(*kind);
  }
  if (kinds.empty())
    kinds = all;
  return kinds;
}

OutputOptions::OutputOptions(const SynthTool &tool, const Help &help)
    : output("o", cl::init(help.outputDefault), cl::value_desc("file"), cl::desc(help.output),
             cl::cat(tool.category)),
      outDir("out-dir", cl::init(""), cl::value_desc("dir"), cl::desc(help.outDir),
             cl::cat(tool.category)) {}

std::string programPath(llvm::StringRef dir, llvm::StringRef name) {
  llvm::sys::fs::create_directories(dir);
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name + ".coll");
  return std::string(path);
}

} // namespace coll::tools
