//===- Tuning.cpp - The tuning table ------------------------------------------===//

#include "Tuning.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

namespace coll::rt {

std::optional<uint64_t> parseBytes(llvm::StringRef text) {
  uint64_t scale = 1;
  if (text.endswith_insensitive("k"))
    scale = 1ull << 10;
  else if (text.endswith_insensitive("m"))
    scale = 1ull << 20;
  else if (text.endswith_insensitive("g"))
    scale = 1ull << 30;
  if (scale != 1)
    text = text.drop_back();
  uint64_t value = 0;
  if (text.empty() || text.getAsInteger(10, value) || value > UINT64_MAX / scale / 2)
    return std::nullopt;
  return value * scale;
}

namespace {

// The built-in order of the embedded algorithms on the host backend. The
// thresholds come from the runtime benchmark (docs/PERFORMANCE.md).
constexpr const char *BuiltinTable = R"(# Coll's built-in rules (docs/RUNTIME.md)
allreduce      2   0-4K    allreduce_oneshot_ll128
allreduce      *   0-8K    allreduce_oneshot
allreduce      *   0-16K   allreduce_allpairs
allreduce      *   *       allreduce_ring
allgather      *   0-2M    allgather_recursive_doubling
allgather      *   *       allgather_ring
reducescatter  *   0-16K   reducescatter_allpairs
reducescatter  *   *       reducescatter_ring
alltoall       *   *       alltoall_allpairs
broadcast      *   0-64K   broadcast_binomial
broadcast      *   *       broadcast_chain
reduce         *   *       reduce_binomial
gather         *   *       gather_direct
scatter        *   *       scatter_direct
)";

// Rules that come first where some host of the job runs more processes than
// it has CPUs (docs/RUNTIME.md). A pipeline such as the chain needs all its
// stages running at once; where processes share CPUs, every slot that moves
// down the chain waits for a process to be scheduled, and the binomial
// tree's fewer, larger hand-offs win (measured with 4 processes on 2 CPUs:
// docs/PERFORMANCE.md).
constexpr const char *CrowdedTable = R"(# Coll's built-in rules for crowded hosts (docs/RUNTIME.md)
broadcast      *   64K-32M broadcast_binomial
)";

std::vector<TuningRule> parseBuiltin(const char *text, const char *name) {
  auto parsed = parseTuningTable(text, name);
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return {};
  }
  return std::move(*parsed);
}

} // namespace

bool TuningRule::matches(ir::Collective coll, int nranks, uint64_t bytes) const {
  if (collective && *collective != coll)
    return false;
  if (nranks < minRanks || nranks > maxRanks)
    return false;
  return bytes >= minBytes && (maxBytes == UINT64_MAX || bytes < maxBytes);
}

std::string formatBytes(uint64_t bytes) {
  if (bytes == UINT64_MAX)
    return "inf";
  if (bytes && bytes % (1ull << 30) == 0)
    return std::to_string(bytes >> 30) + "G";
  if (bytes && bytes % (1ull << 20) == 0)
    return std::to_string(bytes >> 20) + "M";
  if (bytes && bytes % (1ull << 10) == 0)
    return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
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

const std::vector<TuningRule> &builtinTuningRules(bool crowded) {
  static const std::vector<TuningRule> rules = parseBuiltin(BuiltinTable, "<built-in rules>");
  static const std::vector<TuningRule> crowdedFirst = [] {
    std::vector<TuningRule> all = parseBuiltin(CrowdedTable, "<built-in rules for crowded hosts>");
    all.insert(all.end(), rules.begin(), rules.end());
    return all;
  }();
  return crowded ? crowdedFirst : rules;
}

bool isCrowdedRule(const TuningRule &rule) {
  return llvm::StringRef(rule.origin).startswith("<built-in rules for crowded hosts>");
}

} // namespace coll::rt
