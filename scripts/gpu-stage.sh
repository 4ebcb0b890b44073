#!/usr/bin/env bash
# Stages what a GPU check needs into one folder (default gpu-stage/, ignored
# by git) that the device tool can carry (at most 64 MiB):
#   scripts/gpu-stage.sh [--build DIR] [--out DIR]
#                        [--compare-plugin FILE LABEL | --compare-build DIR LABEL]
#   bin/   CudaTests (the ctest label `cuda`), collrun, collbench,
#          coll-rank-check-gpu (the runtime's device path), nccl-gpu-check
#          (libcoll_nccl.so on device buffers), nccl-conformance-gpu (its
#          conformance harness) and collsynth (topology detection through
#          NVML); stripped
#   lib/   libcoll.so, its GPU plugin libcoll_cuda.so, libcoll_nccl.so, and
#          the shared libraries the programs load that are not glibc's (CUDA
#          runtime, tinyxml2, UCX, libstdc++, ...); never the CUDA driver
#   python/coll, tests/  the Python package and the torch check (coll.torch
#          on CUDA tensors, with the GPU machine's own PyTorch)
#   src/, include/  coll.torch's C++ backend and coll.h, which gpu-check.sh
#          builds against that PyTorch
#   algorithms/  the programs of docs/performance/gpu.md, compiled here by
#          collc, and the shared MSCCL corpus (msccl-xml/)
#   gpu-check.sh, gpu-targets.py (issues 27's, 28's and 66's targets from
#          its report),
#          STAGED (commit, nvcc, sizes)
#   compare/  with --compare-plugin FILE LABEL: another build's GPU plugin
#          libcoll_cuda.so, which gpu-check.sh times beside this one in the
#          same call (its *-compare steps, through COLL_CUDA_PLUGIN): a
#          change to the kernels measured against what it changed, on one
#          machine and in one run. LABEL (e.g. the commit it was built at)
#          goes into STAGED and the report. It must have this build's plugin
#          ABI (COLL_DEVICE_PLUGIN_ABI, 15 since the copy engines); libcoll.so
#          refuses another, naming both. With --compare-build DIR LABEL
#          instead: another build's collbench, libcoll.so and plugin
#          (compare/bin, compare/lib), which the *-compare steps run whole,
#          so that a build of another plugin ABI compares too.
# The build (default build/) must have the CUDA backend (nvcc found); the
# script builds the targets it needs. Fails when the folder exceeds 64 MiB.
# On the GPU machine: gpu-stage/gpu-check.sh (see docs/CUDA.md).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build out=$root/gpu-stage compare= compare_label= compare_build=
limit=$((64 * 1024 * 1024))
while [ $# -gt 0 ]; do
  case $1 in
  --build) [ $# -ge 2 ] || { echo "gpu-stage: --build needs a folder" >&2; exit 2; }; build=$(realpath -m "$2"); shift 2 ;;
  --out) [ $# -ge 2 ] || { echo "gpu-stage: --out needs a folder" >&2; exit 2; }; out=$(realpath -m "$2"); shift 2 ;;
  --compare-plugin)
    [ $# -ge 3 ] || { echo "gpu-stage: --compare-plugin needs a file and a label" >&2; exit 2; }
    compare=$(realpath -m "$2") compare_label=$3
    [ -f "$compare" ] || { echo "gpu-stage: --compare-plugin: no file $compare" >&2; exit 2; }
    shift 3
    ;;
  --compare-build)
    [ $# -ge 3 ] || { echo "gpu-stage: --compare-build needs a build folder and a label" >&2; exit 2; }
    compare_build=$(realpath -m "$2") compare_label=$3
    for f in bin/collbench lib/libcoll.so lib/libcoll_cuda.so; do
      [ -e "$compare_build/$f" ] || { echo "gpu-stage: --compare-build: no $compare_build/$f (build collbench coll coll_cuda there)" >&2; exit 2; }
    done
    shift 3
    ;;
  -h | --help) sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
  *) echo "gpu-stage: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -z "$compare" ] || [ -z "$compare_build" ] ||
  { echo "gpu-stage: --compare-plugin and --compare-build exclude each other" >&2; exit 2; }
[ -f "$build/CMakeCache.txt" ] ||
  { echo "gpu-stage: $build is not configured: cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release" >&2; exit 2; }
nvcc=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | head -1)
[ -n "$nvcc" ] && [ -d "$build/tests/unit/cuda/CMakeFiles/CudaTests.dir" ] ||
  { echo "gpu-stage: $build has no CUDA backend (nvcc not found at configure time)" >&2; exit 2; }
