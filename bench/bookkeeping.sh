#!/usr/bin/env bash
# Zero-fault cost of the failover bookkeeping, on one fresh 2-host testbed:
#  1. time: reccl-bench allreduce (64 MiB, all rails, one rank per host) with RECCL_FAILOVER=1
#     (monitor thread, link detector, TCP_INFO stall checks, keepalive) and RECCL_FAILOVER=0 (none
#     of them), interleaved A/B (the order flips every round, so a drift in the machine's load
#     hits both sides); per round ratio = busbw on / busbw off; cost = 1 - median ratio.
#  1b. CPU time, in the same interleaved rounds: user + sys CPU of both ranks (getrusage in
#     bin/failover_worker, WORKER_CPU=1) for the same allreduce work (ITERS calls of SIZE, after
#     the set-up has settled), failover on vs off; cost = median(cpu on / cpu off) - 1. CPU time
#     does not swing with the machine's load the way wall-clock ratios do on a shared VM (+-20 %
#     round to round), so it shows a few per cent where the busbw ratio cannot.
#  2. wire: bytes the rail devices of host 0 sent per allreduce, from their counters, taken from
#     two runs that differ only in -n (so set-up, warm-up and the result check cancel out),
#     against the payload a rank of a 2-rank ring sends (S per call), beside the overhead the
#     channel layer adds by construction (64-byte step header per step, 24-byte ack per step).
#  3. idle CPU: CPU time per second of an idle communicator (connections up, no collective) with
#     failover on (default detector, and RECCL_DETECTOR=none) and off, from getrusage in the test
#     worker (bin/ccl_test_worker, WORKER_IDLE_MS): the machinery's own load, independent of how
#     busy the machine is (the wall-clock A/B above is not, on a shared 2-core VM).
#
#   sudo bench/bookkeeping.sh --build build --out bookkeeping.json
#   sudo bench/bookkeeping.sh --rounds 7 --iters 10 --size 64M --nics rail
#
# Needs root (network namespaces), jq, and in the build's bin/: reccl, reccl-bench.
# Exit: 0 done, 1 a step failed, 64 usage, 77 not root / a tool missing.
set -euo pipefail

BUILD=build
RAILS=2
ROUNDS=6
ITERS=10
SIZE=64M
NICS=rail
OUT=bookkeeping.json
NAME="bk$$"

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --rails) RAILS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
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
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "bookkeeping.sh: --rounds: a positive number, got $ROUNDS" >&2; exit 64; }
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

ROUNDS_JSON="$WORK/rounds.jsonl"
: >"$ROUNDS_JSON"
for ((i = 0; i < ROUNDS; ++i)); do
  if ((i % 2 == 0)); then order=(1 0); else order=(0 1); fi
  for fo in "${order[@]}"; do
    step "round $((i + 1))/$ROUNDS: RECCL_FAILOVER=$fo"
    run "r$i-f$fo" "$fo" "$ITERS"
  done
  cpuOn=null cpuOff=null
  if [[ -x "$CPU_WORKER" ]]; then
    for fo in "${order[@]}"; do
      step "round $((i + 1))/$ROUNDS: CPU time, RECCL_FAILOVER=$fo"
      runCpu "r$i-c$fo" "$fo"
    done
    cpuOn=$(cat "$WORK/r$i-c1.cpu") cpuOff=$(cat "$WORK/r$i-c0.cpu")
  fi
  jq -n -c --argjson i "$i" --arg first "${order[0]}" --argjson cpuOn "$cpuOn" --argjson cpuOff "$cpuOff" \
    --slurpfile on "$WORK/r$i-f1.json" --slurpfile off "$WORK/r$i-f0.json" '
    {round: $i, first: ("RECCL_FAILOVER=" + $first),
     on: {in_place: $on[0].rows[0].in_place.busbw_gbps, out_of_place: $on[0].rows[0].out_of_place.busbw_gbps,
          cpu_us: $cpuOn},
     off: {in_place: $off[0].rows[0].in_place.busbw_gbps, out_of_place: $off[0].rows[0].out_of_place.busbw_gbps,
           cpu_us: $cpuOff}}
    | .ratio_in_place = (.on.in_place / .off.in_place)
    | .ratio_out_of_place = (.on.out_of_place / .off.out_of_place)
    | .ratio_cpu = (if $cpuOn != null and $cpuOff != null and $cpuOff > 0 then $cpuOn / $cpuOff else null end)' \
    >>"$ROUNDS_JSON"
  tail -1 "$ROUNDS_JSON" >&2
done

