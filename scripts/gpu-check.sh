#!/usr/bin/env bash
# The GPU check, run on a machine with a GPU from the folder that
# scripts/gpu-stage.sh filled (it copies this script there):
#   gpu-stage/gpu-check.sh [--quick] [--budget SECONDS] [--steps REGEX] [--skip REGEX]
# Runs, each step timed out on its own and logged with its exit status (its
# output goes to the report as it comes, so a run cut short keeps it):
#   1. nvidia-smi (what the device is);
#   2. the `cuda` tests (ctest -L '^cuda$' needs the build tree, so the staged
#      CudaTests binary runs directly, with the staged MSCCL corpus);
#   3. topology detection: collsynth --topology nvml (the inventory NVML
#      gives, and the topology made of it), beside nvidia-smi topo -m;
#      the runtime on device buffers: coll-rank-check-gpu with 2 and 3
#      processes on the GPU and with 4 ranks of one process; libcoll_nccl.so
#      (nccl-gpu-check: Coll with 2 ranks, and the real libnccl.so.2 that
#      the GPU machine's PyTorch ships; nccl-conformance-gpu, the
#      conformance harness, on Coll and on that real NCCL); coll.torch on CUDA tensors with that
#      PyTorch, on its C++ backend (built there against that PyTorch) and
#      on its Python one (the ctest label `cuda` runs the same);
#   4. the GPU measurements of docs/performance/gpu.md (collbench, and the
#      step-cost benchmark tests/benchmarks/step-cost.py), among them issue
#      66's: the direct two-shot allreduce, allgather and reduce-scatter at
#      the memory floor, 8 ranks, 1 KiB to 16 MiB and 1 GiB, beside
#      collbench's references (the bench-floor-* steps; --steps bench-floor
#      runs only them), and the direct allgather and alltoall with their
#      copies on the copy engines (bench-copy-engine-*: collbench
#      --copy-engine), and issue 67's: MSCCL++'s plans that Coll proves
#      against the built-in programs of the same call (bench-mscclpp-*:
#      collbench --against); --quick skips the 1 GiB steps, each of which
#      checks its result on the host;
#   5. compute-sanitizer memcheck, racecheck and synccheck (from PATH or
#      /usr/local/cuda/bin) over collrun --backend cuda on one program per
#      protocol, small sizes;
#   6. issues 27's, 28's and 66's targets, read back from the report
#      (gpu-targets.py).
# With a comparison plugin staged (gpu-stage.sh --compare-plugin), step 4
# also times the step costs and three small calls with it, beside this
# build's in the same run (the steps ending in -compare); with a comparison
# build staged (--compare-build), with that build's collbench, libcoll.so
# and plugin.
# --budget: no step starts after that many seconds, and none runs past them
# (steps left out are listed and count as failures), so that the report
# comes back from a machine lent for a limited time. --steps: only the steps
# whose names match the extended regular expression (e.g. 'cuda-tests|runtime');
# --skip: not the steps whose names match it.
# Writes one report, gpu-check-report.txt, under $OUT when set, else here.
# Exit status: 0 when every step passed, 1 otherwise (a GPU test skipped for
# lack of a device counts as a failure here: this script is for a GPU).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
quick=0 budget=0 only= skip=
while [ $# -gt 0 ]; do
  case $1 in
  --quick) quick=1; shift ;;
  --budget) [ $# -ge 2 ] || { echo "gpu-check: --budget needs seconds" >&2; exit 2; }; budget=$2; shift 2 ;;
  --steps) [ $# -ge 2 ] || { echo "gpu-check: --steps needs a regex" >&2; exit 2; }; only=$2; shift 2 ;;
  --skip) [ $# -ge 2 ] || { echo "gpu-check: --skip needs a regex" >&2; exit 2; }; skip=$2; shift 2 ;;
  *) echo "gpu-check: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
begin=$(date +%s)
# gpu-stage.sh packs bin/ and lib/ when they would not fit the device tool.
if [ ! -x "$here/bin/CudaTests" ] && [ -f "$here/bin-lib.tar.xz" ]; then
  tar -C "$here" -xJf "$here/bin-lib.tar.xz" || { echo "gpu-check: cannot unpack $here/bin-lib.tar.xz" >&2; exit 2; }
