//===- DropIn.h - What the drop-in libraries share --------------*- C++ -*-===//
//
// libcoll_mpi.so and libcoll_nccl.so decide call by call whether Coll runs a
// collective or the library underneath does (Open MPI, the real NCCL), and
// say so at COLL_DEBUG=INFO once per (collective, reason). The decision past
// each library's own checks (datatypes, ops, communicators) is the same in
// both: host buffers, then the communicator's selection, whose tuning table
// may name the library underneath on purpose.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_DROPIN_DROPIN_H
#define COLL_DROPIN_DROPIN_H

#include "coll/runtime/Comm.h"

#include <string>

namespace coll::rt::dropin {

/// Logs `message` at INFO (subsystem COLL) the first time it comes up in
/// this process, with " (said once)" appended.
void onceAtInfo(int rank, const std::string &message);

/// Logs once per (collective, reason) that a call went to `library`.
void fallback(const char *collective, const char *library, const std::string &reason, int rank);

/// Whether Coll runs `op` (already validated, validateOp) on `c`: its
/// buffers are host memory, or memory of one CUDA device that Coll's GPU
/// backend serves (locateBuffers, Communicator::deviceRefusal; then
/// op.device is set, and the caller sets op.stream), and the selection
/// gives it an algorithm. Otherwise the call goes to `library` and this
/// says why: a fallback, or the tuning table's choice.
bool collRuns(const char *collective, Communicator &c, Op &op, const char *library, int logRank);

} // namespace coll::rt::dropin

#endif // COLL_DROPIN_DROPIN_H