# Wire bytes per allreduce: two runs differing by DELTA iterations of both rows (out of place and
# in place), so DELTA*2 allreduce calls more; everything else is equal and cancels.
SHORT=2
DELTA=10
step "wire: -n $SHORT and -n $((SHORT + DELTA)), RECCL_FAILOVER=1"
t0=$(railTx); run wire-short 1 "$SHORT"; t1=$(railTx)
run wire-long 1 $((SHORT + DELTA)); t2=$(railTx)

# Idle CPU per rank (microseconds of CPU per second of wall time), 8 s idle per variant.
IDLE_JSON="$WORK/idle.jsonl"
: >"$IDLE_JSON"
if [[ -x "$BIN/ccl_test_worker" ]]; then
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

jq -s --arg size "$SIZE" --arg nics "$NICS" --argjson rails "$RAILS" --argjson iters "$ITERS" \
  --arg load_start "$LOAD_START" --arg load_end "$LOAD_END" \
  --argjson short_tx $((t1 - t0)) --argjson long_tx $((t2 - t1)) --argjson delta "$DELTA" \
  --slurpfile wl "$WORK/wire-long.json" --slurpfile idle "$IDLE_JSON" '
  def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  ($wl[0].rows[0].size_bytes) as $bytes
  | 524288 as $chunk
  | {
      date: (now | todate), testbed: {hosts: 2, rails: $rails, nics: $nics}, size: $size, iters: $iters,
      load_average_start: $load_start, load_average_end: $load_end,
      rounds: .,
      median_ratio_in_place: (map(.ratio_in_place) | median),
      median_ratio_out_of_place: (map(.ratio_out_of_place) | median),
      median_busbw_gbps: {on: (map(.on.in_place) | median), off: (map(.off.in_place) | median)},
      median_ratio_cpu: (map(.ratio_cpu | select(. != null)) | if length > 0 then median else null end),
      cpu_note: "user+sys CPU of both ranks for the same allreduce calls (failover_worker WORKER_CPU=1), on / off",
      wire: {
        payload_bytes_per_call: $bytes,
        rail_tx_bytes_per_call: (($long_tx - $short_tx) / ($delta * 2)),
        rail_tx_over_payload: (($long_tx - $short_tx) / ($delta * 2) / $bytes),
        computed_channel_overhead: ((64 + 24) / $chunk),
        computed_note: "64-byte step header per step + 24-byte ack per step, default 512 KiB chunks"
      },
      idle_cpu_us_per_s: $idle
    }
  | .cost_in_place = (1 - .median_ratio_in_place)
  | .cost_out_of_place = (1 - .median_ratio_out_of_place)
  | .cost_cpu = (if .median_ratio_cpu != null then .median_ratio_cpu - 1 else null end)' "$ROUNDS_JSON" >"$OUT"

jq -r '
  "",
  "allreduce \(.size), 2 hosts x \(.testbed.rails) rails (RECCL_NICS=\(.testbed.nics)), \(.rounds | length) interleaved rounds:",
  (.rounds[] | "  round \(.round + 1) (\(.first) first): busbw on \(.on.in_place * 1000 | round / 1000) off \(.off.in_place * 1000 | round / 1000) GB/s in place, ratio \(.ratio_in_place * 1000 | round / 1000); out of place ratio \(.ratio_out_of_place * 1000 | round / 1000)\(if .ratio_cpu != null then "; CPU on \(.on.cpu_us / 1000 | round) off \(.off.cpu_us / 1000 | round) ms, ratio \(.ratio_cpu * 1000 | round / 1000)" else "" end)"),
  "median ratio on/off: in place \(.median_ratio_in_place * 1000 | round / 1000), out of place \(.median_ratio_out_of_place * 1000 | round / 1000)",
  "zero-fault cost of the failover machinery: wall clock (busbw) in place \(.cost_in_place * 1000 | round / 10) %, out of place \(.cost_out_of_place * 1000 | round / 10) %; CPU time \(if .cost_cpu != null then "\(.cost_cpu * 1000 | round / 10) %" else "not measured" end)   (goal <= 3 %)",
  "wire: host 0 rail tx \(.wire.rail_tx_bytes_per_call | round) B per call for \(.wire.payload_bytes_per_call) B payload: x\(.wire.rail_tx_over_payload * 100000 | round / 100000)",
  "      step headers + acks by construction: \(.wire.computed_channel_overhead * 100 * 1000 | round / 1000) % of payload",
  (.idle_cpu_us_per_s[] | "idle CPU: failover \(if .failover then "on " else "off" end) detector \(.detector): rank \(.rank) \(.cpu_us_per_s / 1000 * 10 | round / 10) ms CPU per s"),
  "load average: start \(.load_average_start), end \(.load_average_end)"' "$OUT"
echo "written: $OUT" >&2
