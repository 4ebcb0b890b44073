#!/usr/bin/env bash
# Plants bugs in the CUDA kernel source (interpreter/cuda/device/: the
# shared primitives and each protocol's) one at a time and reports whether the emulated CUDA tests catch each:
#   scripts/cuda-emu-mutants.sh [NAME ...]      (default: every mutant)
# Not part of CI. Works on a copy of the committed tree in $COLL_MUTANT_DIR
# (default /tmp/coll-mutants): one Release build, rebuilt per mutant; or,
# with COLL_MUTANT_BUILD=DIR, on this checkout and its build DIR (the kernel
# file is restored afterwards). A
# mutant is caught when CudaEmuTests (the filter below) fails, reports a
# race (a TSan build: COLL_MUTANT_BUILD=build-tsan) or runs past the timeout
# (a hang the watchdog did not end in time counts as caught).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${COLL_MUTANT_DIR:-/tmp/coll-mutants}
filter=${COLL_MUTANT_FILTER:-'emu:EmuFragile.*:emu:GpuExecutor.ManyRanks*:emu:GpuExecutor.Reused*:emu:GpuExecutor.GraphReplays*:emu:GpuExecutor.DirectSteps*:emu:EmuMultiDevice.DirectSteps*:emu:GpuExecutor.RaisedHostStop*'}
limit=${COLL_MUTANT_TIMEOUT:-180}
device=interpreter/cuda/device

