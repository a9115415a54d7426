#!/usr/bin/env bash
# reccl against reccl: the same reccl-bench sweep from two builds (A, the baseline, and B, the
# change) on one fresh 2-host testbed, in interleaved rounds (A then B, B then A the next round,
# so a drift in the machine's load hits both). Per size the ratio B time / A time is taken within
# a round; the report gives its median over rounds with the range, for in place and out of place,
# and names the sizes where B is slower by more than --tolerance at the median.
#
#   sudo bench/ab.sh --a build-main --b build --out ab.json                  # 8 B .. 1 MiB, all rails
#   sudo bench/ab.sh --a build-main --b build --nics =rail0 -b 8 -e 64M --rounds 7
#   sudo bench/ab.sh --a build-main --b build --coll sendrecv -b 64K -e 16M -f 4   # another collective
#
# Needs root (network namespaces), jq, and reccl + reccl-bench in both builds' bin/ (the testbed
# is made with A's reccl).
# Exit: 0 done (B slower or not: read the report), 1 a step failed or a result was wrong, 64 usage,
# 77 not root / a tool missing.
set -euo pipefail

A=""
B=""
COLL=allreduce
ROUNDS=5
MIN=8
MAX=1M
FACTOR=8
ITERS=200
WARMUP=20
NICS=rail
TOLERANCE=0.05
OUT=ab.json
NAME="ab$$"

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --a) A="$2"; shift 2 ;;
    --b) B="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    -b) MIN="$2"; shift 2 ;;
    -e) MAX="$2"; shift 2 ;;
    -f) FACTOR="$2"; shift 2 ;;
    -n|--iters) ITERS="$2"; shift 2 ;;
    -w) WARMUP="$2"; shift 2 ;;
    --nics) NICS="$2"; shift 2 ;;
    --coll) COLL="$2"; shift 2 ;;
    --tolerance) TOLERANCE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --name) NAME="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "ab.sh: unknown argument $1 (try --help)" >&2; exit 64 ;;
  esac
done
[[ -n "$A" && -n "$B" ]] || { echo "ab.sh: --a and --b (two build directories) are needed" >&2; exit 64; }
[[ "$ROUNDS" =~ ^[1-9][0-9]?$ ]] || { echo "ab.sh: --rounds: 1-99, got $ROUNDS" >&2; exit 64; }
[[ "$ITERS" =~ ^[1-9][0-9]*$ ]] || { echo "ab.sh: --iters: a positive number, got $ITERS" >&2; exit 64; }
[[ "$WARMUP" =~ ^[0-9]+$ ]] || { echo "ab.sh: -w: a number, got $WARMUP" >&2; exit 64; }
[[ "$FACTOR" =~ ^[2-9]$|^[1-9][0-9]+$ ]] || { echo "ab.sh: -f: an integer factor >= 2, got $FACTOR" >&2; exit 64; }
[[ "$TOLERANCE" =~ ^0?\.[0-9]+$ ]] || { echo "ab.sh: --tolerance: a fraction below 1, got $TOLERANCE" >&2; exit 64; }
declare -A BIN
for side in A B; do
  dir=${!side}
  BIN[$side]="$(cd "$dir/bin" 2>/dev/null && pwd)" || { echo "ab.sh: --${side,,}: no $dir/bin" >&2; exit 64; }
  for tool in reccl reccl-bench; do
    [[ -x "${BIN[$side]}/$tool" ]] || { echo "ab.sh: missing ${BIN[$side]}/$tool (build it first)" >&2; exit 77; }
  done
done
command -v jq >/dev/null || { echo "ab.sh: jq not installed (scripts/setup.sh)" >&2; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "ab.sh: needs root for the testbed's namespaces" >&2; exit 77; }
RECCL="${BIN[A]}/reccl"

