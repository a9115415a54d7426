#!/bin/sh
# Guest side of lab.VerbsBenchFaultPlan and lab.VerbsRandomFaultSoak (tests/lab/CMakeLists.txt,
# docs/lab.md): reccl-bench as one rank per lab VM, an allreduce loop over RECCL_TRANSPORT=verbs
# on rail0 and rail1 while rank 0 runs a fault plan on its own rails.
#
#   verbs_bench_plan.sh PLAN FAULTS [SIZE]
#     the plan file PLAN (tools/lab/verbs_plan.json: rail0's cable pulled through the qemu
#     monitor, later rail1 taken admin down, each put back by the plan). Passes when reccl-bench
#     exits 0 on every rank (every result bit-exact, every action of the plan applied and undone)
#     and rank 0's report shows FAULTS faults, each with a failover and a stall figure, and
#     failovers > 0.
#   verbs_bench_plan.sh --soak SEED N [SIZE]
#     N faults drawn from SEED, one at a time on either rail: a cable pulled (300-2000 ms), the
#     link admin down (300-2000 ms), the cable flapped (2-3 times, 400-800 ms a period), every
#     arriving packet dropped (500-3000 ms: within the QP's retries or not) or 2-20 % of them
#     (1-3 s), each followed by 2-4 s with both rails up. Drops are on ingress, as a network
#     loses packets: rxe on Debian's 6.1 resends at once a packet its own host dropped before
#     the wire, so an egress drop spins its requester (the guest's one vCPU locks up for the
#     drop's length; a RoCE NIC sends below tc). Passes when reccl-bench exits 0 on every rank
#     and the plan applied every fault; a fault need not cause a failover (a short drop passes
#     inside the QP's retransmissions). Rank 0 prints the plan and a summary line "soak: ...".
# Rank 0 prints the plan's log and the run's per-fault figures and summary after the table.
set -u
usage() { echo "usage: verbs_bench_plan.sh PLAN FAULTS [SIZE] | --soak SEED N [SIZE]"; exit 64; }
out=/tmp/verbs_bench_plan.$$
soak=0
if [ "${1:-}" = --soak ]; then
  [ $# -ge 3 ] || usage
  soak=1
  seed=$2
  drawn=$3
  size=${4:-256K}
  case $seed$drawn in *[!0-9]*) echo "verbs_bench_plan: --soak: SEED and N are numbers"; exit 64 ;; esac
  [ "$drawn" -ge 1 ] || { echo "verbs_bench_plan: --soak: N must be at least 1"; exit 64; }
  plan=$out.plan.json
  # The plan is drawn on every rank (the same on each): only rank 0 runs it.
  awk -v seed="$seed" -v n="$drawn" '
    function r(lo, hi) { return lo + int(rand() * (hi - lo + 1)) }
    BEGIN {
      srand(seed); t = 1500; faults = 0
      printf "{\"version\": 1, \"actions\": [\n"
      for (i = 0; i < n; i++) {
        dev = "rail" r(0, 1); k = r(0, 4)
        tgt = sprintf("\"target\": {\"netns\": \"\", \"dev\": \"%s\"}", dev)
        if (k == 0) { d = r(300, 2000); a = sprintf("\"action\": \"carrier-off\", %s, \"duration_ms\": %d", tgt, d); kind = "cable"; f = 1 }
        else if (k == 1) { d = r(300, 2000); a = sprintf("\"action\": \"link-down\", %s, \"duration_ms\": %d", tgt, d); kind = "link-down"; f = 1 }
        else if (k == 2) {
          p = r(400, 800); c = r(2, 3); d = p * c; f = c; kind = "flap"
          a = sprintf("\"action\": \"flap\", %s, \"params\": {\"period_ms\": %d, \"count\": %d, \"carrier\": true, \"seed\": %d}", tgt, p, c, r(1, 1000))
        } else if (k == 3) { d = r(500, 3000); a = sprintf("\"action\": \"blackhole\", %s, \"duration_ms\": %d, \"params\": {\"direction\": \"ingress\"}", tgt, d); kind = "blackhole"; f = 1 }
        else { d = r(1000, 3000); a = sprintf("\"action\": \"drop\", %s, \"duration_ms\": %d, \"params\": {\"rate\": %.2f, \"direction\": \"ingress\"}", tgt, d, r(2, 20) / 100); kind = "drop"; f = 1 }
        printf "  {\"at_ms\": %d, %s}%s\n", t, a, i + 1 < n ? "," : ""
        count[kind]++; faults += f
        t += d + r(2000, 4000)
      }
      printf "]}\n"
      printf "%d %d cable %d link-down %d flap %d blackhole %d drop %d\n", faults, t, count["cable"], count["link-down"], count["flap"], count["blackhole"], count["drop"] > "/dev/stderr"
    }' > "$plan" 2> "$plan.kinds" || { echo "verbs_bench_plan: drawing the plan failed"; exit 1; }
  read -r faults plan_ms kinds < "$plan.kinds"
  if [ "$RANK" -eq 0 ]; then
    echo "soak plan (seed $seed, $drawn faults, ${plan_ms} ms: $kinds):"
    cat "$plan"
  fi
