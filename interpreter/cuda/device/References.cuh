//===- References.cuh - collbench's one-launch references ---------*- CUDA -*-===//
//
// Kernels that do what a collective does, in the fewest launches and
// memory accesses this project knows how to write, for collbench to time
// beside the interpreter (docs/CUDA.md, "References"). They are not Coll's
// algorithms: each serves one shape, with every rank on one GPU, in fp32.
//
//  * referenceReduceOnce: an allreduce that reads each rank's buffer once
//    and writes each output once (every rank's memory is addressable).
//  * referenceExchange: an LL-style all-pairs allreduce in one launch, one
//    block per rank: each rank writes its data, 4 bytes with a 4-byte flag
//    per 8-byte word, into a slot of every peer, then polls its own slots
//    and adds up what arrives (the floor of an exchange through flags).
//  * referenceBlockCopy: one block copying the message, with more loads in
//    flight per thread than the kernel's own loop.
//  * referenceFifo: one connection of the Simple protocol, as the kernel
//    runs it: a sender block and a receiver block, FifoDepth slots, the
//    sender releasing `tail` after each slot and the receiver `head`, each
//    acquiring the other's.
//  * referenceSteps, referenceHops: the floors of a step (issue 27's
//    step-cost benchmark). One block running K steps that each copy their
//    share of the message with the kernel's pack loop and end with a block
//    barrier, and nothing else: what a step that waits for nothing cannot
//    beat. Two blocks bouncing the message K times as LL words, a block
//    barrier per hop: what a step that waits on another block cannot beat.
//
// Waits are bounded: after ReferenceWaitNs a block raises `*stalled` and
// returns, so a broken reference is an error, not a hang.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_DEVICE_REFERENCES_CUH
#define COLL_INTERPRETER_CUDA_DEVICE_REFERENCES_CUH

#include "device/Hardware.h"
#include "device/Reduce.h"

#include "DeviceTypes.h"

#include <cstdint>

namespace coll::interp::cuda {

/// A reference's bounded wait, called after each failed poll: every 64th,
/// whether to give up, because `start` (the wait's first look at the clock)
/// is ReferenceWaitNs ago or another block gave up; it then raises
/// `*stalled` for the host and the other blocks.
__device__ __forceinline__ bool referenceGivesUp(uint32_t spins, uint64_t start,
                                                 uint32_t *stalled) {
  if (spins % 64 != 63)
    return false;
  if (ptx::globalTimer() - start <= ReferenceWaitNs && !ptx::ldVolatile(stalled))
    return false;
  ptx::stVolatile(stalled, 1u);
  return true;
}

/// Elements [blockIdx.x * blockDim.x + threadIdx.x, ...) in a grid stride:
/// out[r][i] = in[0][i] + ... + in[nranks-1][i] for every r.
__global__ void referenceReduceOnce(const ReferenceRanks ranks, int32_t nranks, uint64_t n) {
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    float s = ranks.in[0][i];
    for (int32_t r = 1; r < nranks; ++r)
      s += ranks.in[r][i];
    for (int32_t r = 0; r < nranks; ++r)
      ranks.out[r][i] = s;
#if COLL_CUDA_EMULATION // docs/CUDA.md, "Traffic"
    for (int32_t r = 0; r < nranks; ++r) {
      ptx::traffic(&ranks.in[r][i], sizeof(float), false);
      ptx::traffic(&ranks.out[r][i], sizeof(float), true);
    }
#endif
  }
}

/// Block r is rank r. `lines`: nranks * nranks slots of n words; slot
/// (s, d) carries rank s's data to rank d. `flag`: this launch's, never 0.
__global__ void referenceExchange(const ReferenceRanks ranks, int32_t nranks, uint64_t n,
                                  uint64_t *lines, uint32_t flag, uint32_t *stalled) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
  auto slot = [&](int32_t s, int32_t d) { return lines + (uint64_t(s) * nranks + d) * n; };
  for (uint64_t i = tid; i < n; i += nthreads) {
    uint32_t bits;
    const float v = ranks.in[r][i];
#if COLL_CUDA_EMULATION
    ptx::traffic(&ranks.in[r][i], sizeof v, false);
#endif
    __builtin_memcpy(&bits, &v, sizeof bits);
    const uint64_t word = uint64_t(flag) << 32 | bits;
    for (int32_t d = 0; d < nranks; ++d)
      if (d != r)
        ptx::stVolatile(slot(r, d) + i, word);
  }
  uint64_t start = 0;
  for (uint64_t i = tid; i < n; i += nthreads) {
    float s = 0;
    for (int32_t p = 0; p < nranks; ++p) {
      float v = ranks.in[r][i];
#if COLL_CUDA_EMULATION
      ptx::traffic(&ranks.in[r][i], sizeof v, false);
#endif
      if (p != r) {
        const uint64_t *at = slot(p, r) + i;
        uint64_t word = ptx::ldVolatile(at);
        if (static_cast<uint32_t>(word >> 32) != flag && start == 0)
          start = ptx::globalTimer(); // the thread's first wait starts the clock
        ptx::RetryScope retries; // its polls after the first are not traffic
        for (uint32_t spins = 0; static_cast<uint32_t>(word >> 32) != flag; ++spins) {
          ptx::spinPause();
          if (referenceGivesUp(spins, start, stalled))
            return;
          word = ptx::ldVolatile(at);
        }
        const uint32_t bits = static_cast<uint32_t>(word);
        __builtin_memcpy(&v, &bits, sizeof v);
      }
      s += v;
    }
    ranks.out[r][i] = s;
#if COLL_CUDA_EMULATION
    ptx::traffic(&ranks.out[r][i], sizeof s, true);
#endif
  }
}

