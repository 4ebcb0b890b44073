//===- Plot.cpp - Latency and bandwidth against size, as SVG --------------===//

#include "Plot.h"
#include "CollPlot.h"

#include "coll/ir/XML.h"
#include "coll/support/Bytes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace coll::tools {
namespace {

using ir::xmlEscaped;

constexpr int PanelWidth = 420, PanelHeight = 300, Left = 60, Right = 16, Top = 48,
              Bottom = 44, Gap = 30, LegendHeight = 18;

const char *const Palette[] = {"#4e79a7", "#e15759", "#59a14f", "#b07aa1",
                               "#f28e2b", "#76b7b2", "#edc948", "#9c755f"};
constexpr int PaletteSize = sizeof(Palette) / sizeof(Palette[0]);


/// A log axis over [lo, hi] (positive), widened to whole decades (or, for
/// sizes, powers of 4 bytes).
struct LogAxis {
  double lo = 1, hi = 10, base = 10;

  static LogAxis over(double lo, double hi, double base) {
    LogAxis a;
    a.base = base;
    a.lo = std::pow(base, std::floor(std::log(lo) / std::log(base)));
    a.hi = std::pow(base, std::ceil(std::log(hi) / std::log(base)));
    if (a.hi <= a.lo)
      a.hi = a.lo * base;
    return a;
  }
  /// 0 at lo, 1 at hi.
  double at(double v) const { return std::log(v / lo) / std::log(hi / lo); }
  std::vector<double> ticks() const {
    std::vector<double> t;
    for (double v = lo; v <= hi * 1.0001; v *= base)
      t.push_back(v);
    return t;
  }
};

std::string number(double v) {
  if (v >= 1)
    return llvm::formatv("{0}", std::llround(v)).str();
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

class Panel {
public:
  Panel(llvm::raw_ostream &os, int x0, LogAxis xs, LogAxis ys)
      : os(os), x0(x0), xs(xs), ys(ys) {}

  double px(double bytes) const { return x0 + Left + xs.at(bytes) * (PanelWidth - Left - Right); }
  double py(double v) const {
    return Top + PanelHeight - Bottom - ys.at(v) * (PanelHeight - Top - Bottom);
  }

  void frame(const std::string &yLabel) {
    double left = px(xs.lo), right = px(xs.hi), top = py(ys.hi), bottom = py(ys.lo);
    os << "<g class=\"axes\" font-size=\"10\">\n";
    for (double t : xs.ticks()) {
      os << llvm::format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                         "stroke=\"#e0e0e0\"/>",
                         px(t), top, px(t), bottom)
         << llvm::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", px(t), bottom + 14)
         << formatBytes(uint64_t(std::llround(t))) << "</text>\n";
    }
    for (double t : ys.ticks()) {
      os << llvm::format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                         "stroke=\"#e0e0e0\"/>",
                         left, py(t), right, py(t))
         << llvm::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", left - 4, py(t) + 3)
         << number(t) << "</text>\n";
    }
    os << llvm::format("<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                       "height=\"%.1f\" fill=\"none\" stroke=\"#444444\"/>\n",
                       left, top, right - left, bottom - top);
    os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">message size "
                       "(bytes)</text>\n",
                       (left + right) / 2, bottom + 30);
    os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                       "transform=\"rotate(-90 %.1f %.1f)\">",
                       double(x0 + 14), (top + bottom) / 2, double(x0 + 14), (top + bottom) / 2)
       << xmlEscaped(yLabel) << "</text>\n</g>\n";
  }

  void line(const std::string &name, const char *colour, bool dashed,
            const std::vector<std::pair<double, double>> &xy) {
    os << "<g class=\"series\" data-series=\"" << xmlEscaped(name) << "\">";
    os << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.6\""
       << (dashed ? " stroke-dasharray=\"5,3\"" : "") << " points=\"";
    for (const auto &[x, y] : xy)
      os << llvm::format("%.1f,%.1f ", px(x), py(y));
    os << "\"/>";
    for (const auto &[x, y] : xy)
      os << llvm::format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\" fill=\"%s\">", px(x), py(y),
                         colour)
         << "<title>" << xmlEscaped(name) << ": " << formatBytes(uint64_t(x)) << " bytes, "
         << number(y) << "</title></circle>";
    os << "</g>\n";
  }

private:
  llvm::raw_ostream &os;
  int x0;
  LogAxis xs, ys;
};

} // namespace

