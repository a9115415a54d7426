#!/usr/bin/env bash
# tmp_tree_test.sh LAB_SH PROGRAM: a program whose shared library lies under /tmp (a build tree
# there) runs in the lab: lab.sh copies the library to its host path in the image, and the guest's
# tmpfs on /tmp must keep it. PROGRAM must link libreccl.so; the library is copied to a fresh
# folder under /tmp and found there through LD_LIBRARY_PATH, on the host (ldd, which picks what
# lab.sh copies) and in the guest.
# Exits 77 when lab.sh skips (no qemu, no kernel).
set -uo pipefail
[[ $# -eq 2 && -x $1 && -x $2 ]] || { echo "usage: tmp_tree_test.sh LAB_SH PROGRAM" >&2; exit 64; }
lab=$1 prog=$2
lib=$(ldd "$prog" | awk '$1 ~ /^libreccl\.so/ && $3 ~ /^\// { print $3 }')
[[ -n $lib ]] || { echo "tmp_tree_test: $prog does not link libreccl.so" >&2; exit 1; }
dir=$(mktemp -d /tmp/reccl-lab-tree.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp -L "$lib" "$dir/"
[[ $(LD_LIBRARY_PATH=$dir ldd "$prog" | awk '$1 ~ /^libreccl\.so/ { print $3 }') == "$dir/"* ]] ||
  { echo "tmp_tree_test: ldd does not pick the copy under $dir" >&2; exit 1; }
name=$(basename "$prog")
LD_LIBRARY_PATH=$dir "$lab" run --timeout 60 --bin "$prog" -- \
  sh -c "LD_LIBRARY_PATH=$dir $name --help >/dev/null && echo '@@ran from $dir'" >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[[ $rc -eq 77 ]] && exit 77
[[ $rc -eq 0 ]] && grep -q "@@ran from $dir" "$dir/out" || { echo "tmp_tree_test: FAILED (lab.sh exit $rc)"; exit 1; }
echo "tmp_tree_test: ok"