/// One block copies `bytes` from src to dst, each thread keeping
/// BlockCopyUnroll 16-byte loads in flight before it stores them: twice
/// what the kernel's pack loop (Reduce.h's transform, 4 for a copy) keeps,
/// so that the reference is what one block can move, not what Coll's loop
/// moves. Pointers of different alignment within 16 bytes copy bytewise.
inline constexpr int BlockCopyUnroll = 8;
__global__ void referenceBlockCopy(const unsigned char *src, unsigned char *dst, uint64_t bytes) {
  const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
  const uintptr_t mis = reinterpret_cast<uintptr_t>(src) % 16;
  const bool aligned = reinterpret_cast<uintptr_t>(dst) % 16 == mis;
  const uint64_t head = aligned ? minU64(bytes, (16 - mis) % 16) : bytes;
  for (uint64_t i = tid; i < head; i += nthreads)
    dst[i] = src[i];
#if COLL_CUDA_EMULATION // one count per thread of what it moves (docs/CUDA.md, "Traffic")
  const uint64_t bytewise = head > tid ? (head - tid + nthreads - 1) / nthreads : 0;
  ptx::traffic(src, bytewise, false);
  ptx::traffic(dst, bytewise, true);
#endif
  if (!aligned)
    return;
  using P = Pack<unsigned char>;
  const P *from = reinterpret_cast<const P *>(src + head);
  P *to = reinterpret_cast<P *>(dst + head);
  const uint64_t packs = (bytes - head) / sizeof(P);
  for (uint64_t first = tid; first < packs; first += uint64_t(nthreads) * BlockCopyUnroll) {
    P v[BlockCopyUnroll];
#pragma unroll
    for (int u = 0; u < BlockCopyUnroll; ++u) {
      const uint64_t idx = first + uint64_t(u) * nthreads;
      if (idx < packs)
        v[u] = from[idx];
    }
#pragma unroll
    for (int u = 0; u < BlockCopyUnroll; ++u) {
      const uint64_t idx = first + uint64_t(u) * nthreads;
      if (idx < packs)
        to[idx] = v[u];
    }
  }
  for (uint64_t i = head + packs * sizeof(P) + tid; i < bytes; i += nthreads)
    dst[i] = src[i];
#if COLL_CUDA_EMULATION
  const uint64_t tail = head + packs * sizeof(P) + tid;
  const uint64_t mine = (packs > tid ? (packs - tid + nthreads - 1) / nthreads : 0) * sizeof(P) +
                        (bytes > tail ? (bytes - tail + nthreads - 1) / nthreads : 0);
  ptx::traffic(src + head, mine, false);
  ptx::traffic(dst + head, mine, true);
#endif
}

/// Block 0 sends, block 1 receives.
__global__ void referenceFifo(const ReferenceFifo f) {
  const bool sender = blockIdx.x == 0;
  const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
  __shared__ uint32_t giveUp;
  const uint64_t nslots = (f.bytes + f.slotBytes - 1) / f.slotBytes;
  for (uint64_t k = 0; k < nslots; ++k) {
    const uint64_t seq = f.base + k;
    if (tid == 0) {
      // The sender waits for a free slot, the receiver for a full one.
      const uint64_t *counter = sender ? f.head : f.tail;
      const uint64_t start = ptx::globalTimer();
      uint32_t stop = 0;
      uint64_t c = ptx::ldAcquire(counter, Scope::Gpu);
      ptx::RetryScope retries; // its polls after the first are not traffic
      for (uint32_t spins = 0; !(sender ? seq - c < FifoDepth : c > seq); ++spins) {
        ptx::spinPause();
        if (referenceGivesUp(spins, start, f.stalled)) {
          stop = 1;
          break;
        }
        c = ptx::ldAcquire(counter, Scope::Gpu);
      }
      giveUp = stop;
    }
    __syncthreads();
    if (giveUp)
      return;
    const uint64_t off = k * f.slotBytes;
    const uint64_t len = minU64(f.slotBytes, f.bytes - off);
    unsigned char *slot = f.slots + (seq % FifoDepth) * f.slotBytes;
    const unsigned char *from = sender ? f.src + off : slot;
    unsigned char *to = sender ? slot : f.dst + off;
    transform<unsigned char, 1, 1>(&from, 1, &to, sliceCount(len), tid, nthreads,
                                   OpSum<unsigned char>{});
    __syncthreads();
    if (tid == 0)
      ptx::stRelease(sender ? f.tail : f.head, seq + 1, Scope::Gpu);
  }
}

