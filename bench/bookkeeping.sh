#!/usr/bin/env bash
# Zero-fault cost of the failover bookkeeping, on one fresh 2-host testbed:
#  1. CPU time (the primary figure): user + sys CPU of both ranks (getrusage in
#     bin/failover_worker, WORKER_CPU=1) for the same allreduce work (ITERS calls of SIZE, after
#     the set-up has settled), RECCL_FAILOVER=1 vs 0 in CPU_ROUNDS interleaved rounds (the order
#     flips every round, so a drift in the machine's load hits both sides). Per round ratio =
#     cpu on / cpu off; cost = median ratio - 1, with min/max, a distribution-free 95 % confidence
#     interval of the median (order statistics, as the sign test has it) and the sign test's
#     p-value (rounds with ratio > 1 vs < 1). The cost is below 3 % with 95 % confidence when
#     the interval's upper end is below 1.03. CPU time does not swing with the machine's load the
#     way wall-clock ratios do on a shared VM (+-20 % round to round).
#  2. time: reccl-bench allreduce (SIZE, all rails, one rank per host) with RECCL_FAILOVER=1 and 0,
#     interleaved the same way, ROUNDS rounds (0: skipped); ratio = busbw on / busbw off, with the
#     same statistics; cost = 1 - median ratio.
#  3. wire: bytes the rail devices of host 0 sent per allreduce, from their counters, taken from
#     two runs that differ only in -n (so set-up, warm-up and the result check cancel out),
#     against the payload a rank of a 2-rank ring sends (S per call), beside the overhead the
#     channel layer adds by construction (64-byte step header per step, 24-byte ack per step).
#  4. idle CPU: CPU time per second of an idle communicator (connections up, no collective) with
#     failover on (default detector, and RECCL_DETECTOR=none) and off, from getrusage in the test
#     worker (bin/ccl_test_worker, WORKER_IDLE_MS): the machinery's own load.
# The load average at start and end is recorded: compare figures taken at similar load only.
#
#   sudo bench/bookkeeping.sh --build build --out bookkeeping.json
#   sudo bench/bookkeeping.sh --cpu-rounds 24 --rounds 0 --no-wire --no-idle   # CPU A/B only
#   sudo bench/bookkeeping.sh --rounds 7 --iters 10 --size 64M --nics rail
#
# Needs root (network namespaces), jq, and in the build's bin/: reccl, reccl-bench.
# Exit: 0 done, 1 a step failed, 64 usage, 77 not root / a tool missing.
set -euo pipefail

BUILD=build
RAILS=2
ROUNDS=6
CPU_ROUNDS=16
ITERS=10
WIRE=1
IDLE=1
SIZE=64M
NICS=rail
OUT=bookkeeping.json
NAME="bk$$"

usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --rails) RAILS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --cpu-rounds) CPU_ROUNDS="$2"; shift 2 ;;
    --no-wire) WIRE=0; shift ;;
    --no-idle) IDLE=0; shift ;;
    --iters) ITERS="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --nics) NICS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --name) NAME="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bookkeeping.sh: unknown argument $1 (try --help)" >&2; exit 64 ;;
  esac
done
[[ "$RAILS" =~ ^[1-8]$ ]] || { echo "bookkeeping.sh: --rails: 1-8, got $RAILS" >&2; exit 64; }
[[ "$ROUNDS" =~ ^[0-9]+$ ]] || { echo "bookkeeping.sh: --rounds: a number, got $ROUNDS" >&2; exit 64; }
[[ "$CPU_ROUNDS" =~ ^[0-9]+$ ]] || { echo "bookkeeping.sh: --cpu-rounds: a number, got $CPU_ROUNDS" >&2; exit 64; }
[[ "$ITERS" =~ ^[1-9][0-9]*$ ]] || { echo "bookkeeping.sh: --iters: a positive number, got $ITERS" >&2; exit 64; }

