//===- ReaderLists.h - Readers of a cell since its last write ---*- C++ -*-===//
//
// The tracer, the compiler's dependency pass and the race check each walk
// operations in order and keep, for every cell of memory, the operations
// that read it since it was last written (a write must come after them).
// A vector per cell costs 24 bytes and an allocation even when it is empty,
// and most cells are never read more than once between writes; at 4096
// ranks of 4096 chunks that was most of the memory of those passes.
//
// Here a cell holds one 32-bit index into a shared pool of list nodes
// (newest reader first). A write returns the cell's nodes to a free list,
// so the pool holds at most as many nodes as there are readers pending at
// once, and every operation costs O(1) per reader added or dropped.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_READERLISTS_H
#define COLL_IR_READERLISTS_H

#include <cstdint>
#include <vector>

namespace coll::ir {

class ReaderPool {
public:
  /// A cell's list: the index of its newest node, or Empty.
  using List = uint32_t;
  static constexpr List Empty = ~uint32_t(0);

  /// Adds `reader` at the front of `list`.
  void push(List &list, uint32_t reader) {
    uint32_t n;
    if (freeList != Empty) {
      n = freeList;
      freeList = nodes[n].next;
      nodes[n] = {reader, list};
    } else {
      n = static_cast<uint32_t>(nodes.size());
      nodes.push_back({reader, list});
    }
    list = n;
  }
  /// The reader added last, or Empty.
  uint32_t newest(List list) const {
    return list == Empty ? Empty : nodes[list].reader;
  }
  /// Calls `f(reader)` for every reader of `list`, newest first.
  template <typename F> void forEach(List list, F &&f) const {
    for (; list != Empty; list = nodes[list].next)
      f(nodes[list].reader);
  }
  /// Empties `list`, keeping its nodes for later pushes.
  void clear(List &list) {
    if (list == Empty)
      return;
    uint32_t last = list;
    while (nodes[last].next != Empty)
      last = nodes[last].next;
    nodes[last].next = freeList;
    freeList = list;
    list = Empty;
  }

private:
  struct Node {
    uint32_t reader, next;
  };
  std::vector<Node> nodes;
  uint32_t freeList = Empty;
};

} // namespace coll::ir

#endif // COLL_IR_READERLISTS_H
