//===- Svg.cpp - A schedule drawn as a picture ----------------------------===//

#include "coll/ir/Svg.h"

#include "coll/ir/XML.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace coll::ir {
namespace {

constexpr int ColumnWidth = 70, StepWidth = 62, StepHeight = 18, LaneHeight = 26;
constexpr int LabelWidth = 170, Margin = 12, HeadingLine = 18, NoteLine = 16;

/// Ten colours that stay apart from each other (channel c takes c % 10).
const char *const Palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                               "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#79706e"};
constexpr int PaletteSize = sizeof(Palette) / sizeof(Palette[0]);

/// A generous estimate of the width of `text` in sans-serif at `size` px
/// (the widest common glyphs are about 0.6 em), so that the picture is made
/// wide enough for its notes and labels are squeezed before they overflow.
int textWidth(llvm::StringRef text, double size) {
  int glyphs = 0;
  for (char c : text) // UTF-8: count the first byte of every code point
    glyphs += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return int(glyphs * size * 0.6) + 1;
}

std::string plural(int64_t n, llvm::StringRef one) {
  return std::to_string(n) + " " + one.str() + (n == 1 ? "" : "s");
}

std::string slots(BufferKind buf, int32_t off, int32_t count) {
  std::string text = bufferName(buf).str() + "[" + std::to_string(off);
  if (count != 1)
    text += ":" + std::to_string(off + count);
  return text + "]";
}

/// The chunks a step is about: what it sends for a pure send, what it
/// writes otherwise.
std::string chunkLabel(const Step &step) {
  StepTypeInfo info = stepTypeInfo(step.type);
  if (step.type == StepType::Nop || step.type == StepType::Signal ||
      step.type == StepType::Wait)
    return "";
  if (!info.writesDst)
    return slots(step.srcBuf, step.srcOff, step.count);
  return slots(step.dstBuf, step.dstOff, step.count);
}

class Drawing {
public:
  Drawing(const Algorithm &alg, const Analysis &analysis, llvm::raw_ostream &os,
          const SvgOptions &options)
      : alg(alg), analysis(analysis), os(os), options(options) {}

  void write() {
    index();
    levels();
    lanesOf();
    notesOf();
    header();
    for (const Lane &lane : lanes)
      drawLane(lane);
    drawDependencies();
    drawSends();
    os << "</svg>\n";
  }

private:
  struct Lane {
    int32_t rank = -1, tb = -1; ///< rank -1: the band of collapsed ranks
  };

  const Algorithm &alg;
  const Analysis &analysis;
  llvm::raw_ostream &os;
  const SvgOptions &options;

  std::vector<std::vector<uint32_t>> first; ///< flat index of step 0 of [gpu][tb]
  std::vector<StepRef> refs;                ///< by flat index
  std::vector<int32_t> level;               ///< column of each step
  std::vector<int64_t> sentBy;              ///< receive -> its send (flat), or -1
  std::vector<Lane> lanes;
  std::vector<std::vector<int32_t>> laneOf; ///< [gpu][tb] -> lane, -1 collapsed
  int32_t bandLane = -1, collapsedFrom = 0, collapsedTo = 0, columns = 1;
  std::string title;              ///< the heading
  std::vector<std::string> notes; ///< lines under it: the legend, then warnings
  size_t warningsFrom = 1;        ///< notes from here on are drawn in red

  uint32_t flat(StepRef r) const { return first[r.gpu][r.tb] + uint32_t(r.step); }
  bool drawn(int32_t rank) const {
    return rank < collapsedFrom || rank >= collapsedTo;
  }

  void index() {
    first.resize(alg.gpus.size());
    uint32_t next = 0;
    for (size_t g = 0; g < alg.gpus.size(); ++g)
      for (size_t t = 0; t < alg.gpus[g].tbs.size(); ++t) {
        first[g].push_back(next);
        for (size_t s = 0; s < alg.gpus[g].tbs[t].steps.size(); ++s)
          refs.push_back({int32_t(g), int32_t(t), int32_t(s)});
        next += uint32_t(alg.gpus[g].tbs[t].steps.size());
      }
    sentBy.assign(refs.size(), -1);
    for (const Connection &c : analysis.connections)
      for (size_t k = 0; k < c.sendSteps.size() && k < c.recvSteps.size(); ++k)
        sentBy[flat({c.receiver, c.recvTb, c.recvSteps[k]})] =
            flat({c.sender, c.sendTb, c.sendSteps[k]});
    // A wait is drawn as a send's receive is: after its signal, joined to it.
    for (const SignalPair &p : analysis.signals)
      for (size_t k = 0; k < p.signalSteps.size() && k < p.waitSteps.size(); ++k)
        sentBy[flat({p.receiver, p.waitTb, p.waitSteps[k]})] =
            flat({p.sender, p.signalTb, p.signalSteps[k]});
  }

