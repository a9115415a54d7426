#!/usr/bin/env bash
# Side by side on one fresh 2-host testbed, in one go: iperf3 --bidir on rail0 and on all rails
# at once, Gloo allreduce on one rail, reccl allreduce on one rail (RECCL_NICS==rail0) and on all
# rails, 64 MiB bus bandwidth, in interleaved rounds (each round runs every one of them, the order
# reversed every other round; a ratio is taken within a round and the median over rounds is
# reported); then 8 B latency once. Prints the ratios and writes one JSON file.
#
#   sudo bench/compare.sh --build build --out compare.json          # 5 rounds
#   sudo bench/compare.sh --rails 2 --rounds 7 --iters 20 --iperf-seconds 5 --keep   # leave the testbed up
#   sudo bench/compare.sh --peers-only      # iperf3 and Gloo only (no libreccl needed)
#   sudo bench/compare.sh --chrt 10         # Gloo and reccl ranks under SCHED_FIFO 10 (a shared machine)
#
# Needs root (network namespaces), iperf3, jq, and in the build's bin/: reccl, reccl-bench, gloo_bench.
# Exit: 0 done, 1 a step failed, 64 usage, 77 not root / a tool missing.
set -euo pipefail

BUILD=build
RAILS=2
ITERS=20
ROUNDS=5
LAT_ITERS=500
SIZE=64M
IPERF_SECONDS=5
OUT=compare.json
KEEP=0
PEERS_ONLY=0
RECCL=""
NAME="cmp$$"
CHRT=()

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --rails) RAILS="$2"; shift 2 ;;
    --iters) ITERS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
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
[[ "$ROUNDS" =~ ^[1-9][0-9]?$ ]] || { echo "compare.sh: --rounds: 1-99, got $ROUNDS" >&2; exit 64; }
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
# iperf3 servers still running (iperf() runs in a command substitution: a file, not a variable).
SERVER_PIDS="$WORK/iperf-servers.pids"
cleanup() {
  local rc=$?
  if [[ -f "$SERVER_PIDS" ]]; then
    while read -r p; do kill "$p" 2>/dev/null || true; done <"$SERVER_PIDS"
  fi
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
  local rails=("$@") pids=() servers=() k p
  for k in "${rails[@]}"; do
    "$RECCL" testbed exec --name "$NAME" --host 1 -- \
      iperf3 -s -1 -B "$(railAddr 1 "$k")" -p $((5201 + k)) >/dev/null 2>&1 &
    servers+=($!)
    echo $! >>"$SERVER_PIDS"
  done
  # Each server listening before its client starts (5 s at most).
  for k in "${rails[@]}"; do
    for ((t = 0; t < 100; ++t)); do
      [[ -n "$("$RECCL" testbed exec --name "$NAME" --host 1 -- ss -Hltn "sport = :$((5201 + k))" 2>/dev/null)" ]] && break
      sleep 0.05
    done
  done
  for k in "${rails[@]}"; do
    "$RECCL" testbed exec --name "$NAME" --host 0 -- \
      iperf3 -c "$(railAddr 1 "$k")" -B "$(railAddr 0 "$k")" -p $((5201 + k)) --bidir \
      -t "$IPERF_SECONDS" -J >"$WORK/iperf-$tag-rail$k.json" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "compare.sh: iperf3 client failed ($tag)" >&2; return 1; }; done
  for p in "${servers[@]}"; do wait "$p" 2>/dev/null || true; done
  local files=()
  for k in "${rails[@]}"; do files+=("$WORK/iperf-$tag-rail$k.json"); done
  jq -s '[.[] | (.end.sum_received.bits_per_second + .end.sum_received_bidir_reverse.bits_per_second) / 2]
         | add / 8 / 1e9' "${files[@]}"
}

ALL_RAILS=()
for ((k = 0; k < RAILS; ++k)); do ALL_RAILS+=("$k"); done

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

# One round's steps, each writing $WORK/<step>-r<round>.json (iperf3: {"gbps": per direction}).
stepRun() {
  local what="$1" round="$2" v
  case "$what" in
    iperf_rail0)
      step "iperf3 --bidir on rail0 alone (round $round)"
      v=$(iperf "rail0-r$round" 0) && echo "{\"gbps\": $v}" >"$WORK/iperf_rail0-r$round.json" ;;
    iperf_all)
      step "iperf3 --bidir on all $RAILS rails at once (round $round)"
      v=$(iperf "all-r$round" "${ALL_RAILS[@]}") && echo "{\"gbps\": $v}" >"$WORK/iperf_all-r$round.json" ;;
    gloo_bw)
      bench "gloo_bw-r$round" "$BIN/gloo_bench" --iface rail0 --store-dir "$WORK/gloo-store-bw-r$round" --algo all \
        -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 3 ;;
    reccl1_bw)
      RECCL_NICS="=rail0" bench "reccl1_bw-r$round" "$BIN/reccl-bench" -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 3 ;;
    recclall_bw)
      RECCL_NICS="rail" bench "recclall_bw-r$round" "$BIN/reccl-bench" -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 3 ;;
  esac
}