fi
[ -x "$here/bin/CudaTests" ] || { echo "gpu-check: run it from a folder staged by scripts/gpu-stage.sh ($here/bin/CudaTests missing)" >&2; exit 2; }
report=${OUT:-$here}/gpu-check-report.txt
mkdir -p "$(dirname "$report")"
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export COLL_MSCCL_XML_DIR=$here/algorithms/msccl-xml
alg=$here/algorithms
failed=0
: >"$report"
log() { echo "$*" | tee -a "$report"; }
step() { # name timeout command...
  local name=$1 limit=$2 rc start left
  shift 2
  if [ -n "$only" ] && ! [[ $name =~ $only ]]; then
    return 0
  fi
  if [ -n "$skip" ] && [[ $name =~ $skip ]]; then
    return 0
  fi
  log ""
  if [ "$budget" -gt 0 ]; then
    left=$((begin + budget - $(date +%s)))
    if [ "$left" -le 5 ]; then
      log "== $name: not run (--budget $budget s spent)"
      failed=$((failed + 1))
      return 0
    fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  log "== $name: $*"
  start=$(date +%s)
  # At most 2 MB of a step's output, appended as it comes.
  timeout "$limit" "$@" 2>&1 | head -c 2000000 >>"$report"
  rc=${PIPESTATUS[0]}
  log "-- $name: exit $rc, $(($(date +%s) - start)) s"
  [ "$rc" = 0 ] || failed=$((failed + 1))
  return 0
}
log "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
[ -f "$here/STAGED" ] && sed -n '1,4p; /^compare \(plugin\|build\):/p' "$here/STAGED" >>"$report"
if command -v nvidia-smi >/dev/null; then
  step nvidia-smi 60 nvidia-smi
else
  log "nvidia-smi: not found"
fi

step cuda-tests 1800 "$here/bin/CudaTests" --gtest_brief=0
# The executor's tests with every connection at .sys (COLL_CUDA_SCOPE=sys, the
# CrossGpu kernels; docs/CUDA.md, "Scopes"): the path of connections between
# GPUs, on the one GPU lent.
step cuda-tests-sys-scope 900 env COLL_CUDA_SCOPE=sys "$here/bin/CudaTests" --gtest_brief=1 \
  --gtest_filter='GpuExecutor.*'
if grep -q '\[  SKIPPED \]' "$report"; then
  log "cuda-tests: tests were skipped (no usable device?): counted as a failure"
  failed=$((failed + 1))
fi

# Topology detection (docs/SYNTHESIS.md): what NVML reports, as collsynth
# reads it, beside nvidia-smi's own view.
if command -v nvidia-smi >/dev/null; then
  step nvidia-smi-topo 60 nvidia-smi topo -m
fi
step nvml-inventory 60 "$here/bin/collsynth" --topology nvml --inventory
step nvml-topology 60 "$here/bin/collsynth" --topology nvml --print-topology

# The runtime (libcoll.so, its plugin beside it in lib/) on device buffers.
rankcheck=$here/bin/coll-rank-check-gpu
step runtime-gpu-processes-2 600 "$rankcheck" gpu --fork 2
step runtime-gpu-processes-3 600 "$rankcheck" gpu --fork 3
step runtime-gpu-one-process-4 600 "$rankcheck" gpu-all --all 4
step runtime-gpu-kill-2 300 "$rankcheck" gpu-kill --fork 2
step runtime-gpu-abort-2 300 "$rankcheck" gpu-abort --fork 2
step runtime-gpu-trace-2 300 "$rankcheck" gpu-trace --fork 2
# Direct programs on device buffers (issue 28; docs/RUNTIME.md "Direct
# steps"): every collective with the built-in direct programs, each rank's
# area on the GPU shared with CUDA IPC; windows of collMemAllocDevice memory.
step runtime-gpu-direct-3 600 env COLL_TUNING_FILE="$here/direct.tuning" "$rankcheck" gpu --fork 3
step runtime-gpu-direct-one-process-4 600 env COLL_TUNING_FILE="$here/direct.tuning" \
  "$rankcheck" gpu-all --all 4