/// One block runs s.steps steps; step k copies bytes [k * per, (k + 1) *
/// per) of the message (per: bytes / steps, rounded up; the last share may
/// be shorter or empty) with the kernel's own pack loop (transform), then
/// meets the block barrier every step of the interpreter ends with.
__global__ void referenceSteps(const ReferenceSteps s) {
  const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
  const uint64_t per = (s.bytes + s.steps - 1) / s.steps;
  for (uint32_t k = 0; k < s.steps; ++k) {
    const uint64_t off = minU64(uint64_t(k) * per, s.bytes);
    const unsigned char *from = s.src + off;
    unsigned char *to = s.dst + off;
    transform<unsigned char, 1, 1>(&from, 1, &to, sliceCount(minU64(per, s.bytes - off)), tid,
                                   nthreads, OpSum<unsigned char>{});
    __syncthreads();
  }
}

/// Hop t carries the message from block t % 2 to the other block's inbox
/// as LL words (4 data bytes, then flag s.flag + t), stored and polled with
/// strong 8-byte accesses, whose single-copy atomicity carries each word's
/// data with its flag (as in the LL protocol). Block 0 starts from src; the
/// block that receives the last hop writes dst. Every hop ends with a
/// block barrier, as a step does. A thread moves the same words at every
/// hop, so a word's next store into an inbox depends, through the other
/// block's same thread, on the load of its last one: no slot needs freeing.
__global__ void referenceHops(const ReferenceSteps s) {
  const uint32_t b = blockIdx.x, tid = threadIdx.x, nthreads = blockDim.x;
  const uint64_t n = s.bytes / 4;
  // Not s.inbox[b]: a parameter indexed at run time is copied to the stack.
  uint64_t *const mine = b == 0 ? s.inbox[0] : s.inbox[1];
  uint64_t *const theirs = b == 0 ? s.inbox[1] : s.inbox[0];
  // The buffers are cudaMalloc's, and the message a whole number of words.
  const auto *from = reinterpret_cast<const uint32_t *>(s.src);
  auto *to = reinterpret_cast<uint32_t *>(s.dst);
  auto word = [](uint32_t flag, uint32_t bits) { return uint64_t(flag) << 32 | bits; };
  if (b == 0) {
    for (uint64_t i = tid; i < n; i += nthreads) {
      ptx::stVolatile(theirs + i, word(s.flag, from[i]));
#if COLL_CUDA_EMULATION
      ptx::traffic(from + i, sizeof *from, false);
#endif
    }
    __syncthreads();
  }
  // Block 0 receives the odd hops, block 1 the even ones.
  for (uint32_t t = 1 - b; t < s.steps; t += 2) {
    const uint32_t flag = s.flag + t;
    uint32_t stop = 0;
    for (uint64_t i = tid; i < n && !stop; i += nthreads) {
      uint64_t got = ptx::ldVolatile(mine + i);
      if (static_cast<uint32_t>(got >> 32) != flag) { // the clock only for a wait
        const uint64_t start = ptx::globalTimer();
        ptx::RetryScope retries; // its polls after the first are not traffic
        for (uint32_t spins = 0; static_cast<uint32_t>(got >> 32) != flag; ++spins) {
          ptx::spinPause();
          if (referenceGivesUp(spins, start, s.stalled)) {
            stop = 1;
            break;
          }
          got = ptx::ldVolatile(mine + i);
        }
        if (stop)
          break;
      }
      const uint32_t bits = static_cast<uint32_t>(got);
      if (t + 1 < s.steps)
        ptx::stVolatile(theirs + i, word(flag + 1, bits));
      else {
        to[i] = bits;
#if COLL_CUDA_EMULATION
        ptx::traffic(to + i, sizeof *to, true);
#endif
      }
    }
    if (__syncthreads_or(stop))
      return;
  }
}

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICE_REFERENCES_CUH
