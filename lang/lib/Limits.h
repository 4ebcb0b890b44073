//===- Limits.h - Bounds that keep hostile programs finite ------*- C++ -*-===//
//
// A .coll program is code: it can loop forever, recurse without end or ask
// for absurd buffers. Each limit below turns such a program into a located
// error instead of a hang, a stack overflow or an out-of-memory kill. They
// are generous for real algorithms (a 256-rank ring allreduce traces about
// 130 thousand operations) and hold 4096-rank programs whose chunk count
// grows with the ranks.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_LANG_LIMITS_H
#define COLL_LANG_LIMITS_H

#include <cstdint>

namespace coll::lang::limits {

/// Open brackets and braces at any point of the source, and prefix operators
/// in a row: ANTLR's parser recurses on both.
inline constexpr unsigned MaxNesting = 100;
/// Depth of one expression tree (long operator chains nest too).
inline constexpr unsigned MaxExprDepth = 256;
/// Active calls of user functions.
inline constexpr unsigned MaxCallDepth = 200;
/// Statements executed plus expressions evaluated, plus the length of every
/// list built and every chunk range touched.
inline constexpr uint64_t MaxSteps = 50'000'000;
/// More steps for each chunk that traced operations move (traced operations
/// are bounded by MaxOps and their chunks by the buffers).
inline constexpr uint64_t StepsPerTracedChunk = 64;
/// Traced chunk operations (a 512 x 8 hierarchical allreduce traces
/// about 4.2 million).
inline constexpr uint32_t MaxOps = 1u << 23;
/// Ranks of a collective.
inline constexpr int64_t MaxRanks = 4096;
/// Chunks of one input or output buffer over all ranks (4096 ranks of 4096
/// chunks).
inline constexpr int64_t MaxBufferChunks = 1 << 24;
/// Chunks of a custom collective's input or output buffer over all ranks:
/// its postcondition is a list per output chunk.
inline constexpr int64_t MaxCustomChunks = 1 << 20;
/// Chunks of one scratch buffer on one rank.
inline constexpr int64_t MaxScratchChunks = 1 << 16;

} // namespace coll::lang::limits

#endif // COLL_LANG_LIMITS_H