step runtime-gpu-windows-3 300 env COLL_TUNING_FILE="$here/direct.tuning" "$rankcheck" gpu-windows --fork 3
# FIFOs in pinned host memory, the path of GPUs without P2P (docs/RUNTIME.md,
# "Where a connection's ranks run"), on the one GPU lent: COLL_P2P_DISABLE=1
# puts every FIFO between two ranks there (memfds mapped across processes
# and registered with cudaHostRegister; portable within one process), and
# the small allreduces leave their LL128 program for another.
step runtime-gpu-no-p2p-processes-2 600 env COLL_P2P_DISABLE=1 COLL_DEBUG=INFO \
  COLL_DEBUG_SUBSYS=INIT "$rankcheck" gpu --fork 2
step runtime-gpu-no-p2p-processes-3 600 env COLL_P2P_DISABLE=1 "$rankcheck" gpu --fork 3
step runtime-gpu-no-p2p-one-process-4 600 env COLL_P2P_DISABLE=1 "$rankcheck" gpu-all --all 4
# The timeline from %globaltimer (docs/CUDA.md "Timelines"), as
# tests/lit/cuda-emu/trace.test checks it on the emulation: 240 step slices
# of the 8-rank ring allreduce, each within its rank's call.
step collrun-cuda-trace 120 bash -c "'$here/bin/collrun' '$alg/ring_allreduce_8ranks.xml' \
  --backend cuda --size 4K --iters 1 --mode inplace --trace \"\${OUT:-/tmp}/cuda-trace.json\" &&
  python3 '$here/tests/check-trace.py' \"\${OUT:-/tmp}/cuda-trace.json\" 240 --within-calls"
# Synthesis at creation for this machine's GPUs (COLL_TOPO_FILE=nvml): the
# ranks' GPUs found by PCI bus id; ranks sharing the one GPU must be said.
step runtime-gpu-topo-nvml 300 bash -c "COLL_TOPO_FILE=nvml COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=TUNING \
  '$rankcheck' gpu --fork 2 2>&1 | tee /dev/stderr | grep -q 'COLL_TOPO_FILE=nvml: no synthesis: ranks share GPU 0 of nvml'"
step nccl-gpu-coll-2 600 env COLL_DEBUG=INFO "$here/bin/nccl-gpu-check" coll 2
# ncclMemAlloc and ncclCommWindowRegister on Coll (issue 28): CUDA IPC
# windows of Coll's GPU memory, the direct two-shot from 4 MiB by the
# built-in rule for device calls with windows.
step nccl-gpu-windows-3 300 "$here/bin/nccl-gpu-check" windows 3
realnccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null || true)
[ -f "$realnccl" ] || realnccl=libnccl.so.2
step nccl-gpu-real-1 600 env COLL_FORCE_FALLBACK=all COLL_NCCL_LIB="$realnccl" COLL_DEBUG=INFO \
  "$here/bin/nccl-gpu-check" real 1
# The conformance harness (issue 64): Coll with 2 ranks sharing the GPU (no
# real NCCL underneath: fp8 and PreMulSum must fail saying why); the real
# NCCL itself against the same reference (every call forced to it); and
# Coll with the real NCCL beside it for what Coll does not run.
step nccl-conformance-gpu-2 600 "$here/bin/nccl-conformance-gpu" device 2 none
step nccl-conformance-real-1 600 env COLL_FORCE_FALLBACK=all COLL_NCCL_LIB="$realnccl" \
  "$here/bin/nccl-conformance-gpu" device 1 real
step nccl-conformance-coll-and-real-1 600 env COLL_NCCL_LIB="$realnccl" \
  "$here/bin/nccl-conformance-gpu" device 1 real
