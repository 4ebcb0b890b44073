#!/usr/bin/env bash
# Compares the device code nvcc generates for the CUDA kernels at a git
# revision (default: HEAD) with the working tree's, kernel file by file:
#   scripts/cuda-sass-diff.sh [REV] [FILE.cu ...]
# (NEW_REV=rev compares with that revision instead of the working tree.)
# With cuobjdump (beside nvcc, on PATH or CUOBJDUMP=path) it compares SASS
# instruction by instruction (encodings, addresses and branch targets
# blanked); without it, the PTX (ptxas turns identical PTX into identical
# SASS, with the same flags; virtual register and label numbers are blanked,
# since any edit renumbers them). Prints "same" or the differing lines counted;
# exits 1 when any file differs. No GPU needed. The build's flags: sm_90,
# --fmad=false, C++17.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rev=${1:-HEAD}
shift || true
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(KernelsSimple.cu KernelsLL.cu KernelsLL128.cu AverageKernel.cu)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuobjdump=${CUOBJDUMP:-$(dirname "$nvcc")/cuobjdump}
[ -x "$cuobjdump" ] || cuobjdump=$(command -v cuobjdump || true)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/old"
git -C "$root" archive "$rev" interpreter ir | tar -x -C "$tmp/old"
newtree=$root
if [ -n "${NEW_REV:-}" ]; then
  newtree=$tmp/new
  mkdir -p "$newtree"
  git -C "$root" archive "$NEW_REV" interpreter ir | tar -x -C "$newtree"
fi
llvm_inc=$(llvm-config-14 --includedir 2>/dev/null || echo /usr/lib/llvm-14/include)
if [ -n "$cuobjdump" ]; then what=SASS; else what=PTX; fi
listing() { # tree file out
  local flags=(-I"$1/interpreter/cuda" -I"$1/interpreter/include" -I"$1/ir/include"
    -isystem "$llvm_inc" -arch=sm_90 --fmad=false -std=c++17)
  # The kernel files are in interpreter/cuda/device/ since the backend's
  # split into lib/ and device/, in interpreter/cuda/ before.
  local src=$1/interpreter/cuda/device/$2
  [ -f "$src" ] || src=$1/interpreter/cuda/$2
  if [ "$what" = SASS ]; then
    "$nvcc" "${flags[@]}" -cubin "$src" -o "$tmp/x.cubin"
    "$cuobjdump" -sass "$tmp/x.cubin" | grep -E '^\s+/\*[0-9a-f]{4}\*/' |
      sed -E 's#/\*[0-9a-fx]*\*/##g; s/[[:space:]]+/ /g; s/ (0x[0-9a-f]+) ;/ T ;/' >"$3"
  else
    "$nvcc" "${flags[@]}" -ptx "$src" -o "$tmp/x.ptx"
    grep -vE '^\s*(//|$)' "$tmp/x.ptx" |
      sed -E 's/%(r|rd|f|fd|p|rs|h|hh)[0-9]+/%\1/g; s/\$L__[A-Za-z0-9_]+/L/g' >"$3"
  fi
}
status=0
for f in "${files[@]}"; do
  listing "$tmp/old" "$f" "$tmp/old.txt"
  listing "$newtree" "$f" "$tmp/new.txt"
  if cmp -s "$tmp/old.txt" "$tmp/new.txt"; then
    echo "$f: same $what ($(wc -l <"$tmp/new.txt") lines)"
  else
    diff "$tmp/old.txt" "$tmp/new.txt" >"$tmp/diff" || true
    echo "$f: $what differs: $(grep -c '^<' "$tmp/diff") lines only at $rev, $(grep -c '^>' "$tmp/diff") only now:"
    grep '^[<>]' "$tmp/diff" | sed -E 's/[[:space:]]+/ /g' | sort | uniq -c | sort -rn >"$tmp/counts"
    head -12 "$tmp/counts"
    status=1
  fi
done
exit $status
