//===- Svg.h - A schedule drawn as a picture --------------------*- C++ -*-===//
//
// `collc --emit=svg` and `collir FILE --emit=svg` (docs/IR.md, "Pictures"):
// one lane per rank and threadblock, steps left to right by dependency depth
// (a step sits one column right of the latest step it waits for: its tb's
// previous step, its dependency, the send it receives), each labelled with
// its type and the chunks it moves; every send joined to its receive by an
// arrow in the colour of its channel, dependencies between tbs dashed; a
// step's tooltip (its SVG <title>) names it in full, with where it came from.
//
// Above the lanes: a heading, a legend line, and in red what the picture
// leaves out. Past `maxRanks` ranks the middle ranks are collapsed into one
// band that says how many it stands for, arrows to and from them ending at
// the band, and the red line says so; an algorithm without steps gets the
// red line "no steps".
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_SVG_H
#define COLL_IR_SVG_H

#include "coll/ir/Algorithm.h"
#include "coll/ir/Verifier.h"

#include <functional>
#include <string>

namespace llvm {
class raw_ostream;
}

namespace coll::ir {

struct SvgOptions {
  /// Ranks drawn in full (values below 2 count as 2); beyond it the first
  /// maxRanks/2 and the last maxRanks - maxRanks/2 are drawn and the others
  /// collapsed.
  int32_t maxRanks = 16;
  /// Where a step came from ("ring.coll:12:15"), for its tooltip; may be
  /// empty, or return "".
  std::function<std::string(StepRef)> origin;
};

/// Writes `alg` (verified: `analysis` is what ir::verify returned) as SVG.
void writeScheduleSvg(const Algorithm &alg, const Analysis &analysis, llvm::raw_ostream &os,
                      const SvgOptions &options = {});

} // namespace coll::ir

#endif // COLL_IR_SVG_H
