#!/usr/bin/env bash
# The NCCL net plugin's stream throughput beside iperf3 on one fresh 2-host testbed, in
# interleaved rounds (the order reversed every other round): iperf3 --bidir on every rail at once,
# and the plugin driven as NCCL's proxy drives it (nccl_net_stream_worker: both directions at
# once, WORKER_INFLIGHT requests of up to WORKER_BYTES in flight per comm), its connections spread
# over the devices of --devices (RECCL_NET_DEVICES: nic, a device per NIC, connection k on device
# k mod the rails, as NCCL spreads its channels over NICs; fused, one device over every NIC).
# Prints per-direction GB/s and the plugin/iperf3 ratio per round, their median, and writes JSON.
#
#   sudo bench/nccl_net/net_bench.sh --build build --out net-bench.json     # 5 rounds
#   sudo bench/nccl_net/net_bench.sh --rounds 3 --messages 4000 --bytes 512K --conns 4   # 4 connections each way
#   sudo bench/nccl_net/net_bench.sh --devices fused --conns 1   # one connection over both NICs
#   sudo bench/nccl_net/net_bench.sh --check     # every byte written and checked while timed
#
# As nccl-tests times without -c, the stream is timed with only each message's size and index
# written and checked (the worker's own copies would be what it measures); --check times them too.
# Needs root, iperf3, jq, and in the build's bin/: reccl, nccl_net_stream_worker.
# Exit: 0 done, 1 a step failed, 64 usage, 77 not root / a tool missing.
set -euo pipefail

BUILD=build
RAILS=2
ROUNDS=5
MESSAGES=3000
BYTES=1M
INFLIGHT=8
CONNS=2
DEVICES=nic
IPERF_SECONDS=5
OUT=net-bench.json
CHECK=0
NAME="nb$$"

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --rails) RAILS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --messages) MESSAGES="$2"; shift 2 ;;
    --bytes) BYTES="$2"; shift 2 ;;
    --inflight) INFLIGHT="$2"; shift 2 ;;
    --conns) CONNS="$2"; shift 2 ;;
    --devices) DEVICES="$2"; shift 2 ;;
    --iperf-seconds) IPERF_SECONDS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --check) CHECK=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "net_bench.sh: unknown argument $1 (try --help)" >&2; exit 64 ;;
  esac
done
[[ "$RAILS" =~ ^[1-8]$ ]] || { echo "net_bench.sh: --rails: 1-8, got $RAILS" >&2; exit 64; }
[[ "$ROUNDS" =~ ^[1-9][0-9]?$ ]] || { echo "net_bench.sh: --rounds: 1-99, got $ROUNDS" >&2; exit 64; }
[[ "$MESSAGES" =~ ^[1-9][0-9]*$ ]] || { echo "net_bench.sh: --messages: a positive number" >&2; exit 64; }
[[ "$INFLIGHT" =~ ^[1-9][0-9]?$ && $INFLIGHT -le 32 ]] || { echo "net_bench.sh: --inflight: 1-32" >&2; exit 64; }
[[ "$CONNS" =~ ^[1-9][0-9]?$ && $CONNS -le 32 ]] || { echo "net_bench.sh: --conns: 1-32" >&2; exit 64; }
[[ "$DEVICES" == nic || "$DEVICES" == fused ]] || { echo "net_bench.sh: --devices: nic or fused, got $DEVICES" >&2; exit 64; }
case "$BYTES" in
  *K) BYTES_N=$(( ${BYTES%K} * 1024 )) ;;
  *M) BYTES_N=$(( ${BYTES%M} * 1048576 )) ;;
  *[0-9]) BYTES_N=$BYTES ;;
  *) echo "net_bench.sh: --bytes: a size such as 512K or 4M" >&2; exit 64 ;;
esac

BIN="$(cd "$BUILD/bin" 2>/dev/null && pwd)" || { echo "net_bench.sh: --build: no $BUILD/bin" >&2; exit 64; }
for tool in "$BIN/reccl" "$BIN/nccl_net_stream_worker"; do
  [[ -x "$tool" ]] || { echo "net_bench.sh: missing $tool (build it first)" >&2; exit 77; }
done
for tool in iperf3 jq; do
  command -v "$tool" >/dev/null || { echo "net_bench.sh: $tool not installed (scripts/setup.sh)" >&2; exit 77; }
done
[[ $(id -u) -eq 0 ]] || { echo "net_bench.sh: needs root for the testbed's namespaces" >&2; exit 77; }

