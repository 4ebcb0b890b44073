#!/usr/bin/env bash
# torch-check.sh PYTHON LIBCOLL N MODE
# Runs tests/runtime/python/torch_check.py MODE on N processes (MODE all: the
# collectives and ddp modes in one run) with torchrun
# (python -m torch.distributed.run) from the virtual environment whose
# interpreter is PYTHON, with coll.torch from this source tree and LIBCOLL,
# at COLL_DEBUG=INFO. Passes when every rank printed "ok", the log shows the
# decisions MODE must produce, and nothing of Coll's is left in /dev/shm.
# The log must also say that the group ran coll._c10d. A build without that
# module (COLL_TEST_TORCH_BUILT=0, which CMake sets) skips every MODE but
# install, which runs tests/runtime/python/torch_install_check.py: what
# `import coll.torch` says where its backend cannot serve.
# MODE conformance runs tests/runtime/python/torch_conformance.py: every
# call on "coll" and on gloo compared byte for byte (cpu, or MODE
# conformance-cuda on CUDA tensors, skipped where torch sees no GPU); MODE
# conformance-failure the same after a planted failure (a mismatch; then the
# watchdog, on a group of its own), and the log must show the one warning
# per rank and group that names it.
# MODE kill starts the ranks of tests/runtime/python/torch_kill.py itself
# (env://) and passes when every survivor raised Coll's error within the
# watchdog period. MODE shrink runs tests/runtime/python/torch_shrink.py
# likewise: a DDP loop that loses a rank and dist.shrink_group()s on "coll",
# then on gloo with a survivors' group made in advance; the survivors'
# parameters must match. MODE progress runs tests/benchmarks/torch_vs_gloo.py on a
# pseudo-terminal and passes when rank 0 shows its progress line there, and
# not with its output redirected. Exits 77 (skipped) when PYTHON has no torch.
# With COLL_TORCH_INSTALLED=PY (scripts/test.sh sets it once `pip install .`
# has put coll into the environment of the Python PY), the run takes PY for
# PYTHON and coll from that install instead of the source tree and LIBCOLL:
# no PYTHONPATH, no COLL_LIBRARY, and it first checks that `import coll`
# finds the package and its libcoll.so in site-packages.
set -u
py=${COLL_TORCH_INSTALLED:-$1} lib=$2 n=$3 mode=$4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../support/time-scale.sh
. "$here/../../support/time-scale.sh"
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "SKIP: no PyTorch at $py (scripts/setup.sh --torch, which scripts/test.sh runs, installs it into a virtual environment; COLL_SKIP_TORCH=1 skips that)"
  exit 77
fi
if { [ "$mode" = cuda ] || [ "$mode" = conformance-cuda ]; } && ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "SKIP: torch sees no CUDA device"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$mode" = install ]; then
  (cd "$tmp" && timeout "$(scaled 500)" "$py" "$here/torch_install_check.py" \
    "${COLL_PYTHONPATH:-$here/../../../runtime/python}" "$lib" "${COLL_TEST_TORCH_BUILT:-1}")
  exit $?
fi
if [ "${COLL_TEST_TORCH_BUILT:-1}" = 0 ]; then
  echo "SKIP: this build has no coll._c10d, coll.torch's backend (CMake's configure said why)"
  exit 77
fi
if [ -n "${COLL_TORCH_INSTALLED:-}" ]; then
  unset PYTHONPATH COLL_LIBRARY
  where=$(cd "$tmp" && "$py" -c "import coll, os, site, sys
pkg = os.path.dirname(os.path.realpath(coll.__file__))
lib = os.path.realpath(coll.library_path)
sp = [os.path.realpath(p) for p in site.getsitepackages()]
ok = any(pkg == os.path.join(p, 'coll') for p in sp) and lib.startswith(pkg + os.sep)
print(('' if ok else 'not installed: ') + pkg + ' ' + lib)
sys.exit(0 if ok else 1)") || { echo "torch-check: coll is not the pip-installed package: $where" >&2; exit 1; }
  echo "torch-check: coll from $where"
else
  export PYTHONPATH=${COLL_PYTHONPATH:-$here/../../../runtime/python} COLL_LIBRARY=$lib
fi
export COLL_DEBUG=INFO
export OMP_NUM_THREADS=1
expect=("torch allreduce: Coll runs it ")
modes=("$mode")
script=torch_check.py
[ "$mode" = all ] && modes=(collectives ddp)
case $mode in
conformance)
  script=torch_conformance.py modes=(cpu) ;;
