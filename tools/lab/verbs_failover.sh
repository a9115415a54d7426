#!/bin/sh
# Guest side of the verbs failover lab tests and bench (tests/lab/CMakeLists.txt, docs/lab.md,
# bench/verbs/migration_bench.sh): one rank per lab VM runs failover_worker's allreduce loop over
# RECCL_TRANSPORT=verbs on rail0 and rail1, cables pulled through the qemu monitor mid-allreduce.
#
#   verbs_failover.sh SCENARIO...     each in turn in this boot; exit 1 at the first that fails
#     one-side    rank 0's rail0 pulled, put back: migrated, failed back, every result bit-exact
#     both-sides  rail0 pulled on both hosts at once, put back: the same
#     host-down   both of rank 0's rails pulled: an error on every rank within
#                 RECCL_FAILOVER_TIMEOUT_MS of the failing allreduce's start (+ the detection slack)
#     relay       two ranks per host (ranks 2*LAB_INDEX and 2*LAB_INDEX+1), RECCL_FAILOVER_ROUTE=relay:
#                 host 0's rail0 pulled mid-allreduce, put back: host 0's ranks move their rail0
#                 connections onto each other (shared-memory pipe, the other's rail1 NIC), every
#                 result bit-exact, over 1 MiB forwarded on host 0, nothing relayed on the others
#     relay-affinity  the same two ranks per host, route auto under RECCL_NIC_AFFINITY=1, one
#                 channel: host 0's rail1 (rank 1's own NIC) pulled: rank 1 relays through rank 0,
#                 rank 0 stays on its own NIC
#     stalled-tx  rank 0's rail1 stops transmitting mid-loop (a plug qdisc holds every packet
#                 queued on it, as a NIC whose transmit queue the device no longer serves): the
#                 stall check moves rail1's connections, every result bit-exact, and
#                 recclCommDestroy returns within $destroy_bound_ms ms on rank 0 although the
#                 kernel's destroy of an rxe QP whose packets are held waits for them (tens of
#                 seconds each); the plug goes after the destroy, so that the process can exit
#   verbs_failover.sh bench ROUNDS SOURCE:IB_TIMEOUT:IB_RETRY_CNT...
#     rank 0's rail0 pulled mid-allreduce ROUNDS times per setting, the settings interleaved;
#     prints "bench SOURCE:T:R round K rank R: timeline ..." (fault to migration, from the
#     worker) or "... error after U us" (no migration before RECCL_TIMEOUT_MS), and exits 1 only
#     for a wrong result or a run that could not start. SOURCE: bpf (RECCL_DETECTOR=bpf: the
#     kernel hooks; the move onto a pre-connected standby QP), bpfconnect (the same, standbys
#     off: the QP connected on the fault), inband (RECCL_DETECTOR=none: completion errors and the stall check's
#     liveness probes), cqe (completion errors alone, as NCCL has: the stall check an hour).
# Every run rendezvouses on its own port (MASTER_PORT + run index): the previous run's
# listener may still be closing.
set -u
[ $# -ge 1 ] || { echo "usage: verbs_failover.sh one-side|both-sides|host-down|relay|relay-affinity|stalled-tx... | bench ROUNDS MODE..."; exit 64; }
base_port=$MASTER_PORT
run_index=0
timeout_ms=4000
slack_ms=3000  # detection and the peer's notice under TCG on a loaded host
destroy_bound_ms=30000  # stalled-tx: the library waits 5 s for the kernel, rxe over 40 s a held QP
out=/tmp/verbs_failover.$$

# run_worker NAME: one failover_worker run with the environment set by the caller; its output in
# $out (and on the console: the runner reads the worker's cable requests there), its exit in $rc.
run_worker() {
  export MASTER_PORT=$((base_port + run_index))
  run_index=$((run_index + 1))
  echo "verbs_failover: run $1 (MASTER_PORT $MASTER_PORT)"
  { failover_worker 2>&1; echo $? > "$out.rc"; } | tee "$out"
  rc=$(cat "$out.rc")
}

# One allreduce loop, a cable pulled in iteration 2: RECCL_IB_* as the caller set them.
# 18:1 (2 x 1.1 s) by default: smaller settings fail healthy rxe links on a starved TCG host
# (docs/verbs.md); the detector, not the QP's retry budget, starts the migrations here.
base_env() {
  export RECCL_NICS=rail0,rail1 RECCL_TRANSPORT=verbs RECCL_IB_TIMEOUT=${1:-18} RECCL_IB_RETRY_CNT=${2:-1}
  export RECCL_CHUNK_SIZE=16384 WORKER_COLL=allreduce WORKER_COUNT=1048576 WORKER_ITERS=5 WORKER_SETTLE_MS=3000
  export RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=INIT,FAILOVER
  unset RECCL_DETECTOR RECCL_FAILOVER_STANDBY RECCL_STALL_TIMEOUT_MS RECCL_FAILOVER_TIMEOUT_MS RECCL_TIMEOUT_MS WORKER_WAIT_SOURCE
  unset RECCL_FAILOVER_ROUTE WORKER_RELAY_STATS RECCL_NIC_AFFINITY RECCL_NCHANNELS
}

# Who a line speaks for: this VM's rank, or its host where it runs two ranks.
who() { if [ "${LAB_PAIR:-0}" = 1 ]; then echo "host $LAB_INDEX"; else echo "rank $RANK"; fi; }
# What the rails did since boot, one line per device: each rxe device's nonzero hw_counters
# (retransmits, RNR NAKs, sequence errors: why a path went quiet) and each rail's frame counts.
rail_counters() {
  for d in /sys/class/infiniband/*; do
    [ -d "$d/ports/1/hw_counters" ] || continue
    line=""
    for c in "$d"/ports/1/hw_counters/*; do
      v=$(cat "$c" 2>/dev/null) || continue
      [ "${v:-0}" != 0 ] && line="$line ${c##*/}=$v"
    done
    echo "verbs_failover $1 $(who): ${d##*/}:${line:- all zero}"
  done
  for n in rail0 rail1; do
    d=/sys/class/net/$n/statistics
    [ -d "$d" ] || continue
    echo "verbs_failover $1 $(who): $n: tx $(cat $d/tx_packets) rx $(cat $d/rx_packets) tx_dropped $(cat $d/tx_dropped) rx_dropped $(cat $d/rx_dropped)"
  done
}
fail() { echo "verbs_failover $1 $(who): FAILED: $2"; rail_counters "$1"; rm -f "$out" "$out".*; exit 1; }

