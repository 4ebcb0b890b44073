//===- Report.h - One page per run, as HTML ----------------------*- C++ -*-===//
//
// `--report FILE.html` of collrun and collbench: the run on one page that
// opens in any browser, with nothing fetched: what ran (the command, the
// file, the algorithm and protocol, the backend), where (the machine and the
// commit Coll was built from), the table as the tool printed it with its
// notes, the plot of Plot.h inline, and a link to the Chrome/Perfetto
// timeline when --trace wrote one.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TOOLS_REPORT_H
#define COLL_TOOLS_REPORT_H

#include "Plot.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace coll::tools {

struct ReportInfo {
  std::string tool;        ///< "collrun"
  std::string commandLine; ///< as run
  std::string file;        ///< the algorithm file
  std::string algorithm;   ///< name, collective, ranks, protocol, channels, tbs
  std::string backend;     ///< "host backend", "cuda backend on NVIDIA H100 …"
  std::string table;       ///< the table and notes as printed
  std::vector<PlotPoint> points;
  std::string plotTitle;
  std::string timeline; ///< the --trace file, or empty
};

/// This machine in one line: host name, CPU model, CPUs, memory.
std::string machineDescription();
/// The commit the tools were built from (`git describe --dirty`), or
/// "unknown".
const char *buildCommit();

/// Writes the page to `path`.
llvm::Error writeReport(const std::string &path, const ReportInfo &info);

/// A stream that writes to `out` and keeps a copy of everything in `copy`,
/// so that a tool prints its table as it goes and the report gets it too.
class TeeStream : public llvm::raw_ostream {
public:
  TeeStream(llvm::raw_ostream &out, std::string &copy) : out(out), copy(copy) {
    SetUnbuffered();
  }

private:
  void write_impl(const char *ptr, size_t size) override {
    out.write(ptr, size);
    out.flush();
    copy.append(ptr, size);
  }
  uint64_t current_pos() const override { return copy.size(); }

  llvm::raw_ostream &out;
  std::string &copy;
};

} // namespace coll::tools

#endif // COLL_TOOLS_REPORT_H
