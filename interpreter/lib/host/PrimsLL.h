//===- PrimsLL.h - The LL protocol on the host ---------------------*- C++ -*-===//
//
// LL: every 8-byte word of a 16-byte line carries its own flag and is
// stored and loaded as one relaxed atomic; the receiver takes every line
// that is already there, then waits for the next.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_INTERPRETER_LIB_HOST_PRIMSLL_H
#define COLL_INTERPRETER_LIB_HOST_PRIMSLL_H

#include "host/Prims.h"

namespace coll::interp::host {
namespace {

template <class T, Protocol Proto>
inline void Prims<T, Proto>::storeLL(ConnectionEnd &c, uint64_t seq, uint64_t bytes) {
  data::llStore(words(c, seq), stageOut, bytes, llFlag(seq));
}

template <class T, Protocol Proto>
template <class NoData>
inline bool Prims<T, Proto>::recvLL(ConnectionEnd &c, uint64_t seq, uint64_t bytes, NoData &&noData,
                                 const T *&in) {
    std::atomic<uint64_t> *line = words(c, seq);
    auto *to = reinterpret_cast<unsigned char *>(stageIn);
    const uint32_t flag = llFlag(seq);
    for (uint64_t l = 0, lines = llLines(bytes); l < lines;) {
      // Take every line that is already there, then wait for the next.
      l = data::llLoadReady(line, to, l, lines, flag);
      if (l == lines)
        break;
      std::atomic<uint64_t> *w = line + 2 * l;
      if (!await(
              [&] {
                return llWordReady(w[0].load(std::memory_order_relaxed), flag) &&
                       llWordReady(w[1].load(std::memory_order_relaxed), flag);
              },
              [&] {
                return noData(llvm::formatv("LL line {0} of slot {1}: flags {2:x} and {3:x}, "
                                            "expected {4:x}",
                                            l, seq,
                                            uint32_t(w[0].load(std::memory_order_relaxed) >> 32),
                                            uint32_t(w[1].load(std::memory_order_relaxed) >> 32),
                                            flag)
                                  .str());
              },
              1))
        return false;
    }
    in = stageIn;
  return true;
}

} // namespace
} // namespace coll::interp::host

#endif // COLL_INTERPRETER_LIB_HOST_PRIMSLL_H
