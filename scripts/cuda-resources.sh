#!/usr/bin/env bash
# What the GPU would run: per kernel, ptxas's resources for sm_90 and counts
# read from the SASS. No GPU needed.
#   scripts/cuda-resources.sh                   print the table
#   scripts/cuda-resources.sh --write FILE      record it (the expected figures)
#   scripts/cuda-resources.sh --check FILE      compare with FILE; exit 1 on a regression
# Options: --jobs N (parallel nvcc runs, default 2). --from-build DIR reads
# the reports and cubins the build kept in DIR (build/cuda-resources, by
# scripts/nvcc-keep.sh as the build compiles the kernels, with the same flags
# as below) and compiles nothing: the CudaResources test does so. --markdown
# FILE prints FILE's figures as the table of docs/CUDA.md and compiles
# nothing.
# Environment: NVCC (default: on PATH, else
# /usr/local/cuda/bin/nvcc), NVDISASM (default: beside nvcc, on PATH, else
# in the PyTorch environment of scripts/setup.sh, whose Triton ships one).
#
# Each kernel file of interpreter/cuda/device/ (KernelsSimple.cu,
# KernelsLL.cu, KernelsLL128.cu, AverageKernel.cu) is compiled once to a cubin with the build's device flags
# (sm_90, --fmad=false, C++17) plus -lineinfo and -Xptxas -v. Per entry
# function (kernel) it records:
#   regs, stack (bytes stack frame), spill_st, spill_ld, smem   from ptxas -v;
#   ldg128, stg128   128-bit global loads/stores (LDG.E.128*, STG.E.128*,
#                    LD.E.128*, ST.E.128*: the generic-address forms count too);
#   ldl, stl         local-memory loads/stores (LDL*, STL*) in the whole kernel;
#   sys              instructions of system scope (.SYS: strong loads and
#                    stores, MEMBAR.*.SYS): the volatile accesses of LL lines
#                    and of the watchdog's report in every kernel, and in the
#                    CrossGpu build (the last template argument true) the
#                    .sys acquires and releases of connections between GPUs
#                    (docs/CUDA.md, "Scopes");
#   hot_ld, hot_ld_red, hot_st, hot_local   Simple kernels only: in the 16-byte
#                    pack loop of `transform` (device/Reduce.h), located by the
#                    line information of the SASS (nvdisasm -gi): 128-bit loads
#                    of the first operand (copy and reduce), of the other
#                    operands (reduce only), 128-bit stores, and LDL/STL.
# An instruction belongs to the loop when any level of its inlining chain
# is a line of that loop; ptxas's line attribution is approximate (a spill
# may be attributed to a neighbouring line), so hot_local is a strong hint,
# and ldl/stl over the whole kernel is the exact count.
#
# --check fails when, for any kernel: it is missing from FILE or from the
# build (an unrecorded kernel); regs, stack, spill_st, spill_ld, smem, ldl or
# stl exceed the recorded figure; ldg128, stg128, hot_ld, hot_ld_red or
# hot_st fall below it (128-bit accesses lost); hot_local exceeds it; sys
# differs at all (a kernel within one GPU that gains a .sys access pays for
# it, a CrossGpu kernel that loses one is wrong between GPUs). Figures
# better than recorded are reported; re-record them with --write. Without
# nvdisasm the SASS columns are not checked, and the script says so.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=print file= jobs=2 markdown= from_build=
while [ $# -gt 0 ]; do
  case $1 in
  --write | --check)
    mode=${1#--}
    [ $# -ge 2 ] || { echo "cuda-resources: $1 needs a file" >&2; exit 2; }
    file=$2
    shift 2
    ;;
  --jobs)
    [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || { echo "cuda-resources: --jobs needs a positive number" >&2; exit 2; }
    jobs=$2
    shift 2
    ;;
  --from-build)
    [ $# -ge 2 ] || { echo "cuda-resources: --from-build needs a folder" >&2; exit 2; }
    from_build=$2
    shift 2
    ;;
  --markdown)
    [ $# -ge 2 ] && [ -r "$2" ] || { echo "cuda-resources: --markdown needs a readable recorded file" >&2; exit 2; }
    markdown=$2
    shift 2
    ;;
  -h | --help) sed -n '2,48p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "cuda-resources: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$markdown" ]; then # the table of docs/CUDA.md, from a recorded file; compiles nothing
  awk 'BEGIN { print "| kernel | regs | stack | spill st/ld | smem | LDG/STG.128 | LDL/STL | pack loop: LDG.128 first/other, STG.128, LDL+STL |"
               print "|---|---|---|---|---|---|---|---|" }
    /^#/ || NF == 0 { next }
    { delete v; for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      hot = ("hot_ld" in v) ? v["hot_ld"] "/" v["hot_ld_red"] ", " v["hot_st"] ", " v["hot_local"] : "–"
      printf "| `%s` | %s | %s | %s/%s | %s | %s/%s | %s/%s | %s |\n", $1, v["regs"], v["stack"], v["spill_st"], v["spill_ld"], v["smem"], v["ldg128"], v["stg128"], v["ldl"], v["stl"], hot }' "$markdown"
  exit 0
