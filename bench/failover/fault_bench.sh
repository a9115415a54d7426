#!/usr/bin/env bash
# Failover under real last-hop faults, side by side, on one fresh 2 hosts x 2 rails testbed, in
# one go: fault-free allreduce on one rail (RECCL_NICS==rail0) and on both rails; then
# `reccl-bench --fault-plan` with N faults of a rail of host 0 (each recovered later: switch-side
# link-downs, or with --fault carrier a tap NIC's carrier dropped with TUNSETCARRIER, the path a
# physical NIC's driver takes) for each detection source (BPF detector, rtnetlink, in-band only), in R rounds of N/R
# faults per source, each round preceded by a fault-free one-rail run in the fault loop's own mode
# (and one after the last), so that each round's bandwidth degraded to one rail is paired with a
# one-rail figure measured next to it; then the same fault against Gloo (one rail) once with
# recovery and once held until Gloo gives up. Prints stall p50/p99 per source and the bandwidth
# ratios (fault_report.py); writes one JSON file with every run.
#
#   sudo bench/failover/fault_bench.sh --build build --faults 100 --out fault_bench.json
#   sudo bench/failover/fault_bench.sh --faults 5 --size 8M --sources bpf     # a quick look
#   sudo bench/failover/fault_bench.sh --nic tap --fault carrier --down-ms 50-300 --out short.json
#   sudo bench/failover/fault_bench.sh --nic tap --fault carrier --down-ms 1000 --out held.json
#
# Options: --build DIR (build), --faults N per source (100), --size BYTES (64M), --down-ms MS
# fault duration (1000), or LO-HI: each fault's duration drawn uniformly from [LO, HI] ms (seeded,
# the same every run; e.g. 50-300 for short drops), --period-ms MS between faults (the longest
# duration + 1400 on veth, + 2000 on tap, where rtnetlink learns of a change ~1 s late and the
# fail-back waits for it), --nic veth|tap (veth: the testbed's NICs; tap: taps whose carrier takes
# the driver's path, docs/testbed.md), --fault link|carrier (link: the cable pulled at the switch
# port, the default; carrier: the host NIC's carrier off and on, tap only), --sources "bpf netlink none",
# --rounds R (4), --baseline-iters N (40), --gloo-timeout-ms MS (15000), --gloo-iters N|auto (auto: the
# 1 MiB allreduces of Gloo's loop around a recovered fault, sized from a short timed loop so that it
# lasts from 2 s before the fault to 2 s after its recovery), --no-gloo, --out FILE
# (fault_bench.json; the fault runs' rank logs go to fault_bench.logs/), --keep (leave the testbed
# and work files), --fifo PRIO (every rank, reccl's and Gloo's, under SCHED_FIFO PRIO via chrt:
# timing on a machine that others load), --pause-damon (turn the kernel's running DAMON monitors
# off for the run and back on at its end: on a kernel without preemption their scans can hold a
# CPU for tens of ms at a time, which lands in the stall's tail; docs/results/fault-bench.md,
# 2026-12-01 03:23).
# The JSON's "machine" says how many ran and the CPU they took during the run, paused or not.
# --trace-waits US (runqslower from libbpf-tools during the fault runs: each time a reccl thread
# waited US or more between its wake-up and a CPU, and which task the CPU switched from; counted
# per task name in the JSON's "machine", the lines in FILE.logs/waits.txt). --trace-bursts
# (bpftrace kthread_bursts.bt during the fault runs: every time a kernel thread held a CPU for 1 ms
# or more without a break; the report lays them over each fault's stall, per source in the JSON,
# the lines in FILE.logs/bursts.txt; mounts tracefs for the run when it is not).
# --linkwatch-busy MS (50-900): during each fault run a neighbour NIC that the ranks do not use
# (host 1's rail2, a third rail the testbed then has) drops its carrier for 20 ms every MS ms, so
# the kernel's link-watch always has work pending and runs its non-urgent part once a second: a
# tap's loss waits for that run (0-1 s) before rtnetlink hears of it, and a short drop is folded
# away (docs/detector.md, "Link-watch's blind second"); what a host whose other NICs or containers
# change state sees. Without it, a loss seconds apart from any other link event on the machine is
# reported at once by every source.
# --wire-prio N (tap only; default the testbed's, 0): the tap forwarder, the taps' cable and
# switch, at SCHED_FIFO N (`reccl testbed up --wire-prio`, docs/testbed.md); 0 normal scheduling.
# Per source the report counts the faults no failover followed (missed; a short drop may pass
# without one) and what such a fault cost the call it hit.
# Exit: 0 done and every result exact, 1 a run failed or a result was wrong, 64 usage,
# 77 not root / a tool missing.
set -euo pipefail

