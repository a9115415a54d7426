#!/usr/bin/env bash
# A gray RDMA rail in the stock-kernel lab (2 hosts x 2 rails, soft-RoCE): part of the packets
# arriving on rank 0's rail0 dropped for a while under an allreduce loop (tools/lab/
# verbs_gray_plan.json through tools/lab/verbs_bench_plan.sh), with the rails' sequence-error
# counters judged (RECCL_RDMA_LOSS_WINDOW_MS, default) and not (0), the two modes interleaved
# round by round, one boot each.
#
#   bench/verbs/gray_bench.sh [--build DIR] [--rounds N] [--retry-cnt N] [--log FILE]
#
# At RECCL_IB_RETRY_CNT 7 (default here; rxe never exhausts it) nothing but the counters ends
# the drop's effect early; at a smaller count the QPs' completion errors race them.
# Prints, per mode: the rounds, the longest allreduce iteration (ms; median, min-max: how long
# the job was held up at worst), the rounds whose fault had a failover, and how many of those
# the counters declared; then the ratio of the medians (off / on).
# TCG-emulated RDMA: relative times between modes, not what a NIC would show.
# Exit: 0, 1 when a run failed (wrong result, no start), 77 where the lab cannot run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build
rounds=3
retry=7
log=
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case $1 in
    --build) build=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --retry-cnt) retry=${2:?}; shift 2 ;;
    --log) log=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "gray_bench: unknown argument $1" >&2; usage 64 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "gray_bench: --rounds: a positive count, got '$rounds'" >&2; exit 64; }
[[ $retry =~ ^[0-7]$ ]] || { echo "gray_bench: --retry-cnt: 0..7, got '$retry'" >&2; exit 64; }
bench=$build/bin/reccl-bench
[[ -x $bench ]] || { echo "gray_bench: $bench missing (build the tree first)" >&2; exit 64; }
work=$(mktemp -d /tmp/reccl-gray-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
[[ -n $log ]] && : > "$log"

declare -A longest declared failed
for ((r = 1; r <= rounds; r++)); do
  for mode in on off; do
    window=; [[ $mode == off ]] && window=0
    envs=(--env "RECCL_IB_RETRY_CNT=$retry" --env VERBS_PLAN_MIN_FAILOVERS=0)
    [[ -n $window ]] && envs+=(--env "RECCL_RDMA_LOSS_WINDOW_MS=$window")
    out=$work/$mode.$r
    set +e
    "$root/tools/lab/lab.sh" run --vms 2 --rails 2 --timeout 240 --module sch_ingress --module cls_bpf "${envs[@]}" \
      --bin "$bench" --file "$root/tools/lab/verbs_bench_plan.sh" --file "$root/tools/lab/verbs_gray_plan.json" \
      -- sh /lab/bin/verbs_bench_plan.sh /lab/bin/verbs_gray_plan.json 1 1M > "$out" 2>&1
    rc=$?
    set -e
    [[ -n $log ]] && { echo "=== round $r mode $mode rc $rc"; cat "$out"; } >> "$log"
    ((rc == 77)) && { echo "gray_bench: the lab cannot run here"; exit 77; }
    ((rc == 0)) || { echo "gray_bench: round $r mode $mode failed (exit $rc)"; tail -20 "$out"; exit 1; }
    l=$(sed -n 's/.*plan: longest iteration \([0-9.]*\) ms.*/\1/p' "$out" | head -1)
    [[ -n $l ]] || { echo "gray_bench: round $r mode $mode printed no longest iteration"; exit 1; }
    longest[$mode]+="$l "
    grep -q 'rail0) degraded (source detector rdma_counters)' "$out" && declared[$mode]=$((${declared[$mode]:-0} + 1))
    grep -Eq '^\[vm0\] #  fault 0 at .* stall [0-9.]+ ms' "$out" || failed[$mode]=$((${failed[$mode]:-0} + 1))
    echo "round $r $mode: longest iteration $l ms"
  done
done
med() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f (%.1f-%.1f)", m, v[1], v[NR] }'; }
printf '\n| rail counters judged | rounds | longest iteration, ms: median (min-max) | rounds with a failover | declared by the counters |\n|---|---:|---|---:|---:|\n'
for mode in on off; do
  printf '| %s | %d | %s | %d | %d |\n' "$mode" "$rounds" "$(echo "${longest[$mode]}" | med)" \
    "$((rounds - ${failed[$mode]:-0}))" "${declared[$mode]:-0}"
done
on=$(echo "${longest[on]}" | med | cut -d' ' -f1)
off=$(echo "${longest[off]}" | med | cut -d' ' -f1)
awk -v a="$off" -v b="$on" 'BEGIN { if (b > 0) printf "\nlongest iteration, median off / on: %.2f\n", a / b }'