BIN="$(cd "$BUILD/bin" 2>/dev/null && pwd)" || { echo "bookkeeping.sh: --build: no $BUILD/bin" >&2; exit 64; }
for tool in "$BIN/reccl" "$BIN/reccl-bench"; do
  [[ -x "$tool" ]] || { echo "bookkeeping.sh: missing $tool (build it first)" >&2; exit 77; }
done
command -v jq >/dev/null || { echo "bookkeeping.sh: jq not installed (scripts/setup.sh)" >&2; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "bookkeeping.sh: needs root for the testbed's namespaces" >&2; exit 77; }
RECCL="$BIN/reccl"
# SIZE in bytes (reccl-bench's suffixes K, M, G) -> float elements for the CPU runs.
case "$SIZE" in
  *[Kk]) SIZE_BYTES=$((${SIZE%?} * 1024)) ;;
  *[Mm]) SIZE_BYTES=$((${SIZE%?} * 1024 * 1024)) ;;
  *[Gg]) SIZE_BYTES=$((${SIZE%?} * 1024 * 1024 * 1024)) ;;
  *) SIZE_BYTES=$SIZE ;;
esac
[[ "$SIZE_BYTES" =~ ^[1-9][0-9]*$ ]] || { echo "bookkeeping.sh: --size: bytes with K/M/G, got $SIZE" >&2; exit 64; }
COUNT=$((SIZE_BYTES / 4))
CPU_WORKER="$BIN/failover_worker"
[[ -x "$CPU_WORKER" ]] || echo "bookkeeping.sh: no $CPU_WORKER: CPU-time A/B not measured" >&2

WORK="$(mktemp -d /tmp/reccl-bookkeeping.XXXXXX)"
cleanup() {
  local rc=$?
  "$RECCL" testbed down --name "$NAME" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '== %s\n' "$*" >&2; }

step "testbed $NAME: 2 hosts x $RAILS rails"
"$RECCL" testbed up --name "$NAME" --hosts 2 --rails "$RAILS" >&2
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# Sum of tx bytes of host 0's rail devices (rtnetlink counters, so no sysfs remount needed).
railTx() {
  "$RECCL" testbed exec --name "$NAME" --host 0 -- ip -j -s link show |
    jq '[.[] | select(.ifname | startswith("rail")) | .stats64.tx.bytes] | add'
}

# run TAG FAILOVER ITERS: one reccl-bench run, rank 0's JSON left in $WORK/TAG.json.
run() {
  local tag="$1" fo="$2" iters="$3"
  RECCL_FAILOVER="$fo" RECCL_NICS="$NICS" "$RECCL" testbed run --name "$NAME" --timeout 600 -- \
    "$BIN/reccl-bench" -b "$SIZE" -e "$SIZE" -n "$iters" -w 2 --json "$WORK/$tag.json" >"$WORK/$tag.log" 2>&1 || {
    cat "$WORK/$tag.log" >&2
    echo "bookkeeping.sh: $tag failed" >&2
    return 1
  }
  [[ $(jq '.out_of_bounds' "$WORK/$tag.json") -eq 0 ]] || { echo "bookkeeping.sh: $tag: wrong elements" >&2; return 1; }
}

# runCpu TAG FAILOVER: CPU microseconds of both ranks for ITERS allreduces of SIZE, into $WORK/TAG.cpu.
runCpu() {
  local tag="$1" fo="$2"
  WORKER_CPU=1 WORKER_ITERS="$ITERS" WORKER_COUNT="$COUNT" RECCL_FAILOVER="$fo" RECCL_NICS="$NICS" \
    "$RECCL" testbed run --name "$NAME" --timeout 600 -- "$CPU_WORKER" >"$WORK/$tag.log" 2>&1 || {
    cat "$WORK/$tag.log" >&2
    echo "bookkeeping.sh: $tag failed" >&2
    return 1
  }
  local lines
  lines=$(grep -c 'cpu rank [0-9]* calls' "$WORK/$tag.log" || true)
  [[ "$lines" -eq 2 ]] || { cat "$WORK/$tag.log" >&2; echo "bookkeeping.sh: $tag: $lines of 2 ranks reported CPU" >&2; return 1; }
  sed -n 's/.*cpu rank [0-9]* calls [0-9]* cpu_us \([0-9]*\) wall_us.*/\1/p' "$WORK/$tag.log" |
    awk '{ s += $1 } END { print s }' >"$WORK/$tag.cpu"
}