  /// A step's column: one right of the latest step it waits for.
  void levels() {
    level.assign(refs.size(), 0);
    for (const StepRef &r : analysis.topologicalOrder) {
      const Step &step = alg.gpus[r.gpu].tbs[r.tb].steps[r.step];
      int32_t at = 0;
      if (r.step > 0)
        at = std::max(at, level[flat({r.gpu, r.tb, r.step - 1})] + 1);
      if (step.hasDependency())
        at = std::max(at, level[flat({r.gpu, step.depTb, step.depStep})] + 1);
      if (sentBy[flat(r)] >= 0)
        at = std::max(at, level[sentBy[flat(r)]] + 1);
      level[flat(r)] = at;
      columns = std::max(columns, at + 1);
    }
  }

  void lanesOf() {
    int32_t n = alg.ngpus();
    collapsedFrom = collapsedTo = n;
    int32_t most = std::max(options.maxRanks, int32_t(2));
    if (n > most) {
      collapsedFrom = most / 2;
      collapsedTo = n - (most - most / 2);
    }
    laneOf.resize(alg.gpus.size());
    for (int32_t g = 0; g < n; ++g) {
      laneOf[g].assign(alg.gpus[g].tbs.size(), -1);
      if (g == collapsedFrom && collapsedFrom < collapsedTo) {
        bandLane = int32_t(lanes.size());
        lanes.push_back({});
      }
      if (!drawn(g))
        continue;
      for (size_t t = 0; t < alg.gpus[g].tbs.size(); ++t) {
        laneOf[g][t] = int32_t(lanes.size());
        lanes.push_back({g, int32_t(t)});
      }
    }
  }

  /// The heading and the lines under it: a legend, and what the picture
  /// leaves out.
  void notesOf() {
    title = alg.name + ": " + collectiveAttribute(alg).str() + " over " +
            plural(alg.ngpus(), "rank") + ", " + protocolName(alg.protocol).str() + ", " +
            plural(alg.nchannels, "channel");
    notes.push_back("lanes: rank and threadblock; columns: dependency depth; arrows: "
                    "sends, in the colour of their channel; dashed: dependencies");
    if (!analysis.signals.empty())
      notes.push_back("dotted arrows: signals, from a signal to the wait that takes it; put, "
                      "get and getre name the peer whose memory they reach in their tooltip");
    warningsFrom = notes.size();
    if (collapsedFrom < collapsedTo)
      notes.push_back("ranks " + std::to_string(collapsedFrom) + "-" +
                      std::to_string(collapsedTo - 1) + " (" +
                      std::to_string(collapsedTo - collapsedFrom) +
                      " ranks) are collapsed into the grey band: only " +
                      std::to_string(collapsedFrom + alg.ngpus() - collapsedTo) +
                      " ranks are drawn in full, and arrows to and from the others end at "
                      "the band");
    if (refs.empty())
      notes.push_back("no steps: this algorithm moves no data");
  }

  int headerHeight() const { return HeadingLine + 10 + int(notes.size()) * NoteLine; }
  int x(uint32_t step) const { return LabelWidth + level[step] * ColumnWidth; }
  int y(int32_t lane) const { return headerHeight() + lane * LaneHeight; }
  int width() const {
    int text = textWidth(title, 13);
    for (const std::string &note : notes)
      text = std::max(text, textWidth(note, 10));
    return std::max(LabelWidth + columns * ColumnWidth + Margin, 2 * Margin + text);
  }
  int height() const { return headerHeight() + int(lanes.size()) * LaneHeight + Margin; }

