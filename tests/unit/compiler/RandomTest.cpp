//===- RandomTest.cpp - Random programs compile, verify and run -----------===//
//
// Random valid programs, built as ChunkDags directly: copies and reductions
// of one to six chunks between random slots of random ranks (input, output,
// scratch), with random channel hints, parallel factors, instances,
// protocols and fusion. Steps of more than 8 chunks exercise the FIFO-aware
// ordering, its program-order fallback and the retry without fusion. The
// postcondition of each is what its operations establish, as a custom
// collective. Every program must compile, give the same bytes twice, and
// produce that postcondition on the host interpreter (int32 sums, so every
// element can be checked exactly).
//
//===----------------------------------------------------------------------===//

#include "CompilerTest.h"
#include "TimeScale.h"

#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"
#include "coll/ir/Geometry.h"
#include "coll/ir/Verifier.h"

#include <algorithm>
#include <random>

using namespace coll;
using namespace coll::compiler;
using namespace coll::compiler::test;
using ir::BufferKind;

namespace {

using Contents = std::vector<lang::ContribId>;

struct Generator {
  explicit Generator(uint32_t seed) : rng(seed) {}

  int pick(int n) { return static_cast<int>(rng() % uint32_t(n)); }

  /// An in-place program names memory as the tracer does: by the input
  /// slots that the output aliases (input and output have one size).
  lang::ChunkDag make(bool inplace) {
    int n = 2 + pick(4), in = 1 + pick(8), out = inplace ? in : 1 + pick(8);
    const int scratch = 12;
    std::vector<std::vector<std::vector<Contents>>> state(
        n, {std::vector<Contents>(in), std::vector<Contents>(out),
            std::vector<Contents>(scratch)});
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < in; ++j)
        state[r][0][j] = {lang::ContribId(r * in + j)};
    std::vector<int32_t> scratchUsed(n, 0);

    lang::ChunkDag dag;
    dag.scratchNames = {"scratch"};
    int wanted = 3 + pick(40);
    for (int attempt = 0; attempt < 200 && int(dag.ops.size()) < wanted;
         ++attempt) {
      int size = 1 + pick(6);
      // In place, output slots are input slots; out of place, the input is
      // read-only.
      auto buffer = [&](bool written) {
        if (inplace)
          return pick(2) ? BufferKind::Input : BufferKind::Scratch;
        return BufferKind(written ? 1 + pick(2) : pick(3));
      };
      lang::SlotRange src{pick(n), {buffer(false), 0}, 0, size};
      lang::SlotRange dst{pick(n), {buffer(true), 0}, 0, size};
      auto chunks = [&](BufferKind b) {
        return b == BufferKind::Input    ? in
               : b == BufferKind::Output ? out
                                         : scratch;
      };
      int srcChunks = chunks(src.buffer.kind),
          dstChunks = chunks(dst.buffer.kind);
      if (size > srcChunks || size > dstChunks)
        continue;
      src.index = pick(srcChunks - size + 1);
      dst.index = pick(dstChunks - size + 1);
      if (src.rank == dst.rank && src.buffer == dst.buffer &&
          src.index < dst.index + size && dst.index < src.index + size)
        continue;
      auto &from = state[src.rank][size_t(src.buffer.kind)];
      auto &to = state[dst.rank][size_t(dst.buffer.kind)];
      bool reduce = pick(3) == 0;
      bool ok = true;
      std::vector<Contents> result(size);
      for (int i = 0; i < size && ok; ++i) {
        const Contents &a = from[src.index + i], &b = to[dst.index + i];
        ok = !a.empty() && (!reduce || !b.empty());
        result[i] = a;
        if (reduce && ok) {
          Contents merged;
          std::set_union(a.begin(), a.end(), b.begin(), b.end(),
                         std::back_inserter(merged));
          ok = merged.size() == a.size() + b.size();
          result[i] = merged;
        }
      }
      if (!ok)
        continue;
      for (int i = 0; i < size; ++i)
        to[dst.index + i] = result[i];
      if (dst.buffer.kind == BufferKind::Scratch)
        scratchUsed[dst.rank] =
            std::max(scratchUsed[dst.rank], dst.index + size);
      lang::ChunkOp op;
      op.kind = reduce ? lang::OpKind::Reduce : lang::OpKind::Copy;
      op.src = src;
      op.dst = dst;
      op.channel = pick(4) == 0 ? pick(2) : -1;
      op.parallel = pick(6) == 0 ? 2 : 1;
      dag.ops.push_back(op);
    }

    lang::CollectiveSpec &spec = dag.collective;
    spec.kind = ir::Collective::Custom;
    spec.nranks = n;
    spec.inputChunks = in;
    spec.outputChunks = out;
    spec.chunksPerBlock = std::max(in, out);
    spec.inplace = inplace;
    spec.inputDefined.assign(n, std::vector<bool>(in, true));
    spec.expected.assign(n, std::vector<Contents>(out));
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < out; ++i)
        spec.expected[r][i] = state[r][inplace ? 0 : 1][i];
    dag.scratchChunks.assign(n, {0});
    for (int r = 0; r < n; ++r)
      dag.scratchChunks[r][0] = scratchUsed[r];
    dag.options.instances = 1 + pick(2);
    dag.options.fusion = pick(5) != 0;
    dag.options.protocol = std::array{ir::Protocol::Simple, ir::Protocol::LL,
                                      ir::Protocol::LL128}[pick(3)];
    return dag;
  }

  std::mt19937 rng;
};

