//===- TuningTable.cpp - The tuning table (COLL_TUNING_FILE) -------------===//

#include "coll/synth/TuningTable.h"

#include "coll/support/Bytes.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

namespace coll::synth {

bool TuningRule::matches(ir::Collective coll, int nranks, uint64_t bytes) const {
  if (collective && *collective != coll)
    return false;
  if (nranks < minRanks || nranks > maxRanks)
    return false;
  return bytes >= minBytes && (maxBytes == UINT64_MAX || bytes < maxBytes);
}

llvm::Expected<std::vector<TuningRule>> parseTuningTable(llvm::StringRef text,
                                                         llvm::StringRef fileName) {
  std::vector<TuningRule> rules;
  llvm::SmallVector<llvm::StringRef, 0> lines;
  text.split(lines, '\n');
  for (size_t n = 0; n < lines.size(); ++n) {
    llvm::StringRef line = lines[n].split('#').first.trim();
    if (line.empty())
      continue;
    const std::string where = llvm::formatv("{0}:{1}", fileName, n + 1).str();
    auto error = [&](const llvm::Twine &message) {
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     where + ": error: " + message);
    };
    llvm::SmallVector<llvm::StringRef, 4> fields;
    line.split(fields, ' ', -1, false);
    llvm::SmallVector<llvm::StringRef, 4> words;
    for (llvm::StringRef f : fields) {
      llvm::SmallVector<llvm::StringRef, 2> parts;
      f.split(parts, '\t', -1, false);
      words.append(parts.begin(), parts.end());
    }
    if (words.size() != 4)
      return error(llvm::formatv("expected 4 fields (collective ranks bytes target), found {0}",
                                 words.size()));
    TuningRule rule;
    rule.origin = where;
    rule.text = line.str();
    if (words[0] != "*") {
      auto coll = ir::parseCollective(words[0]);
      if (!coll || *coll == ir::Collective::Custom)
        return error("unknown collective '" + words[0] +
                     "' (expected allreduce, allgather, reducescatter, alltoall, broadcast, "
                     "reduce, gather, scatter or *)");
      rule.collective = *coll;
    }
    llvm::StringRef ranks = words[1];
    if (ranks != "*") {
      auto [lo, hi] = ranks.split('-');
      unsigned a = 0, b = 0;
      if (lo.getAsInteger(10, a) || a < 1)
        return error("bad rank range '" + ranks + "' (expected *, N, A-B or A-)");
      rule.minRanks = static_cast<int>(a);
      if (!ranks.contains('-'))
        rule.maxRanks = rule.minRanks;
      else if (!hi.empty()) {
        if (hi.getAsInteger(10, b) || b < a)
          return error("bad rank range '" + ranks + "' (expected *, N, A-B or A-)");
        rule.maxRanks = static_cast<int>(b);
      }
    }
    llvm::StringRef bytes = words[2];
    if (bytes != "*") {
      auto [lo, hi] = bytes.split('-');
      if (!bytes.contains('-'))
        return error("bad byte range '" + bytes + "' (expected *, LO-HI or LO-*)");
      auto a = parseBytes(lo);
      if (!a)
        return error("bad size '" + lo + "' (a number with an optional K, M or G)");
      rule.minBytes = *a;
      if (hi != "*") {
        auto b = parseBytes(hi);
        if (!b)
          return error("bad size '" + hi + "' (a number with an optional K, M or G, or *)");
        if (*b <= *a)
          return error("the byte range '" + bytes + "' is empty");
        rule.maxBytes = *b;
      }
    }
    llvm::StringRef target = words[3];
    if (auto proto = ir::parseProtocol(target)) {
      rule.kind = TuningRule::Target::Protocol;
      rule.protocol = *proto;
      rule.target = ir::protocolName(*proto).str();
    } else if (target == "p2p") {
      if (rule.collective != ir::Collective::AllToAll)
        return error("the target p2p (grouped sends and receives) serves alltoall only");
      rule.kind = TuningRule::Target::PointToPoint;
      rule.target = target.str();
    } else if (target == "mpi" || target == "nccl" || target == "gloo" || target == "torch") {
      rule.kind = TuningRule::Target::Library;
      rule.target = target.str();
    } else {
      rule.kind = TuningRule::Target::Algorithm;
      rule.target = target.str();
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

llvm::Expected<std::vector<TuningRule>> readTuningFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read the tuning file %s: %s",
                                   path.str().c_str(), buffer.getError().message().c_str());
  return parseTuningTable((*buffer)->getBuffer(), path);
}

std::string formatTuningRule(const TuningRule &rule) {
  std::string ranks = "*";
  if (rule.minRanks == rule.maxRanks)
    ranks = std::to_string(rule.minRanks);
  else if (rule.minRanks > 1 || rule.maxRanks != TuningRule().maxRanks)
    ranks = std::to_string(rule.minRanks) + "-" +
            (rule.maxRanks == TuningRule().maxRanks ? "" : std::to_string(rule.maxRanks));
  const std::string bytes =
      formatBytes(rule.minBytes) + "-" +
      (rule.maxBytes == UINT64_MAX ? std::string("*") : formatBytes(rule.maxBytes));
  return llvm::formatv("{0,-14} {1,-7} {2,-11} {3}",
                       rule.collective ? ir::collectiveName(*rule.collective) : "*", ranks, bytes,
                       rule.target)
      .str();
}

} // namespace coll::synth
