#!/usr/bin/env bash
# torch-nccl-dropin.sh PYTHON LIBCOLL_NCCL N
# PyTorch's own ProcessGroupNCCL (backend "nccl") over the NCCL drop-in:
# tests/runtime/python/torch_nccl_dropin.py on N processes with torchrun
# (python -m torch.distributed.run), LIBCOLL_NCCL preloaded, at
# COLL_DEBUG=INFO, with the real NCCL of torch's wheel underneath
# (COLL_NCCL_LIB; set it to choose another). Passes when every rank printed
# "ok", the log shows that Coll ran calls ("Coll runs it"; with one rank,
# "as a copy"), and nothing of Coll's is left in /dev/shm. Exits 77
# (skipped) when PYTHON has no torch or torch sees no CUDA device.
set -u
py=$1 lib=$2 n=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../support/time-scale.sh
. "$here/../../support/time-scale.sh"
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "SKIP: no PyTorch at $py"
  exit 77
fi
if ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "SKIP: torch sees no CUDA device"
  exit 77
fi
if [ -z "${COLL_NCCL_LIB:-}" ]; then
  COLL_NCCL_LIB=$("$py" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null || true)
  [ -f "$COLL_NCCL_LIB" ] || COLL_NCCL_LIB=libnccl.so.2
fi
export COLL_NCCL_LIB COLL_DEBUG=INFO OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$(cd "$tmp" && LD_PRELOAD=$lib timeout "$(scaled 300)" "$py" -m torch.distributed.run \
  --nproc_per_node "$n" --master_port $((29500 + RANDOM % 2000)) "$here/torch_nccl_dropin.py" 2>&1)
rc=$?
echo "$out"
status=0
ok=$(grep -o "rank [0-9]*: ok" <<<"$out" | wc -l)
[ "$rc" -eq 0 ] && [ "$ok" -eq "$n" ] || { echo "torch-nccl-dropin: exit $rc, $ok of $n ranks ok" >&2; status=1; }
expect="Coll runs it"
[ "$n" -eq 1 ] && expect="Coll runs it as a copy"
grep -qF -- "$expect" <<<"$out" || { echo "torch-nccl-dropin: the log lacks: $expect" >&2; status=1; }
left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
[ -z "$left" ] || { echo "torch-nccl-dropin: left in /dev/shm: $left" >&2; status=1; }
exit $status