void writePlot(llvm::raw_ostream &os, const std::string &title,
               const std::vector<PlotPoint> &points) {
  // Series in order of first appearance; per series its points by size.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const PlotPoint *>> series;
  double minBytes = 0, maxBytes = 0, minUs = 0, maxUs = 0, minBw = 0, maxBw = 0;
  bool any = false, anyBw = false;
  for (const PlotPoint &p : points) {
    if (p.bytes == 0 || p.seconds <= 0)
      continue; // nothing to place on a log axis
    if (!series.count(p.series))
      order.push_back(p.series);
    series[p.series].push_back(&p);
    double us = p.seconds * 1e6;
    minBytes = any ? std::min(minBytes, double(p.bytes)) : double(p.bytes);
    maxBytes = any ? std::max(maxBytes, double(p.bytes)) : double(p.bytes);
    minUs = any ? std::min(minUs, us) : us;
    maxUs = any ? std::max(maxUs, us) : us;
    any = true;
    if (p.busbw > 0) {
      minBw = anyBw ? std::min(minBw, p.busbw) : p.busbw;
      maxBw = anyBw ? std::max(maxBw, p.busbw) : p.busbw;
      anyBw = true;
    }
  }
  const int width = 2 * PanelWidth + Gap;
  const int height = Top + PanelHeight + LegendHeight * int(order.size() + 1);
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" viewBox=\"0 0 " << width << " " << height
     << "\" font-family=\"sans-serif\" font-size=\"11\">\n<title>" << xmlEscaped(title)
     << "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text class=\"heading\" x=\"10\" y=\"20\" font-size=\"13\">" << xmlEscaped(title)
     << "</text>\n";
  if (!any) {
    os << "<text class=\"note\" x=\"10\" y=\"40\">no timed call to plot</text>\n</svg>\n";
    return;
  }
  LogAxis sizes = LogAxis::over(minBytes, maxBytes, 4);
  Panel latency(os, 0, sizes, LogAxis::over(minUs, maxUs, 10));
  latency.frame("time per call (µs)");
  Panel bandwidth(os, PanelWidth + Gap, sizes,
                  anyBw ? LogAxis::over(minBw, maxBw, 10) : LogAxis::over(1, 10, 10));
  bandwidth.frame("bus bandwidth (GB/s)");
  int index = 0;
  for (const std::string &name : order) {
    std::vector<const PlotPoint *> &ps = series[name];
    llvm::stable_sort(ps, [](const PlotPoint *a, const PlotPoint *b) { return a->bytes < b->bytes; });
    bool dashed = ps.front()->reference;
    const char *colour = Palette[index % PaletteSize];
    std::vector<std::pair<double, double>> us, bw;
    for (const PlotPoint *p : ps) {
      us.emplace_back(double(p->bytes), p->seconds * 1e6);
      if (p->busbw > 0)
        bw.emplace_back(double(p->bytes), p->busbw);
    }
    latency.line(name, colour, dashed, us);
    if (!bw.empty())
      bandwidth.line(name, colour, dashed, bw);
    int y = Top + PanelHeight + LegendHeight * index + 6;
    os << "<g class=\"legend\"><line x1=\"" << Left << "\" y1=\"" << y << "\" x2=\"" << Left + 30
       << "\" y2=\"" << y << "\" stroke=\"" << colour << "\" stroke-width=\"1.6\""
       << (dashed ? " stroke-dasharray=\"5,3\"" : "") << "/><text x=\"" << Left + 38 << "\" y=\""
       << y + 4 << "\">" << xmlEscaped(name) << (dashed ? " (reference)" : "") << "</text></g>\n";
    ++index;
  }
  os << "</svg>\n";
}

llvm::Error writeOutputFile(const std::string &path,
                            llvm::function_ref<void(llvm::raw_ostream &)> write) {
  llvm::Error err = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
    write(os);
    return llvm::Error::success();
  });
  if (!err)
    return llvm::Error::success();
  std::error_code ec = llvm::errorToErrorCode(std::move(err));
  return llvm::createStringError(ec, "cannot write '%s': %s", path.c_str(), ec.message().c_str());
}

llvm::Error writePlotFile(const std::string &path, const std::string &title,
                          const std::vector<PlotPoint> &points) {
  return writeOutputFile(path, [&](llvm::raw_ostream &os) { writePlot(os, title, points); });
}

} // namespace coll::tools

extern "C" int collPlotWrite(const char *path, const char *title,
                             const collPlotPoint *points, size_t n) {
  std::vector<coll::tools::PlotPoint> all;
  for (size_t i = 0; i < n; ++i)
    all.push_back({points[i].series, points[i].reference != 0, points[i].bytes,
                   points[i].seconds, points[i].busbw});
  if (llvm::Error err = coll::tools::writePlotFile(path, title, all)) {
    llvm::errs() << llvm::toString(std::move(err)) << "\n";
    return -1;
  }
  return 0;
}
