#!/usr/bin/env bash
# A gray RDMA rail in the stock-kernel lab (2 hosts x 2 rails, soft-RoCE): part of the packets
# arriving on rank 0's rail0 dropped for a while under an allreduce loop (tools/lab/
# verbs_gray_plan.json through tools/lab/verbs_bench_plan.sh), with the rails' sequence-error
# counters judged (RECCL_RDMA_LOSS_WINDOW_MS, default) and not (0), the two modes interleaved
# round by round, one boot each.
#
#   bench/verbs/gray_bench.sh [--build DIR] [--rounds N] [--retry-cnt N] [--log FILE]
#                             [--plan FILE] [--size BYTES] [--off VAR=VAL]
#
# --plan: the fault plan (default tools/lab/verbs_gray_plan.json: 5 % for 4 s); --size: the
# allreduce (default 1M); --off: what the "off" mode sets (default RECCL_RDMA_LOSS_WINDOW_MS=0;
# RECCL_RDMA_LOSS_POOL=0 compares the pooled windows against the window alone).
# At RECCL_IB_RETRY_CNT 7 (default here; rxe never exhausts it) nothing but the counters ends
# the drop's effect early; at a smaller count the QPs' completion errors race them.
# Prints, per mode: the rounds, the longest allreduce iteration (ms; median, min-max: how long
# the job was held up at worst), the bus bandwidth while the drop lasted (GB/s, median), the
# rounds whose fault had a failover, how many of those the counters declared, and in how many
# a verdict was pooled (the detector's INFO line); then the ratio of the medians (off / on).
# TCG-emulated RDMA: relative times between modes, not what a NIC would show.
# Exit: 0, 1 when a run failed (wrong result, no start), 77 where the lab cannot run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build
rounds=3
retry=7
log=
plan=$root/tools/lab/verbs_gray_plan.json
size=1M
off=RECCL_RDMA_LOSS_WINDOW_MS=0
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case $1 in
    --build) build=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --retry-cnt) retry=${2:?}; shift 2 ;;
    --log) log=${2:?}; shift 2 ;;
    --plan) plan=${2:?}; shift 2 ;;
    --size) size=${2:?}; shift 2 ;;
    --off) off=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "gray_bench: unknown argument $1" >&2; usage 64 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "gray_bench: --rounds: a positive count, got '$rounds'" >&2; exit 64; }
[[ $retry =~ ^[0-7]$ ]] || { echo "gray_bench: --retry-cnt: 0..7, got '$retry'" >&2; exit 64; }
[[ -f $plan ]] || { echo "gray_bench: --plan: no file $plan" >&2; exit 64; }
[[ $size =~ ^[1-9][0-9]*[KMG]?$ ]] || { echo "gray_bench: --size: bytes (K, M, G suffix allowed), got '$size'" >&2; exit 64; }
[[ $off =~ ^RECCL_[A-Z0-9_]+=[^[:space:]]*$ ]] || { echo "gray_bench: --off: RECCL_VAR=VALUE, got '$off'" >&2; exit 64; }
bench=$build/bin/reccl-bench
[[ -x $bench ]] || { echo "gray_bench: $bench missing (build the tree first)" >&2; exit 64; }
work=$(mktemp -d /tmp/reccl-gray-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
[[ -n $log ]] && : > "$log"

declare -A longest during declared pooled failed
for ((r = 1; r <= rounds; r++)); do
  for mode in on off; do
    envs=(--env "RECCL_IB_RETRY_CNT=$retry" --env VERBS_PLAN_MIN_FAILOVERS=0 --env RECCL_DEBUG_SUBSYS=INIT,FAILOVER,DETECTOR)
    [[ $mode == off ]] && envs+=(--env "$off")
    out=$work/$mode.$r
    set +e
    "$root/tools/lab/lab.sh" run --vms 2 --rails 2 --timeout 240 --module sch_ingress --module cls_bpf "${envs[@]}" \
      --bin "$bench" --file "$root/tools/lab/verbs_bench_plan.sh" --file "$plan" \
      -- sh /lab/bin/verbs_bench_plan.sh "/lab/bin/$(basename "$plan")" 1 "$size" > "$out" 2>&1
    rc=$?
    set -e
    [[ -n $log ]] && { echo "=== round $r mode $mode rc $rc"; cat "$out"; } >> "$log"
    ((rc == 77)) && { echo "gray_bench: the lab cannot run here"; exit 77; }
    ((rc == 0)) || { echo "gray_bench: round $r mode $mode failed (exit $rc)"; tail -20 "$out"; exit 1; }
    l=$(sed -n 's/.*plan: longest iteration \([0-9.]*\) ms.*/\1/p' "$out" | head -1)
    [[ -n $l ]] || { echo "gray_bench: round $r mode $mode printed no longest iteration"; exit 1; }
    longest[$mode]+="$l "
    d=$(sed -n 's/^\[vm0\] *"busbw_during_gbps": \([0-9.e+-]*\).*/\1/p' "$out" | head -1)
    during[$mode]+="${d:-0} "
    grep -q 'rail0) degraded (source detector rdma_counters)' "$out" && declared[$mode]=$((${declared[$mode]:-0} + 1))
    grep -q "rdma counters: .*(rail0) degraded: .* over the pool's windows" "$out" && pooled[$mode]=$((${pooled[$mode]:-0} + 1))
    grep -Eq '^\[vm0\] #  fault 0 at .* stall [0-9.]+ ms' "$out" || failed[$mode]=$((${failed[$mode]:-0} + 1))
    echo "round $r $mode: longest iteration $l ms, busbw during the drop ${d:-?} GB/s"
  done
done
# med [DIGITS]: "median (min-max)" of the numbers on stdin, DIGITS decimals (1).
med() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk -v d="${1:-1}" '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; f = "%." d "f"; printf f " (" f "-" f ")", m, v[1], v[NR] }'; }
printf '\n| mode (off: %s) | rounds | longest iteration, ms: median (min-max) | busbw during the drop, GB/s: median (min-max) | rounds with a failover | declared by the counters | of those, pooled at least once |\n|---|---:|---|---|---:|---:|---:|\n' "$off"
for mode in on off; do
  printf '| %s | %d | %s | %s | %d | %d | %d |\n' "$mode" "$rounds" "$(echo "${longest[$mode]}" | med)" \
    "$(echo "${during[$mode]}" | med 4)" "$((rounds - ${failed[$mode]:-0}))" "${declared[$mode]:-0}" "${pooled[$mode]:-0}"
done
on=$(echo "${longest[on]}" | med | cut -d' ' -f1)
off=$(echo "${longest[off]}" | med | cut -d' ' -f1)
awk -v a="$off" -v b="$on" 'BEGIN { if (b > 0) printf "\nlongest iteration, median off / on: %.2f\n", a / b }'