[ "$out" != "$root" ] && [ "$out" != / ] || { echo "gpu-stage: refusing to use $out" >&2; exit 2; }

# The corpus: COLL_MSCCL_XML_DIR from the environment (as the tests read
# it), else the build's (CMake's COLL_MSCCL_XML_DIR, ../shared/msccl-xml
# beside the checkout by default).
corpus=${COLL_MSCCL_XML_DIR:-$(grep '^COLL_MSCCL_XML_DIR:' "$build/CMakeCache.txt" | cut -d= -f2-)}
[ -d "$corpus" ] || {
  echo "gpu-stage: no MSCCL corpus at '$corpus': set COLL_MSCCL_XML_DIR to the folder of MSCCL's XML files (the build's own is CMake's COLL_MSCCL_XML_DIR)" >&2
  exit 2
}

cmake --build "$build" -j "${COLL_JOBS:-2}" --target CudaTests collrun collbench collc \
  coll coll_cuda coll_nccl coll-rank-check-gpu nccl-gpu-check nccl-conformance-gpu collsynth

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/algorithms"
for b in "$build/tests/unit/cuda/CudaTests" "$build/bin/collrun" "$build/bin/collbench" \
  "$build/bin/coll-rank-check-gpu" "$build/bin/nccl-gpu-check" "$build/bin/nccl-conformance-gpu" \
  "$build/bin/collsynth"; do
  [ -x "$b" ] || { echo "gpu-stage: $b was not built" >&2; exit 1; }
  strip -o "$out/bin/$(basename "$b")" "$b"
