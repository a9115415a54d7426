#!/usr/bin/env bash
# Side by side on one fresh 2-host testbed, in one go: iperf3 --bidir per rail and on all rails
# at once, Gloo allreduce on one rail, reccl allreduce on one rail (RECCL_NICS==rail0) and on all
# rails, 64 MiB bus bandwidth and 8 B latency. Prints the ratios and writes one JSON file.
#
#   sudo bench/compare.sh --build build --out compare.json
#   sudo bench/compare.sh --rails 2 --iters 20 --iperf-seconds 5 --keep   # leave the testbed up
#   sudo bench/compare.sh --peers-only      # iperf3 and Gloo only (no libreccl needed)
#   sudo bench/compare.sh --chrt 10         # Gloo and reccl ranks under SCHED_FIFO 10 (a shared machine)
#
# Needs root (network namespaces), iperf3, jq, and in the build's bin/: reccl, reccl-bench, gloo_bench.
# Exit: 0 done, 1 a step failed, 64 usage, 77 not root / a tool missing.
set -euo pipefail

BUILD=build
RAILS=2
ITERS=20
LAT_ITERS=500
SIZE=64M
IPERF_SECONDS=5
OUT=compare.json
KEEP=0
PEERS_ONLY=0
RECCL=""
NAME="cmp$$"
CHRT=()

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --rails) RAILS="$2"; shift 2 ;;
    --iters) ITERS="$2"; shift 2 ;;
    --lat-iters) LAT_ITERS="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --iperf-seconds) IPERF_SECONDS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --name) NAME="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --peers-only) PEERS_ONLY=1; shift ;;
    --reccl-cli) RECCL="$2"; shift 2 ;;
    --chrt) CHRT=(chrt -f "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown argument $1 (try --help)" >&2; exit 64 ;;
  esac
done
[[ "$RAILS" =~ ^[1-8]$ ]] || { echo "compare.sh: --rails: 1-8, got $RAILS" >&2; exit 64; }
[[ "$ITERS" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --iters: a positive number, got $ITERS" >&2; exit 64; }
[[ "$IPERF_SECONDS" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --iperf-seconds: a positive number" >&2; exit 64; }
[[ ${#CHRT[@]} -eq 0 || "${CHRT[2]}" =~ ^[1-9][0-9]?$ ]] || { echo "compare.sh: --chrt: a priority 1-99, got ${CHRT[2]}" >&2; exit 64; }

BIN="$(cd "$BUILD/bin" 2>/dev/null && pwd)" || { echo "compare.sh: --build: no $BUILD/bin" >&2; exit 64; }
RECCL="${RECCL:-$BIN/reccl}"
NEEDED=("$RECCL" "$BIN/gloo_bench")
[[ $PEERS_ONLY -eq 1 ]] || NEEDED+=("$BIN/reccl-bench")
for tool in "${NEEDED[@]}"; do
  [[ -x "$tool" ]] || { echo "compare.sh: missing $tool (build it first)" >&2; exit 77; }
done
for tool in iperf3 jq; do
  command -v "$tool" >/dev/null || { echo "compare.sh: $tool not installed (scripts/setup.sh)" >&2; exit 77; }
done
[[ $(id -u) -eq 0 ]] || { echo "compare.sh: needs root for the testbed's namespaces" >&2; exit 77; }

WORK="$(mktemp -d /tmp/reccl-compare.XXXXXX)"
IPERF_PIDS=()
cleanup() {
  local rc=$?
  for p in "${IPERF_PIDS[@]:-}"; do [[ -n "$p" ]] && kill "$p" 2>/dev/null || true; done
  if [[ $KEEP -eq 0 ]]; then "$RECCL" testbed down --name "$NAME" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '== %s\n' "$*" >&2; }
railAddr() { echo "10.$((100 + $2)).0.$(($1 + 1))"; }  # host rail

step "testbed $NAME: 2 hosts x $RAILS rails"
"$RECCL" testbed up --name "$NAME" --hosts 2 --rails "$RAILS" >&2

# iperf3 --bidir from host 0 to host 1 over the given rails at the same time; prints the summed
# per-direction throughput in GB/s (the mean of the two directions' received rates).
iperf() {
  local tag="$1"; shift
  local rails=("$@") pids=() k
  IPERF_PIDS=()
  for k in "${rails[@]}"; do
    "$RECCL" testbed exec --name "$NAME" --host 1 -- \
      iperf3 -s -1 -B "$(railAddr 1 "$k")" -p $((5201 + k)) >/dev/null 2>&1 &
    IPERF_PIDS+=($!)
  done
  sleep 0.5
  for k in "${rails[@]}"; do
    "$RECCL" testbed exec --name "$NAME" --host 0 -- \
      iperf3 -c "$(railAddr 1 "$k")" -B "$(railAddr 0 "$k")" -p $((5201 + k)) --bidir \
      -t "$IPERF_SECONDS" -J >"$WORK/iperf-$tag-rail$k.json" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "compare.sh: iperf3 client failed ($tag)" >&2; return 1; }; done
  for p in "${IPERF_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  IPERF_PIDS=()
  local files=()
  for k in "${rails[@]}"; do files+=("$WORK/iperf-$tag-rail$k.json"); done
  jq -s '[.[] | (.end.sum_received.bits_per_second + .end.sum_received_bidir_reverse.bits_per_second) / 2]
         | add / 8 / 1e9' "${files[@]}"
}

# iperf3 runs before and after the collectives; the ratios use the better of the two (the
# ceiling), so a burst of load on the machine cannot flatter reccl.
declare -A IPERF
ALL_RAILS=()
for ((k = 0; k < RAILS; ++k)); do ALL_RAILS+=("$k"); done
iperfRound() {
  local round="$1" k v
  for k in "${ALL_RAILS[@]}"; do
    step "iperf3 --bidir on rail$k alone ($round)"
    v=$(iperf "rail$k-$round" "$k")
    IPERF[rail$k-$round]=$v
    IPERF[rail$k]=$(jq -n --argjson a "${IPERF[rail$k]:-0}" --argjson b "$v" '[$a, $b] | max')
  done
  step "iperf3 --bidir on all $RAILS rails at once ($round)"
  v=$(iperf "all-$round" "${ALL_RAILS[@]}")
  IPERF[all-$round]=$v
  IPERF[all]=$(jq -n --argjson a "${IPERF[all]:-0}" --argjson b "$v" '[$a, $b] | max')
}
iperfRound before

# Runs a benchmark on both hosts (one rank each) and leaves rank 0's JSON in $WORK/$1.json.
# --chrt applies here only: iperf3 under SCHED_FIFO spins both vCPUs and starves its own peers.
bench() {
  local tag="$1"; shift
  step "$tag: $*"
  "$RECCL" testbed run --name "$NAME" --timeout 600 -- ${CHRT[@]+"${CHRT[@]}"} "$@" --json "$WORK/$tag.json" >"$WORK/$tag.log" 2>&1 || {
    cat "$WORK/$tag.log" >&2
    echo "compare.sh: $tag failed" >&2
    return 1
  }
  grep -v '^\[rank [1-9]' "$WORK/$tag.log" | sed 's/^\[rank 0\] //' | grep -v '^#  \|^#$' >&2 || true
}

bench gloo_bw "$BIN/gloo_bench" --iface rail0 --store-dir "$WORK/gloo-store-bw" --algo all \
  -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 3
bench gloo_lat "$BIN/gloo_bench" --iface rail0 --store-dir "$WORK/gloo-store-lat" --algo ring \
  -b 8 -e 8 -n "$LAT_ITERS" -w 20
if [[ $PEERS_ONLY -eq 1 ]]; then
  iperfRound after
  jq -n --arg size "$SIZE" --argjson rails "$RAILS" \
    --argjson iperf "$(for k in "${!IPERF[@]}"; do echo "{\"$k\": ${IPERF[$k]}}"; done | jq -s add)" \
    --slurpfile gb "$WORK/gloo_bw.json" --slurpfile gl "$WORK/gloo_lat.json" '
    ($gb[0].rows | max_by(.in_place.busbw_gbps)) as $gbest
    | {date: (now | todate), testbed: {hosts: 2, rails: $rails}, size: $size, iperf3_per_direction_gbps: $iperf,
       gloo: {busbw_gbps: $gbest.in_place.busbw_gbps, algo: $gbest.algo,
              latency_8b_us: $gl[0].rows[0].in_place.time_us},
       ratios: {gloo_over_iperf3_rail0: ($gbest.in_place.busbw_gbps / $iperf.rail0)},
       wrong: ($gb[0].out_of_bounds + $gl[0].out_of_bounds), runs: {gloo_bw: $gb[0], gloo_lat: $gl[0]}}' >"$OUT"
  jq -r '"", "iperf3 --bidir per direction (GB/s): \(.iperf3_per_direction_gbps)",
         "gloo \(.size) allreduce busbw \(.gloo.busbw_gbps) GB/s (\(.gloo.algo)), 8 B latency \(.gloo.latency_8b_us) us",
         "gloo / iperf3 rail0: \(.ratios.gloo_over_iperf3_rail0)", "wrong elements: \(.wrong)"' "$OUT"
  echo "written: $OUT" >&2
  [[ $(jq .wrong "$OUT") -eq 0 ]]
  exit
fi
RECCL_NICS="=rail0" bench reccl1_bw "$BIN/reccl-bench" -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 3
RECCL_NICS="=rail0" bench reccl1_lat "$BIN/reccl-bench" -b 8 -e 8 -n "$LAT_ITERS" -w 20
RECCL_NICS="rail" bench recclall_bw "$BIN/reccl-bench" -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 3
RECCL_NICS="rail" bench recclall_lat "$BIN/reccl-bench" -b 8 -e 8 -n "$LAT_ITERS" -w 20
iperfRound after

# Best Gloo allreduce algorithm (in place: Gloo has no out-of-place allreduce); reccl in place
# too for the like-for-like ratio, out of place reported beside it.
jq -n \
  --arg name "$NAME" --arg size "$SIZE" --argjson rails "$RAILS" --argjson iters "$ITERS" \
  --argjson iperf_rail0 "${IPERF[rail0]}" --argjson iperf_all "${IPERF[all]}" \
  --argjson iperf "$(for k in "${!IPERF[@]}"; do echo "{\"$k\": ${IPERF[$k]}}"; done | jq -s add)" \
  --slurpfile gb "$WORK/gloo_bw.json" --slurpfile gl "$WORK/gloo_lat.json" \
  --slurpfile r1b "$WORK/reccl1_bw.json" --slurpfile r1l "$WORK/reccl1_lat.json" \
  --slurpfile rab "$WORK/recclall_bw.json" --slurpfile ral "$WORK/recclall_lat.json" '
  def ip(r): r.rows[0].in_place;
  def oop(r): r.rows[0].out_of_place;
  ($gb[0].rows | max_by(.in_place.busbw_gbps)) as $gbest
  | ($gl[0].rows[0].in_place.time_us) as $glat
  | {
      date: (now | todate), testbed: {name: $name, hosts: 2, rails: $rails}, size: $size, iters: $iters,
      iperf3_per_direction_gbps: $iperf,
      gloo: {busbw_gbps: $gbest.in_place.busbw_gbps, algo: $gbest.algo, latency_8b_us: $glat},
      reccl_one_rail: {busbw_gbps: ip($r1b[0]).busbw_gbps, busbw_out_of_place_gbps: oop($r1b[0]).busbw_gbps,
                       latency_8b_us: oop($r1l[0]).time_us},
      reccl_all_rails: {busbw_gbps: ip($rab[0]).busbw_gbps, busbw_out_of_place_gbps: oop($rab[0]).busbw_gbps,
                        latency_8b_us: oop($ral[0]).time_us},
      ratios: {
        reccl_one_rail_over_gloo: (ip($r1b[0]).busbw_gbps / $gbest.in_place.busbw_gbps),
        reccl_all_rails_over_iperf3_all_rails: (ip($rab[0]).busbw_gbps / $iperf_all),
        reccl_one_rail_over_iperf3_rail0: (ip($r1b[0]).busbw_gbps / $iperf_rail0),
        gloo_latency_over_reccl_latency_8b: ($glat / oop($r1l[0]).time_us)
      },
      wrong: ([$gb[0], $gl[0], $r1b[0], $r1l[0], $rab[0], $ral[0]] | map(.out_of_bounds) | add),
      runs: {gloo_bw: $gb[0], gloo_lat: $gl[0], reccl_one_rail_bw: $r1b[0], reccl_one_rail_lat: $r1l[0],
             reccl_all_rails_bw: $rab[0], reccl_all_rails_lat: $ral[0]}
    }' >"$OUT"

jq -r '
  "",
  "allreduce \(.size) bus bandwidth, 2 hosts x \(.testbed.rails) rails (GB/s):",
  "  iperf3 --bidir per direction  rail0 \(.iperf3_per_direction_gbps.rail0 * 100 | round / 100)   all rails \(.iperf3_per_direction_gbps.all * 100 | round / 100)",
  "  gloo rail0                    \(.gloo.busbw_gbps * 100 | round / 100)  (\(.gloo.algo), in place)",
  "  reccl rail0                   \(.reccl_one_rail.busbw_gbps * 100 | round / 100)  (out of place \(.reccl_one_rail.busbw_out_of_place_gbps * 100 | round / 100))",
  "  reccl all rails               \(.reccl_all_rails.busbw_gbps * 100 | round / 100)  (out of place \(.reccl_all_rails.busbw_out_of_place_gbps * 100 | round / 100))",
  "8 B allreduce latency (us): gloo \(.gloo.latency_8b_us | round)  reccl rail0 \(.reccl_one_rail.latency_8b_us | round)  reccl all rails \(.reccl_all_rails.latency_8b_us | round)",
  "ratios:",
  "  reccl rail0 / gloo rail0                 \(.ratios.reccl_one_rail_over_gloo * 1000 | round / 1000)   (target >= 1.3)",
  "  reccl all rails / iperf3 all rails       \(.ratios.reccl_all_rails_over_iperf3_all_rails * 1000 | round / 1000)   (target >= 0.7)",
  "  gloo 8 B latency / reccl 8 B latency     \(.ratios.gloo_latency_over_reccl_latency_8b * 1000 | round / 1000)",
  "wrong elements: \(.wrong)"' "$OUT"
echo "written: $OUT" >&2
[[ $(jq .wrong "$OUT") -eq 0 ]]