conformance-cuda)
  script=torch_conformance.py modes=(cuda) expect=("torch allreduce: Coll runs it on the GPU with") ;;
conformance-failure)
  # The planted failure is the group's first collective; after it, gloo.
  script=torch_conformance.py modes=(cpu failure)
  expect=("COLL WARN torch: the group runs every call on gloo from its collective 1 on: a call of Coll's failed: Coll invalid usage: mismatched calls"
          "COLL WARN torch: the group runs every call on gloo from its collective 1 on: a call of Coll's failed: Coll timeout: watchdog") ;;
collectives|all)
  expect+=("torch allgather: Coll runs it " "torch reducescatter: Coll runs it "
           "torch alltoall: Coll runs it " "torch broadcast: Coll runs it "
           "torch reduce: falls back to gloo: reduce (gloo leaves its ring's partial results"
           "torch allreduce: falls back to gloo: dtype torch.bool")
  # A one-rank job copies, and sends nothing (torch refuses a send to
  # oneself); its all-to-all with split sizes is not checked for.
  if [ "$n" -gt 1 ]; then
    expect+=("torch alltoall: falls back to gloo: split sizes given"
             "torch send: Coll runs it (collIsend/collIrecv: by peer and tag, any source)"
             "torch recv: Coll runs it (collIsend/collIrecv: by peer and tag, any source)")
  else
    expect+=("torch allreduce: Coll runs it as a copy (one rank")
  fi ;;
cuda)
  expect=("torch allreduce: Coll runs it on the GPU with" "torch allgather: Coll runs it on the GPU with"
           "torch reducescatter: Coll runs it on the GPU with" "torch alltoall: Coll runs it on the GPU with"
           "torch broadcast: Coll runs it on the GPU with"
           "torch reduce: falls back to gloo: reduce (gloo leaves its ring's partial results") ;;
tuning)
  printf '# small all-reduces to gloo, the rest to Coll\nallreduce * 0-4K gloo\n' >"$tmp/tuning.txt"
  export COLL_TUNING_FILE=$tmp/tuning.txt
  expect+=("torch allreduce: gloo runs it by tuning rule $tmp/tuning.txt:2"
           "library gloo: tuning rule $tmp/tuning.txt:2") ;;
esac
expect+=("torch backend: coll._c10d from ")
if [ "$mode" = progress ]; then
  # tests/benchmarks/torch_vs_gloo.py on a pseudo-terminal: rank 0's progress
  # line, erased before each row; and none with the output redirected.
  bench=$here/../../benchmarks/torch_vs_gloo.py
  unset COLL_DEBUG # its lines would break the progress line's
  port=$((29500 + RANDOM % 2000))
  out=$(cd "$tmp" && timeout "$(scaled 300)" python3 "$here/../../support/pty-run.py" "$py" \
    -m torch.distributed.run --nproc_per_node "$n" --master_port "$port" "$bench" \
    --max-bytes $((16 * n)) 2>&1) || { echo "$out"; echo "torch-check: the run failed" >&2; exit 1; }
  echo "$out"
  status=0
  for want in "<CR>torch-vs-gloo: all_reduce of $((4 * n)) bytes (1/6)<EL><CR><EL>  all_reduce" \
    "<CR>torch-vs-gloo: reduce_scatter_tensor of $((16 * n)) bytes (6/6), "; do
    grep -qF -- "$want" <<<"$out" || { echo "torch-check: the output lacks: $want" >&2; status=1; }
  done
  out=$(cd "$tmp" && timeout "$(scaled 300)" "$py" -m torch.distributed.run --nproc_per_node "$n" \
    --master_port $((port + 1)) "$bench" --max-bytes $((4 * n)) 2>&1) ||
    { echo "$out"; echo "torch-check: the redirected run failed" >&2; exit 1; }
  case $out in *$'\r'* | *torch-vs-gloo:*) echo "$out"; echo "torch-check: a progress line off a terminal" >&2; status=1 ;; esac
  exit $status