WORK="$(mktemp -d /tmp/reccl-ab.XXXXXX)"
cleanup() {
  local rc=$?
  "$RECCL" testbed down --name "$NAME" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
step() { printf '== %s\n' "$*" >&2; }

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
step "testbed $NAME: 2 hosts x 2 rails; load $LOAD_START"
"$RECCL" testbed up --name "$NAME" --hosts 2 --rails 2 >&2

sweep() {
  local side="$1" round="$2" tag="$1-r$2"
  step "round $round: $side (${!side})"
  RECCL_NICS="$NICS" "$RECCL" testbed run --name "$NAME" --timeout 600 -- \
    "${BIN[$side]}/reccl-bench" --coll "$COLL" -b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" \
    --json "$WORK/$tag.json" >"$WORK/$tag.log" 2>&1 || {
    cat "$WORK/$tag.log" >&2
    echo "ab.sh: $tag failed" >&2
    return 1
  }
}
for ((round = 1; round <= ROUNDS; ++round)); do
  if ((round % 2 == 1)); then sweep A "$round"; sweep B "$round"; else sweep B "$round"; sweep A "$round"; fi
done
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

files=()
for ((round = 1; round <= ROUNDS; ++round)); do files+=("$WORK/A-r$round.json" "$WORK/B-r$round.json"); done
jq -s --arg a "$A" --arg b "$B" --arg coll "$COLL" --arg nics "$NICS" --argjson tol "$TOLERANCE" \
  --arg load_start "$LOAD_START" --arg load_end "$LOAD_END" '
  def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  # [[A round 1, B round 1], [A round 2, B round 2], ...]
  [range(0; length; 2) as $i | [.[$i], .[$i + 1]]] as $pairs
  | ($pairs[0][0].rows | map(.size_bytes)) as $sizes
  | {
      date: (now | todate), a: $a, b: $b, coll: $coll, nics: $nics, rounds: ($pairs | length), tolerance: $tol,
      load: {start: $load_start, end: $load_end},
      sizes: [$sizes[] as $s | {size: $s}
        + ([["in_place", "out_of_place"][] as $k
            | select($pairs[0][0].rows[0][$k] != null)  # sendrecv has no in-place time
            | ($pairs | map((.[1].rows[] | select(.size_bytes == $s) | .[$k].time_us)
                             / (.[0].rows[] | select(.size_bytes == $s) | .[$k].time_us))) as $r
            | {key: $k, value: {b_over_a_time: ($r | med), min: ($r | min), max: ($r | max),
                                a_time_us: ($pairs | map(.[0].rows[] | select(.size_bytes == $s) | .[$k].time_us) | med)}}]
           | from_entries)],
      wrong: (map(.out_of_bounds) | add)
    }
  | .slower = [.sizes[] | select(.in_place.b_over_a_time > 1 + $tol or .out_of_place.b_over_a_time > 1 + $tol) | .size]' \
  "${files[@]}" >"$OUT"

jq -r '
  def r3: . * 1000 | round / 1000;
  "",
  "\(.coll): B time / A time per size, median of \(.rounds) interleaved rounds (range), RECCL_NICS=\(.nics); load \(.load.start) -> \(.load.end)",
  "  A: \(.a)   B: \(.b)",
  (.sizes[] | "  \(.size | tostring | (" " * (10 - length)) + .) B   out of place \(.out_of_place.b_over_a_time | r3) (\(.out_of_place.min | r3)-\(.out_of_place.max | r3))\(if .in_place then "   in place \(.in_place.b_over_a_time | r3) (\(.in_place.min | r3)-\(.in_place.max | r3))" else "" end)   A \(.out_of_place.a_time_us | round) us"),
  (if (.slower | length) == 0 then "no size slower by more than \(.tolerance * 100 | round) % at the median"
   else "slower by more than \(.tolerance * 100 | round) % at the median: \(.slower | map(tostring) | join(", ")) B" end),
  "wrong elements: \(.wrong)"' "$OUT"
echo "written: $OUT" >&2
[[ $(jq .wrong "$OUT") -eq 0 ]]
