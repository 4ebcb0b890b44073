//===- Check.h - Running a collective against its definition ----*- C++ -*-===//
//
// A CheckedCall owns one call's buffers on every rank: it fills the inputs
// with seeded random data (never zero), poisons the outputs, and after the
// call compares every rank's output with the collective's definition
// computed directly from the saved inputs — without chunks, steps or
// protocols, so it is independent of the algorithm under test.
//
//  - Copies (allgather, alltoall, broadcast, gather, scatter) and integer
//    reductions (wrapping, as NCCL's) must match bit for bit.
//  - min/max must match bit for bit (the result is one of the inputs).
//  - Floating sum/avg/prod are computed in double (long double for fp64) and
//    an element is wrong when it differs by more than the error any
//    reduction order can make in the element type: n*u*sum|x| for sums,
//    n*u*|p| for products (u = unit roundoff of the type).
//  - Out of place, the input must be unchanged (NCCL's sendbuff is const).
//
// A custom collective is checked against the condition its file carries
// (ir::Definition): input chunks the precondition leaves undefined hold
// 0xff bytes rather than data, and each output chunk the postcondition
// constrains must hold exactly its contributions, reduced with the call's
// operator (`avg` is not defined for a custom collective).
//
// For allreduce it also counts elements whose bits differ between ranks: a
// valid algorithm may reduce in a different order on different ranks, and
// users need to know when it does.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CHECK_H
#define COLL_INTERPRETER_CHECK_H

#include "coll/interpreter/DataType.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coll::interp {

/// What a collective is, for checking: the parts of a Plan the definition
/// depends on.
struct CollectiveDesc {
  ir::Collective collective = ir::Collective::AllReduce;
  ir::BlockShape shape;
  int32_t root = 0;
  /// A custom collective's condition (Plan::condition).
  std::shared_ptr<const ir::Definition> custom;

  static CollectiveDesc of(const Plan &plan) {
    return CollectiveDesc{plan.collective, plan.shape, plan.root < 0 ? 0 : plan.root,
                          plan.condition};
  }
  int32_t nranks() const { return shape.nranks; }
  /// Whether the definition is known: a built-in collective, or a custom
  /// one with its condition.
  bool checkable() const { return collective != ir::Collective::Custom || custom; }
};

struct CheckResult {
  uint64_t checked = 0; ///< elements compared, over all ranks
  uint64_t wrong = 0;   ///< elements outside the definition's tolerance
  /// allreduce only: elements whose bits differ from rank 0's result.
  uint64_t crossRankDiffs = 0;
  std::string firstWrong; ///< a description of the first wrong element
};

class CheckedCall {
public:
  /// Whether `collective` has a built-in definition (custom's comes with its
  /// file: CollectiveDesc::checkable).
  static bool canCheck(ir::Collective collective);

  /// Allocates and fills the buffers of one call of `count` elements per
  /// block; in place when `inplace`.
  CheckedCall(const CollectiveDesc &desc, DataType type, ReduceOp op, uint64_t count,
              bool inplace, uint64_t seed);
  ~CheckedCall();

  /// The pointers to pass to an executor.
  CallArgs args() const;
  /// Restores the inputs (and poisons the outputs) for another run.
  void reset();
  /// Compares the outputs with the definition.
  CheckResult check() const;

  uint64_t inputElems() const { return inElems; }
  uint64_t outputElems() const { return outElems; }

private:
  /// Rank r's input element e, as the seed makes it.
  template <class T> T inputElement(int32_t r, uint64_t e) const;

  CollectiveDesc desc;
  DataType type;
  ReduceOp op;
  uint64_t count, inElems, outElems;
  bool inplace;
  size_t elemSize;
  /// The seed, mixed once: rank r's elements come from `mixedSeed ^ r << 48`.
  uint64_t mixedSeed;
  /// Per rank: the memory the call uses (one allocation in place), and
  /// where input and output start in it.
  std::vector<std::vector<unsigned char>> memory;
  /// Per rank, the pristine input of a custom collective (whose undefined
  /// chunks are marked); the built-in collectives' inputs are generated
  /// again from the seed wherever needed (inputElement), which keeps a
  /// 1024-rank call's memory to the buffers the executor uses.
  std::vector<std::vector<unsigned char>> pristine;
  std::vector<size_t> inputAt, outputAt;
};

} // namespace coll::interp

#endif // COLL_INTERPRETER_CHECK_H
