//===- Heap.cpp - The allocator's settings for a one-shot tool ------------===//

#include "coll/support/Heap.h"

#include <cstdint>
#include <cstdlib>
#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                        \
    __has_feature(memory_sanitizer)
#define COLL_HEAP_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COLL_HEAP_SANITIZED 1
#endif

namespace coll {

void tuneHeapForOneShotTool() {
#if defined(__GLIBC__) && !defined(COLL_HEAP_SANITIZED)
  constexpr size_t Mi = size_t(1) << 20;
  constexpr size_t Pad = 256 * Mi;    // each growth of the heap: address space only
  constexpr uintptr_t Huge = 2 * Mi;  // a transparent huge page on x86-64 and arm64
  // Huge pages for the first 64 MiB only: what a 128-rank program needs.
  // Beyond, faulting in huge pages (compaction) cost more than it saved on
  // the 2-core build machine (docs/performance/compiler.md).
  constexpr uintptr_t HugeRegion = 64 * Mi;
  // Blocks up to glibc's largest threshold come from the heap, which is
  // never trimmed: what one pass frees, the next reuses without faults.
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(32 * Mi));
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, static_cast<int>(Pad));
  // One arena: the evaluator thread of the .coll front end (its own deep
  // stack) allocates from the same heap, which the main thread reuses.
  mallopt(M_ARENA_MAX, 1);
  // Grow the heap now, by the pad, and ask for huge pages over it. Memory
  // is committed only where touched; the kernel may decline huge pages. A
  // 2 MiB region with 4 KiB pages in it already stays in 4 KiB pages, so
  // the heap's later blocks must start past the regions used so far: the
  // probe stays allocated (and untouched: no memory), keeping the top of
  // the heap, where the next blocks come from, beyond it.
  static void *probe = std::malloc(Huge);
  if (!probe)
    return;
  auto lo = (reinterpret_cast<uintptr_t>(probe) + Huge - 1) & ~(Huge - 1);
  auto hi = reinterpret_cast<uintptr_t>(sbrk(0)) & ~(Huge - 1);
  hi = std::min<uintptr_t>(hi, lo + HugeRegion);
  if (hi > lo)
    (void)madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_HUGEPAGE);
#endif
}

} // namespace coll