BUILD=build
FAULTS=100
SIZE=64M
DOWN_MS=1000
PERIOD_MS=""
NIC=veth
WIRE_PRIO=""  # the testbed's default
FAULT=link
SOURCES="bpf netlink none"
BASE_ITERS=40
ROUNDS=4
GLOO_TIMEOUT_MS=15000
GLOO=1
GLOO_ITERS=auto
OUT=fault_bench.json
KEEP=0
NAME="fb$$"
FIFO=0
PAUSE_DAMON=0
TRACE_US=0
TRACE_BURSTS=0
LW_BUSY_MS=0
TRACEFS_MOUNTED=0  # --trace-bursts mounted tracefs (cleanup unmounts it)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --faults) FAULTS="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --down-ms) DOWN_MS="$2"; shift 2 ;;
    --period-ms) PERIOD_MS="$2"; shift 2 ;;
    --nic) NIC="$2"; shift 2 ;;
    --fault) FAULT="$2"; shift 2 ;;
    --linkwatch-busy) LW_BUSY_MS="$2"; shift 2 ;;
    --sources) SOURCES="$2"; shift 2 ;;
    --baseline-iters) BASE_ITERS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --gloo-timeout-ms) GLOO_TIMEOUT_MS="$2"; shift 2 ;;
    --no-gloo) GLOO=0; shift ;;
    --gloo-iters) GLOO_ITERS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --fifo) FIFO="$2"; shift 2 ;;
    --wire-prio) WIRE_PRIO="$2"; shift 2 ;;
    --pause-damon) PAUSE_DAMON=1; shift ;;
    --trace-waits) TRACE_US="$2"; shift 2 ;;
    --trace-bursts) TRACE_BURSTS=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fault_bench.sh: unknown argument $1 (try --help)" >&2; exit 64 ;;
  esac
done
num() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "fault_bench.sh: $1: a positive number, got '$2'" >&2; exit 64; }; }
[[ $NIC == veth || $NIC == tap ]] || { echo "fault_bench.sh: --nic: veth or tap, got '$NIC'" >&2; exit 64; }
[[ $FAULT == link || $FAULT == carrier ]] || { echo "fault_bench.sh: --fault: link or carrier, got '$FAULT'" >&2; exit 64; }
[[ -z $WIRE_PRIO || $NIC == tap ]] || { echo "fault_bench.sh: --wire-prio is for --nic tap (veth has no forwarder)" >&2; exit 64; }
[[ $FAULT == link || $NIC == tap ]] || { echo "fault_bench.sh: --fault carrier needs --nic tap (a veth's carrier follows its peer)" >&2; exit 64; }
# --down-ms MS or LO-HI.
if [[ "$DOWN_MS" =~ ^([1-9][0-9]*)-([1-9][0-9]*)$ ]]; then
  DOWN_LO=${BASH_REMATCH[1]}; DOWN_HI=${BASH_REMATCH[2]}
  ((DOWN_LO <= DOWN_HI)) || { echo "fault_bench.sh: --down-ms: LO-HI with LO <= HI, got '$DOWN_MS'" >&2; exit 64; }
else
  num --down-ms "$DOWN_MS"; DOWN_LO=$DOWN_MS; DOWN_HI=$DOWN_MS
fi
# The fail-back after a fault: its recovery seen (on tap, a carrier back before link-watch reported
# its loss waits with it for link-watch's next run, up to 1 s), the hold-down (300 ms), and room
# before the next fault.
if [[ $NIC == tap ]]; then MARGIN_MS=1600; SPARE_MS=400; else MARGIN_MS=600; SPARE_MS=800; fi
[[ -n "$PERIOD_MS" ]] || PERIOD_MS=$((DOWN_HI + MARGIN_MS + SPARE_MS))
num --faults "$FAULTS"; num --period-ms "$PERIOD_MS"
[[ $LW_BUSY_MS == 0 ]] || { num --linkwatch-busy "$LW_BUSY_MS"; ((LW_BUSY_MS >= 50 && LW_BUSY_MS <= 900)) ||
  { echo "fault_bench.sh: --linkwatch-busy: 50-900 ms, got $LW_BUSY_MS" >&2; exit 64; }; }
