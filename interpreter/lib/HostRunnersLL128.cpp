//===- HostRunnersLL128.cpp - The tb tasks of the LL128 protocol ----------===//
//
// host/Runners.h: each protocol's instantiations compile in their own file.
//
//===----------------------------------------------------------------------===//

#include "host/PrimsLL128.h"
#include "host/Runners.h"

namespace coll::interp::host {

template <>
RankRunner::Impl::Runner pickRunner<ir::Protocol::LL128>(DataType type) {
  return detail::runnerFor<ir::Protocol::LL128>(type);
}

} // namespace coll::interp::host