# name|file of $device|text to find|replacement (\n for newlines)
mutants=(
  'no-barrier-before-free|Prims.h|    if (__syncthreads_or(!ok))\n      return false;\n    if (tid == 0) {|    if (!ok)\n      return false;\n    if (tid == 0) {'
  'relaxed-tail|Prims.h|        } else if constexpr (P == Proto::Simple) {\n          ptx::stRelease(sendTail, sendSeq + 1, sendScope());|        } else if constexpr (P == Proto::Simple) {\n          ptx::stRelaxed(sendTail, sendSeq + 1, sendScope());'
  'slot-off-by-one|PrimsSimple.h|    out[o++] = slot<T>(sendFifo, sendSeq);|    out[o++] = slot<T>(sendFifo, sendSeq + 1);'
  'll-flag|PrimsLL.h|  const uint32_t inFlag = llFlag(recvSeq), outFlag = llFlag(sendSeq);|  const uint32_t inFlag = llFlag(recvSeq), outFlag = llFlag(sendSeq) + (sendSeq == 5);'
  'll128-flag-before-syncwarp|PrimsLL128.h|      __syncwarp(); // every lane'"'"'s data before lane 7'"'"'s flag\n      if (active \&\& j == FlagLane)\n        ptx::stRelease(line + LL128FlagWord, outFlag, sendScope());|      if (active \&\& j == FlagLane)\n        ptx::stRelease(line + LL128FlagWord, outFlag, sendScope());\n      __syncwarp();'
  'relaxed-head|Prims.h|      if (tid == nthreads - 1)\n        ptx::stRelease(recvHead, recvSeq + 1, recvScope());|      if (tid == nthreads - 1)\n        ptx::stRelaxed(recvHead, recvSeq + 1, recvScope());'
  'head-before-barrier|Prims.h|    bool ok = true;\n    const uint32_t count = sliceCount(n);|    bool ok = true;\n    if constexpr (Recv)\n      if (tid == nthreads - 1)\n        ptx::stRelease(recvHead, recvSeq + 1, recvScope());\n    const uint32_t count = sliceCount(n);'
  'relaxed-data-poll|PrimsSimple.h|return (recvTailSeen = ptx::ldAcquire(recvTail, recvScope())) > recvSeq;|return (recvTailSeen = ptx::ldRelaxed(recvTail, recvScope())) > recvSeq;'
  'relaxed-dependency-poll|Prims.h|      const uint32_t goal = flagProgress(it, p.span, irStep);\n      uint64_t seen = 0;\n      fail = !spin([\&] { return flagReached(seen = ptx::ldAcquire(flag, Scope::Gpu)|      const uint32_t goal = flagProgress(it, p.span, irStep);\n      uint64_t seen = 0;\n      fail = !spin([\&] { return flagReached(seen = ptx::ldRelaxed(flag, Scope::Gpu)'
  'first-dependency-only|Prims.h|    const uint32_t n = depTb >= 0 ? 1u : static_cast<uint32_t>(-depTb);\n    if (tid < n) {|    const uint32_t n = depTb >= 0 ? 1u : static_cast<uint32_t>(-depTb);\n    if (tid < n \&\& tid < 1) {'
  'dependency-wrong-iteration|Prims.h|      const uint32_t goal = flagProgress(it, p.span, irStep);|      const uint32_t goal = flagProgress(it ? it - 1 : 0, p.span, irStep);'
  'relaxed-signal|Prims.h|      ptx::stRelease(signalFlag(m.signal),|      ptx::stRelaxed(signalFlag(m.signal),'
  'relaxed-signal-poll|Prims.h|      const uint32_t goal = signalProgress(m, it);\n      uint64_t seen = 0;\n      fail = !spin([\&] { return signalReached(seen = ptx::ldAcquire(flag, signalScope())|      const uint32_t goal = signalProgress(m, it);\n      uint64_t seen = 0;\n      fail = !spin([\&] { return signalReached(seen = ptx::ldRelaxed(flag, signalScope())'
  'signal-generation-equal|Prims.h|return signalReached(seen = |return flagReached(seen = '
  'signal-gpu-scope|Prims.h|    if constexpr (CrossGpu)\n      return Scope::Sys;\n    else\n      return Scope::Gpu;\n  }\n  /// What the flag holds|    return Scope::Gpu;\n  }\n  /// What the flag holds'
  'wait-previous-signal|Prims.h|      const uint32_t goal = signalProgress(m, it);|      const uint32_t goal = signalProgress(m, it) - 1;'
  'fused-signal-first-member|Prims.h|    if (tid < step.nsrc) {\n      const PlanMemberSignal m = memberSignal(tid);\n      if (p.windowDescriptors) {|    if (tid < 1) {\n      const PlanMemberSignal m = memberSignal(tid);\n      if (p.windowDescriptors) {'
  'fused-wait-first-member|Prims.h|    if (tid < step.nsrc) {\n      const PlanMemberSignal m = memberSignal(tid);\n      const uint64_t *flag|    if (tid < 1) {\n      const PlanMemberSignal m = memberSignal(tid);\n      const uint64_t *flag'
  'fused-signal-one-pair|Prims.h|    return r == 0 ? PlanMemberSignal{d.signal, d.ordinal} : p.memberSignals[d.members + r];|    return PlanMemberSignal{d.signal, d.ordinal};'
  'folded-put-not-folded|Prims.h|  __device__ bool foldedCopy(const PlanStep \&) const { return stepPeer().ordinal == FoldedCopy; }|  __device__ bool foldedCopy(const PlanStep \&step) const { return step.type != StepKind::Put \&\& stepPeer().ordinal == FoldedCopy; }'
  'fused-put-first-destination|Reduce.h|    for (int j = 0; j < nout; ++j)\n      reinterpret_cast<Pack<T> *>(out[j] + head)[i] = v;|    for (int j = 0; j < 1; ++j)\n      reinterpret_cast<Pack<T> *>(out[j] + head)[i] = v;'
  'fused-put-unaligned-head|Reduce.h|  for (uint32_t i = tid; i < head; i += nthreads)\n    scalar(i);\n  for (uint32_t i = head + packs * E + tid; i < n; i += nthreads)\n    scalar(i);\n  const Pack<T> *from|  for (uint32_t i = head + packs * E + tid; i < n; i += nthreads)\n    scalar(i);\n  const Pack<T> *from'
  'folded-copy-reads-dst|Prims.h|    if (!from)\n      in[nin++] = dst;|    in[nin++] = dst;'
  'folded-copy-dropped|Prims.h|    if (!from)\n      in[nin++] = dst;\n#pragma unroll 1 // unrolled, its remainder was computed on every step'"'"'s path\n    for (int r = 0; r < nsrc; ++r)|    if (!from)\n      in[nin++] = dst;\n#pragma unroll 1 // unrolled, its remainder was computed on every step'"'"'s path\n    for (int r = from; r < nsrc; ++r)'
  'fused-getre-first-peer|Prims.h|    const int32_t rank = member == 0 ? d.peer : p.memberPeers[d.members + member];|    const int32_t rank = d.peer;'
  'host-stop-ignored|Prims.h|      if (p.hostStop \&\& ptx::ldVolatile(p.hostStop)) {|      if (false \&\& p.hostStop \&\& ptx::ldVolatile(p.hostStop)) {'
  'fifo-free-off-by-one|Prims.h|sendSeq - seen->sendHead >= FifoDepth;|sendSeq - seen->sendHead > FifoDepth;'
  'fifo-filled-off-by-one|Prims.h|        needed = seen->recvTail <= recvSeq;|        needed = seen->recvTail < recvSeq;'
  'fifo-seen-before-barrier|Prims.h|        if (__syncthreads_or(fail))\n          return false;\n        // Every thread has read `seen` for this step; the barrier that ends\n        // the step publishes the new values to the next.\n        if (tid == 0)\n          *seen = FifoSeen{sendHeadSeen, recvTailSeen};|        if (tid == 0)\n          *seen = FifoSeen{sendHeadSeen, recvTailSeen};\n        if (__syncthreads_or(fail))\n          return false;'
)

