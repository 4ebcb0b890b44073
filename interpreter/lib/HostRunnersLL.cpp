//===- HostRunnersLL.cpp - The tb tasks of the LL protocol ----------------===//
//
// host/Runners.h: each protocol's instantiations compile in their own file.
//
//===----------------------------------------------------------------------===//

#include "host/PrimsLL.h"
#include "host/Runners.h"

namespace coll::interp::host {

template <>
RankRunner::Impl::Runner pickRunner<ir::Protocol::LL>(DataType type) {
  return detail::runnerFor<ir::Protocol::LL>(type);
}

} // namespace coll::interp::host