  void header() {
    os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width() << "\" height=\""
       << height() << "\" viewBox=\"0 0 " << width() << " " << height()
       << "\" font-family=\"sans-serif\" font-size=\"10\">\n";
    os << "<title>" << xmlEscaped(title) << "</title>\n";
    os << "<defs>\n";
    for (int c = 0; c < PaletteSize; ++c)
      os << "<marker id=\"arrow" << c << "\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" "
         << "markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" "
         << "fill=\"" << Palette[c] << "\"/></marker>\n";
    os << "</defs>\n";
    os << "<text class=\"heading\" x=\"" << Margin << "\" y=\"" << HeadingLine
       << "\" font-size=\"13\">" << xmlEscaped(title) << "</text>\n";
    for (size_t k = 0; k < notes.size(); ++k) {
      bool warning = k >= warningsFrom;
      os << "<text class=\"" << (warning ? "warning" : "note") << "\" x=\"" << Margin
         << "\" y=\"" << HeadingLine + 16 + int(k) * NoteLine << "\""
         << (warning ? " fill=\"#b00020\"" : "") << ">" << xmlEscaped(notes[k]) << "</text>\n";
    }
  }

  std::string laneLabel(const Lane &lane) const {
    const ThreadBlock &tb = alg.gpus[lane.rank].tbs[lane.tb];
    std::string text = "rank " + std::to_string(lane.rank) + " tb " + std::to_string(lane.tb) +
                       " ch " + std::to_string(tb.channel);
    if (tb.sendPeer >= 0)
      text += " \u2192" + std::to_string(tb.sendPeer);
    if (tb.recvPeer >= 0)
      text += " \u2190" + std::to_string(tb.recvPeer);
    return text;
  }

  void drawLane(const Lane &lane) {
    int32_t at = int32_t(&lane - lanes.data());
    int top = y(at);
    if (lane.rank < 0) {
      os << "<g class=\"band\"><rect x=\"" << Margin << "\" y=\"" << top << "\" width=\""
         << width() - 2 * Margin << "\" height=\"" << StepHeight
         << "\" fill=\"#eeeeee\"/><text x=\"" << Margin + 4 << "\" y=\"" << top + 13
         << "\">ranks " << collapsedFrom << "-" << collapsedTo - 1 << " ("
         << collapsedTo - collapsedFrom << " ranks) collapsed</text></g>\n";
      return;
    }
    if (lane.tb == 0 && at > 0) // a rule between ranks
      os << "<line class=\"rank-rule\" x1=\"" << Margin << "\" y1=\"" << top - 4 << "\" x2=\""
         << width() - Margin << "\" y2=\"" << top - 4 << "\" stroke=\"#dddddd\"/>\n";
    os << "<g class=\"lane\" data-rank=\"" << lane.rank << "\" data-tb=\"" << lane.tb << "\">";
    os << "<text x=\"" << Margin << "\" y=\"" << top + 13 << "\">" << xmlEscaped(laneLabel(lane))
       << "</text>\n";
    const ThreadBlock &tb = alg.gpus[lane.rank].tbs[lane.tb];
    const char *colour = Palette[tb.channel % PaletteSize];
    for (size_t s = 0; s < tb.steps.size(); ++s) {
      const Step &step = tb.steps[s];
      StepRef ref{lane.rank, lane.tb, int32_t(s)};
      uint32_t id = flat(ref);
      std::string title = "rank " + std::to_string(lane.rank) + " tb " +
                          std::to_string(lane.tb) + " step " + std::to_string(s) + ": " +
                          stepTypeName(step.type).str();
      if (!chunkLabel(step).empty())
        title += " " + slots(step.srcBuf, step.srcOff, step.count) + " -> " +
                 slots(step.dstBuf, step.dstOff, step.count);
      StepTypeInfo info = stepTypeInfo(step.type);
      if (info.sends)
        title += ", sends to rank " + std::to_string(tb.sendPeer);
      if (info.receives)
        title += ", receives from rank " + std::to_string(tb.recvPeer);
      switch (info.direct) {
      case DirectRole::None: break;
      case DirectRole::RemoteSrc:
        title += ", reads rank " + std::to_string(step.peer) + "'s memory";
        break;
      case DirectRole::RemoteDst:
        title += ", writes rank " + std::to_string(step.peer) + "'s memory";
        break;
      case DirectRole::Signal: title += ", signals rank " + std::to_string(step.peer); break;
      case DirectRole::Wait:
        title += ", waits for a signal from rank " + std::to_string(step.peer);
        break;
      }
      if (step.hasDependency())
        title += ", after tb " + std::to_string(step.depTb) + " step " +
                 std::to_string(step.depStep);
      title += ", channel " + std::to_string(tb.channel);
      if (options.origin)
        if (std::string from = options.origin(ref); !from.empty())
          title += "; from " + from;
      bool nop = step.type == StepType::Nop;
      os << "<g class=\"step\" data-step=\"" << s << "\"><title>" << xmlEscaped(title)
         << "</title><rect x=\"" << x(id) << "\" y=\"" << top << "\" width=\"" << StepWidth
         << "\" height=\"" << StepHeight << "\" rx=\"3\" fill=\"" << (nop ? "#ffffff" : colour)
         << "\" fill-opacity=\"" << (nop ? "1" : "0.25") << "\" stroke=\"" << colour
         << "\"/><text x=\"" << x(id) + 3 << "\" y=\"" << top + 13 << "\"";
      // A label too long for its box is set smaller (o[120:128] and up).
      std::string label = (stepTypeName(step.type) + " " + chunkLabel(step)).str();
      if (int wide = textWidth(label, 10); wide > StepWidth - 6)
        os << " font-size=\"" << llvm::format("%.1f", std::max(5.0, 10.0 * (StepWidth - 6) / wide))
           << "\"";
      os << ">" << xmlEscaped(label) << "</text></g>\n";
    }
    os << "</g>\n";
  }