fi
if [ "$mode" = check ] && [ ! -r "$file" ]; then
  echo "cuda-resources: cannot read expected figures '$file'" >&2
  exit 2
fi

nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -n "$from_build" ] || [ -x "$nvcc" ] || { echo "cuda-resources: no nvcc at '$nvcc' (set NVCC)" >&2; exit 2; }
nvdisasm=${NVDISASM:-}
if [ -z "$nvdisasm" ]; then
  for c in "$(dirname "$nvcc")/nvdisasm" "$(command -v nvdisasm || true)" \
    "${XDG_CACHE_HOME:-$HOME/.cache}"/coll/torch-venv/lib/python3*/site-packages/triton/backends/nvidia/bin/nvdisasm; do
    if [ -n "$c" ] && [ -x "$c" ]; then nvdisasm=$c; break; fi
  done
elif [ ! -x "$nvdisasm" ]; then
  echo "cuda-resources: NVDISASM='$nvdisasm' is not executable" >&2
  exit 2
fi

kernel_src=$root/interpreter/cuda/device/Reduce.h
# The pack loop of transform(): from its `for` to the end of the function
# (the scalar head and tail come before it).
lineof() {
  local n
  n=$(grep -nF -- "$1" "$kernel_src" | head -1 | cut -d: -f1)
  [ -n "$n" ] || { echo "cuda-resources: '$1' not found in device/Reduce.h: update the markers in $0" >&2; exit 2; }
  echo "$n"
}
loop_first=$(lineof 'auto pass = [&](uint32_t first) {')
loop_last=$(awk -v from="$loop_first" 'NR > from && /^}/ { print NR - 1; exit }' "$kernel_src")
[ -n "$loop_last" ] || { echo "cuda-resources: the end of transform() not found in device/Reduce.h" >&2; exit 2; }
line_ld=$(lineof 'acc[u] = inPacks(0)[idx];')
line_ld_red=$(lineof 'P v = inPacks(k)[idx];')
line_st=$(lineof 'outPacks(j)[idx] = acc[u];')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
llvm_inc=$(llvm-config-14 --includedir 2>/dev/null || echo /usr/lib/llvm-14/include)
files=(KernelsSimple.cu KernelsLL.cu KernelsLL128.cu AverageKernel.cu)
if [ -n "$from_build" ]; then
  for f in "${files[@]}"; do
    for k in ptxas cubin; do
      [ -s "$from_build/$f.$k" ] || { echo "cuda-resources: no $from_build/$f.$k: build CollCuda first (its compile keeps it)" >&2; exit 2; }
      [ "$from_build/$f.$k" -nt "$root/interpreter/cuda/device/$f" ] ||
        { echo "cuda-resources: $from_build/$f.$k is older than $f: rebuild CollCuda" >&2; exit 2; }
      cp "$from_build/$f.$k" "$tmp/$f.$k"
    done
  done
else
  export nvcc root tmp llvm_inc
  printf '%s\n' "${files[@]}" | xargs -P "$jobs" -I{} sh -c '
    "$nvcc" -I"$root/interpreter/cuda" -I"$root/interpreter/include" -I"$root/ir/include" \
      -isystem "$llvm_inc" -arch=sm_90 --fmad=false -std=c++17 -lineinfo -Xptxas -v \
      -cubin "$root/interpreter/cuda/device/{}" -o "$tmp/{}.cubin" >"$tmp/{}.ptxas" 2>&1 ||
      { cat "$tmp/{}.ptxas" >&2; echo "cuda-resources: nvcc failed on {}" >&2; exit 255; }'