# run_pair NAME: two failover_worker runs on this host at once, ranks 2*LAB_INDEX and
# 2*LAB_INDEX+1 of 2*LAB_VMS; their outputs in $out.0 and $out.1 (and on the console), their
# exits in $rc0 and $rc1.
run_pair() {
  export MASTER_PORT=$((base_port + run_index))
  run_index=$((run_index + 1))
  echo "verbs_failover: run $1, two ranks per host (MASTER_PORT $MASTER_PORT)"
  for k in 0 1; do
    { RANK=$((LAB_INDEX * 2 + k)) WORLD_SIZE=$((LAB_VMS * 2)) LOCAL_RANK=$k LOCAL_WORLD_SIZE=2 failover_worker 2>&1
      echo $? > "$out.$k.rc"; } | tee "$out.$k" &
  done
  wait
  rc0=$(cat "$out.0.rc")
  rc1=$(cat "$out.1.rc")
}

# The relay scenarios. relay: RECCL_FAILOVER_ROUTE=relay, host 0 loses rail0, and its two ranks
# forward for each other. relay-affinity: route auto under RECCL_NIC_AFFINITY=1 with one channel,
# host 0 loses rail1 (rank 1's own NIC): rank 1 relays through rank 0, which stays direct. Read
# from WORKER_RELAY_STATS's "relay rank R migrations M forwarded B pipes P" lines and the exits;
# host 1 relays nothing in either.
relay_field() {  # relay_field FIELD FILE...: the sum of FIELD (migrations, forwarded) over the files
  f=$1
  shift
  cat "$@" | sed -n "s/^relay rank [0-9]* .*$f \([0-9]*\).*/\1/p" | awk '{s += $1} END {print s + 0}'
}