  /// The point where an arrow meets step `id`'s lane: the step itself, or
  /// the band when its rank is collapsed.
  std::pair<int, int> anchor(uint32_t id, bool start) const {
    const StepRef &r = refs[id];
    int32_t lane = laneOf[r.gpu][r.tb];
    int left = x(id);
    if (lane < 0)
      return {left + StepWidth / 2, y(bandLane) + StepHeight / 2};
    return {start ? left + StepWidth : left, y(lane) + StepHeight / 2};
  }

  void drawSends() {
    for (size_t id = 0; id < refs.size(); ++id) {
      if (sentBy[id] < 0)
        continue;
      uint32_t from = uint32_t(sentBy[id]);
      if (!drawn(refs[from].gpu) && !drawn(refs[id].gpu))
        continue;
      auto [x1, y1] = anchor(from, true);
      auto [x2, y2] = anchor(uint32_t(id), false);
      int channel = alg.gpus[refs[from].gpu].tbs[refs[from].tb].channel % PaletteSize;
      bool signal =
          alg.gpus[refs[from].gpu].tbs[refs[from].tb].steps[refs[from].step].type ==
          StepType::Signal;
      os << "<line class=\"" << (signal ? "signal" : "send") << "\" x1=\"" << x1 << "\" y1=\""
         << y1 << "\" x2=\"" << x2 << "\" y2=\"" << y2 << "\" stroke=\"" << Palette[channel]
         << "\" stroke-width=\"1.2\"" << (signal ? " stroke-dasharray=\"1,2\"" : "")
         << " marker-end=\"url(#arrow" << channel << ")\"/>\n";
    }
  }

  void drawDependencies() {
    for (size_t id = 0; id < refs.size(); ++id) {
      const StepRef &r = refs[id];
      const Step &step = alg.gpus[r.gpu].tbs[r.tb].steps[r.step];
      if (!step.hasDependency() || step.depTb == r.tb || !drawn(r.gpu))
        continue;
      auto [x1, y1] = anchor(flat({r.gpu, step.depTb, step.depStep}), true);
      auto [x2, y2] = anchor(uint32_t(id), false);
      os << "<line class=\"dep\" x1=\"" << x1 << "\" y1=\"" << y1 << "\" x2=\"" << x2
         << "\" y2=\"" << y2 << "\" stroke=\"#888888\" stroke-dasharray=\"3,2\"/>\n";
    }
  }
};

} // namespace

void writeScheduleSvg(const Algorithm &alg, const Analysis &analysis, llvm::raw_ostream &os,
                      const SvgOptions &options) {
  Drawing(alg, analysis, os, options).write();
}

} // namespace coll::ir
