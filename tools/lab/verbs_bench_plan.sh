#!/bin/sh
# Guest side of lab.VerbsBenchFaultPlan and lab.VerbsRandomFaultSoak (tests/lab/CMakeLists.txt,
# docs/lab.md): reccl-bench as one rank per lab VM, an allreduce loop over RECCL_TRANSPORT=verbs
# on rail0 and rail1 while rank 0 runs a fault plan on its own rails (a two-host soak: each rank
# on its own).
#
#   verbs_bench_plan.sh PLAN FAULTS [SIZE]
#     the plan file PLAN (tools/lab/verbs_plan.json: rail0's cable pulled through the qemu
#     monitor, later rail1 taken admin down, each put back by the plan). Passes when reccl-bench
#     exits 0 on every rank (every result bit-exact, every action of the plan applied and undone)
#     and rank 0's report shows FAULTS faults, each with a failover and a stall figure, and
#     failovers > 0. VERBS_PLAN_MIN_FAILOVERS=0 drops the failover checks (a baseline run
#     without the source that finds the fault). Rank 0 prints "plan: longest iteration X ms;
#     failovers ..." last.
#   verbs_bench_plan.sh --soak SEED N [SIZE [HOSTS]]
#     N faults drawn from SEED, one at a time on either of rank 0's rails (HOSTS 2: on either rail
#     of either host, the first on host 0, the second on host 1, then drawn; each host runs its
#     own, reccl-bench --fault-plan-every-rank): a cable pulled (300-2000 ms), the
#     link admin down (300-2000 ms), the cable flapped (2-3 times, 400-800 ms a period), every
#     arriving packet dropped (500-3000 ms: within the QP's retries or not) or 2-20 % of them
#     (1-3 s), each followed by 2-4 s with both rails up. Drops are on ingress, as a network
#     loses packets: rxe on Debian's 6.1 resends at once a packet its own host dropped before
#     the wire, so an egress drop spins its requester (the guest's one vCPU locks up for the
#     drop's length; a RoCE NIC sends below tc). Passes when reccl-bench exits 0 on every rank
#     and the plan applied every fault; a fault need not cause a failover (a short drop passes
#     inside the QP's retransmissions). Rank 0 prints the plan and a summary line "soak: ..."
#     (with HOSTS 2, host 1 checks and prints its own plan's count). HOSTS 2 is not the CI
#     soak's: qemu's virtio-net stops serving a NIC's transmit queue far more often with cables
#     pulled on both VMs (docs/results/lab.md).
# Rank 0 prints the plan's log and the run's per-fault figures and summary after the table.
set -u
usage() { echo "usage: verbs_bench_plan.sh PLAN FAULTS [SIZE] | --soak SEED N [SIZE [HOSTS]]"; exit 64; }
out=/tmp/verbs_bench_plan.$$
soak=0
if [ "${1:-}" = --soak ]; then
  [ $# -ge 3 ] || usage
  soak=1
  seed=$2
  drawn=$3
  size=${4:-256K}
  hosts=${5:-1}
  case $seed$drawn in *[!0-9]*) echo "verbs_bench_plan: --soak: SEED and N are numbers"; exit 64 ;; esac
  [ "$drawn" -ge 1 ] || { echo "verbs_bench_plan: --soak: N must be at least 1"; exit 64; }
  case $hosts in 1 | 2) ;; *) echo "verbs_bench_plan: --soak: HOSTS is 1 or 2"; exit 64 ;; esac
  # The plans are drawn on every rank (the same on each), one per host; with two hosts each rank
  # runs its own, with one rank 0 runs host 0's (the draws then as they always were).
  if [ "$hosts" -eq 2 ]; then plan=$out.plan.$RANK.json; else plan=$out.plan.0.json; fi
  awk -v seed="$seed" -v n="$drawn" -v out="$out" -v hosts="$hosts" '
    function r(lo, hi) { return lo + int(rand() * (hi - lo + 1)) }
    BEGIN {
      srand(seed); t = 1500
      for (h = 0; h < hosts; h++) { file[h] = out ".plan." h ".json"; printf "{\"version\": 1, \"actions\": [\n" > file[h]; sep[h] = "" }
      for (i = 0; i < n; i++) {
        host = hosts < 2 ? 0 : i < 2 ? i : r(0, 1)
        dev = "rail" r(0, 1); k = r(0, 4)
        tgt = sprintf("\"target\": {\"netns\": \"\", \"dev\": \"%s\"}", dev)
        if (k == 0) { d = r(300, 2000); a = sprintf("\"action\": \"carrier-off\", %s, \"duration_ms\": %d", tgt, d); kind = "cable"; f = 1 }
        else if (k == 1) { d = r(300, 2000); a = sprintf("\"action\": \"link-down\", %s, \"duration_ms\": %d", tgt, d); kind = "link-down"; f = 1 }
        else if (k == 2) {
          p = r(400, 800); c = r(2, 3); d = p * c; f = c; kind = "flap"
          a = sprintf("\"action\": \"flap\", %s, \"params\": {\"period_ms\": %d, \"count\": %d, \"carrier\": true, \"seed\": %d}", tgt, p, c, r(1, 1000))
        } else if (k == 3) { d = r(500, 3000); a = sprintf("\"action\": \"blackhole\", %s, \"duration_ms\": %d, \"params\": {\"direction\": \"ingress\"}", tgt, d); kind = "blackhole"; f = 1 }
        else { d = r(1000, 3000); a = sprintf("\"action\": \"drop\", %s, \"duration_ms\": %d, \"params\": {\"rate\": %.2f, \"direction\": \"ingress\"}", tgt, d, r(2, 20) / 100); kind = "drop"; f = 1 }
        printf "%s  {\"at_ms\": %d, %s}", sep[host], t, a > file[host]; sep[host] = ",\n"
        count[kind]++; hf[host] += f
        t += d + r(2000, 4000)
      }
      for (h = 0; h < hosts; h++) printf "\n]}\n" > file[h]
      printf "%d %d %d cable %d link-down %d flap %d blackhole %d drop %d\n", hf[0], hf[1], t, count["cable"], count["link-down"], count["flap"], count["blackhole"], count["drop"] > "/dev/stderr"
    }' 2> "$out.kinds" || { echo "verbs_bench_plan: drawing the plan failed"; exit 1; }
  # faults: this host's (each flap's downs counted).
  read -r faults0 faults1 plan_ms kinds < "$out.kinds"
  if [ "$RANK" -eq 0 ]; then faults=$faults0; else faults=$faults1; fi
  every_rank=
  [ "$hosts" -eq 2 ] && every_rank=--fault-plan-every-rank
  if [ "$RANK" -eq 0 ]; then
    echo "soak plan (seed $seed, $drawn faults on $hosts host(s), ${plan_ms} ms: $kinds; host 0: $faults0, host 1: $faults1 counting each flap's downs):"
    echo "host 0:"; cat "$out.plan.0.json"
    if [ "$hosts" -eq 2 ]; then echo "host 1:"; cat "$out.plan.1.json"; fi
  fi
