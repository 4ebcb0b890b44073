//===- TestPrograms.h - .coll sources shared by front-end tests -*- C++ -*-===//
//
// Small .coll sources that several test files trace or compile. Header-only,
// so the front-end tests can use them without linking the interpreter.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TESTS_SUPPORT_TESTPROGRAMS_H
#define COLL_TESTS_SUPPORT_TESTPROGRAMS_H

#include <string>

namespace coll::test {

/// The textbook ring allreduce: chunk r is reduced around the ring ending at
/// rank r, then copied around it, all on channel 0 (one tb per rank; without
/// the hints every chunk would get a channel of its own). `param N` defaults
/// to \p n. Tests pin source locations in it: the reduce is at 6:42, the
/// copy at 9:15.
inline std::string ringAllReduceProgram(int n = 4, bool inplace = true) {
  return "param N = " + std::to_string(n) +
         "\ncollective allreduce(ranks = N, chunks = N, inplace = " +
         (inplace ? "true" : "false") + R"()
for r in 0..N {
    let c = chunk(r, input, r)
    for k in 1..N {
        c = chunk((r + k) % N, input, r).reduce(c, ch = 0)
    }
    for k in 0..N-1 {
        c = c.copy((r + k) % N, input, r, ch = 0)
    }
}
)";
}

/// The out-of-place ring allgather: each rank copies its input into its own
/// output slot, then the chunk travels N-1 hops. `param N` defaults to \p n.
inline std::string ringAllGatherProgram(int n) {
  return "param N = " + std::to_string(n) + R"(
collective allgather(ranks = N, chunks = 1)
for r in 0..N {
    let c = chunk(r, input, 0).copy(r, output, r)
    for k in 1..N { c = c.copy((r + k) % N, output, r) }
}
)";
}

/// Direct access, two-shot allreduce: rank r adds chunk r of every peer
/// into its own (get_reduce), then stores the sum into every peer (put).
inline std::string directTwoShotProgram(int n) {
  return "param N = " + std::to_string(n) + R"(
collective allreduce(ranks = N, chunks = N, inplace = true)
for r in 0..N { for p in 0..N { if p != r { chunk(r, input, r).get_reduce(chunk(p, input, r)) } } }
for r in 0..N { for p in 0..N { if p != r { chunk(r, input, r).put(p, input, r) } } }
)";
}

/// Direct access, a ring of puts: each hop puts the partial sum into the
/// next rank's scratch, which that rank reduces and puts on; then the sums
/// travel the ring by puts. Dependencies between ranks in both directions.
inline std::string directPutRingProgram(int n) {
  return "param N = " + std::to_string(n) + R"(
collective allreduce(ranks = N, chunks = N, inplace = true)
for r in 0..N {
    let c = chunk((r + 1) % N, input, r)
    for k in 2..N+1 {
        let next = (r + k) % N
        c = chunk(next, input, r).reduce(c.put(next, scratch, r))
    }
    for k in 1..N { c = c.put((r + k) % N, input, r) }
}
)";
}

} // namespace coll::test

#endif // COLL_TESTS_SUPPORT_TESTPROGRAMS_H
