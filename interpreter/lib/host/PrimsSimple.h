//===- PrimsSimple.h - The Simple protocol on the host -------------*- C++ -*-===//
//
// Simple: the receiver reads the slot in place once it acquires the tail;
// the sender writes the slot in place (Prims::sendBegin) and releases the
// tail.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_INTERPRETER_LIB_HOST_PRIMSSIMPLE_H
#define COLL_INTERPRETER_LIB_HOST_PRIMSSIMPLE_H

#include "host/Prims.h"

namespace coll::interp::host {
namespace {

template <class T, Protocol Proto>
inline bool Prims<T, Proto>::recvSimple(ConnectionEnd &c, uint64_t seq, const T *&in) {
  auto noData = [&](const std::string &what) {
    return "waiting for data to receive (" + what + "); " + connectionCounters(c);
  };
  if (!await([&] { return c.control->tail.load(std::memory_order_acquire) > seq; },
             [&] { return noData("slot " + std::to_string(seq)); }, 1))
    return false;
  s.seenTag = c.control->call.load(std::memory_order_relaxed);
  in = reinterpret_cast<const T *>(c.fifo + (seq % FifoDepth) * c.shape.slotBytes);
  return true;
}

} // namespace
} // namespace coll::interp::host

#endif // COLL_INTERPRETER_LIB_HOST_PRIMSSIMPLE_H