selected=("$@")
mkdir -p "$work"
if [ -n "${COLL_MUTANT_BUILD:-}" ]; then
  # An existing build of this checkout: the kernel is mutated in place and
  # restored at the end (also on interruption).
  src=$root
  build=$COLL_MUTANT_BUILD
  rm -rf "$work/device.orig"
  cp -r "$src/$device" "$work/device.orig"
  trap 'cp "$work/device.orig"/* "$src/$device"/' EXIT
else
  src=$work/src
  build=$work/build
  rm -rf "$src"
  mkdir -p "$src"
  git -C "$root" archive HEAD | tar -x -C "$src"
  rm -rf "$work/device.orig"
  cp -r "$src/$device" "$work/device.orig"
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCOLL_ENABLE_LANG=OFF -DCOLL_BUILD_BENCHMARKS=OFF -DCOLL_ENABLE_CUDA=OFF \
    >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 2; }
fi

printf '%-28s %s\n' mutant result
for m in "${mutants[@]}"; do
  IFS='|' read -r name file find replace <<<"$m"
  if [ ${#selected[@]} -gt 0 ] && [[ ! " ${selected[*]} " =~ " $name " ]]; then continue; fi
  cp "$work/device.orig"/* "$src/$device"/
  if ! FIND="$find" REPLACE="$replace" python3 - "$src/$device/$file" <<'PY'
import os, sys
path = sys.argv[1]
find = os.environ["FIND"].replace("\\n", "\n").replace("\\&", "&")
repl = os.environ["REPLACE"].replace("\\n", "\n").replace("\\&", "&")
text = open(path).read()
if text.count(find) != 1:
    sys.exit(1)
open(path, "w").write(text.replace(find, repl))
PY
  then
    printf '%-28s %s\n' "$name" "NOT APPLIED (the text to mutate was not found once)"
    continue
  fi
  if ! ninja -C "$build" -j "${COLL_JOBS:-1}" CudaEmuTests >"$work/$name.build.log" 2>&1; then
    printf '%-28s %s\n' "$name" "does not build (see $work/$name.build.log)"
    continue
  fi
  start=$(date +%s)
  timeout "$limit" "$build/tests/unit/cuda/CudaEmuTests" --gtest_filter="${filter//emu:/}" \
    >"$work/$name.test.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 124 ]; then
    printf '%-28s %s\n' "$name" "caught: hang past ${limit}s"
  elif grep -q 'WARNING: ThreadSanitizer' "$work/$name.test.log"; then
    printf '%-28s %s\n' "$name" "caught: ThreadSanitizer race report (${secs}s)"
  elif [ $rc -ne 0 ]; then
    failed=$(grep '^\[  FAILED  \]' "$work/$name.test.log" | grep -v 'listed below' | sort -u | wc -l)
    printf '%-28s %s\n' "$name" "caught: $failed tests failed (${secs}s)"
  else
    printf '%-28s %s\n' "$name" "SURVIVED (${secs}s)"
  fi
done
cp "$work/device.orig"/* "$src/$device"/