else
  [ $# -ge 2 ] || usage
  plan=$1
  faults=$2
  size=${3:-256K}
  every_rank=
fi
# 18:1 (2 x 1.1 s): smaller QP settings fail healthy rxe links on a starved TCG host
# (docs/verbs.md); the detector, not the QP's retry budget, starts the migrations here.
# A caller's retry count is kept (the gray-rail run of docs/lab.md: 7, which rxe never ends).
export RECCL_NICS=rail0,rail1 RECCL_TRANSPORT=verbs RECCL_IB_TIMEOUT=18 RECCL_IB_RETRY_CNT=${RECCL_IB_RETRY_CNT:-1}
# The plan's faults are the detector's to find; a stall check at 10 s keeps the liveness probes
# from moving healthy paths while a guest's one vCPU verifies the detector's BPF programs
# (unanswered for over 2 s there), which would leave nothing on rail0 for the plan's cable pull.
# A caller's value is kept (a soak with the default 2 s check: docs/results/soak.md).
export RECCL_STALL_TIMEOUT_MS=${RECCL_STALL_TIMEOUT_MS:-10000}
export RECCL_CHUNK_SIZE=16384 RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=${RECCL_DEBUG_SUBSYS:-INIT,FAILOVER}

# The rails' state and frame counters, twice a second apart, and the neighbour table: whether a
# rail that stopped carrying traffic still sent frames (then the virtual cable lost them) or not.
rails_state() {
  for i in 1 2; do
    for d in /sys/class/net/rail*; do
      echo "rails: ${d##*/} $(cat "$d/operstate") carrier $(cat "$d/carrier" 2>/dev/null || echo -)" \
        "tx $(cat "$d/statistics/tx_packets") rx $(cat "$d/statistics/rx_packets")" \
        "tx_dropped $(cat "$d/statistics/tx_dropped") rx_dropped $(cat "$d/statistics/rx_dropped")"
    done
    [ "$i" -eq 1 ] && sleep 1
  done
  ip neigh show 2>&1 | sed 's/^/rails: neigh /'
  # Whether each rail still carries anything at all (a rail stuck below the plan's faults, with
  # carrier and no tc rule, is the emulation's, docs/results/lab.md). The peer may have ended its
  # run already: then no answer says nothing.
  for d in /sys/class/net/rail*; do
    k=${d##*/rail}
    peer=10.77.$((k + 1)).$(((LAB_INDEX + 1) % LAB_VMS + 1))
    if ping -c 2 -W 1 -I "${d##*/}" "$peer" > /dev/null 2>&1; then a=answers; else a="no answer"; fi
    echo "rails: ${d##*/} ping $peer: $a"
  done
}

fail() {
  rails_state
  # The plan's log tells when each action ran, against when it was due.
  [ -s "$out.log" ] && grep '"event":"action"' "$out.log"
  echo "verbs_bench_plan rank $RANK: FAILED: $1"
  rm -f "$out" "$out".*
  exit 1
}

# The output goes to the console too: the runner reads the plan's cable requests there.
{ reccl-bench --fault-plan "$plan" $every_rank -b "$size" -e "$size" -n 4 -w 2 --fault-tail-ms 2500 \
    --json "$out.json" --fault-log "$out.log" 2>&1; echo $? > "$out.rc"; } | tee "$out"
rc=$(cat "$out.rc")
[ "$rc" -eq 0 ] || fail "reccl-bench exit $rc"
grep -q "transport verbs" "$out" || fail "the communicator did not use verbs"
if [ "$RANK" -ne 0 ] && [ -n "$every_rank" ]; then
  n=$(sed -n 's/^# fault plan .* on rank [0-9]*: \([0-9]*\) faults, every action applied and undone$/\1/p' "$out")
  [ "${n:-0}" -eq "$faults" ] || fail "this host's plan did not apply its $faults faults and undo them"
fi
if [ "$RANK" -eq 0 ]; then
  grep -q "^# Out of bounds values : 0 OK" "$out" || fail "results not bit-exact"
  n=$(sed -n 's/^# fault plan .*, \([0-9]*\) faults$/\1/p' "$out")
  [ "${n:-0}" -eq "$faults" ] || fail "the plan applied ${n:-no} faults, expected $faults"
  fo=$(sed -n 's/^# failovers \([0-9]*\) failbacks.*/\1/p' "$out")
  minfo=${VERBS_PLAN_MIN_FAILOVERS:-1}
  case $minfo in '' | *[!0-9]*) fail "VERBS_PLAN_MIN_FAILOVERS: a count, got '$minfo'" ;; esac
  [ "${fo:-0}" -ge "$minfo" ] || fail "no failover"
  # The longest iteration, from the JSON's timeline (one key a line, keys in order: end first).
  longest=$(sed -n '/^ "iterations": \[/,/^ \]/p' "$out.json" | awk -F': ' '
    /"end_mono_ns"/ { e = $2 + 0 } /"start_mono_ns"/ { d = e - ($2 + 0); if (d > m) m = d }
    END { printf "%.1f", m / 1e6 }')
  if [ "$soak" -eq 1 ]; then
    iters=$(sed -n 's/^# fault plan .*: \([0-9]*\) iterations of .*/\1/p' "$out")
    # Two hosts: no stall percentiles, as host 0's analysis window of one of its faults takes in
    # host 1's faults (whose times are on another clock); the longest iteration is the figure.
    stall=
    [ "$hosts" -eq 1 ] && stall="; $(sed -n 's/^# \(stall ms p50 [^ ]* p99 [^ ]* max [^ ]*\) .* over \([0-9]*\) faults with a failover.*/\1 over \2 faults with a failover/p' "$out")"
    echo "soak: seed $seed, $drawn faults ($kinds; counting each flap's downs $faults0 on host 0, $faults1 on host 1), $iters iterations bit-exact, longest ${longest} ms;" \
      "$(sed -n 's/^# \(failovers .*\) (sums over ranks)$/\1/p' "$out")$stall"
  else
    if [ "$minfo" -ge 1 ]; then
      with=$(sed -n 's/^# stall ms .* over \([0-9]*\) faults with a failover.*/\1/p' "$out")
      [ "${with:-0}" -eq "$faults" ] || fail "${with:-no} of $faults faults had a failover"
      stalls=$(grep -c "^#  fault [0-9]* at .* stall [0-9.]* ms" "$out")
      [ "$stalls" -eq "$faults" ] || fail "$stalls of $faults faults have a stall figure"
    fi
    # The plan's actions (a cable's done_mono_ns: when its carrier read as asked), then the JSON's
    # per-fault figures and summary (reccl-bench --json writes one key a line at the top).
    grep '"event":"action"' "$out.log"
    sed -n '/^ "faults": \[/,/^ \]/p; /^ "summary": {/,/^ }/p' "$out.json"
    echo "plan: longest iteration ${longest} ms; $(sed -n 's/^# \(failovers .*\) (sums over ranks)$/\1/p' "$out")"
  fi
fi
echo "verbs_bench_plan rank $RANK: ok"
rm -f "$out" "$out".*
exit 0
