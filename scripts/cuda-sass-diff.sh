#!/usr/bin/env bash
# Compares the SASS nvcc generates for the CUDA kernels at a git revision
# (default: HEAD) with the working tree's, kernel file by kernel file:
#   scripts/cuda-sass-diff.sh [REV] [FILE.cu ...]
# Prints "same" or the diff per file; exits 1 when any differs. Needs nvcc
# and cuobjdump (no GPU). Uses the build's flags: sm_90, --fmad=false, C++17.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rev=${1:-HEAD}
shift || true
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(KernelsSimple.cu KernelsLL.cu KernelsLL128.cu AverageKernel.cu)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuobjdump=$(dirname "$nvcc")/cuobjdump
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/old"
git -C "$root" archive "$rev" interpreter ir | tar -x -C "$tmp/old"
llvm_inc=$(llvm-config-14 --includedir 2>/dev/null || echo /usr/lib/llvm-14/include)
compile() { # tree file out
  "$nvcc" -I"$1/interpreter/cuda" -I"$1/interpreter/include" -I"$1/ir/include" \
    -isystem "$llvm_inc" -arch=sm_90 --fmad=false -std=c++17 -cubin \
    "$1/interpreter/cuda/$2" -o "$3"
}
status=0
for f in "${files[@]}"; do
  compile "$tmp/old" "$f" "$tmp/old.cubin"
  compile "$root" "$f" "$tmp/new.cubin"
  # Addresses and the cubin's own header aside, instruction for instruction.
  "$cuobjdump" -sass "$tmp/old.cubin" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed 's#/\*[0-9a-f]*\*/##' >"$tmp/old.sass"
  "$cuobjdump" -sass "$tmp/new.cubin" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed 's#/\*[0-9a-f]*\*/##' >"$tmp/new.sass"
  if cmp -s "$tmp/old.sass" "$tmp/new.sass"; then
    echo "$f: same SASS ($(wc -l <"$tmp/new.sass") instructions)"
  else
    echo "$f: SASS differs"
    diff "$tmp/old.sass" "$tmp/new.sass" | head -40
    status=1
  fi
done
exit $status