WORK="$(mktemp -d /tmp/reccl-net-bench.XXXXXX)"
cleanup() {
  local rc=$?
  pkill -f "iperf3 -s -1 -B 10\\.1[0-9][0-9]\\.0\\.2 -p 62[0-9][0-9]" 2>/dev/null || true
  "$BIN/reccl" testbed down --name "$NAME" >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
railAddr() { echo "10.$((100 + $2)).0.$(($1 + 1))"; }

echo "== testbed $NAME: 2 hosts x $RAILS rails" >&2
"$BIN/reccl" testbed up --name "$NAME" --hosts 2 --rails "$RAILS" >&2

# iperf3 --bidir host 0 <-> host 1 on every rail at once: per-direction GB/s, summed over rails.
iperf() {
  local tag="$1" k pids=() servers=()
  for ((k = 0; k < RAILS; ++k)); do
    "$BIN/reccl" testbed exec --name "$NAME" --host 1 -- iperf3 -s -1 -B "$(railAddr 1 $k)" -p $((6201 + k)) \
      >/dev/null 2>&1 &
    servers+=($!)
  done
  for ((k = 0; k < RAILS; ++k)); do
    for ((t = 0; t < 100; ++t)); do
      [[ -n "$("$BIN/reccl" testbed exec --name "$NAME" --host 1 -- ss -Hltn "sport = :$((6201 + k))")" ]] && break
      sleep 0.05
    done
  done
  for ((k = 0; k < RAILS; ++k)); do
    "$BIN/reccl" testbed exec --name "$NAME" --host 0 -- iperf3 -c "$(railAddr 1 $k)" -B "$(railAddr 0 $k)" \
      -p $((6201 + k)) --bidir -t "$IPERF_SECONDS" -J >"$WORK/$tag-rail$k.json" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "net_bench.sh: iperf3 failed ($tag)" >&2; return 1; }; done
  for p in "${servers[@]}"; do wait "$p" 2>/dev/null || true; done
  jq -s '[.[] | (.end.sum_received.bits_per_second + .end.sum_received_bidir_reverse.bits_per_second) / 2]
         | add / 8 / 1e9' "$WORK/$tag"-rail*.json
}

# The plugin stream: per-direction GB/s (received bytes over the run's seconds, mean of the ranks).
plugin() {
  local tag="$1"
  "$BIN/reccl" testbed run --name "$NAME" --timeout 600 -- /usr/bin/env RECCL_NET_DEVICES="$DEVICES" WORKER_DEV=spread WORKER_ITERS="$MESSAGES" \
    WORKER_BYTES="$BYTES_N" WORKER_INFLIGHT="$INFLIGHT" WORKER_CONNS="$CONNS" WORKER_WAIT_SOURCE=1 WORKER_CHECK="$CHECK" WORKER_STOP_FILE="$WORK/$tag.stop" \
    "$BIN/nccl_net_stream_worker" >"$WORK/$tag.log" 2>&1 || {
    cat "$WORK/$tag.log" >&2
    echo "net_bench.sh: the plugin stream failed ($tag)" >&2
    return 1
  }
  grep -o 'done rank [01] .*' "$WORK/$tag.log" |
    awk '{for (i = 1; i < NF; ++i) { if ($i == "bytes") b = $(i + 1); if ($i == "seconds") s = $(i + 1) }
          sum += b / s / 1e9; n++} END { if (n != 2) exit 1; printf "%.4f\n", sum / n }'
}

for ((round = 1; round <= ROUNDS; ++round)); do
  if ((round % 2)); then order=(iperf plugin); else order=(plugin iperf); fi
  for what in "${order[@]}"; do
    echo "== $what (round $round)" >&2
    v=$("$what" "$what-r$round")
    echo "{\"round\": $round, \"what\": \"$what\", \"gbps\": $v}" >>"$WORK/rounds.jsonl"
  done
done

jq -s --arg bytes "$BYTES" --arg devices "$DEVICES" --argjson inflight "$INFLIGHT" --argjson conns "$CONNS" --argjson rails "$RAILS" --argjson messages "$MESSAGES" '
  def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  (group_by(.round) | map({round: .[0].round, iperf3: (map(select(.what == "iperf")) | .[0].gbps),
                           plugin: (map(select(.what == "plugin")) | .[0].gbps)})
   | map(. + {ratio: (.plugin / .iperf3)})) as $per
  | {date: (now | todate), rails: $rails, devices: $devices, message_bytes: $bytes, inflight: $inflight, connections: $conns,
     messages: $messages,
     iperf3_gbps: ($per | map(.iperf3) | med), plugin_gbps: ($per | map(.plugin) | med),
     plugin_over_iperf3: ($per | map(.ratio) | med),
     ratio_range: {min: ($per | map(.ratio) | min), max: ($per | map(.ratio) | max)}, per_round: $per}' \
  "$WORK/rounds.jsonl" | jq --argjson check "$CHECK" '. + {bytes_checked: ($check == 1)}' >"$OUT"
jq -r '"per direction, 2 hosts x \(.rails) rails, median of \(.per_round | length) rounds (GB/s):",
       "  iperf3 --bidir, every rail    \(.iperf3_gbps * 100 | round / 100)",
       "  NCCL net plugin (reccl)       \(.plugin_gbps * 100 | round / 100)   (\(.message_bytes) messages, \(.connections) connection(s) each way over the \(.devices) device(s), \(.inflight) in flight on each)",
       "  plugin / iperf3               \(.plugin_over_iperf3 * 1000 | round / 1000)   (rounds \(.ratio_range.min * 1000 | round / 1000)-\(.ratio_range.max * 1000 | round / 1000))"' "$OUT"
