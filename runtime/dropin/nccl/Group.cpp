//===- Group.cpp - Groups of libcoll_nccl.so ------------------------------===//
//
// Groups keep NCCL's semantics: calls between ncclGroupStart and the
// outermost ncclGroupEnd are checked at once (an invalid one returns its
// error, and the group's ncclGroupEnd returns it too and runs nothing), and
// issued at ncclGroupEnd: the real NCCL's share inside one real group, then
// Coll's share, which returns complete. Communicators initialized inside a
// group are made at its ncclGroupEnd, each on a thread of its own.
//
//===----------------------------------------------------------------------===//

#include "Shim.h"

#include <thread>

using namespace coll::rt::dropin::nccl;

namespace coll::rt::dropin::nccl {

thread_local Group group;

} // namespace coll::rt::dropin::nccl

/// Ends the outermost group: its inits (each on a thread, as they are
/// collective with each other), then its calls. `simulate`: the real
/// NCCL's share is simulated, Coll's is not run.
static ncclResult_t endGroup(ncclSimInfo_t *simulate) {
  if (group.depth == 0)
    return failWith(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group.depth > 0)
    return ncclSuccess;
  Group state = std::move(group);
  group = Group();
  if (state.error != ncclSuccess) // NCCL: the group fails and runs nothing
    return state.error;
  if (!state.inits.empty()) {
    std::vector<ncclResult_t> results(state.inits.size(), ncclSuccess);
    std::vector<std::string> messages(state.inits.size());
    std::vector<std::thread> threads;
    auto setDevice = cudart<int (*)(int)>("cudaSetDevice");
    for (size_t i = 0; i < state.inits.size(); ++i)
      threads.emplace_back([&, i] {
        PendingInit &p = state.inits[i];
        if (p.device >= 0 && setDevice)
          setDevice(p.device);
        results[i] = initRank(p.out, p.nranks, p.id, p.rank, p.hasConfig ? &p.config : nullptr,
                              p.device, p.noDevice);
        messages[i] = threadError;
      });
    for (std::thread &t : threads)
      t.join();
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i] != ncclSuccess)
        return failWith(nullptr, results[i], messages[i]);
  }
  if (!simulate)
    return issue(std::move(state.calls));
  COLL_NEED_REAL(nullptr, ncclGroupSimulateEnd);
  real().ncclGroupStart();
  for (const Call &c : state.calls)
    if (!c.onColl)
      if (ncclResult_t r = issueReal(c); r != ncclSuccess) {
        real().ncclGroupEnd();
        return r;
      }
  return fromReal(nullptr, "ncclGroupSimulateEnd", real().ncclGroupSimulateEnd(simulate));
}

COLL_NCCL_API(ncclResult_t, ncclGroupStart, (), ()) {
  ++group.depth;
  return ncclSuccess;
}

COLL_NCCL_API(ncclResult_t, ncclGroupEnd, (), ()) { return endGroup(nullptr); }

COLL_NCCL_API(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t *simInfo), (simInfo)) {
  if (!simInfo || simInfo->magic != 0x74685283) {
    if (group.depth > 0)
      --group.depth;
    return failWith(nullptr, ncclInvalidArgument,
                    "ncclGroupSimulateEnd: simInfo was not set up with NCCL_SIM_INFO_INITIALIZER");
  }
  return endGroup(simInfo);
}
