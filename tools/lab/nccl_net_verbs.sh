#!/bin/sh
# Guest side of lab.NcclNetOverVerbsPerNicDevices: the NCCL net plugin between two lab hosts over
# RDMA verbs (soft-RoCE on rail0 and rail1), driven as NCCL's proxy drives it
# (nccl_net_stream_worker), one connection each way on each per-NIC device. Rank 0 pulls its rail1
# cable mid-stream and plugs it back: the connections of device rail1 move onto rail0, those of
# device rail0 stay, every message arrives whole and in order (the worker checks each
# byte), and no rank errs.
#   nccl_net_verbs.sh SECONDS     the stream's length (at least; the fault comes 1 s in)
set -u
[ $# -eq 1 ] || { echo "usage: nccl_net_verbs.sh SECONDS"; exit 64; }
out=/tmp/nccl_net_verbs.$$
stop=/tmp/nccl_net_verbs.stop
: >"$stop"  # the stream ends once WORKER_SECONDS have passed
fail() { echo "nccl_net_verbs rank $RANK: FAILED: $1"; exit 1; }

# 18:1 (2 x 1.1 s) as verbs_failover.sh: smaller settings fail healthy rxe links on a starved
# TCG host; the detector moves the connections here, not the QPs' retry budget.
export RECCL_NICS=rail0,rail1 RECCL_TRANSPORT=verbs RECCL_IB_TIMEOUT=18 RECCL_IB_RETRY_CNT=1
export RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=INIT,FAILOVER WORKER_VERBOSE=1
export WORKER_PLUGIN=/lab/bin/libnccl-net-reccl.so WORKER_HANDLES_PORT=$((MASTER_PORT + 1))
export WORKER_CONNS=2 WORKER_DEV=spread WORKER_BYTES=262144 WORKER_INFLIGHT=4 WORKER_WAIT_SOURCE=1
export WORKER_STOP_FILE=$stop WORKER_SECONDS=$1

{ nccl_net_stream_worker 2>&1; echo $? >"$out.rc"; } | tee "$out" &
if [ "$RANK" -eq 0 ]; then
  i=0
  until grep -q "^started rank 0" "$out" 2>/dev/null; do
    [ $i -lt 1200 ] || fail "the stream did not start within 120 s"
    [ -f "$out.rc" ] && fail "the worker ended before the stream started"
    sleep 0.1
    i=$((i + 1))
  done
  sleep 1
  printf '\n@@lab-monitor set_link rail1 off\n'
  sleep 2
  printf '\n@@lab-monitor set_link rail1 on\n'
fi
wait
rc=$(cat "$out.rc")
[ "$rc" -eq 0 ] || fail "worker exit $rc"
grep -q "devices 2: reccl:rail0 reccl:rail1" "$out" || fail "the plugin did not offer a device per NIC"
grep -q "transport verbs" "$out" || fail "the connections did not use verbs"
grep -q "^done rank $RANK " "$out" || fail "no done line"
if [ "$RANK" -eq 0 ]; then
  grep -q "failover of rank .* rail 1 (rail1) -> rail 0 (rail0)" "$out" ||
    fail "no connection of device rail1 moved onto rail0"
  ! grep -q "failover of rank .* rail 0 (rail0) -> " "$out" ||
    fail "a connection of device rail0 moved, though rail0 stayed up"
fi
echo "nccl_net_verbs rank $RANK: passed"
