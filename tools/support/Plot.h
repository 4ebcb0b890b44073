//===- Plot.h - Latency and bandwidth against size, as SVG ------*- C++ -*-===//
//
// `--plot FILE.svg` of collrun and collbench: two panels side by side, the
// time of a call (µs) and its bus bandwidth (GB/s) against the message size,
// both on log axes, one line per series: the algorithm in each mode, and the
// references timed in the same run (collbench's d2d copy, collrun's copy
// floor), dashed. Written directly as SVG: no plotting library is needed
// for lines on log axes.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TOOLS_PLOT_H
#define COLL_TOOLS_PLOT_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::tools {

/// One measured point of a series.
struct PlotPoint {
  std::string series;     ///< "in-place", "out-of-place", or a reference's name
  bool reference = false; ///< drawn dashed
  uint64_t bytes = 0;
  double seconds = 0;
  double busbw = 0; ///< GB/s (a reference's own bandwidth)
};

/// Writes the two panels of `points` as SVG.
void writePlot(llvm::raw_ostream &os, const std::string &title,
               const std::vector<PlotPoint> &points);

/// Writes a file with `write` (written to a temporary file beside it and
/// renamed; "-" is standard output); the error names the path.
llvm::Error writeOutputFile(const std::string &path,
                            llvm::function_ref<void(llvm::raw_ostream &)> write);

/// The same, to the file at `path`.
llvm::Error writePlotFile(const std::string &path, const std::string &title,
                          const std::vector<PlotPoint> &points);

} // namespace coll::tools

#endif // COLL_TOOLS_PLOT_H
