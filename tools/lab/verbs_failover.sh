#!/bin/sh
# Guest side of the verbs failover lab tests (tests/lab/CMakeLists.txt, docs/lab.md): one rank per
# lab VM runs failover_worker's allreduce loop over RECCL_TRANSPORT=verbs on rail0 and rail1,
# cables pulled through the qemu monitor mid-allreduce, and checks what the scenario must show.
#   one-side    rank 0's rail0 pulled, put back: migrated, failed back, every result bit-exact
#   both-sides  rail0 pulled on both hosts at once, put back: the same
#   host-down   both of rank 0's rails pulled: an error on every rank within
#               RECCL_FAILOVER_TIMEOUT_MS of the failing allreduce's start (+ the detection slack)
# Exit 0 when it showed it, 1 otherwise (the reason on stdout).
set -u
scenario=${1:?usage: verbs_failover.sh one-side|both-sides|host-down}
# 18:1 (2 x 1.1 s): smaller settings fail healthy rxe links on a starved TCG host (docs/verbs.md);
# the detector, not the QP's retry budget, starts the migrations here.
export RECCL_NICS=rail0,rail1 RECCL_TRANSPORT=verbs RECCL_IB_TIMEOUT=18 RECCL_IB_RETRY_CNT=1
export RECCL_CHUNK_SIZE=16384 WORKER_COLL=allreduce WORKER_COUNT=1048576 WORKER_ITERS=5 WORKER_SETTLE_MS=3000
export RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=INIT,FAILOVER
timeout_ms=4000
slack_ms=3000  # detection and the peer's notice under TCG on a loaded host
case $scenario in
  one-side) export WORKER_FAULTS=2/mid/@lab/rail0/0 ;;
  both-sides) export WORKER_FAULTS=2/mid/@lab/rail0/0,2/mid/@lab/rail0/1 ;;
  host-down) export WORKER_FAULTS=2/mid/@lab/rail0+rail1/0 RECCL_FAILOVER_TIMEOUT_MS=$timeout_ms RECCL_TIMEOUT_MS=120000 ;;
  *) echo "verbs_failover.sh: unknown scenario $scenario"; exit 64 ;;
esac
out=/tmp/verbs_failover.$$
# Straight to the console as well: the runner reads the worker's cable requests there.
{ failover_worker 2>&1; echo $? > "$out.rc"; } | tee "$out"
rc=$(cat "$out.rc")
fail() { echo "verbs_failover $scenario rank $RANK: FAILED: $*"; rm -f "$out" "$out.rc"; exit 1; }
grep -q "transport verbs" "$out" || fail "the communicator did not use verbs"
if [ "$scenario" = host-down ]; then
  [ "$rc" -ge 10 ] || fail "worker exit $rc, expected an error (10 + result)"
  us=$(sed -n 's/^failed rank [0-9]* at_ns [0-9]* call_us \([0-9]*\).*/\1/p' "$out")
  [ -n "$us" ] || fail "no 'failed rank' line"
  [ "$us" -le $(( (timeout_ms + slack_ms) * 1000 )) ] || fail "the error came ${us} us after the allreduce started"
  echo "verbs_failover $scenario rank $RANK: ok: error after ${us} us (RECCL_FAILOVER_TIMEOUT_MS=$timeout_ms)"
else
  [ "$rc" -eq 0 ] || fail "worker exit $rc"
  done=$(grep "^done rank" "$out")
  fo=$(echo "$done" | sed -n 's/.* failovers \([0-9]*\) failbacks \([0-9]*\) .*/\1/p')
  fb=$(echo "$done" | sed -n 's/.* failovers \([0-9]*\) failbacks \([0-9]*\) .*/\2/p')
  [ "${fo:-0}" -ge 1 ] || fail "no failover ($done)"
  [ "${fb:-0}" -ge 1 ] || fail "no fail-back ($done)"
  if echo "$WORKER_FAULTS" | grep -q "/$RANK\(,\|$\)"; then
    grep -q "when mid: hit" "$out" || fail "the cable was not pulled mid-allreduce"
  fi
  echo "verbs_failover $scenario rank $RANK: ok: $fo failovers, $fb fail-backs, every result bit-exact"
fi
rm -f "$out" "$out.rc"
exit 0