done
# Every library the loader resolves, except glibc's own (present on any
# Linux machine, and tied to its loader) and the CUDA driver (libcuda, the
# machine's own).
for b in "$out"/bin/*; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libcuda|ld-linux[^/]*)\.so' || true
done | sort -u | while read -r lib; do
  cp -L "$lib" "$out/lib/$(basename "$lib")"
done
# libcoll.so under its soname, and the plugin it loads from beside itself.
strip -o "$out/lib/$(readlink "$build/lib/libcoll.so")" "$build/lib/$(readlink "$build/lib/libcoll.so")"
strip -o "$out/lib/libcoll_cuda.so" "$build/lib/libcoll_cuda.so"
if [ -n "$compare" ]; then
  mkdir -p "$out/compare"
  strip -o "$out/compare/libcoll_cuda.so" "$compare"
  echo "$compare_label" >"$out/compare/LABEL"
fi
if [ -n "$compare_build" ]; then
  mkdir -p "$out/compare/bin" "$out/compare/lib"
  strip -o "$out/compare/bin/collbench" "$compare_build/bin/collbench"
  strip -o "$out/compare/lib/$(readlink "$compare_build/lib/libcoll.so")" \
    "$compare_build/lib/$(readlink "$compare_build/lib/libcoll.so")"
  strip -o "$out/compare/lib/libcoll_cuda.so" "$compare_build/lib/libcoll_cuda.so"
  echo "$compare_label" >"$out/compare/LABEL"
fi
strip -o "$out/lib/$(readlink "$build/lib/libcoll_nccl.so")" "$build/lib/$(readlink "$build/lib/libcoll_nccl.so")"
mkdir -p "$out/python" "$out/tests/runtime/python" "$out/tests/support"
cp -r "$root/runtime/python/coll" "$out/python/"
rm -rf "$out/python/coll/__pycache__"
# The torch check where it sits in the source tree: it sources the time
# scale of tests/support.
cp "$root/tests/runtime/python/torch-check.sh" "$root/tests/runtime/python/torch_check.py" \
  "$root/tests/runtime/python/torch-nccl-dropin.sh" "$root/tests/runtime/python/torch_nccl_dropin.py" \
  "$root/tests/runtime/python/build-torch-backend.sh" "$out/tests/runtime/python/"
# coll.torch's C++ backend is built there, against that machine's torch
# (build-torch-backend.sh): its sources and coll.h.
mkdir -p "$out/src" "$out/include"
cp "$root"/runtime/python/backend/*.cpp "$root"/runtime/python/backend/*.h "$out/src/"
cp "$root/runtime/include/coll.h" "$out/include/"
cp "$root/tests/runtime/process/direct.tuning" "$out/"
cp "$root/tests/support/time-scale.sh" "$out/tests/support/"
cp "$root/tests/lit/collrun/Inputs/check-trace.py" "$out/tests/"
ldd "$out"/bin/* | grep -q 'not found' && { ldd "$out"/bin/*; echo "gpu-stage: unresolved library" >&2; exit 1; }

# The programs of docs/performance/gpu.md, compiled here.
collc=$build/bin/collc
"$collc" "$root/algorithms/broadcast_chain.coll" -D N=2 -D K=1 -o "$out/algorithms/send_2ranks_simple.xml"
"$collc" "$root/algorithms/allreduce_allpairs.coll" -D N=8 --protocol LL -o "$out/algorithms/allpairs_allreduce_8ranks_ll.xml"
"$collc" "$root/algorithms/allreduce_ring.coll" -D N=8 -D CHANNELS=8 -o "$out/algorithms/ring_allreduce_8ranks_simple_8ch.xml"
"$collc" "$root/algorithms/allreduce_ring.coll" -D N=4 --protocol LL128 -o "$out/algorithms/ring_allreduce_4ranks_ll128.xml"
"$collc" "$root/algorithms/allreduce_ring.coll" -D N=8 -o "$out/algorithms/ring_allreduce_8ranks.xml"
# docs/performance/gpu.md's small-message figures (issue targets): the built-in
# choices for device calls at 8 ranks (8 KiB: the LL all-pairs, above;
# below: the Simple one-shot) and at 2 ranks (below 4 KiB: the LL ring),
# and what they were chosen over or may yet give way to: the Simple
# all-pairs, the one-shot in LL128 and Simple at 2 ranks, the one-shot and
# the all-pairs in LL at 8 ranks and 1 KiB.
"$collc" "$root/algorithms/allreduce_allpairs.coll" -D N=8 -o "$out/algorithms/allpairs_allreduce_8ranks.xml"
"$collc" "$root/algorithms/allreduce_oneshot.coll" -D N=8 -o "$out/algorithms/oneshot_allreduce_8ranks.xml"
"$collc" "$root/algorithms/allreduce_oneshot.coll" -D N=2 --protocol LL128 -o "$out/algorithms/oneshot_allreduce_2ranks_ll128.xml"
"$collc" "$root/algorithms/allreduce_ring.coll" -D N=2 --protocol LL -o "$out/algorithms/ring_allreduce_2ranks_ll.xml"
"$collc" "$root/algorithms/allreduce_oneshot.coll" -D N=2 -o "$out/algorithms/oneshot_allreduce_2ranks.xml"
"$collc" "$root/algorithms/allreduce_ring.coll" -D N=2 -o "$out/algorithms/ring_allreduce_2ranks.xml"
"$collc" "$root/algorithms/allreduce_oneshot.coll" -D N=8 --protocol LL -o "$out/algorithms/oneshot_allreduce_8ranks_ll.xml"
# Direct access (issue 28): the two-shot and one-shot with every rank in
# one launch, and the two-shot on 4 lanes for large messages (14 tbs a lane
# at 8 ranks since issue 66's parts, 7 data and 7 signal: 448 blocks, which
# fit 132 SMs at 4 blocks of 128 threads).
"$collc" "$root/algorithms/allreduce_twoshot_direct.coll" -D N=8 -o "$out/algorithms/twoshot_direct_8ranks.xml"
"$collc" "$root/algorithms/allreduce_twoshot_direct.coll" -D N=8 --instances 4 -o "$out/algorithms/twoshot_direct_8ranks_4lanes.xml"
"$collc" "$root/algorithms/allreduce_oneshot_direct.coll" -D N=8 -o "$out/algorithms/oneshot_direct_8ranks.xml"
# The direct allgather and alltoall (a transfer per peer on its own tb)
# beside the FIFO programs the built-in rules choose without windows.
"$collc" "$root/algorithms/allgather_direct.coll" -D N=8 -o "$out/algorithms/allgather_direct_8ranks.xml"
"$collc" "$root/algorithms/alltoall_direct.coll" -D N=8 -o "$out/algorithms/alltoall_direct_8ranks.xml"
"$collc" "$root/algorithms/allgather_ring.coll" -D N=8 -o "$out/algorithms/allgather_ring_8ranks.xml"
# Issue 66: the direct programs at the memory floor, compiled as the runtime
# compiles them (one lane) and as docs/CUDA.md "Traffic" counts them: the
# two-shot and the allgather above, and the reduce-scatter (gpu-check.sh's
# bench-floor-* steps).
"$collc" "$root/algorithms/reducescatter_direct.coll" -D N=8 -o "$out/algorithms/reducescatter_direct_8ranks.xml"
"$collc" "$root/algorithms/alltoall_allpairs.coll" -D N=8 -o "$out/algorithms/alltoall_allpairs_8ranks.xml"
# Issue 67: MSCCL++'s plans that Coll proves (tests/lit/Inputs/mscclpp/),
# timed against the built-in programs of the same call (gpu-check.sh's
# bench-mscclpp-* steps, collbench --against): the 2- and 8-rank allreduces
# against the two-shot, one-shot and ring, the 2-rank allgather against
# the direct allgather and the ring, the 2-rank alltoalls against the
# all-pairs and the direct one (out of place, where it runs), and the
# multi-node allgather (8 ranks, port channels) and reduce-scatter (2).
mkdir -p "$out/algorithms/mscclpp"
for f in single_node_allreduce_2 single_node_allreduce_8 executor_reduce_fixed single_node_allgather_fixed \
         single_node_alltoall_alltoall_2 single_node_alltoall_alltoall_pipeline_2 \
         single_node_alltoall_alltoall_ring_oop_2 multi_node_allgather_8 multi_node_reducescatter_2; do
  cp "$root/tests/lit/Inputs/mscclpp/$f.json" "$out/algorithms/mscclpp/"
done
"$collc" "$root/algorithms/allreduce_twoshot_direct.coll" -D N=2 -o "$out/algorithms/twoshot_direct_2ranks.xml"
"$collc" "$root/algorithms/allreduce_oneshot_direct.coll" -D N=2 -o "$out/algorithms/oneshot_direct_2ranks.xml"
"$collc" "$root/algorithms/allgather_direct.coll" -D N=2 -o "$out/algorithms/allgather_direct_2ranks.xml"
"$collc" "$root/algorithms/allgather_ring.coll" -D N=2 -o "$out/algorithms/allgather_ring_2ranks.xml"
"$collc" "$root/algorithms/alltoall_allpairs.coll" -D N=2 -o "$out/algorithms/alltoall_allpairs_2ranks.xml"
"$collc" "$root/algorithms/alltoall_direct.coll" -D N=2 -o "$out/algorithms/alltoall_direct_2ranks.xml"
"$collc" "$root/algorithms/reducescatter_direct.coll" -D N=2 -o "$out/algorithms/reducescatter_direct_2ranks.xml"
# The step-cost benchmark's programs (tests/benchmarks/step-cost.py).
python3 "$root/tests/benchmarks/step-cost.py" compile --collc "$collc" --out "$out/algorithms/step-cost" >/dev/null
cp "$root/tests/benchmarks/step-cost.py" "$out/tests/"
cp -r "$corpus" "$out/algorithms/msccl-xml"

cp "$root/scripts/gpu-check.sh" "$root/scripts/gpu-targets.py" "$out/"
size=$(du -sb "$out" | cut -f1)
{
  echo "commit: $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet HEAD -- . ':!gpu-stage' || echo ' (with uncommitted changes)')"
  echo "staged: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
  echo "nvcc: $nvcc ($("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
  echo "size: $size bytes"
  [ -z "$compare" ] || echo "compare plugin: $compare_label ($compare)"
  [ -z "$compare_build" ] || echo "compare build: $compare_label ($compare_build)"
  (cd "$out" && du -ab bin lib algorithms | sort -k2)
} >"$out/STAGED"
# Over the limit (the kernels' line tables make the plugin and CudaTests
# large): bin/ and lib/ travel as one xz archive, which gpu-check.sh unpacks
# where it runs.
if [ "$size" -gt "$limit" ]; then
  packed="bin lib"
  [ -z "$compare$compare_build" ] || packed="$packed compare"
  tar -C "$out" -cf - $packed | xz -T2 -6 >"$out/bin-lib.tar.xz"
  rm -rf "$out/bin" "$out/lib" "$out/compare"
  size=$(du -sb "$out" | cut -f1)
  echo "packed: $packed in bin-lib.tar.xz; size now $size bytes" >>"$out/STAGED"
fi
if [ "$size" -gt "$limit" ]; then
  du -sh "$out"/* >&2
  echo "gpu-stage: $out is $size bytes, over the 64 MiB the device tool carries" >&2
  exit 1
fi
echo "gpu-stage: $out ready, $((size / 1024)) KiB (limit 65536 KiB)"