relay() {
  LAB_PAIR=1
  base_env
  export WORKER_RELAY_STATS=1 RECCL_STALL_TIMEOUT_MS=10000
  case $1 in
    relay) export RECCL_FAILOVER_ROUTE=relay WORKER_FAULTS=2/mid/@lab/rail0/0 ;;
    relay-affinity) export RECCL_FAILOVER_ROUTE=auto RECCL_NIC_AFFINITY=1 RECCL_NCHANNELS=1 WORKER_FAULTS=2/mid/@lab/rail1/0 ;;
  esac
  run_pair "$1"
  rail_counters "$1"
  for k in 0 1; do
    r=$((LAB_INDEX * 2 + k))
    eval "code=\$rc$k"
    [ "$code" -eq 0 ] || fail "$1" "rank $r: worker exit $code"
    grep -q "transport verbs" "$out.$k" || fail "$1" "rank $r: the communicator did not use verbs"
    grep -q "^relay rank $r " "$out.$k" || fail "$1" "rank $r: no relay counters"
  done
  migrations=$(relay_field migrations "$out.0" "$out.1")
  forwarded=$(relay_field forwarded "$out.0" "$out.1")
  if [ "$LAB_INDEX" -ne 0 ]; then
    [ "$((migrations + forwarded))" -eq 0 ] || fail "$1" "host $LAB_INDEX relayed ($migrations moves, $forwarded bytes)"
  else
    grep -q "when mid: hit" "$out.0" || fail "$1" "the cable was not pulled mid-allreduce"
    [ "$migrations" -ge 1 ] || fail "$1" "host 0 moved no connection onto a relay"
    [ "$forwarded" -gt 1048576 ] || fail "$1" "host 0's relays forwarded $forwarded bytes, expected over 1 MiB"
    if [ "$1" = relay-affinity ]; then
      [ "$(relay_field migrations "$out.0")" -eq 0 ] || fail "$1" "rank 0 relayed, though its own NIC (rail0) was up"
      [ "$(relay_field migrations "$out.1")" -ge 1 ] || fail "$1" "rank 1 did not relay"
      [ "$(relay_field forwarded "$out.0")" -gt 1048576 ] || fail "$1" "rank 0 forwarded too little for rank 1"
    fi
  fi
  LAB_PAIR=0
  echo "verbs_failover $1 host $LAB_INDEX: ok: $migrations moves onto a relay, $forwarded bytes forwarded, every result bit-exact"
}

# wait_line PATTERN FILE SECONDS: until a line of FILE matches PATTERN; 1 when SECONDS pass first.
wait_line() {
  n=$(($3 * 10))
  while [ "$n" -gt 0 ]; do
    grep -q "$1" "$2" 2>/dev/null && return 0
    sleep 0.1
    n=$((n - 1))
  done
  return 1
}

stalled_tx() {
  base_env
  # A run by time: rail1's connections wait for the stall check once the plug is in.
  export RECCL_STALL_TIMEOUT_MS=3000 WORKER_SECONDS=10 WORKER_ITERS=1000000
  tc=/lab/bin/tc
  rm -f "$out" "$out".*
  if [ "$RANK" -eq 0 ]; then
    [ -x "$tc" ] || fail stalled-tx "no iproute2 tc in /lab/bin (for the plug qdisc; lab.sh --bin)"
    # Every wait bounded, 182 s at most in all (the test's limit is 300 s): a worker that dies
    # without its lines exits only once the plug is gone (its QPs' destroy waits for it).
    (
      wait_line "^started rank" "$out" 60 || exit 0
      sleep 2
      "$tc" qdisc add dev rail1 root plug limit 100000000 || { echo "verbs_failover stalled-tx: no plug qdisc on rail1"; exit 0; }
      echo "verbs_failover stalled-tx: rail1's transmit queue plugged"
      wait_line "^done rank\|^failed rank" "$out" 60
      "$tc" -s qdisc show dev rail1 > "$out.qdisc"
      wait_line "^destroyed rank\|^failed rank" "$out" 60
      "$tc" qdisc del dev rail1 root
    ) &
  fi
  run_worker stalled-tx
  wait
  grep -q "transport verbs" "$out" || fail stalled-tx "the communicator did not use verbs"
  [ "$rc" -eq 0 ] || fail stalled-tx "worker exit $rc"
  if [ "$RANK" -eq 0 ]; then
    held=$(sed -n 's/.*backlog [^ ]* \([0-9]*\)p.*/\1/p' "$out.qdisc" 2>/dev/null | head -n 1)
    [ "${held:-0}" -gt 0 ] || fail stalled-tx "rail1's plug held no packet when the loop ended: nothing for the destroy to wait on ($(cat "$out.qdisc" 2>/dev/null))"
    us=$(sed -n 's/^destroyed rank [0-9]* destroy_us \([0-9]*\).*/\1/p' "$out")
    [ -n "$us" ] || fail stalled-tx "no 'destroyed rank' line"
    [ "$us" -le $((destroy_bound_ms * 1000)) ] || fail stalled-tx "recclCommDestroy took ${us} us with $held packets held on rail1"
    echo "verbs_failover stalled-tx rank 0: ok: recclCommDestroy took ${us} us with $held packets held on rail1, every result bit-exact"
  else
    echo "verbs_failover stalled-tx rank $RANK: ok: every result bit-exact"
  fi
}