/// Runs `alg` on int32 data, in place or not, and compares every output
/// chunk the postcondition constrains with the sum of its contributions.
void expectPostcondition(const ir::Algorithm &alg, const lang::ChunkDag &dag,
                         int32_t refinement, bool inplace,
                         const std::string &what) {
  ir::DiagnosticList diags("<random>");
  auto analysis = ir::verify(alg, diags);
  ASSERT_TRUE(static_cast<bool>(analysis))
      << what << llvm::toString(analysis.takeError());
  auto plan = interp::buildPlan(alg, *analysis, "<random>");
  ASSERT_TRUE(static_cast<bool>(plan))
      << what << llvm::toString(plan.takeError());
  ir::BlockShape shape = plan->shape;
  interp::HostOptions options;
  options.watchdogMs = uint32_t(coll::testing::scaledMs(20000));
  options.simpleSlotBytes = 64;
  options.llSlotBytes = 24;
  options.ll128SlotBytes = 248;
  auto executor = interp::HostExecutor::create(std::move(*plan), options);
  ASSERT_TRUE(static_cast<bool>(executor))
      << what << llvm::toString(executor.takeError());
  // Chunks of one size, so that moving data between classes is exact.
  uint64_t count = 5 * uint64_t(alg.nchunksPerLoop);
  ir::ChunkLayout layout(shape, count);
  uint64_t chunk = count / uint64_t(alg.nchunksPerLoop);
  const lang::CollectiveSpec &spec = dag.collective;
  std::vector<std::vector<int32_t>> in(spec.nranks), out(spec.nranks);
  interp::CallArgs args;
  args.type = interp::DataType::Int32;
  args.count = count;
  for (int32_t r = 0; r < spec.nranks; ++r) {
    in[r].resize(count);
    out[r].assign(count, -7);
    for (uint64_t e = 0; e < count; ++e)
      in[r][e] = int32_t(r * 1000003 + e * 7 + 1);
    if (inplace)
      out[r] = in[r];
    args.input.push_back(inplace ? out[r].data() : in[r].data());
    args.output.push_back(out[r].data());
  }
  auto result = (*executor)->run(args);
  ASSERT_TRUE(static_cast<bool>(result))
      << what << llvm::toString(result.takeError());
  int32_t inRefined = spec.inputChunks * refinement;
  for (int32_t r = 0; r < spec.nranks; ++r)
    for (int32_t i = 0; i < spec.outputChunks; ++i)
      for (int32_t t = 0; t < refinement; ++t) {
        if (spec.expected[r][i].empty())
          continue;
        uint64_t at =
            layout.chunkOffset(BufferKind::Output, i * refinement + t);
        for (uint64_t e = 0; e < chunk; ++e) {
          int32_t sum = 0;
          for (lang::ContribId id : spec.expected[r][i]) {
            uint32_t refined = id * refinement + t;
            int32_t a = int32_t(refined / inRefined),
                    j = int32_t(refined % inRefined);
            sum += in[a][layout.chunkOffset(BufferKind::Input, j) + e];
          }
          ASSERT_EQ(out[r][at + e], sum)
              << what << "rank " << r << " output chunk " << i * refinement + t
              << " element " << e;
        }
      }
}

TEST(RandomPrograms, CompileVerifyAndRun) {
  int programs = COLL_TEST_SANITIZER ? 60 : 400;
  for (int seed = 1; seed <= programs; ++seed) {
    Generator gen(static_cast<uint32_t>(seed));
    bool inplace = seed % 2 == 0;
    lang::ChunkDag dag = gen.make(inplace);
    std::string what = "seed " + std::to_string(seed) + ": ";
    llvm::SourceMgr srcMgr;
    std::string text;
    llvm::raw_string_ostream os(text);
    lang::DiagnosticEngine diags(srcMgr, os, "test");
    std::optional<Schedule> schedule = compileSchedule(dag, {}, diags);
    ASSERT_TRUE(schedule) << what << os.str();
    const ir::Algorithm &alg = schedule->algorithm;
    EXPECT_TRUE(inplace ? alg.inplace : alg.outofplace) << what;
    std::optional<Schedule> again = compileSchedule(dag, {}, diags);
    ASSERT_TRUE(again) << what;
    EXPECT_EQ(ir::writeAlgorithm(alg), ir::writeAlgorithm(again->algorithm))
        << what;
    for (bool mode : {false, true})
      if (mode ? alg.inplace : alg.outofplace)
        expectPostcondition(alg, dag, schedule->refinement, mode,
                            what + (mode ? "in place: " : "out of place: "));
    if (HasFatalFailure())
      return;
  }
}

} // namespace
