//===- Heap.h - The allocator's settings for a one-shot tool ----*- C++ -*-===//
//
// collc and collir build large structures once, free much of them between
// passes, and exit. glibc's defaults suit long-running processes: freed
// memory at the top of the heap and every block over 128 KiB-32 MiB goes
// back to the kernel, and every 4 KiB page is faulted in on first touch.
// On a virtual machine a page fault costs about 3 us, and a 128-rank
// compilation took about 8,000 of them (docs/performance/compiler.md,
// "collc's page faults"). Tools call tuneHeapForOneShotTool() first thing
// in main: freed memory stays in the heap for the next pass, the heap grows in
// large steps, and the kernel is asked to back its first 64 MiB with
// transparent huge pages where it allows (`madvise` mode). Libraries never
// call it: the runtime lives in its users' processes.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SUPPORT_HEAP_H
#define COLL_SUPPORT_HEAP_H

namespace coll {

/// Sets glibc's allocator up for a process that allocates much once and
/// exits (see above). Does nothing under a sanitizer or without glibc.
/// Call it before the process allocates much, from one thread.
void tuneHeapForOneShotTool();

} // namespace coll

#endif // COLL_SUPPORT_HEAP_H