# PyTorch's own libstdc++ and CUDA runtime, not the staged ones.
torchlib=$(mktemp -d)
for f in "$here"/lib/*; do
  case $(basename "$f") in libstdc++* | libgcc_s* | libcudart*) ;; *) ln -s "$f" "$torchlib/" ;; esac
done
# coll.torch's backend, built against this machine's PyTorch; then the CUDA
# check on it (where the build failed, so does the check: `import coll.torch`
# says why).
step torch-backend-build 300 bash "$here/tests/runtime/python/build-torch-backend.sh" python3 \
  "$here/src" "$here/include" "$here/lib/libcoll.so.0" "$here/python/coll"
step torch-cuda-2 900 env LD_LIBRARY_PATH="$torchlib" COLL_PYTHONPATH="$here/python" \
  bash "$here/tests/runtime/python/torch-check.sh" python3 "$here/lib/libcoll.so.0" 2 cuda
# PyTorch's own ProcessGroupNCCL over the preloaded drop-in: one rank (Coll
# copies on the stream) and two sharing the GPU (the real NCCL refuses).
step nccl-gpu-one-rank-device-1 300 env COLL_DEBUG=INFO "$here/bin/nccl-gpu-check" coll 1
for n in 1 2; do
  step torchrun-nccl-dropin-$n 600 env LD_LIBRARY_PATH="$torchlib" \
    bash "$here/tests/runtime/python/torch-nccl-dropin.sh" python3 \
    "$here/lib/$(basename "$(ls "$here"/lib/libcoll_nccl.so.* | head -1)")" $n
done

# The collbench runs of docs/performance/gpu.md.
bench=$here/bin/collbench
step bench-simple-send-256M 600 "$bench" "$alg/send_2ranks_simple.xml" --size 256M --iters 20 --warmup 5
step bench-ll-allpairs-8K-graph 600 "$bench" "$alg/allpairs_allreduce_8ranks_ll.xml" --size 8K --graph --iters 200 --warmup 50
step bench-ll-allpairs-8K 600 "$bench" "$alg/allpairs_allreduce_8ranks_ll.xml" --size 8K --iters 200 --warmup 50
step bench-msccl-allpairs-8K-graph 600 "$bench" "$alg/msccl-xml/rccl__allreduce-allpairs-8n-ll-32tb.xml" --size 8K --graph --iters 200 --warmup 50
step bench-simple-send-256M-threads256 600 "$bench" "$alg/send_2ranks_simple.xml" --size 256M --iters 20 --warmup 5 --threads 256
step bench-simple-send-256M-slot512K 600 "$bench" "$alg/send_2ranks_simple.xml" --size 256M --iters 20 --warmup 5 --slot-bytes 524288
step bench-allpairs-8ranks-8K 600 "$bench" "$alg/allpairs_allreduce_8ranks.xml" --size 8K --iters 200 --warmup 50
step bench-oneshot-8ranks-1K 600 "$bench" "$alg/oneshot_allreduce_8ranks.xml" --size 1K --iters 200 --warmup 50
step bench-oneshot-2ranks-1K-ll128 600 "$bench" "$alg/oneshot_allreduce_2ranks_ll128.xml" --size 1K --iters 200 --warmup 50
step bench-ring-2ranks-1K-ll 600 "$bench" "$alg/ring_allreduce_2ranks_ll.xml" --size 1K --iters 200 --warmup 50
# The built-in rules for device calls (docs/RUNTIME.md): the 2-rank Simple
# one-shot the LL ring replaced, never timed on a GPU, and the LL programs
# that might serve 8 ranks below 8 KiB.
step bench-oneshot-2ranks-1K 600 "$bench" "$alg/oneshot_allreduce_2ranks.xml" --size 1K --iters 200 --warmup 50
step bench-oneshot-8ranks-1K-4K-ll 600 "$bench" "$alg/oneshot_allreduce_8ranks_ll.xml" --size 1K,4K --iters 200 --warmup 50
step bench-ll-allpairs-8ranks-1K-4K 600 "$bench" "$alg/allpairs_allreduce_8ranks_ll.xml" --size 1K,4K --iters 200 --warmup 50
# Where the 2-rank LL ring might serve further (NCCL keeps LL to larger
# sizes): against the Simple ring the built-in rules choose from 4 KiB.
step bench-ring-2ranks-4K-64K-ll 600 "$bench" "$alg/ring_allreduce_2ranks_ll.xml" --size 4K,16K,64K --iters 200 --warmup 50
step bench-ring-2ranks-4K-64K 600 "$bench" "$alg/ring_allreduce_2ranks.xml" --size 4K,16K,64K --iters 200 --warmup 50
# The step-cost benchmark: per protocol, the slope of a call's time over K
# steps of 1 KiB, local (no ordering) and hops (a wait on another tb), and
# beside them the floors (collbench's steps and hops references).
step bench-step-cost 600 python3 "$here/tests/step-cost.py" run --tool "$bench" \
  --dir "$alg/step-cost" --iters 200 --warmup 20
# A staged comparison plugin (gpu-stage.sh --compare-plugin): the same
# step costs and small calls with the kernels of another build, in this
# run, right after this build's.
if [ -f "$here/compare/libcoll_cuda.so" ] || [ -x "$here/compare/bin/collbench" ]; then
  cbench=$bench
  if [ -x "$here/compare/bin/collbench" ]; then
    log "compare build: $(cat "$here/compare/LABEL" 2>/dev/null)"
    cbench=$here/compare/bin/collbench
    cmp=(env LD_LIBRARY_PATH="$here/compare/lib:$LD_LIBRARY_PATH"
      COLL_CUDA_PLUGIN="$here/compare/lib/libcoll_cuda.so")
  else
    log "compare plugin: $(cat "$here/compare/LABEL" 2>/dev/null)"
    cmp=(env COLL_CUDA_PLUGIN="$here/compare/libcoll_cuda.so")
  fi
  # --no-floor: an earlier build's plugin may not know the steps and hops
  # references; this build's runs time them, before and after.
  step bench-step-cost-compare 600 "${cmp[@]}" python3 "$here/tests/step-cost.py" run --tool "$cbench" \
    --dir "$alg/step-cost" --iters 200 --warmup 20 --no-floor
  step bench-step-cost-again 600 python3 "$here/tests/step-cost.py" run --tool "$bench" \
    --dir "$alg/step-cost" --iters 200 --warmup 20
  for f in allpairs_allreduce_8ranks_ll:8K oneshot_allreduce_8ranks:1K ring_allreduce_2ranks_ll:1K; do
    step "bench-small-${f%%:*}-${f##*:}" 600 "$bench" "$alg/${f%%:*}.xml" --size "${f##*:}" --iters 200 --warmup 50
    step "bench-small-${f%%:*}-${f##*:}-compare" 600 "${cmp[@]}" "$cbench" "$alg/${f%%:*}.xml" \
      --size "${f##*:}" --iters 200 --warmup 50
  done
fi
# The same with every connection at .sys: what ordering between GPUs costs.
step bench-step-cost-sys-scope 600 env COLL_CUDA_SCOPE=sys python3 "$here/tests/step-cost.py" run \
  --tool "$bench" --dir "$alg/step-cost" --iters 200 --warmup 20
# Fewer threads per block (issue 27): every warp runs a step's path, and 16
# warps share an SM's four schedulers.
for t in 128 64; do
  step bench-step-cost-threads-$t 600 python3 "$here/tests/step-cost.py" run --tool "$bench" \
    --tool-arg=--threads=$t --dir "$alg/step-cost" --iters 200 --warmup 20
  step bench-allpairs-8ranks-8K-threads-$t 600 "$bench" "$alg/allpairs_allreduce_8ranks.xml" --size 8K \
    --iters 200 --warmup 50 --threads $t
  step bench-oneshot-8ranks-1K-threads-$t 600 "$bench" "$alg/oneshot_allreduce_8ranks.xml" --size 1K \
    --iters 200 --warmup 50 --threads $t
  step bench-oneshot-2ranks-1K-ll128-threads-$t 600 "$bench" "$alg/oneshot_allreduce_2ranks_ll128.xml" \
    --size 1K --iters 200 --warmup 50 --threads $t
done
# Direct access (issue 28): against the ring and the one-launch references
# collbench times beside it.
step bench-direct-twoshot-8ranks-8K 600 "$bench" "$alg/twoshot_direct_8ranks.xml" --size 8K --iters 200 --warmup 50
step bench-direct-oneshot-8ranks-8K 600 "$bench" "$alg/oneshot_direct_8ranks.xml" --size 8K --iters 200 --warmup 50
step bench-direct-twoshot-8ranks-1M-16M 600 "$bench" "$alg/twoshot_direct_8ranks_4lanes.xml" --size 1M,4M,16M --iters 50 --warmup 10
step bench-ring-8ranks-1M-16M 600 "$bench" "$alg/ring_allreduce_8ranks_simple_8ch.xml" --size 1M,4M,16M --iters 50 --warmup 10
for c in allgather_direct allgather_ring alltoall_direct alltoall_allpairs; do
  step "bench-$c-8ranks-64K-16M" 600 "$bench" "$alg/${c}_8ranks.xml" --size 64K,1M,16M --iters 50 --warmup 10
done
# Issue 66, items 2 and 3: the direct programs at the memory floor (fused
# puts, the folded copies; docs/CUDA.md "Traffic" counts them at 1.06, 0.89
# in place and 1.00 out of place, and 1.00 x the reference kernel's bytes),
# compiled as the runtime compiles them (one lane), at 8 ranks, in both
# modes (the allgather's out of place since its copy folds into its puts),
# beside the references collbench times in the
# same run: d2d, and for the two-shot exchange (to 1 MiB) and reduce, the
# reference kernel of the count. collbench has no kernel reference for an
# allgather or a reduce-scatter: gpu-targets.py reads their 1 GiB rows
# against d2d (its docstring says how). The 1 GiB steps are below, with
# --quick's.
for c in twoshot allgather reducescatter; do
  step "bench-floor-$c-8ranks-1K-16M" 300 "$bench" "$alg/${c}_direct_8ranks.xml" --size 1K,64K,1M,16M \
    --iters 50 --warmup 10
done
# Issue 66, item 4: the direct allgather and alltoall with their copies on
# the copy engines (collbench --copy-engine: cudaMemcpyAsync between two
# kernels of the signals; docs/CUDA.md, "Copy engines"), beside the same
# programs' kernels above (bench-floor-allgather-*, bench-alltoall_direct-*)
# and d2d. No target yet: the first GPU figures.
for c in allgather alltoall; do
  step "bench-copy-engine-$c-8ranks-64K-16M" 300 "$bench" "$alg/${c}_direct_8ranks.xml" --copy-engine \
    --size 64K,1M,16M --iters 50 --warmup 10
done
# Issue 67: MSCCL++'s plans against Coll's built-in programs of the same
# call, each timed per size and mode in the same collbench run (--against;
# docs/performance/mscclpp.md has the emulation's figures).
mscclpp_plans=$alg/mscclpp
step bench-mscclpp-allreduce-8ranks 300 "$bench" "$mscclpp_plans/single_node_allreduce_8.json" --size 8K,1M,16M \
  --iters 20 --warmup 5 --references none \
  --against "$alg/twoshot_direct_8ranks.xml,$alg/oneshot_direct_8ranks.xml,$alg/ring_allreduce_8ranks.xml"
for f in single_node_allreduce_2 executor_reduce_fixed; do
  step "bench-mscclpp-$f" 300 "$bench" "$mscclpp_plans/$f.json" --size 8K,1M,16M --iters 20 --warmup 5 \
    --references none --against "$alg/twoshot_direct_2ranks.xml,$alg/oneshot_direct_2ranks.xml,$alg/ring_allreduce_2ranks.xml"
done
step bench-mscclpp-single_node_allgather_fixed 300 "$bench" "$mscclpp_plans/single_node_allgather_fixed.json" \
  --size 8K,1M,16M --iters 20 --warmup 5 --references none \
  --against "$alg/allgather_direct_2ranks.xml,$alg/allgather_ring_2ranks.xml"
step bench-mscclpp-multi_node_allgather_8 300 "$bench" "$mscclpp_plans/multi_node_allgather_8.json" \
  --size 8K,1M,16M --iters 20 --warmup 5 --references none \
  --against "$alg/allgather_direct_8ranks.xml,$alg/allgather_ring_8ranks.xml"
step bench-mscclpp-multi_node_reducescatter_2 300 "$bench" "$mscclpp_plans/multi_node_reducescatter_2.json" \
  --size 8K,1M,16M --iters 20 --warmup 5 --references none --against "$alg/reducescatter_direct_2ranks.xml"
for f in single_node_alltoall_alltoall_2 single_node_alltoall_alltoall_pipeline_2 single_node_alltoall_alltoall_ring_oop_2; do
  step "bench-mscclpp-$f" 300 "$bench" "$mscclpp_plans/$f.json" --size 8K,1M,16M --iters 20 --warmup 5 \
    --references none --against "$alg/alltoall_allpairs_2ranks.xml,$alg/alltoall_direct_2ranks.xml"
done
# The direct steps under compute-sanitizer: peers' loads and stores, and
# the signals between ranks' blocks.
if sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null); then
  for tool in memcheck racecheck synccheck; do
    step "sanitizer-$tool-twoshot-direct" 600 "$sanitizer" --tool "$tool" --error-exitcode 9 \
      "$here/bin/collrun" "$alg/twoshot_direct_8ranks.xml" --backend cuda --size 4K,64K --iters 2
  done
fi
if [ "$quick" = 0 ]; then
  step bench-direct-twoshot-1G 1800 "$bench" "$alg/twoshot_direct_8ranks_4lanes.xml" --size 1G --mode inplace --iters 10 --warmup 2
  step bench-ring-allreduce-1G 1800 "$bench" "$alg/ring_allreduce_8ranks_simple_8ch.xml" --size 1G --mode inplace --iters 10 --warmup 2
  # Issue 66's verdict rows (gpu-targets.py): 12 calls of each mode and of
  # each reference, some ms each on the GPU; the host's filling and check
  # of up to 8 GiB of buffers a call will likely take longer (not yet
  # measured).
  for c in twoshot allgather reducescatter; do
    step "bench-floor-$c-8ranks-1G" 600 "$bench" "$alg/${c}_direct_8ranks.xml" --size 1G --iters 10 --warmup 2
  done
  step bench-copy-engine-allgather-8ranks-1G 600 "$bench" "$alg/allgather_direct_8ranks.xml" --copy-engine \
    --size 1G --iters 10 --warmup 2
fi

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$sanitizer" ]; then
  for tool in memcheck racecheck synccheck; do
    for f in send_2ranks_simple allpairs_allreduce_8ranks_ll ring_allreduce_4ranks_ll128; do
      step "sanitizer-$tool-$f" 900 "$sanitizer" --tool "$tool" --error-exitcode 9 \
        "$here/bin/collrun" "$alg/$f.xml" --backend cuda --size 4K,64K --iters 1
    done
  done
  # The runtime's device path: libcoll.so, the plugin it loads, 4 ranks on one GPU.
  step "sanitizer-memcheck-runtime-one-process-4" 900 "$sanitizer" --tool memcheck \
    --error-exitcode 9 "$here/bin/coll-rank-check-gpu" gpu-all --all 4
else
  log "compute-sanitizer: not found (PATH, /usr/local/cuda/bin): sanitizer steps not run"
  failed=$((failed + 1))
fi

rm -rf "$torchlib"
# Issues 27's, 28's and 66's targets, read back from this report: a row per
# reading, a verdict per target (gpu-targets.py; it changes no step's status).
if [ -f "$here/gpu-targets.py" ]; then
  targets=$(python3 "$here/gpu-targets.py" "$report" 2>&1)
  log ""
  log "$targets"
fi
log ""
log "gpu-check: $failed step(s) failed; report: $report"
[ "$failed" = 0 ]