# The ranks use rails 0 and 1; with --linkwatch-busy the testbed has a third, the neighbour's.
RAILS=2; ((LW_BUSY_MS == 0)) || RAILS=3
# Carrier faults go through a held tap queue (no queue's RTM_NEWLINK tells rtnetlink first, as
# with a physical NIC's driver); the neighbour's flaps are background, not faults.
BACKGROUND=(); [[ $FAULT != carrier ]] || BACKGROUND=(--fault-hold-tap-queues)
((LW_BUSY_MS == 0)) || BACKGROUND+=(--fault-background "$NAME-h1/rail2" --fault-hold-tap-queues)
num --baseline-iters "$BASE_ITERS"; num --gloo-timeout-ms "$GLOO_TIMEOUT_MS"; num --rounds "$ROUNDS"
[[ $GLOO_ITERS == auto ]] || num --gloo-iters "$GLOO_ITERS"
[[ $TRACE_US == 0 ]] || num --trace-waits "$TRACE_US"
((ROUNDS <= FAULTS)) || { echo "fault_bench.sh: --rounds ($ROUNDS) must not exceed --faults ($FAULTS)" >&2; exit 64; }
((PERIOD_MS > DOWN_HI + MARGIN_MS)) || { echo "fault_bench.sh: --period-ms must exceed the longest --down-ms by $MARGIN_MS ms on $NIC (fail-back)" >&2; exit 64; }
[[ "$FIFO" =~ ^([0-9]|[1-9][0-9])$ ]] || { echo "fault_bench.sh: --fifo: a priority 1-99, got '$FIFO'" >&2; exit 64; }
SCHED=()
if ((FIFO > 0)); then
  command -v chrt >/dev/null || { echo "fault_bench.sh: --fifo needs chrt (util-linux)" >&2; exit 77; }
  SCHED=(chrt -f "$FIFO")
fi
for s in $SOURCES; do
  [[ $s == bpf || $s == netlink || $s == none ]] || { echo "fault_bench.sh: --sources: bpf, netlink or none, got $s" >&2; exit 64; }
done

BIN="$(cd "$BUILD/bin" 2>/dev/null && pwd)" || { echo "fault_bench.sh: --build: no $BUILD/bin" >&2; exit 64; }
TOOLS=("$BIN/reccl" "$BIN/reccl-bench")
[[ $GLOO -eq 0 ]] || TOOLS+=("$BIN/gloo_bench")
if ((TRACE_US > 0)); then
  RUNQSLOWER=$(command -v runqslower || true)
  [[ -n "$RUNQSLOWER" ]] || { echo "fault_bench.sh: --trace-waits needs runqslower (libbpf-tools; scripts/setup.sh)" >&2; exit 77; }
fi
BURSTS_BT="$(dirname "$0")/kthread_bursts.bt"
if ((TRACE_BURSTS)); then
  BPFTRACE=$(command -v bpftrace || true)
  [[ -n "$BPFTRACE" ]] || { echo "fault_bench.sh: --trace-bursts needs bpftrace (scripts/setup.sh)" >&2; exit 77; }
  [[ -r "$BURSTS_BT" ]] || { echo "fault_bench.sh: missing $BURSTS_BT" >&2; exit 77; }
fi
for tool in "${TOOLS[@]}"; do
  [[ -x "$tool" ]] || { echo "fault_bench.sh: missing $tool (build it first)" >&2; exit 77; }
done
REPORT="$(dirname "$0")/fault_report.py"
[[ -r "$REPORT" ]] || { echo "fault_bench.sh: missing $REPORT" >&2; exit 77; }
command -v python3 >/dev/null || { echo "fault_bench.sh: python3 not installed (scripts/setup.sh)" >&2; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "fault_bench.sh: needs root for the testbed's namespaces" >&2; exit 77; }
RECCL="$BIN/reccl"

# The fault of host 0's rail R, as `reccl inject` arguments and as a plan's target:
# link on veth: the switch port's admin state, named as the host NIC's --side switch; link on
# tap: the switch port itself (a tap has no veth peer), the testbed's forwarder drops the host
# NIC's carrier with it; carrier (tap): the host NIC's own carrier, TUNSETCARRIER.
case "$FAULT" in
  link) FAULT_DOWN=link-down; FAULT_UP=link-up; FAULT_WHAT="link-downs of a switch port" ;;
  carrier) FAULT_DOWN=carrier-off; FAULT_UP=carrier-on; FAULT_WHAT="carrier drops of a host NIC" ;;