# Interleaved A/B rounds: the order flips every round.
orderOf() { if (($1 % 2 == 0)); then echo "1 0"; else echo "0 1"; fi; }

CPU_JSON="$WORK/cpu.jsonl"
: >"$CPU_JSON"
[[ -x "$CPU_WORKER" ]] || CPU_ROUNDS=0
for ((i = 0; i < CPU_ROUNDS; ++i)); do
  read -r -a order <<<"$(orderOf "$i")"
  for fo in "${order[@]}"; do
    step "CPU round $((i + 1))/$CPU_ROUNDS: RECCL_FAILOVER=$fo"
    runCpu "c$i-f$fo" "$fo"
  done
  jq -n -c --argjson i "$i" --arg first "${order[0]}" --argjson on "$(cat "$WORK/c$i-f1.cpu")" \
    --argjson off "$(cat "$WORK/c$i-f0.cpu")" --arg load "$(cut -d' ' -f1 /proc/loadavg)" \
    '{round: $i, first: ("RECCL_FAILOVER=" + $first), cpu_us_on: $on, cpu_us_off: $off, ratio: ($on / $off),
      load_average_1m: ($load | tonumber)}' >>"$CPU_JSON"
  tail -1 "$CPU_JSON" >&2
done

ROUNDS_JSON="$WORK/rounds.jsonl"
: >"$ROUNDS_JSON"
for ((i = 0; i < ROUNDS; ++i)); do
  read -r -a order <<<"$(orderOf "$i")"
  for fo in "${order[@]}"; do
    step "busbw round $((i + 1))/$ROUNDS: RECCL_FAILOVER=$fo"
    run "r$i-f$fo" "$fo" "$ITERS"
  done
  jq -n -c --argjson i "$i" --arg first "${order[0]}" \
    --slurpfile on "$WORK/r$i-f1.json" --slurpfile off "$WORK/r$i-f0.json" '
    {round: $i, first: ("RECCL_FAILOVER=" + $first),
     on: {in_place: $on[0].rows[0].in_place.busbw_gbps, out_of_place: $on[0].rows[0].out_of_place.busbw_gbps},
     off: {in_place: $off[0].rows[0].in_place.busbw_gbps, out_of_place: $off[0].rows[0].out_of_place.busbw_gbps}}
    | .ratio_in_place = (.on.in_place / .off.in_place)
    | .ratio_out_of_place = (.on.out_of_place / .off.out_of_place)' >>"$ROUNDS_JSON"
  tail -1 "$ROUNDS_JSON" >&2
done

# Wire bytes per allreduce: two runs differing by DELTA iterations of both rows (out of place and
# in place), so DELTA*2 allreduce calls more; everything else is equal and cancels.
SHORT=2
DELTA=10
t0=0 t1=0 t2=0
echo '{"rows": [{"size_bytes": 0}]}' >"$WORK/wire-long.json"
if ((WIRE)); then
  step "wire: -n $SHORT and -n $((SHORT + DELTA)), RECCL_FAILOVER=1"
  t0=$(railTx); run wire-short 1 "$SHORT"; t1=$(railTx)
  run wire-long 1 $((SHORT + DELTA)); t2=$(railTx)
fi

# Idle CPU per rank (microseconds of CPU per second of wall time), 8 s idle per variant.
IDLE_JSON="$WORK/idle.jsonl"
: >"$IDLE_JSON"
if ((IDLE == 0)); then
  :