fi
if [ "$mode" = shrink ]; then
  # tests/runtime/python/torch_shrink.py: a DDP loop whose rank 2 is killed
  # (SIGKILL) at step 3 on "coll", where the survivors shrink_group and go
  # on; then the gloo reference (a survivors' group made in advance); the
  # survivors' parameters must match. Plain processes (env://).
  status=0
  for backend in coll gloo; do
    export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29500 + RANDOM % 2000)) WORLD_SIZE=$n
    pids=()
    for r in $(seq 0 $((n - 1))); do
      (cd "$tmp" && RANK=$r LOCAL_RANK=$r timeout "$(scaled 300)" "$py" "$here/torch_shrink.py" \
        "$backend" "$tmp" >"$tmp/$backend.out.$r" 2>&1) &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    cat "$tmp/$backend".out.*
    for r in $(seq 0 $((n - 1))); do
      [ "$r" = 2 ] && continue
      grep -q "^rank $r: done" "$tmp/$backend.out.$r" ||
        { echo "torch-check: rank $r of the $backend run did not finish" >&2; status=1; }
    done
  done
  grep -q "^rank 0: shrank to rank 0 of $((n - 1))" "$tmp/coll.out.0" ||
    { echo "torch-check: rank 0 did not shrink the group" >&2; status=1; }
  [ $status = 0 ] && { "$py" "$here/torch_shrink.py" compare "$tmp" "$n" 2 || status=1; }
  left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
  [ -z "$left" ] || { echo "torch-check: left in /dev/shm: $left" >&2; status=1; }
  exit $status
fi
if [ "$mode" = kill ]; then
  # Plain processes (env://), so that nothing but Coll stops the survivors.
  COLL_WATCHDOG_MS=$(scaled 5000)
  export COLL_WATCHDOG_MS MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29500 + RANDOM % 2000))
  export WORLD_SIZE=$n
  pids=()
  for r in $(seq 0 $((n - 1))); do
    (cd "$tmp" && RANK=$r LOCAL_RANK=$r timeout "$(scaled 120)" "$py" "$here/torch_kill.py" \
      "$(scaled 0.3)" "$(scaled 60)" >"$tmp/out.$r" 2>&1) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  out=$(cat "$tmp"/out.*)
  echo "$out"
  status=0
  for r in $(seq 0 $((n - 2))); do
    line=$(grep "^rank $r: error after" "$tmp/out.$r" || true)
    ms=$(sed -E 's/^rank [0-9]+: error after (-?[0-9]+) ms.*/\1/' <<<"$line")
    if [ -z "$line" ] || [ "$ms" -gt "$(scaled 7000)" ]; then
      echo "torch-check: rank $r did not fail within the watchdog period: ${line:-no error}" >&2
      status=1
    fi
  done
  left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
  [ -z "$left" ] || { echo "torch-check: left in /dev/shm: $left" >&2; status=1; }
  exit $status
fi
out=$(cd "$tmp" && timeout "$(scaled 500)" "$py" -m torch.distributed.run --nproc_per_node "$n" \
  --master_port $((29500 + RANDOM % 2000)) "$here/$script" "${modes[@]}" 2>&1)
rc=$?
echo "$out"
status=0
ok=$(grep -o "rank [0-9]*: ok" <<<"$out" | wc -l)
[ "$rc" -eq 0 ] && [ "$ok" -eq "$n" ] || { echo "torch-check: exit $rc, $ok of $n ranks ok" >&2; status=1; }
for e in "${expect[@]}"; do
  grep -qF -- "$e" <<<"$out" || { echo "torch-check: the log lacks: $e" >&2; status=1; }
done
left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
[ -z "$left" ] || { echo "torch-check: left in /dev/shm: $left" >&2; status=1; }
if [ "$mode" = conformance-failure ]; then
  # One per rank and group: the mismatch, and the watchdog's.
  warned=$(grep -c "COLL WARN torch: the group runs every call on gloo" <<<"$out")
  [ "$warned" -eq $((2 * n)) ] ||
    { echo "torch-check: $warned warnings of retired groups, not one per rank and group ($((2 * n)))" >&2; status=1; }
fi
exit $status
