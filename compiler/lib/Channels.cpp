//===- Channels.cpp - Channels for operations without a hint --------------===//
//
// Operations the program gave no `ch =` are spread over channels so that
// independent flows run side by side (docs/COMPILER.md, "Channels"):
//
//  1. Flows. A cross-rank operation continues the flow of the operation
//     whose result it moves on: the last writer of exactly its source range,
//     when it depends on it (a chunk travelling around a ring, reduced and
//     then copied, is one flow). Any other cross-rank operation starts a
//     flow. Local operations do not use connections and stay on channel 0.
//  2. Colouring, flows in program order: a flow takes the smallest channel
//     where no flow shares a connection (sender, receiver) with it *at the
//     same time*, so that flows which would queue behind each other in one
//     FIFO get FIFOs of their own while phases that follow each other reuse
//     them. A flow's time is the range of depths (longest dependency chain
//     from the start) of its operations; two flows overlap in time when
//     their ranges do. Operations with a hint keep it and count as
//     flows on their channel. When every channel below the limit (32
//     channels in all, lanes included) conflicts, the flow takes the one it
//     shares the fewest connections with. Operations that name a tb
//     (`sendtb =`, `recvtb =`) but no channel stay on channel 0, as the
//     program's tbs have one channel each.
//
// Linear in the operations and dependencies, plus, per connection, the
// flows that use it times the flows before them there.
//
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <tuple>

namespace coll::compiler {

void assignChannels(const lang::ChunkDag &dag, Program &prog) {
  // Lanes multiply the channels (Lower.cpp); automatic ones stay within
  // what MSCCL runtimes and NCCL offer in all.
  int64_t lanes = std::max<int32_t>(dag.options.instances, 1);
  int32_t maxParallel = 1;
  for (const lang::ChunkOp &op : dag.ops)
    maxParallel = std::max(maxParallel, op.parallel);
  lanes *= maxParallel;
  int32_t limit = static_cast<int32_t>(
      std::max<int64_t>(1, MaxAutoChannels / std::max<int64_t>(lanes, 1)));
  prog.opChannel.assign(dag.ops.size(), 0);
  constexpr uint32_t NoFlow = ~uint32_t(0);
  std::vector<uint32_t> flowOf(dag.ops.size(), NoFlow);
  // Per flow: its operations' connections, and its channel once coloured
  // (-1: automatic, not yet coloured). One connection inline: most flows of
  // a large program have one.
  std::vector<llvm::SmallVector<uint64_t, 1>> connections;
  std::vector<int32_t> channel;
  std::vector<std::pair<uint32_t, uint32_t>> span; // depths, first to last
  std::vector<uint32_t> depth(dag.ops.size(), 0);
  auto connection = [](const lang::ChunkOp &op) {
    return (uint64_t(uint32_t(op.src.rank)) << 32) | uint32_t(op.dst.rank);
  };
  // The last op that wrote exactly a range: (rank, kind, scratch id, index,
  // size) -> op.
  llvm::DenseMap<std::tuple<int32_t, int, uint32_t, int32_t, int32_t>,
                 uint32_t>
      writer;
  auto key = [](const lang::SlotRange &r) {
    return std::tuple(r.rank, int(r.buffer.kind), r.buffer.scratchId, r.index,
                      r.size);
  };
  for (uint32_t o = 0; o < dag.ops.size(); ++o) {
    const lang::ChunkOp &op = dag.ops[o];
    for (uint32_t d : op.deps)
      depth[o] = std::max(depth[o], depth[d] + 1);
    // Direct operations use no connection: like local ones, they stay on
    // channel 0 unless they say otherwise.
    if (op.src.rank != op.dst.rank && op.direct == lang::Direct::None) {
      // A tb the program named has one channel: operations that name tbs
      // keep channel 0 unless they say otherwise.
      bool fixed = op.channel >= 0 || op.sendTb >= 0 || op.recvTb >= 0;
      if (fixed) {
        flowOf[o] = static_cast<uint32_t>(channel.size());
        connections.push_back({connection(op)});
        channel.push_back(std::max(op.channel, 0));
        span.emplace_back(depth[o], depth[o]);
      } else {
        auto it = writer.find(key(op.src));
        uint32_t prev = it == writer.end() ? NoOp : it->second;
        if (prev != NoOp && flowOf[prev] != NoFlow &&
            channel[flowOf[prev]] < 0 &&
            std::binary_search(op.deps.begin(), op.deps.end(), prev)) {
          flowOf[o] = flowOf[prev];
          connections[flowOf[o]].push_back(connection(op));
          span[flowOf[o]].second = depth[o];
        } else {
          flowOf[o] = static_cast<uint32_t>(channel.size());
          connections.push_back({connection(op)});
          channel.push_back(-1);
          span.emplace_back(depth[o], depth[o]);
        }
      }
    }
    writer[key(op.dst)] = o;
  }

  // Per connection, the flows coloured so far that use it: each one's
  // channel and time, copied in, so that the scan below (every flow of a
  // connection against those before it: a ring's N flows each cross all N
  // connections) reads one array instead of three by flow id.
  struct User {
    int32_t channel;
    uint32_t first, last; // span
  };
  llvm::DenseMap<uint64_t, llvm::SmallVector<User, 1>, PackedKeyInfo> users;
  for (uint32_t f = 0; f < channel.size(); ++f) {
    std::sort(connections[f].begin(), connections[f].end());
    connections[f].erase(
        std::unique(connections[f].begin(), connections[f].end()),
        connections[f].end());
    if (channel[f] >= 0)
      for (uint64_t c : connections[f])
        users[c].push_back({channel[f], span[f].first, span[f].second});
  }
  std::vector<uint32_t> clash;
  for (uint32_t f = 0; f < channel.size(); ++f) {
    if (channel[f] >= 0)
      continue;
    clash.assign(limit, 0);
    const uint32_t first = span[f].first, last = span[f].second;
    for (uint64_t c : connections[f]) {
      auto it = users.find(c);
      if (it == users.end())
        continue;
      for (const User &g : it->second)
        if (size_t(g.channel) < clash.size() && g.first <= last && first <= g.last)
          ++clash[g.channel];
    }
    channel[f] = static_cast<int32_t>(
        std::min_element(clash.begin(), clash.end()) - clash.begin());
    // Recorded once coloured (a flow's connections are distinct, so it
    // does not meet itself above).
    for (uint64_t c : connections[f])
      users[c].push_back({channel[f], first, last});
  }
  for (uint32_t o = 0; o < dag.ops.size(); ++o) {
    const lang::ChunkOp &op = dag.ops[o];
    if (op.channel >= 0)
      prog.opChannel[o] = op.channel;
    else if (op.sendTb >= 0 || op.recvTb >= 0)
      prog.opChannel[o] = 0;
    else if (flowOf[o] != NoFlow)
      prog.opChannel[o] = channel[flowOf[o]];
  }
}

} // namespace coll::compiler
