//===- host/Runners.h - A tb's task for each type and protocol ------------===//
//
// RankRunner picks the function that runs one tb from the call's data type
// and the plan's protocol: runThreadBlock over the protocol's Prims (the
// reduction operator is the call's, switched on per primitive: withOp,
// Prims.h). The instantiations of each protocol (every data type) compile
// in their own file, HostRunners<Proto>.cpp, so that a build spreads them
// over its cores instead of one file taking minutes (they were the longest
// compiles of the sanitizer builds).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_HOST_RUNNERS_H
#define COLL_INTERPRETER_HOST_RUNNERS_H

#include "host/Prims.h"
#include "host/State.h"

#include "coll/interpreter/Protocol.h"
#include "coll/interpreter/ReduceOps.h"
#include "coll/interpreter/StepSemantics.h"

namespace coll::interp::host {

/// The task of a tb of protocol `Proto` for data of `type`; defined
/// (explicitly specialized) in HostRunners<Proto>.cpp.
template <ir::Protocol Proto> RankRunner::Impl::Runner pickRunner(DataType type);

/// What each HostRunners<Proto>.cpp instantiates, with its protocol's
/// Prims included before it.
namespace detail {

template <class T, ir::Protocol Proto> bool runTb(TbState &s) {
  RankRunner::Impl &ex = *s.owner;
  const PlanTb &ptb = ex.plan.tbs[s.globalTb];
  RankBuffers<T> buffers{static_cast<T *>(ex.input), static_cast<T *>(ex.output),
                         ex.scratchGiven ? static_cast<T *>(ex.scratchGiven)
                                         : ex.scratch.as<T>()};
  Prims<T, Proto> prims(s);
  return runThreadBlock<T>(prims, ex.plan.steps.data() + ptb.stepBegin, ptb.nSteps,
                           ex.layout->slices.data(), 0, buffers, ex.iterations,
                           ex.sliceElems);
}

template <ir::Protocol Proto>
RankRunner::Impl::Runner runnerFor(DataType type) {
  return visitDataType(type, [&](auto tag) -> RankRunner::Impl::Runner {
    return &runTb<typename decltype(tag)::type, Proto>;
  });
}

} // namespace detail
} // namespace coll::interp::host

#endif
