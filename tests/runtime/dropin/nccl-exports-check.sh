#!/usr/bin/env bash
# nccl-exports-check.sh NCCL_H LIBCOLL_NCCL
# Every function nccl.h declares (nccl* and pnccl*) must be a defined,
# exported symbol of libcoll_nccl.so. The header is parsed here, with its
# comments stripped; no nccl.h: skipped (exit 77) with the reason.
set -euo pipefail
header=$1 lib=$2
if [[ ! -f $header ]]; then
  echo "SKIP: no nccl.h at $header"
  exit 77
fi
declared=$(gcc -fpreprocessed -dD -E -P -x c "$header" 2>/dev/null |
  grep -v '^#' | grep -oE '(^|[^A-Za-z0-9_])p?nccl[A-Za-z0-9_]*[[:space:]]*\(' |
  grep -oE 'p?nccl[A-Za-z0-9_]*' | sort -u)
count=$(echo "$declared" | wc -l)
if (( count < 40 )); then
  echo "FAIL: found only $count declarations in $header; the parser is broken"
  exit 1
fi
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ {print $3}' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
if [[ -n $missing ]]; then
  echo "FAIL: declared in $header but not exported by $lib:"
  echo "$missing"
  exit 1
fi
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
if [[ -n $extra ]]; then
  echo "FAIL: exported by $lib but not declared in $header:"
  echo "$extra"
  exit 1
fi
echo "ok: all $count functions of $header are exported"
