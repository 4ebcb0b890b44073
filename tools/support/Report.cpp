//===- Report.cpp - One page per run, as HTML -----------------------------===//

#include "Report.h"

#include "BuildInfo.h"

#include "coll/ir/XML.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <ctime>
#include <unistd.h>

namespace coll::tools {

using ir::xmlEscaped;

const char *buildCommit() { return COLL_BUILD_COMMIT; }

std::string machineDescription() {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  std::string cpu = "unknown CPU";
  // /proc files report size 0: read them as a stream.
  if (auto info = llvm::MemoryBuffer::getFileAsStream("/proc/cpuinfo")) {
    llvm::SmallVector<llvm::StringRef, 64> lines;
    (*info)->getBuffer().split(lines, '\n');
    for (llvm::StringRef line : lines)
      if (line.startswith("model name")) {
        cpu = line.split(':').second.trim().str();
        break;
      }
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  double gib = pages > 0 && pageSize > 0 ? double(pages) * double(pageSize) / (1ull << 30) : 0;
  return llvm::formatv("{0}: {1}, {2} CPUs, {3:f1} GiB of memory", host, cpu, cpus, gib).str();
}

namespace {

/// The page of `info`, to be written at `path` (for the timeline's link).
void writePage(llvm::raw_ostream &os, const std::string &path, const ReportInfo &info) {
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
  os << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>"
     << xmlEscaped(info.tool + ": " + info.algorithm) << "</title>\n"
     << "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}"
        "th{text-align:left;padding-right:1em;vertical-align:top}pre{background:#f6f6f6;"
        "padding:.8em;overflow-x:auto}</style></head><body>\n"
     << "<h1>" << xmlEscaped(info.tool) << ": " << xmlEscaped(info.algorithm) << "</h1>\n"
     << "<table class=\"run\">\n";
  auto row = [&](llvm::StringRef name, llvm::StringRef value) {
    os << "<tr><th>" << xmlEscaped(name) << "</th><td>" << xmlEscaped(value) << "</td></tr>\n";
  };
  row("command", info.commandLine);
  row("algorithm file", info.file);
  row("algorithm", info.algorithm);
  row("backend", info.backend);
  row("machine", machineDescription());
  row("Coll", std::string("built from ") + buildCommit());
  row("date", date);
  if (!info.timeline.empty()) {
    // Relative to the page when both lie in one folder tree.
    llvm::SmallString<256> from(path), to(info.timeline);
    llvm::sys::fs::make_absolute(from);
    llvm::sys::fs::make_absolute(to);
    llvm::StringRef dir = llvm::sys::path::parent_path(from);
    std::string link = llvm::StringRef(to).startswith((dir + "/").str())
                           ? llvm::StringRef(to).drop_front(dir.size() + 1).str()
                           : "file://" + std::string(to);
    os << "<tr><th>timeline</th><td><a class=\"timeline\" href=\"" << xmlEscaped(link) << "\">"
       << xmlEscaped(info.timeline)
       << "</a> (Chrome trace / Perfetto JSON: open it at https://ui.perfetto.dev or in "
          "chrome://tracing)</td></tr>\n";
  }
  os << "</table>\n<h2>Time and bandwidth</h2>\n";
  writePlot(os, info.plotTitle, info.points);
  os << "<h2>Table</h2>\n<pre class=\"table\">" << xmlEscaped(info.table, /*attribute=*/false)
     << "</pre>\n</body></html>\n";
}

} // namespace

llvm::Error writeReport(const std::string &path, const ReportInfo &info) {
  return writeOutputFile(path, [&](llvm::raw_ostream &os) { writePage(os, path, info); });
}

} // namespace coll::tools
