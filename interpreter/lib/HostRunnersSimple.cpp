//===- HostRunnersSimple.cpp - The tb tasks of the Simple protocol --------===//
//
// host/Runners.h: each protocol's instantiations compile in their own file.
//
//===----------------------------------------------------------------------===//

#include "host/PrimsSimple.h"
#include "host/Runners.h"

namespace coll::interp::host {

template <>
RankRunner::Impl::Runner pickRunner<ir::Protocol::Simple>(DataType type) {
  return detail::runnerFor<ir::Protocol::Simple>(type);
}

} // namespace coll::interp::host