esac
fault_cli() {  # $1 rail: --netns NS --dev IF [--side switch]
  case "$FAULT/$NIC" in
    link/veth) echo --netns "$NAME-h0" --dev "rail$1" --side switch ;;
    link/tap) echo --netns "$NAME-fab" --dev "h0r$1" ;;
    carrier/tap) echo --netns "$NAME-h0" --dev "rail$1" ;;
  esac
}
fault_target() {  # $1 rail: the plan's target object
  local a; read -ra a <<<"$(fault_cli "$1")"
  printf '{"netns": "%s", "dev": "%s", "side": "%s"}' "${a[1]}" "${a[3]}" "$([[ ${#a[@]} -gt 4 ]] && echo switch || echo host)"
}

# DAMON (the kernel's data-access monitor) runs one kernel thread per kdamond that is on; they
# compete with the ranks for the CPUs. Counted always, paused only when asked.
DAMON_DIR=/sys/kernel/mm/damon/admin/kdamonds
DAMON_ON=()      # state files of the kdamonds on at the start
DAMON_PAUSED=()  # those this run turned off (turned on again by cleanup)
for st in "$DAMON_DIR"/*/state; do
  [[ -r "$st" && "$(cat "$st" 2>/dev/null)" == on ]] && DAMON_ON+=("$st")
done
kdamond_cpu_ticks() {  # user + system clock ticks of every running kdamond thread (also DAMON modules')
  local t=0 p
  for p in $(pgrep -x 'kdamond\.[0-9]+' || true); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}

# SIGINT ends runqslower and bpftrace cleanly; a tracer that ignores it gets SIGTERM after 2 s.
stop_tracer() {  # $1 pid
  kill -INT "$1" 2>/dev/null || true
  local i
  for ((i = 0; i < 20; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

WORK="$(mktemp -d /tmp/reccl-fault-bench.XXXXXX)"
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local st
  [[ -z "${TRACER:-}" ]] || { kill "$TRACER" 2>/dev/null || true; wait "$TRACER" 2>/dev/null || true; }
  [[ -z "${BTRACER:-}" ]] || stop_tracer "$BTRACER"
  ((!TRACEFS_MOUNTED)) || umount /sys/kernel/tracing 2>/dev/null || echo "fault_bench.sh: could not unmount tracefs" >&2
  for st in "${DAMON_PAUSED[@]}"; do
    echo on >"$st" 2>/dev/null || echo "fault_bench.sh: could not turn DAMON back on: $st" >&2
  done
  # A run killed half-way may leave a link down: put every cable back before the teardown.
  for h in 0 1; do for ((r = 0; r < ${RAILS:-2}; r++)); do
    "$RECCL" inject clear --netns "$NAME-h$h" --dev "rail$r" >/dev/null 2>&1 || true
    # A tap has no veth peer that clear would put up: the switch port itself.
    [[ $NIC != tap ]] || "$RECCL" inject link-up --netns "$NAME-fab" --dev "h${h}r$r" >/dev/null 2>&1 || true
  done; done
  if [[ $KEEP -eq 0 ]]; then
    "$RECCL" testbed down --name "$NAME" >/dev/null 2>&1 || true
    # A failed run's rank logs (every failover line) are what explains it: they stay.
    if [[ $rc -ne 0 && $rc -ne 130 ]]; then
      echo "fault_bench.sh: the ranks' logs of the failed run stay in $WORK" >&2
    else
      # A fault with no failover leaves no error, only the ranks' log lines (a rail already
      # out as DEGRADED, a signal that never came): the fault runs' logs stay beside the JSON.
      local logs="${OUT%.json}.logs"
      if compgen -G "$WORK/fault_*.log" >/dev/null && mkdir -p "$logs"; then
        cp "$WORK"/fault_*.log "$logs"/ && echo "fault_bench.sh: the fault runs' rank logs: $logs" >&2
        [[ ! -s "$WORK/waits.txt" ]] || cp "$WORK/waits.txt" "$logs"/
        [[ ! -s "$WORK/bursts.txt" ]] || cp "$WORK/bursts.txt" "$logs"/
        [[ ! -s "$WORK/bursts.err" ]] || cp "$WORK/bursts.err" "$logs"/
      fi
      rm -rf "$WORK"
    fi
  else
    echo "kept: testbed $NAME, work files $WORK" >&2
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '== %s\n' "$*" >&2; }

if ((PAUSE_DAMON)); then
  for st in "${DAMON_ON[@]}"; do
    echo off >"$st" || { echo "fault_bench.sh: --pause-damon: cannot turn $st off" >&2; exit 1; }
    DAMON_PAUSED+=("$st")
  done
  step "machine: ${#DAMON_ON[@]} DAMON kdamond(s) on, paused for the run"
else
  step "machine: ${#DAMON_ON[@]} DAMON kdamond(s) on$( ((${#DAMON_ON[@]})) && echo ' (--pause-damon pauses them for the run)')"
fi
KDAMOND_TICKS0=$(kdamond_cpu_ticks)
# --trace-bursts: bpftrace's tracepoints need tracefs; mounted for the run when it is not (and
# unmounted by cleanup).
if ((TRACE_BURSTS)) && [[ ! -d /sys/kernel/tracing/events/sched ]]; then
  mount -t tracefs nodev /sys/kernel/tracing || { echo "fault_bench.sh: --trace-bursts: cannot mount tracefs" >&2; exit 77; }
  TRACEFS_MOUNTED=1
fi

step "testbed $NAME: 2 hosts x $RAILS rails, $NIC NICs$( ((RAILS > 2)) && echo ', rail2 only for the neighbour NIC of --linkwatch-busy')"
"$RECCL" testbed up --name "$NAME" --hosts 2 --rails "$RAILS" --nic "$NIC" ${WIRE_PRIO:+--wire-prio "$WIRE_PRIO"} >&2
# The forwarder's scheduling as the testbed set it, for the report (tap only).
WIRE_SCHED=""
if [[ $NIC == tap ]]; then
  WIRE_SCHED=$("$RECCL" testbed show --name "$NAME" --json | python3 -c 'import json,sys; p=json.load(sys.stdin).get("wire_prio", 0); print("SCHED_FIFO %d" % p if p else "normal")')
fi

# Runs a command as one rank per host; rank 0's output in $WORK/$tag.log.
ranks() {
  local tag="$1"; shift
  "$RECCL" testbed run --name "$NAME" --timeout 1800 -- "${SCHED[@]}" "$@" >"$WORK/$tag.log" 2>&1
}

# --- fault-free baselines (the same bench, normal mode: out-of-place busbw) --------------------
for b in one:=rail0 two:rail0,rail1; do
  tag="base_${b%%:*}"
  step "fault-free allreduce $SIZE, RECCL_NICS=${b#*:}"
  ranks "$tag" /usr/bin/env RECCL_NICS="${b#*:}" "$BIN/reccl-bench" -b "$SIZE" -e "$SIZE" -n "$BASE_ITERS" -w 3 \
    --json "$WORK/$tag.json" || { cat "$WORK/$tag.log" >&2; echo "fault_bench.sh: $tag failed" >&2; exit 1; }
done

# One rail, fault-free, in the fault loop's own mode (each result checked, counters agreed after
# each call), so that "degraded after a failover" has a like-for-like one-rail figure: the loop's
# per-call work between calls makes its busbw differ from the plain benchmark's. Its plan only
# touches rail 1 of host 0, which RECCL_NICS==rail0 leaves unused. Run before each round and after
# the last: a shared VM's bandwidth drifts by more than the goal's margin within minutes.
python3 -c 'import json,sys; json.dump({"version": 1, "actions": [{"at_ms": 500, "action": sys.argv[2],
  "target": json.loads(sys.argv[3]), "duration_ms": 300}]}, open(sys.argv[1], "w"))' \
  "$WORK/plan_loop_one.json" "$FAULT_DOWN" "$(fault_target 1)"
loop_one() {  # $1 round (from 0; ROUNDS: after the last)
  local tag="base_loop_one_r$1" when="before round $(($1 + 1))/$ROUNDS"
  (($1 < ROUNDS)) || when="after the last round"
  step "fault-free allreduce $SIZE in the fault loop, RECCL_NICS==rail0 ($when)"
  ranks "$tag" /usr/bin/env RECCL_NICS==rail0 "$BIN/reccl-bench" --fault-plan "$WORK/plan_loop_one.json" \
    -e "$SIZE" -w 3 -n "$BASE_ITERS" --fault-tail-ms 500 --json "$WORK/$tag.json" ||
    { tail -20 "$WORK/$tag.log" >&2; echo "fault_bench.sh: $tag failed" >&2; exit 1; }
}

# --- the fault plan per source, in rounds -------------------------------------------------------
# Per round and source, its share of the FAULTS faults of host 0's cable (link-downs at the switch,
# or carrier drops), each DOWN_MS long (or drawn from DOWN_LO-DOWN_HI, seeded by the round, so every
# source gets the same durations), PERIOD_MS apart, first at 3 s. With the BPF or rtnetlink detector the traffic fails
# back to rail 0 after each recovery, so every fault hits rail 0. In-band only has no source that
# sees a rail come back: its traffic stays where the last failover put it, so its faults alternate
# between rail 0 and rail 1.
plan() {  # $1 file, $2 alternate rails (0/1), $3 faults, $4 round (the durations' seed)
  python3 - "$1" "$3" "$DOWN_LO" "$DOWN_HI" "$PERIOD_MS" "$2" "$4" "$FAULT_DOWN" "$(fault_target 0)" "$(fault_target 1)" \
    "$LW_BUSY_MS" "$NAME-h1" "$NIC" <<'PY'
import json, random, sys
path, n, lo, hi, period, alt, seed, action = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
    int(sys.argv[5]), sys.argv[6] == "1", int(sys.argv[7]), sys.argv[8]
targets = [json.loads(sys.argv[9]), json.loads(sys.argv[10])]
busy, h1, nic = int(sys.argv[11]), sys.argv[12], sys.argv[13]
rng = random.Random(seed)
acts = []
if busy:  # the neighbour NIC flapping from the start to 1.5 s after the last fault (action 0)
    acts.append({"at_ms": busy // 2 + 1, "action": "flap",
                 "target": {"netns": h1, "dev": "rail2", "side": "host" if nic == "tap" else "switch"},
                 "params": {"period_ms": busy, "count": (3000 + n * period + 1500) // busy, "down_ms": 20,
                            "carrier": nic == "tap"}})
for i in range(n):
    acts.append({"at_ms": 3000 + i * period, "action": action, "target": targets[(i % 2) if alt else 0],
                 "duration_ms": rng.randint(lo, hi)})
json.dump({"version": 1, "actions": acts}, open(path, "w"))
PY
}
# Same settings for every source: in-band stall check at 200 ms; hold-down 300 ms; flap damping
# forgets within ~1 s (faults PERIOD_MS apart are separate events here, not a flapping link).
FAULT_ENV=(RECCL_STALL_TIMEOUT_MS=200 RECCL_HOLDDOWN_MS=300 RECCL_DAMPING_HALFLIFE_MS=200)
# --trace-waits, --trace-bursts: runqslower, bpftrace during each fault run only (runqslower's
# programs load in ~0.3 s).
trace_start() {
  if ((TRACE_BURSTS)); then
    # Its first line ("Attaching N probes...") says the probes are in (a second or two); -B line:
    # each line reaches the file as it is printed.
    echo "# $1" >>"$WORK/bursts.txt"
    local before i
    before=$(wc -l <"$WORK/bursts.txt")
    "$BPFTRACE" -B line "$BURSTS_BT" >>"$WORK/bursts.txt" 2>>"$WORK/bursts.err" &
    BTRACER=$!
    for ((i = 0; i < 200; i++)); do
      (($(wc -l <"$WORK/bursts.txt") > before)) && break
      kill -0 "$BTRACER" 2>/dev/null || { cat "$WORK/bursts.err" >&2; echo "fault_bench.sh: --trace-bursts: bpftrace failed" >&2; exit 1; }
      sleep 0.1
    done
    ((i < 200)) || { echo "fault_bench.sh: --trace-bursts: bpftrace did not attach within 20 s" >&2; exit 1; }
  fi
  ((TRACE_US > 0)) || return 0
  echo "# $1" >>"$WORK/waits.txt"
  "$RUNQSLOWER" -P "$TRACE_US" >>"$WORK/waits.txt" 2>&1 &
  TRACER=$!
  sleep 0.5
}
trace_stop() {
  if [[ -n "${BTRACER:-}" ]]; then
    stop_tracer "$BTRACER"
    BTRACER=
  fi
  [[ -n "${TRACER:-}" ]] || return 0
  stop_tracer "$TRACER"
  TRACER=
}
for ((k = 0; k < ROUNDS; k++)); do
  loop_one "$k"
  n=$((FAULTS / ROUNDS + (k < FAULTS % ROUNDS ? 1 : 0)))
  for src in $SOURCES; do
    alt=0; [[ $src == none ]] && alt=1
    tag="fault_${src}_r$k"
    plan "$WORK/plan_$tag.json" "$alt" "$n" "$k"
    step "round $((k + 1))/$ROUNDS, RECCL_DETECTOR=$src: $n $FAULT_WHAT ($NAME-h0's rail, $NIC), ${DOWN_MS} ms each, every ${PERIOD_MS} ms"
    trace_start "$tag"
    ranks "$tag" /usr/bin/env RECCL_NICS=rail0,rail1 RECCL_DETECTOR="$src" "${FAULT_ENV[@]}" "$BIN/reccl-bench" \
      --fault-plan "$WORK/plan_$tag.json" "${BACKGROUND[@]}" --fault-log "$WORK/plan_$tag.jsonl" -e "$SIZE" -w 3 -n 5 \
      --fault-tail-ms 1500 --json "$WORK/$tag.json" || {
        tail -20 "$WORK/$tag.log" >&2; echo "fault_bench.sh: fault run ($src, round $k) failed" >&2; exit 1; }
    trace_stop
    ((k > 0)) || grep -m1 'link detector on\|sources' "$WORK/$tag.log" >&2 || true
    grep '^\[rank 0\] # stall' "$WORK/$tag.log" | sed 's/^\[rank 0\] //' >&2 || true
  done
done
loop_one "$ROUNDS"

# --- Gloo under the same fault ------------------------------------------------------------------
# Gloo runs on rail 0 only (it has one TCP device), under the same kind of fault as reccl's runs.
# (a) rail 0's cable down DOWN_MS (with a range: its longest, DOWN_HI) and back,
# during a loop of GLOO_ITERS allreduces of 1 MiB (short iterations, so the loop's length is
# known to a few ms): the loop's extra time over the same loop without a fault, run just before
# and just after (the faster of the two), is Gloo's stall. (b) the cable stays down: how long
# until Gloo reports an error (its I/O timeout, --gloo-timeout-ms), or whether it hangs.
gloo() {  # $1 tag, $2 size, then extra args
  local tag="$1" size="$2"; shift 2
  ranks "$tag" "$BIN/gloo_bench" --iface rail0 --store-dir "$WORK/gs-$tag" --algo ring -b "$size" -e "$size" -w 1 \
    --timeout-ms "$GLOO_TIMEOUT_MS" "$@" --json "$WORK/$tag.json"
}
mono_ms() { python3 -c 'import time; print(int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1000))'; }
if [[ $GLOO -eq 1 ]]; then
  step "gloo fault-free, rail0: $SIZE, and 1 MiB in a loop"
  gloo gloo_free "$SIZE" -n 10 || { tail -5 "$WORK/gloo_free.log" >&2; echo "fault_bench.sh: gloo baseline failed" >&2; exit 1; }
  if [[ $GLOO_ITERS == auto ]]; then
    # A loop's length in iterations depends on the wire: time a short one, then take enough to
    # span the fault (at ~2 s), its longest duration and 2 s after, with a 1.5x margin.
    gloo gloo_calib 1M -n 200 --timeline || { tail -5 "$WORK/gloo_calib.log" >&2; exit 1; }
    GLOO_ITERS=$(python3 - "$WORK/gloo_calib.json" "$DOWN_HI" <<'PY'
import json, math, sys
its = json.load(open(sys.argv[1]))["timeline"]["loops"][-1]["iterations"]
ms = sorted((i["end_mono_ns"] - i["start_mono_ns"]) / 1e6 for i in its)[len(its) // 2]
print(max(200, math.ceil(1.5 * (4000 + int(sys.argv[2])) / max(ms, 0.05))))
PY
    ) || { echo "fault_bench.sh: cannot size Gloo's loop from gloo_calib.json" >&2; exit 1; }
  fi
  gloo gloo_free_small1 1M -n "$GLOO_ITERS" || { tail -5 "$WORK/gloo_free_small1.log" >&2; exit 1; }
  step "gloo 1 MiB x $GLOO_ITERS, rail0 of host 0: $FAULT_DOWN for ${DOWN_HI} ms at ~2 s"
  gloo gloo_recover 1M -n "$GLOO_ITERS" --timeline &
  GPID=$!
  sleep 2
  T_DOWN=$(mono_ms)
  # shellcheck disable=SC2046  # fault_cli prints words without blanks
  "$RECCL" inject "$FAULT_DOWN" $(fault_cli 0) >&2
  sleep "$(python3 -c "print($DOWN_HI / 1000)")"
  T_UP=$(mono_ms)
  # shellcheck disable=SC2046
  "$RECCL" inject "$FAULT_UP" $(fault_cli 0) >&2
  GRC=0; wait $GPID || GRC=$?
  echo "$GRC" >"$WORK/gloo_recover.rc"
  echo "$T_DOWN $T_UP" >"$WORK/gloo_recover.fault"  # CLOCK_MONOTONIC ms, as the timeline
  gloo gloo_free_small2 1M -n "$GLOO_ITERS" || { tail -5 "$WORK/gloo_free_small2.log" >&2; exit 1; }
  step "gloo, rail0 of host 0: $FAULT_DOWN at ~4 s, kept (Gloo timeout ${GLOO_TIMEOUT_MS} ms)"
  # Enough iterations that only the fault (or the watchdog below) ends the loop, on any wire.
  gloo gloo_hold "$SIZE" -n 1000000 --timeline &
  GPID=$!
  sleep 4
  T_FAULT=$(mono_ms)
  # shellcheck disable=SC2046
  "$RECCL" inject "$FAULT_DOWN" $(fault_cli 0) >&2
  # A Gloo that never reports an error is a hang: stopped 30 s after its own timeout.
  ( sleep $((GLOO_TIMEOUT_MS / 1000 + 30)); kill -TERM $GPID 2>/dev/null && touch "$WORK/gloo_hold.hung" ) &
  WATCH=$!
  GRC=0; wait $GPID || GRC=$?
  T_END=$(mono_ms)
  kill $WATCH 2>/dev/null || true
  # shellcheck disable=SC2046
  "$RECCL" inject "$FAULT_UP" $(fault_cli 0) >&2
  echo "$GRC $((T_END - T_FAULT)) $T_FAULT" >"$WORK/gloo_hold.rc"
fi

# --- report -------------------------------------------------------------------------------------
KDAMOND_MS=$((($(kdamond_cpu_ticks) - KDAMOND_TICKS0) * 1000 / $(getconf CLK_TCK)))
((KDAMOND_MS >= 0)) || KDAMOND_MS=0  # a kdamond restarted meanwhile (its counts begin anew)
python3 - "$WORK/meta.json" "$SOURCES" "$FAULTS" "$ROUNDS" "$SIZE" "$DOWN_MS" "$PERIOD_MS" "$GLOO" "$GLOO_TIMEOUT_MS" \
  "${GLOO_ITERS/auto/0}" "$NAME" "$FIFO" "${FAULT_ENV[*]}" "${#DAMON_ON[@]}" "${#DAMON_PAUSED[@]}" "$KDAMOND_MS" "$TRACE_US" "$TRACE_BURSTS" \
  "$NIC" "$FAULT" "$LW_BUSY_MS" "$WIRE_SCHED" <<'PY'
import json, sys
a = sys.argv[2:]
# down_ms: the duration, or "LO-HI" when drawn from a range.
json.dump({"sources": a[0].split(), "faults": int(a[1]), "rounds": int(a[2]), "size": a[3],
           "down_ms": int(a[4]) if a[4].isdigit() else a[4], "nic": a[17], "fault": a[18], "linkwatch_busy_ms": int(a[19]),
           "wire_sched": a[20] or None,
           "period_ms": int(a[5]), "gloo": a[6] == "1", "gloo_timeout_ms": int(a[7]), "gloo_iters": int(a[8]),
           "name": a[9], "fifo": int(a[10]), "settings": a[11],
           "machine": {"damon_kdamonds_on": int(a[12]), "damon_paused": int(a[13]) > 0,
                       "kdamond_cpu_ms": int(a[14]), "trace_waits_us": int(a[15]),
                       "trace_bursts": a[16] == "1"}}, open(sys.argv[1], "w"))
PY
python3 "$REPORT" "$WORK" "$OUT"