STEPS=(iperf_all iperf_rail0 gloo_bw)
[[ $PEERS_ONLY -eq 1 ]] || STEPS+=(recclall_bw reccl1_bw)
for ((round = 1; round <= ROUNDS; ++round)); do
  order=("${STEPS[@]}")
  if ((round % 2 == 0)); then
    order=()
    for ((i = ${#STEPS[@]} - 1; i >= 0; --i)); do order+=("${STEPS[i]}"); done
  fi
  for what in "${order[@]}"; do stepRun "$what" "$round"; done
done

bench gloo_lat "$BIN/gloo_bench" --iface rail0 --store-dir "$WORK/gloo-store-lat" --algo ring \
  -b 8 -e 8 -n "$LAT_ITERS" -w 20
if [[ $PEERS_ONLY -eq 0 ]]; then
  RECCL_NICS="=rail0" bench reccl1_lat "$BIN/reccl-bench" -b 8 -e 8 -n "$LAT_ITERS" -w 20
  RECCL_NICS="rail" bench recclall_lat "$BIN/reccl-bench" -b 8 -e 8 -n "$LAT_ITERS" -w 20
fi

# Every round's runs as one JSON array: [{round, iperf_rail0, iperf_all, gloo_bw, reccl1_bw, recclall_bw}].
roundsJson() {
  local round what
  for ((round = 1; round <= ROUNDS; ++round)); do
    local args=(--argjson round "$round")
    for what in "${STEPS[@]}"; do args+=(--slurpfile "$what" "$WORK/$what-r$round.json"); done
    jq -n "${args[@]}" '$ARGS.named | with_entries(.value |= (if type == "array" then .[0] else . end))'
  done | jq -s .
}
roundsJson >"$WORK/rounds.json"

# Per round: the best Gloo allreduce algorithm (in place: Gloo has no out-of-place allreduce);
# reccl in place too for the like-for-like ratios, out of place reported beside it. Each ratio is
# taken within its round; the figures are the medians over rounds, with their range.
LAT_FILES=(--slurpfile gl "$WORK/gloo_lat.json")
if [[ $PEERS_ONLY -eq 0 ]]; then
  LAT_FILES+=(--slurpfile r1l "$WORK/reccl1_lat.json" --slurpfile ral "$WORK/recclall_lat.json")
else
  LAT_FILES+=(--argjson r1l null --argjson ral null)
fi
jq -n \
  --arg name "$NAME" --arg size "$SIZE" --argjson rails "$RAILS" --argjson iters "$ITERS" \
  --argjson peers_only "$PEERS_ONLY" --slurpfile rounds "$WORK/rounds.json" "${LAT_FILES[@]}" '
  def med: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
                  else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def span: {min: min, max: max};
  def ip(r): r.rows[0].in_place;
  def oop(r): r.rows[0].out_of_place;
  def one: if type == "array" then .[0] else . end;
  ($rounds[0] | map(
      (.gloo_bw.rows | max_by(.in_place.busbw_gbps)) as $g
      | {round, iperf3_rail0: .iperf_rail0.gbps, iperf3_all: .iperf_all.gbps,
         gloo: $g.in_place.busbw_gbps, gloo_algo: $g.algo}
        + (if $peers_only == 1 then {} else
            {reccl_one_rail: ip(.reccl1_bw).busbw_gbps, reccl_one_rail_out_of_place: oop(.reccl1_bw).busbw_gbps,
             reccl_all_rails: ip(.recclall_bw).busbw_gbps, reccl_all_rails_out_of_place: oop(.recclall_bw).busbw_gbps}
           end)
      | .ratios = ({gloo_over_iperf3_rail0: (.gloo / .iperf3_rail0)}
          + (if $peers_only == 1 then {} else
              {reccl_one_rail_over_gloo: (.reccl_one_rail / .gloo),
               reccl_all_rails_over_iperf3_all_rails: (.reccl_all_rails / .iperf3_all),
               reccl_one_rail_over_iperf3_rail0: (.reccl_one_rail / .iperf3_rail0)} end))
    )) as $per
  | ($gl | one) as $gl1 | ($r1l | one) as $r1l1 | ($ral | one) as $ral1
  | ($per[0].ratios | keys) as $rk
  | {
      date: (now | todate), testbed: {name: $name, hosts: 2, rails: $rails}, size: $size, iters: $iters,
      rounds: ($per | length),
      iperf3_per_direction_gbps: {rail0: ($per | map(.iperf3_rail0) | med), all: ($per | map(.iperf3_all) | med)},
      gloo: {busbw_gbps: ($per | map(.gloo) | med), algo: ($per | map(.gloo_algo) | group_by(.) | max_by(length)[0]),
             latency_8b_us: $gl1.rows[0].in_place.time_us},
      ratios: ($rk | map({key: ., value: (. as $k | $per | map(.ratios[$k]) | med)}) | from_entries),
      ratio_ranges: ($rk | map({key: ., value: (. as $k | $per | map(.ratios[$k]) | span)}) | from_entries),
      per_round: $per,
      wrong: (([$rounds[0][] | (.gloo_bw, .reccl1_bw, .recclall_bw) | select(. != null) | .out_of_bounds]
               + [$gl1, $r1l1, $ral1 | select(. != null) | .out_of_bounds]) | add),
      runs: {rounds: $rounds[0], gloo_lat: $gl1, reccl_one_rail_lat: $r1l1, reccl_all_rails_lat: $ral1}
    }
  | if $peers_only == 1 then . else
      .reccl_one_rail = {busbw_gbps: ($per | map(.reccl_one_rail) | med),
                         busbw_out_of_place_gbps: ($per | map(.reccl_one_rail_out_of_place) | med),
                         latency_8b_us: oop($r1l1).time_us}
      | .reccl_all_rails = {busbw_gbps: ($per | map(.reccl_all_rails) | med),
                            busbw_out_of_place_gbps: ($per | map(.reccl_all_rails_out_of_place) | med),
                            latency_8b_us: oop($ral1).time_us}
      | .ratios.gloo_latency_over_reccl_latency_8b = ($gl1.rows[0].in_place.time_us / oop($r1l1).time_us)
    end' >"$OUT"

jq -r '
  def r2: . * 100 | round / 100;
  def r3: . * 1000 | round / 1000;
  def rng(k): "\(.ratios[k] | r3)   (rounds \(.ratio_ranges[k].min | r3)-\(.ratio_ranges[k].max | r3))";
  "",
  "allreduce \(.size) bus bandwidth, 2 hosts x \(.testbed.rails) rails, median of \(.rounds) interleaved rounds (GB/s):",
  "  iperf3 --bidir per direction  rail0 \(.iperf3_per_direction_gbps.rail0 | r2)   all rails \(.iperf3_per_direction_gbps.all | r2)",
  "  gloo rail0                    \(.gloo.busbw_gbps | r2)  (\(.gloo.algo), in place)",
  (if .reccl_one_rail then
    "  reccl rail0                   \(.reccl_one_rail.busbw_gbps | r2)  (out of place \(.reccl_one_rail.busbw_out_of_place_gbps | r2))",
    "  reccl all rails               \(.reccl_all_rails.busbw_gbps | r2)  (out of place \(.reccl_all_rails.busbw_out_of_place_gbps | r2))",
    "8 B allreduce latency (us): gloo \(.gloo.latency_8b_us | round)  reccl rail0 \(.reccl_one_rail.latency_8b_us | round)  reccl all rails \(.reccl_all_rails.latency_8b_us | round)",
    "ratios, each within a round, median (range):",
    "  reccl rail0 / gloo rail0                 \(rng("reccl_one_rail_over_gloo"))   target >= 1.3",
    "  reccl all rails / iperf3 all rails       \(rng("reccl_all_rails_over_iperf3_all_rails"))   target >= 0.85",
    "  reccl rail0 / iperf3 rail0               \(rng("reccl_one_rail_over_iperf3_rail0"))   target >= 0.9",
    "  gloo 8 B latency / reccl 8 B latency     \(.ratios.gloo_latency_over_reccl_latency_8b | r3)"
   else
    "8 B allreduce latency (us): gloo \(.gloo.latency_8b_us | round)",
    "ratios, each within a round, median (range):"
   end),
  "  gloo rail0 / iperf3 rail0                \(rng("gloo_over_iperf3_rail0"))",
  "wrong elements: \(.wrong)"' "$OUT"
echo "written: $OUT" >&2
[[ $(jq .wrong "$OUT") -eq 0 ]]