scenario() {
  case $1 in
    relay | relay-affinity)
      relay "$1"
      return
      ;;
    stalled-tx)
      stalled_tx
      return
      ;;
  esac
  base_env
  # The cable pulls are the detector's to find. A TCG guest beside a loaded host can go the
  # default 2 s stall time without an ack on a healthy link: the stall check then moves healthy
  # connections, and rail0's come home by such a move instead of the fail-back checked here.
  case $1 in
    one-side) export WORKER_FAULTS=2/mid/@lab/rail0/0 RECCL_STALL_TIMEOUT_MS=10000 ;;
    both-sides) export WORKER_FAULTS=2/mid/@lab/rail0/0,2/mid/@lab/rail0/1 RECCL_STALL_TIMEOUT_MS=10000 ;;
    host-down) export WORKER_FAULTS=2/mid/@lab/rail0+rail1/0 RECCL_FAILOVER_TIMEOUT_MS=$timeout_ms RECCL_TIMEOUT_MS=120000 ;;
    *) echo "verbs_failover.sh: unknown scenario $1"; exit 64 ;;
  esac
  run_worker "$1"
  grep -q "transport verbs" "$out" || fail "$1" "the communicator did not use verbs"
  if [ "$1" = host-down ]; then
    [ "$rc" -ge 10 ] || fail "$1" "worker exit $rc, expected an error (10 + result)"
    us=$(sed -n 's/^failed rank [0-9]* at_ns [0-9]* call_us \([0-9]*\).*/\1/p' "$out")
    [ -n "$us" ] || fail "$1" "no 'failed rank' line"
    [ "$us" -le $(( (timeout_ms + slack_ms) * 1000 )) ] || fail "$1" "the error came ${us} us after the allreduce started"
    echo "verbs_failover $1 rank $RANK: ok: error after ${us} us (RECCL_FAILOVER_TIMEOUT_MS=$timeout_ms)"
  else
    [ "$rc" -eq 0 ] || fail "$1" "worker exit $rc"
    done=$(grep "^done rank" "$out")
    fo=$(echo "$done" | sed -n 's/.* failovers \([0-9]*\) failbacks \([0-9]*\) .*/\1/p')
    fb=$(echo "$done" | sed -n 's/.* failovers \([0-9]*\) failbacks \([0-9]*\) .*/\2/p')
    [ "${fo:-0}" -ge 1 ] || fail "$1" "no failover ($done)"
    [ "${fb:-0}" -ge 1 ] || fail "$1" "no fail-back ($done)"
    if echo "$WORKER_FAULTS" | grep -q "/$RANK\(,\|$\)"; then
      grep -q "when mid: hit" "$out" || fail "$1" "the cable was not pulled mid-allreduce"
    fi
    echo "verbs_failover $1 rank $RANK: ok: $fo failovers, $fb fail-backs, every result bit-exact"
  fi
}

bench() {
  rounds=$1
  shift
  k=1
  while [ "$k" -le "$rounds" ]; do
    for mode in "$@"; do
      source=${mode%%:*}
      qp=${mode#*:}
      base_env "${qp%%:*}" "${qp#*:}"
      case $source in
        bpf) export RECCL_DETECTOR=bpf ;;
        bpfconnect) export RECCL_DETECTOR=bpf RECCL_FAILOVER_STANDBY=0 ;;
        inband) export RECCL_DETECTOR=none ;;
        cqe) export RECCL_DETECTOR=none RECCL_STALL_TIMEOUT_MS=3600000 ;;
        *) echo "verbs_failover.sh: unknown source $source (bpf, bpfconnect, inband, cqe)"; exit 64 ;;
      esac
      # A completion error at NCCL's 20:7 never comes on rxe (docs/verbs.md): the allreduce then
      # ends in RECCL_TIMEOUT_MS's error, which is the figure.
      export RECCL_TIMEOUT_MS=45000 WORKER_WAIT_SOURCE=1 WORKER_FAULTS=2/mid/@lab/rail0/0
      run_worker "bench $mode round $k"
      grep -q "transport verbs" "$out" || fail "bench $mode" "the communicator did not use verbs"
      [ "$rc" -eq 1 ] && fail "bench $mode" "a wrong result"
      line=$(grep "^timeline rank" "$out" | tail -n 1)
      if [ "$rc" -ge 10 ]; then
        us=$(sed -n 's/^failed rank [0-9]* at_ns [0-9]* call_us \([0-9]*\).*/\1/p' "$out")
        [ -n "$us" ] || fail "bench $mode" "worker exit $rc before the loop"
        line="${line:+$line; }error after $us us"
      elif [ "$rc" -ne 0 ]; then
        fail "bench $mode" "worker exit $rc"
      fi
      echo "bench $mode round $k rank $RANK: ${line:-no timeline line}"
    done
    k=$((k + 1))
  done
}

if [ "$1" = bench ]; then
  shift
  [ $# -ge 2 ] || { echo "usage: verbs_failover.sh bench ROUNDS MODE..."; exit 64; }
  bench "$@"
else
  for s in "$@"; do scenario "$s"; done
fi
rm -f "$out" "$out".*
exit 0
