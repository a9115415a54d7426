#!/usr/bin/env bash
# The AVX2/AVX-512 units are compiled with wider -m flags than the rest of the binary. Any
# external or weak (inline, template) symbol they define could be picked by the linker for code
# that runs on CPUs without those instructions, so each must define exactly its table getter.
set -euo pipefail
status=0
found=0
for obj in "$@"; do
  case "$obj" in
    *kernels_avx2*|*kernels_avx512*) ;;
    *) continue ;;
  esac
  found=$((found + 1))
  syms=$(nm -C --defined-only -g "$obj" | awk '{ $1 = ""; $2 = ""; sub(/^ +/, ""); print }')
  count=$(printf '%s\n' "$syms" | grep -c . || true)
  if [[ $count -ne 1 || ! $syms =~ ^reccl::reduce::avx(2|512)Kernels\(\)$ ]]; then
    echo "$obj exports more than its table getter:" >&2
    printf '  %s\n' "$syms" >&2
    status=1
  fi
done
[[ $found -eq 2 ]] || { echo "expected the avx2 and avx512 objects, found $found" >&2; exit 1; }
exit $status
