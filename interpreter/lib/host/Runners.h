//===- host/Runners.h - A tb's task for each type, operator and protocol --===//
//
// RankRunner picks the function that runs one tb from the call's data type,
// reduction operator and the plan's protocol: runThreadBlock over the
// protocol's Prims. The instantiations of each protocol (every data type
// times every operator) compile in their own file, HostRunners<Proto>.cpp,
// so that a build spreads them over its cores instead of one file taking
// minutes (it was the longest compile of the sanitizer builds).
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

/// The task of a tb of protocol `Proto` for data of `type` reduced by `op`;
/// defined (explicitly specialized) in HostRunners<Proto>.cpp.
template <ir::Protocol Proto> RankRunner::Impl::Runner pickRunner(DataType type, ReduceOp op);

/// What each HostRunners<Proto>.cpp instantiates, with its protocol's
/// Prims included before it.
namespace detail {

template <class T, class Op, ir::Protocol Proto> bool runTb(TbState &s) {
  RankRunner::Impl &ex = *s.owner;
  const PlanTb &ptb = ex.plan.tbs[s.globalTb];
  RankBuffers<T> buffers{static_cast<T *>(ex.input), static_cast<T *>(ex.output),
                         ex.scratchGiven ? static_cast<T *>(ex.scratchGiven)
                                         : ex.scratch.as<T>()};
  Prims<T, Op, Proto> prims(s);
  return runThreadBlock<T>(prims, ex.plan.steps.data() + ptb.stepBegin, ptb.nSteps,
                           ex.layout->slices.data(), 0, buffers, ex.iterations,
                           ex.sliceElems);
}

template <ir::Protocol Proto>
RankRunner::Impl::Runner runnerFor(DataType type, ReduceOp op) {
  return visitDataType(type, [&](auto tag) -> RankRunner::Impl::Runner {
    using T = typename decltype(tag)::type;
    switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return &runTb<T, OpSum<T>, Proto>;
    case ReduceOp::Prod: return &runTb<T, OpProd<T>, Proto>;
    case ReduceOp::Min: return &runTb<T, OpMin<T>, Proto>;
    case ReduceOp::Max: return &runTb<T, OpMax<T>, Proto>;
    }
    return nullptr;
  });
}

} // namespace detail
} // namespace coll::interp::host

#endif
