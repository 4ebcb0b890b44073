#!/usr/bin/env bash
# The CUDA_COMPILER_LAUNCHER of CollCuda (interpreter/cuda/CMakeLists.txt):
#   nvcc-keep.sh OUTDIR NVCC ARGS... -o OBJ.o ...
# runs the build's own nvcc command, keeping what scripts/cuda-resources.sh
# reads so that CudaResources compiles nothing again: ptxas's report of the
# command (the build passes -Xptxas=-v) as OUTDIR/NAME.ptxas and the SASS
# cubin as OUTDIR/NAME.cubin, NAME being the object's name without `.o`
# (KernelsLL.cu). The report stays out of the build's log; anything else nvcc
# or ptxas prints (a warning) still reaches it, and all of it when the
# command fails.
set -uo pipefail
[ $# -ge 2 ] || { echo "nvcc-keep: usage: nvcc-keep.sh OUTDIR NVCC ARGS..." >&2; exit 2; }
outdir=$1
shift
obj= prev=
for a in "$@"; do
  [ "$prev" = -o ] && obj=$a
  prev=$a
done
[ -n "$obj" ] || exec "$@" # not a compile to an object: nothing to keep
name=$(basename "$obj" .o)
mkdir -p "$outdir"
keep=$(mktemp -d "$outdir/$name.keep.XXXXXX")
trap 'rm -rf "$keep"' EXIT
"$@" --keep --keep-dir "$keep" 2>"$outdir/$name.ptxas"
rc=$?
if [ $rc -ne 0 ]; then
  cat "$outdir/$name.ptxas" >&2
  exit $rc
fi
cubins=("$keep"/*.sm_*.cubin)
if [ ${#cubins[@]} -ne 1 ] || [ ! -f "${cubins[0]}" ]; then
  echo "nvcc-keep: expected one SASS cubin from $name, found: ${cubins[*]}" >&2
  exit 1
fi
mv "${cubins[0]}" "$outdir/$name.cubin"
grep -v -e '^ptxas info *:' -e '^ptxas info *: *Function properties' \
  -e '^ *[0-9]* bytes stack frame' -e '^ *Compile time =' "$outdir/$name.ptxas" >&2
exit 0