elif [[ -x "$BIN/ccl_test_worker" ]]; then
  for variant in "1 auto" "1 none" "0 auto"; do
    read -r fo det <<<"$variant"
    step "idle: RECCL_FAILOVER=$fo RECCL_DETECTOR=$det"
    WORKER_IDLE_MS=8000 RECCL_FAILOVER="$fo" RECCL_DETECTOR="$det" RECCL_NICS="$NICS" \
      "$RECCL" testbed run --name "$NAME" --timeout 120 -- "$BIN/ccl_test_worker" >"$WORK/idle.log" 2>&1 || {
      cat "$WORK/idle.log" >&2
      echo "bookkeeping.sh: idle run failed" >&2
      exit 1
    }
    sed -n 's/.*idle rank \([0-9]*\) cpu_us .* cpu_per_s_us \([0-9.]*\).*/\1 \2/p' "$WORK/idle.log" |
      jq -R -c --arg fo "$fo" --arg det "$det" 'split(" ") | {failover: ($fo == "1"), detector: $det,
        rank: (.[0] | tonumber), cpu_us_per_s: (.[1] | tonumber)}' >>"$IDLE_JSON"
  done
else
  echo "bookkeeping.sh: no $BIN/ccl_test_worker: idle CPU not measured" >&2
fi
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

jq -n --arg size "$SIZE" --arg nics "$NICS" --argjson rails "$RAILS" --argjson iters "$ITERS" \
  --arg load_start "$LOAD_START" --arg load_end "$LOAD_END" \
  --argjson short_tx $((t1 - t0)) --argjson long_tx $((t2 - t1)) --argjson delta "$DELTA" --argjson wire "$WIRE" \
  --slurpfile rounds "$ROUNDS_JSON" --slurpfile cpu "$CPU_JSON" \
  --slurpfile wl "$WORK/wire-long.json" --slurpfile idle "$IDLE_JSON" '
  def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
                     else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  # P(X <= j), X ~ Binomial(n, 1/2)
  def bcdf($n; $j): if $j < 0 then 0 else
    reduce range(0; $j + 1) as $k ({c: 1, s: 0}; .s += .c | .c = .c * ($n - $k) / ($k + 1)) | .s / pow(2; $n) end;
  # Per-round ratios -> median, min, max, the distribution-free 95 % interval of the median
  # (order statistics j and n-j+1, the sign test`s interval) and the sign test against 1.
  def stats: sort as $x | ($x | length) as $n
    | if $n == 0 then null else
      ([range(1; $n + 1) | select(bcdf($n; . - 1) <= 0.025)] | max) as $j
      | ($x | map(select(. > 1)) | length) as $up | ($x | map(select(. < 1)) | length) as $down
      | {n: $n, median: ($x | median), min: $x[0], max: $x[$n - 1],
         ci95: (if $j == null then null
                else {low: $x[$j - 1], high: $x[$n - $j], coverage: (1 - 2 * bcdf($n; $j - 1))} end),
         rounds_above_1: $up, rounds_below_1: $down,
         sign_test_p: ([1, 2 * bcdf($up + $down; ([$up, $down] | min))] | min)} end;
  ($wl[0].rows[0].size_bytes) as $bytes
  | 524288 as $chunk
  | {
      date: (now | todate), testbed: {hosts: 2, rails: $rails, nics: $nics}, size: $size, iters: $iters,
      load_average_start: $load_start, load_average_end: $load_end,
      cpu_rounds: $cpu,
      cpu_ratio: ($cpu | map(.ratio) | stats),
      cpu_note: "user+sys CPU of both ranks for the same allreduce calls (failover_worker WORKER_CPU=1), on / off",
      rounds: $rounds,
      busbw_ratio_in_place: ($rounds | map(.ratio_in_place) | stats),
      busbw_ratio_out_of_place: ($rounds | map(.ratio_out_of_place) | stats),
      median_busbw_gbps: {on: ($rounds | map(.on.in_place) | median), off: ($rounds | map(.off.in_place) | median)},
      wire: (if $wire == 0 then null else {
        payload_bytes_per_call: $bytes,
        rail_tx_bytes_per_call: (($long_tx - $short_tx) / ($delta * 2)),
        rail_tx_over_payload: (($long_tx - $short_tx) / ($delta * 2) / $bytes),
        computed_channel_overhead: ((64 + 24) / $chunk),
        computed_note: "64-byte step header per step + 24-byte ack per step, default 512 KiB chunks"
      } end),
      idle_cpu_us_per_s: $idle
    }
  | .cost_cpu = (if .cpu_ratio != null then .cpu_ratio.median - 1 else null end)
  | .cost_cpu_ci95_high = (if .cpu_ratio.ci95 != null then .cpu_ratio.ci95.high - 1 else null end)
  | .cost_in_place = (if .busbw_ratio_in_place != null then 1 - .busbw_ratio_in_place.median else null end)
  | .cost_out_of_place = (if .busbw_ratio_out_of_place != null then 1 - .busbw_ratio_out_of_place.median else null end)' >"$OUT"