fi

# Resources: one line per entry function, "mangled regs stack spill_st spill_ld smem".
for f in "${files[@]}"; do
  awk '
    /Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); cur = substr($0, RSTART + 1, RLENGTH - 2); next }
    /Function properties for/ { prop = $NF; next }
    /bytes stack frame/ && prop == cur { st[cur] = $1; ss[cur] = $5; sl[cur] = $9; next }
    /Used [0-9]+ registers/ && cur != "" {
      match($0, /Used [0-9]+ registers/); r = substr($0, RSTART + 5, RLENGTH - 15)
      sm = 0; if (match($0, /[0-9]+ bytes smem/)) sm = substr($0, RSTART, RLENGTH - 11)
      print cur, r + 0, st[cur] + 0, ss[cur] + 0, sl[cur] + 0, sm + 0; cur = ""
    }' "$tmp/$f.ptxas"
done >"$tmp/res"
[ -s "$tmp/res" ] || { echo "cuda-resources: no kernel found in ptxas's output" >&2; exit 2; }

# SASS counts: "mangled ldg128 stg128 ldl stl hot_ld hot_ld_red hot_st hot_local".
have_sass=0
if [ -n "$nvdisasm" ]; then
  have_sass=1
  for f in "${files[@]}"; do
    "$nvdisasm" -gi -c "$tmp/$f.cubin" >"$tmp/$f.sass" ||
      { echo "cuda-resources: $nvdisasm failed on $f" >&2; exit 2; }
    awk -v first="$loop_first" -v last="$loop_last" -v lld="$line_ld" -v lred="$line_ld_red" \
      -v lst="$line_st" '
      function flush() { if (fn != "") print fn, a, b, c, d, h1, h2, h3, h4, sy }
      /^\.text\./ { flush(); fn = substr($1, 7); sub(/:$/, "", fn); a = b = c = d = h1 = h2 = h3 = h4 = sy = 0; inloop = 0; n = 0; next }
      /\/\/## File/ {
        if (!ingroup) { inloop = 0; n = 0; ingroup = 1 }
        # every level of the chain: File "X", line N [inlined at "Y", line M]
        s = $0
        while (match(s, /"[^"]*", line [0-9]+/)) {
          loc = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
          if (loc ~ /Reduce\.h"/) {
            ln = loc; sub(/.*line /, "", ln); ln += 0
            if (ln >= first && ln <= last) inloop = 1
            if (n == 0) inner = ln
          } else if (n == 0) inner = -1
          n++
        }
        next
      }
      /^ *\/\*[0-9a-f]+\*\// {
        ingroup = 0
        if (fn == "") next
        op = $0; sub(/^ *\/\*[0-9a-f]+\*\/ */, "", op); sub(/^@!?U?P[0-9T] */, "", op); split(op, w, /[ ;]/); op = w[1]
        wide = op ~ /^(LDG|LD)\.E\.128/ ? 1 : op ~ /^(STG|ST)\.E\.128/ ? 2 : 0
        loc = op ~ /^(LDL|STL)(\.|$)/
        if (wide == 1) a++; if (wide == 2) b++
        if (op ~ /^LDL(\.|$)/) c++; if (op ~ /^STL(\.|$)/) d++
        if (op ~ /\.SYS(\.|$)/) sy++
        if (inloop) {
          if (wide == 1 && inner == lld) h1++
          if (wide == 1 && inner == lred) h2++
          if (wide == 2 && inner == lst) h3++
          if (loc) h4++
        }
      }
      END { flush() }' "$tmp/$f.sass"
  done >"$tmp/sass"
fi

