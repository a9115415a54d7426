#!/usr/bin/env bash
# expect_line.sh REGEX COMMAND...: runs COMMAND (a lab.sh run), its output passed through; then
# fails unless that output, every VM's, has a line matching the extended regular expression
# REGEX. COMMAND's own failure (or skip, 77) is the result as it is. For checks that any of the
# hosts may satisfy (which rank's detector found a fault is a race between them).
set -uo pipefail
[[ $# -ge 2 ]] || { echo "usage: expect_line.sh REGEX COMMAND..." >&2; exit 64; }
re=$1
shift
out=$(mktemp /tmp/reccl-expect-line.XXXXXX)
trap 'rm -f "$out"' EXIT
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
((rc == 0)) || exit "$rc"
grep -Eq -- "$re" "$out" && exit 0
echo "expect_line: no line of the output matches '$re'"
exit 1