jq -r '
  def pct: . * 1000 | round / 10;
  def r3: . * 1000 | round / 1000;
  def line($s): "median \($s.median | r3), min \($s.min | r3), max \($s.max | r3), 95 % CI of the median " +
    (if $s.ci95 != null then "[\($s.ci95.low | r3), \($s.ci95.high | r3)]" else "(too few rounds)" end) +
    ", sign test \($s.rounds_above_1) above / \($s.rounds_below_1) below 1, p \($s.sign_test_p * 1000 | round / 1000)";
  "",
  "allreduce \(.size) x \(.iters) calls, 2 hosts x \(.testbed.rails) rails (RECCL_NICS=\(.testbed.nics))",
  (.cpu_rounds[] | "  CPU round \(.round + 1) (\(.first) first): on \(.cpu_us_on / 1000 | round) off \(.cpu_us_off / 1000 | round) ms, ratio \(.ratio | r3) (load \(.load_average_1m))"),
  (if .cpu_ratio != null then
     "CPU time on/off over \(.cpu_ratio.n) rounds: \(line(.cpu_ratio))",
     "zero-fault cost, CPU time: \(.cost_cpu | pct) %\(if .cost_cpu_ci95_high != null then " (95 % upper bound \(.cost_cpu_ci95_high | pct) %)" else "" end)   (goal <= 3 %)"
   else "CPU time: not measured" end),
  (.rounds[] | "  busbw round \(.round + 1) (\(.first) first): on \(.on.in_place | r3) off \(.off.in_place | r3) GB/s in place, ratio \(.ratio_in_place | r3); out of place ratio \(.ratio_out_of_place | r3)"),
  (if .busbw_ratio_in_place != null then
     "busbw on/off in place: \(line(.busbw_ratio_in_place))",
     "busbw on/off out of place: \(line(.busbw_ratio_out_of_place))",
     "zero-fault cost, wall clock (busbw): in place \(.cost_in_place | pct) %, out of place \(.cost_out_of_place | pct) %"
   else empty end),
  (if .wire != null then
     "wire: host 0 rail tx \(.wire.rail_tx_bytes_per_call | round) B per call for \(.wire.payload_bytes_per_call) B payload: x\(.wire.rail_tx_over_payload * 100000 | round / 100000)",
     "      step headers + acks by construction: \(.wire.computed_channel_overhead * 100 * 1000 | round / 1000) % of payload"
   else empty end),
  (.idle_cpu_us_per_s[] | "idle CPU: failover \(if .failover then "on " else "off" end) detector \(.detector): rank \(.rank) \(.cpu_us_per_s / 1000 * 10 | round / 10) ms CPU per s"),
  "load average: start \(.load_average_start), end \(.load_average_end)"' "$OUT"
echo "written: $OUT" >&2
