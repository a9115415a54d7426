#!/usr/bin/env bash
# Fault to QP migration over verbs in the stock-kernel lab (2 hosts x 2 rails, soft-RoCE), per
# fault source and QP setting, side by side in one boot: rank 0's rail0 cable pulled
# mid-allreduce, the settings interleaved round by round (tools/lab/verbs_failover.sh bench).
#
#   bench/verbs/migration_bench.sh [--build DIR] [--rounds N] [--timeout S] [--log FILE] [MODE...]
#
# MODE is SOURCE:IB_TIMEOUT:IB_RETRY_CNT (RECCL_IB_TIMEOUT, RECCL_IB_RETRY_CNT). SOURCE: bpf, the
# kernel hooks (carrier fexit, ib_dispatch_event) through the in-process detector, the move onto
# a pre-connected standby QP; bpfconnect, the same with standbys off (RECCL_FAILOVER_STANDBY=0:
# the new QP connected on the fault); inband, no
# detector: completion errors and the stall check's liveness probes (RECCL_STALL_TIMEOUT_MS 2 s);
# cqe, completion errors alone, the path NCCL has. Default modes: the detector and in-band at the
# lab's QP setting, the detector at NCCL's default, completion errors alone at the smallest
# setting that holds on this lab's healthy links, at 20:6 and at NCCL's 20:7.
# Prints one table, per mode: the rounds, the rank-0 failover's first signal and the moment the
# held-up work moved again, both in ms after the carrier loss the guest read (median, min-max),
# and the rounds that never migrated (the allreduce failed at RECCL_TIMEOUT_MS = 45 s instead).
# TCG-emulated RDMA: relative times between modes, not what a NIC would show.
# Exit: 0, 1 when a run failed (wrong result, no start), 77 where the lab cannot run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build
rounds=3
timeout=
log=
modes=()
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case $1 in
    --build) build=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --timeout) timeout=${2:?}; shift 2 ;;
    --log) log=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "migration_bench: unknown option $1" >&2; usage 64 ;;
    *) modes+=("$1"); shift ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "migration_bench: --rounds: a positive count, got '$rounds'" >&2; exit 64; }
((${#modes[@]})) || modes=(bpf:18:1 inband:18:1 bpf:20:7 cqe:16:1 cqe:20:6 cqe:20:7)
for m in "${modes[@]}"; do
  [[ $m =~ ^(bpf|bpfconnect|inband|cqe):[0-9]+:[0-7]$ ]] ||
    { echo "migration_bench: mode '$m': expected bpf|bpfconnect|inband|cqe:IB_TIMEOUT:IB_RETRY_CNT, e.g. bpf:18:1" >&2; exit 64; }
done
worker=$build/bin/failover_worker
[[ -x $worker ]] || { echo "migration_bench: $worker missing (build the tree first)" >&2; exit 64; }
# A run is ~25 s with a migration and ~60 s when the allreduce waits for RECCL_TIMEOUT_MS.
: "${timeout:=$((120 + rounds * ${#modes[@]} * 70))}"
[[ -n $log ]] || log=$(mktemp "${TMPDIR:-/tmp}/migration_bench.XXXXXX.log")
echo "migration_bench: ${#modes[@]} modes x $rounds rounds, lab deadline ${timeout} s, log $log" >&2
set +e
"$root/tools/lab/lab.sh" run --vms 2 --rails 2 --timeout "$timeout" --bin "$worker" \
  --file "$root/tools/lab/verbs_failover.sh" -- sh /lab/bin/verbs_failover.sh bench "$rounds" "${modes[@]}" >"$log" 2>&1
rc=$?
set -e
((rc == 77)) && { tail -n 3 "$log" >&2; exit 77; }
grep -a '^lab: ' "$log" >&2 || true
awk -v order="${modes[*]}" '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function fig(list, n,   a, i, lo, hi) {
    if (n == 0) return "-"
    split(list, a, " ")
    lo = hi = a[1] + 0
    for (i = 1; i <= n; i++) { a[i] += 0; if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
    return sprintf("%.1f (%.1f-%.1f)", median(a, n), lo, hi)
  }
  /^\[vm0\] bench .* rank 0: / {
    m = $3; runs[m]++
    if (match($0, /signal_ms [-0-9.]+/)) { sig[m] = sig[m] " " substr($0, RSTART + 10, RLENGTH - 10); ns[m]++ }
    if (match($0, /resume_ms [-0-9.]+/)) { res[m] = res[m] " " substr($0, RSTART + 10, RLENGTH - 10); nr[m]++ }
    if (match($0, /source [^;]+/)) src[m] = substr($0, RSTART + 7, RLENGTH - 7)
    if (match($0, /error after [0-9]+ us/)) { e = substr($0, RSTART + 12, RLENGTH - 15); err[m] = err[m] sprintf(" %.1f s", e / 1e6) }
  }
  END {
    printf "| mode (source:timeout:retry) | rounds | signal ms | resume ms | no migration (error after) | source |\n"
    printf "|---|---:|---|---|---|---|\n"
    n = split(order, o, " ")
    for (i = 1; i <= n; i++) {
      m = o[i]
      printf "| %s | %d | %s | %s | %s | %s |\n", m, runs[m], fig(sig[m], ns[m]), fig(res[m], nr[m]),
             err[m] == "" ? "-" : substr(err[m], 2), src[m] == "" ? "-" : src[m]
    }
  }' "$log"
if ((rc != 0)); then
  echo "migration_bench: the lab run exited $rc; the guest's lines:" >&2
  grep -a 'FAILED\|verbs_failover' "$log" | tail -n 20 >&2
  exit 1
fi