else
  [ $# -ge 2 ] || usage
  plan=$1
  faults=$2
  size=${3:-256K}
fi
# 18:1 (2 x 1.1 s): smaller QP settings fail healthy rxe links on a starved TCG host
# (docs/verbs.md); the detector, not the QP's retry budget, starts the migrations here.
export RECCL_NICS=rail0,rail1 RECCL_TRANSPORT=verbs RECCL_IB_TIMEOUT=18 RECCL_IB_RETRY_CNT=1
# The plan's faults are the detector's to find; a stall check at 10 s keeps the liveness probes
# from moving healthy paths while a guest's one vCPU verifies the detector's BPF programs
# (unanswered for over 2 s there), which would leave nothing on rail0 for the plan's cable pull.
# A caller's value is kept (a soak with the default 2 s check: docs/results/soak.md).
export RECCL_STALL_TIMEOUT_MS=${RECCL_STALL_TIMEOUT_MS:-10000}
export RECCL_CHUNK_SIZE=16384 RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=INIT,FAILOVER

fail() {
  # The plan's log tells when each action ran, against when it was due.
  [ -s "$out.log" ] && grep '"event":"action"' "$out.log"
  echo "verbs_bench_plan rank $RANK: FAILED: $1"
  rm -f "$out" "$out".*
  exit 1
}

# The output goes to the console too: the runner reads the plan's cable requests there.
{ reccl-bench --fault-plan "$plan" -b "$size" -e "$size" -n 4 -w 2 --fault-tail-ms 2500 \
    --json "$out.json" --fault-log "$out.log" 2>&1; echo $? > "$out.rc"; } | tee "$out"
rc=$(cat "$out.rc")
[ "$rc" -eq 0 ] || fail "reccl-bench exit $rc"
grep -q "transport verbs" "$out" || fail "the communicator did not use verbs"
if [ "$RANK" -eq 0 ]; then
  grep -q "^# Out of bounds values : 0 OK" "$out" || fail "results not bit-exact"
  n=$(sed -n 's/^# fault plan .*, \([0-9]*\) faults$/\1/p' "$out")
  [ "${n:-0}" -eq "$faults" ] || fail "the plan applied ${n:-no} faults, expected $faults"
  fo=$(sed -n 's/^# failovers \([0-9]*\) failbacks.*/\1/p' "$out")
  [ "${fo:-0}" -ge 1 ] || fail "no failover"
  if [ "$soak" -eq 1 ]; then
    iters=$(sed -n 's/^# fault plan .*: \([0-9]*\) iterations of .*/\1/p' "$out")
    # The longest iteration, from the JSON's timeline (one key a line, keys in order: end first).
    longest=$(sed -n '/^ "iterations": \[/,/^ \]/p' "$out.json" | awk -F': ' '
      /"end_mono_ns"/ { e = $2 + 0 } /"start_mono_ns"/ { d = e - ($2 + 0); if (d > m) m = d }
      END { printf "%.1f", m / 1e6 }')
    echo "soak: seed $seed, $drawn faults ($kinds; $faults counting each flap's downs), $iters iterations bit-exact, longest ${longest} ms;" \
      "$(sed -n 's/^# \(failovers .*\) (sums over ranks)$/\1/p' "$out");" \
      "$(sed -n 's/^# \(stall ms p50 [^ ]* p99 [^ ]* max [^ ]*\) .* over \([0-9]*\) faults with a failover.*/\1 over \2 faults with a failover/p' "$out")"
  else
    with=$(sed -n 's/^# stall ms .* over \([0-9]*\) faults with a failover.*/\1/p' "$out")
    [ "${with:-0}" -eq "$faults" ] || fail "${with:-no} of $faults faults had a failover"
    stalls=$(grep -c "^#  fault [0-9]* at .* stall [0-9.]* ms" "$out")
    [ "$stalls" -eq "$faults" ] || fail "$stalls of $faults faults have a stall figure"
    # The plan's actions (a cable's done_mono_ns: when its carrier read as asked), then the JSON's
    # per-fault figures and summary (reccl-bench --json writes one key a line at the top).
    grep '"event":"action"' "$out.log"
    sed -n '/^ "faults": \[/,/^ \]/p; /^ "summary": {/,/^ }/p' "$out.json"
  fi
fi
echo "verbs_bench_plan rank $RANK: ok"
rm -f "$out" "$out".*
exit 0