# Joined table, one line per kernel: "name key=value ...", sorted by name.
awk -v have_sass="$have_sass" '
  function pretty(m,   cmd, d) {
    cmd = "c++filt " m; cmd | getline d; close(cmd); sub(/^void /, "", d)
    gsub(/coll::interp::cuda::|coll::interp::/, "", d)
    sub(/\(Proto\)0/, "Simple", d); sub(/\(Proto\)1/, "LL", d); sub(/\(Proto\)2/, "LL128", d)
    sub(/\(.*$/, "", d); gsub(/, /, ",", d); gsub(/ /, "_", d); return d
  }
  FNR == NR && FILENAME ~ /sass$/ { s[$1] = "ldg128=" $2 " stg128=" $3 " ldl=" $4 " stl=" $5 " sys=" $10
                                    hot[$1] = " hot_ld=" $6 " hot_ld_red=" $7 " hot_st=" $8 " hot_local=" $9; next }
  {
    line = pretty($1) " regs=" $2 " stack=" $3 " spill_st=" $4 " spill_ld=" $5 " smem=" $6
    if (have_sass == 1) { line = line " " s[$1]; if ($1 ~ /ProtoE0E/) line = line hot[$1] }
    print line
  }' $([ $have_sass = 1 ] && echo "$tmp/sass") "$tmp/res" | sort >"$tmp/table"

if [ "$mode" = print ]; then
  cat "$tmp/table"
fi
[ "$have_sass" = 1 ] || echo "cuda-resources: SASS not checked: no nvdisasm (set NVDISASM); resources only" >&2

case $mode in
write)
  { echo "# Per-kernel ptxas resources and SASS counts, sm_90: scripts/cuda-resources.sh --write $(basename "$file")"
    echo "# (nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')). Checked by the cuda-build test; see docs/CUDA.md."
    cat "$tmp/table"; } >"$file"
  echo "cuda-resources: wrote $(wc -l <"$tmp/table") kernels to $file"
  ;;
check)
  awk -v have_sass="$have_sass" '
    function parse(line, arr,   i, f, kv) { split(line, f, " "); for (i = 2; i in f; i++) { split(f[i], kv, "="); arr[f[1] SUBSEP kv[1]] = kv[2] + 0; keys[kv[1]] = 1 } }
    /^#/ || NF == 0 { next }
    FNR == NR { exp_[$1] = 1; parse($0, e); next }
    { got[$1] = 1; parse($0, g) }
    END {
      bad = 0; better = 0
      split("regs stack spill_st spill_ld smem ldl stl hot_local", up, " ")
      split("ldg128 stg128 hot_ld hot_ld_red hot_st", down, " ")
      for (k in exp_) if (!(k in got)) { print "FAIL " k ": recorded but not built"; bad++ }
      for (k in got) {
        if (!(k in exp_)) { print "FAIL " k ": not recorded (re-record with --write)"; bad++; continue }
        for (i in up) { x = up[i]; if (!((k SUBSEP x) in e) || !((k SUBSEP x) in g)) continue
          if (g[k SUBSEP x] > e[k SUBSEP x]) { print "FAIL " k ": " x " " g[k SUBSEP x] " > recorded " e[k SUBSEP x]; bad++ }
          else if (g[k SUBSEP x] < e[k SUBSEP x]) { print "better " k ": " x " " g[k SUBSEP x] " < recorded " e[k SUBSEP x]; better++ } }
        for (i in down) { x = down[i]; if (!((k SUBSEP x) in e)) continue
          if (!((k SUBSEP x) in g)) { if (have_sass == 1) { print "FAIL " k ": " x " missing"; bad++ }; continue }
          if (g[k SUBSEP x] < e[k SUBSEP x]) { print "FAIL " k ": " x " " g[k SUBSEP x] " < recorded " e[k SUBSEP x] " (128-bit accesses lost)"; bad++ }
          else if (g[k SUBSEP x] > e[k SUBSEP x]) { print "better " k ": " x " " g[k SUBSEP x] " > recorded " e[k SUBSEP x]; better++ } }
        x = "sys"
        if (((k SUBSEP x) in e) && ((k SUBSEP x) in g) && g[k SUBSEP x] != e[k SUBSEP x]) {
          print "FAIL " k ": " x " " g[k SUBSEP x] " != recorded " e[k SUBSEP x] " (instructions of system scope changed)"; bad++ }
        if (have_sass == 1 && ((k SUBSEP x) in e) && !((k SUBSEP x) in g)) { print "FAIL " k ": sys missing"; bad++ }
      }
      n = 0; for (k in got) n++
      if (bad) { print "cuda-resources: " bad " regression(s) in " n " kernels"; exit 1 }
      print "cuda-resources: " n " kernels as recorded or better" (better ? " (" better " figures better: re-record with --write)" : "")
    }' "$file" "$tmp/table"
  ;;
esac
