#!/bin/sh
# Guest side of lab.VerbsBenchFaultPlan (tests/lab/CMakeLists.txt, docs/lab.md): reccl-bench as
# one rank per lab VM, an allreduce loop over RECCL_TRANSPORT=verbs on rail0 and rail1 while rank 0
# runs the fault plan PLAN (tools/lab/verbs_plan.json: rail0's cable pulled through the qemu
# monitor, later rail1 taken admin down, each put back by the plan).
#
#   verbs_bench_plan.sh PLAN FAULTS [SIZE]
#
# Passes when reccl-bench exits 0 on every rank (every result bit-exact, every action of the
# plan applied and undone) and rank 0's report shows FAULTS faults, each with a failover and a
# stall figure, and failovers > 0. Rank 0 prints the plan's log and the run's per-fault figures
# and summary after the table.
set -u
[ $# -ge 2 ] || { echo "usage: verbs_bench_plan.sh PLAN FAULTS [SIZE]"; exit 64; }
plan=$1
faults=$2
size=${3:-256K}
out=/tmp/verbs_bench_plan.$$
# 18:1 (2 x 1.1 s): smaller QP settings fail healthy rxe links on a starved TCG host
# (docs/verbs.md); the detector, not the QP's retry budget, starts the migrations here.
export RECCL_NICS=rail0,rail1 RECCL_TRANSPORT=verbs RECCL_IB_TIMEOUT=18 RECCL_IB_RETRY_CNT=1
# The plan's faults are the detector's to find; a stall check at 10 s keeps the liveness probes
# from moving healthy paths while a guest's one vCPU verifies the detector's BPF programs
# (unanswered for over 2 s there), which would leave nothing on rail0 for the plan's cable pull.
export RECCL_STALL_TIMEOUT_MS=10000
export RECCL_CHUNK_SIZE=16384 RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=INIT,FAILOVER

fail() { echo "verbs_bench_plan rank $RANK: FAILED: $1"; rm -f "$out" "$out.rc" "$out.json" "$out.log"; exit 1; }

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
  with=$(sed -n 's/^# stall ms .* over \([0-9]*\) faults with a failover.*/\1/p' "$out")
  [ "${with:-0}" -eq "$faults" ] || fail "${with:-no} of $faults faults had a failover"
  stalls=$(grep -c "^#  fault [0-9]* at .* stall [0-9.]* ms" "$out")
  [ "$stalls" -eq "$faults" ] || fail "$stalls of $faults faults have a stall figure"
  fo=$(sed -n 's/^# failovers \([0-9]*\) failbacks.*/\1/p' "$out")
  [ "${fo:-0}" -ge 1 ] || fail "no failover"
  # The plan's actions (a cable's done_mono_ns: when its carrier read as asked), then the JSON's
  # per-fault figures and summary (reccl-bench --json writes one key a line at the top).
  grep '"event":"action"' "$out.log"
  sed -n '/^ "faults": \[/,/^ \]/p; /^ "summary": {/,/^ }/p' "$out.json"
fi
echo "verbs_bench_plan rank $RANK: ok"
rm -f "$out" "$out.rc" "$out.json" "$out.log"
exit 0
