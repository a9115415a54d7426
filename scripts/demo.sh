#!/usr/bin/env bash
# `make demo`: failover of a running allreduce across a real last-hop fault.
# A fresh testbed of 2 hosts x 2 rails (network namespaces, tap NICs whose carrier takes a
# physical NIC driver's path, a switch namespace), one rank per host running reccl-bench
# --fault-plan (allreduce in a loop, every result checked bit for bit) with the in-process link
# detector (every source, first signal wins); the plan drops host 0's rail-0 carrier
# (TUNSETCARRIER, as a pulled cable shows to a NIC's driver) and brings it back later, while a
# neighbour NIC (host 1's rail2, which the ranks do not use) drops its carrier for 20 ms every
# 250 ms: the kernel's link-watch then holds non-urgent carrier changes up to a second (what a
# host whose other NICs or containers change state sees; docs/detector.md). Beside the
# ranks, `reccl detector watch` watches that NIC with BPF only and with rtnetlink only, so the
# report shows what each source took for the same fault. Prints a report and draws the bus
# bandwidth per iteration with the fault and its recovery marked (gnuplot, PNG).
# Everything it creates is removed at the end, also on Ctrl-C.
#
#   sudo scripts/demo.sh [BUILD_DIR] [--short] [--nic tap|veth] [--out DIR]
#     --short   smaller messages and a shorter plan (~20 s; what ctest runs)
#     --nic     tap (default): the carrier dropped on the NIC; veth: the cable pulled at the switch
#               port (a veth's loss reaches every source at once)
#     --out     where the report, JSON, plan log and PNG go (default BUILD_DIR/demo)
# Exit: 0 the collective survived the fault with exact results, 1 it did not or a step failed,
# 64 usage, 77 not root or a tool missing.
set -euo pipefail
BUILD_DIR=build
SHORT=0
OUT=""
NIC=tap
while [[ $# -gt 0 ]]; do
  case "$1" in
    --short) SHORT=1; shift ;;
    --out) OUT="$2"; shift 2 ;;
    --nic) NIC="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "demo: unknown option $1 (try --help)" >&2; exit 64 ;;
    *) BUILD_DIR="$1"; shift ;;
  esac
done
[[ $NIC == tap || $NIC == veth ]] || { echo "demo: --nic: tap or veth, got '$NIC'" >&2; exit 64; }
RECCL="$BUILD_DIR/bin/reccl"
BENCH="$BUILD_DIR/bin/reccl-bench"
OUT=${OUT:-$BUILD_DIR/demo}
NAME="demo$$"

if [[ $EUID -ne 0 ]]; then
  echo "demo: needs root (the testbed creates network namespaces); run: sudo make demo" >&2
  exit 77
fi
for t in "$RECCL" "$BENCH"; do
  [[ -x $t ]] || { echo "demo: $t not built; run: make build" >&2; exit 77; }
done
for t in gnuplot python3; do
  command -v $t >/dev/null || { echo "demo: $t not installed; run: scripts/setup.sh" >&2; exit 77; }
done
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

if ((SHORT)); then SIZE=8M; AT=1500; DOWN=2000; TAIL=2000; else SIZE=64M; AT=4000; DOWN=6000; TAIL=5000; fi

RUN_PID=""
WATCH_PIDS=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_watchers
  if [[ -n $RUN_PID ]] && kill -0 "$RUN_PID" 2>/dev/null; then
    echo "== stopping the ranks (the plan puts the cable back)"
    kill -TERM "$RUN_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$RUN_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$RUN_PID" 2>/dev/null || true
  fi
  echo "== tear down: testbed $NAME, fault state, pins"
  for h in 0 1; do for r in 0 1 2; do
    "$RECCL" inject clear --netns "$NAME-h$h" --dev "rail$r" >/dev/null 2>&1 || true
  done; done
  "$RECCL" testbed down --name "$NAME" 2>&1 | sed 's/^/   /' || true
  exit $rc
}
# The watchers beside the ranks: SIGTERM, then SIGKILL after 2 s.
stop_watchers() {
  local p i
  for p in "${WATCH_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${WATCH_PIDS[@]}"; do
    for ((i = 0; i < 20; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  WATCH_PIDS=()
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT TERM

if [[ $NIC == tap ]]; then
  ACTION=carrier-off; SIDE=host; WHAT="host 0's rail-0 carrier dropped (TUNSETCARRIER)"
else
  ACTION=link-down; SIDE=switch; WHAT="host 0's rail-0 cable down at the switch port"
fi
# rail2: only the neighbour NIC; the ranks use rails 0 and 1.
echo "== testbed: reccl testbed up --name $NAME --hosts 2 --rails 3 --nic $NIC"
"$RECCL" testbed up --name "$NAME" --hosts 2 --rails 3 --nic "$NIC" | sed 's/^/   /'

cat >"$OUT/plan.json" <<EOF
{"version": 1, "actions": [
  {"at_ms": 126, "action": "flap", "target": {"netns": "$NAME-h1", "dev": "rail2", "side": "$SIDE"},
   "params": {"period_ms": 250, "count": $(((AT + DOWN + TAIL) / 250)), "down_ms": 20, "carrier": $([[ $NIC == tap ]] && echo true || echo false)}},
  {"at_ms": $AT, "action": "$ACTION", "target": {"netns": "$NAME-h0", "dev": "rail0", "side": "$SIDE"},
   "duration_ms": $DOWN}
]}
EOF
echo
echo "== fault plan ($OUT/plan.json): $WHAT at +$((AT / 1000)).$((AT % 1000 / 100)) s,"
echo "   back after $((DOWN / 1000)).$((DOWN % 1000 / 100)) s; all the while host 1's rail2 (a neighbour NIC the"
echo "   ranks do not use) drops its carrier for 20 ms every 250 ms"

# Each source alone on the same NIC, beside the ranks (whose detector takes the first signal of
# all of them): what each would have taken. Started before the ranks; their stderr line "active
# sources" says they are watching.
echo "== watching host 0's rail0 with each source alone: reccl detector watch --source bpf|netlink"
for src in bpf netlink; do
  stdbuf -oL "$RECCL" detector watch --json --netns "$NAME-h0" --dev rail0 --source "$src" \
    >"$OUT/watch_$src.jsonl" 2>"$OUT/watch_$src.err" &
  WATCH_PIDS+=($!)
done
for src in bpf netlink; do
  for ((i = 0; i < 200; i++)); do
    grep -q 'active sources' "$OUT/watch_$src.err" && break
    sleep 0.1
  done
  grep -q 'active sources' "$OUT/watch_$src.err" ||
    echo "   (the $src watcher did not start: $(tail -1 "$OUT/watch_$src.err"); its line stays empty)"
done
echo "== allreduce $SIZE in a loop on 2 ranks (one per host, both rails), detector in process:"
echo "   reccl testbed run -- reccl-bench --fault-plan plan.json --fault-background $NAME-h1/rail2 -e $SIZE --json demo.json"
echo
# Hold-down 1 s before failing back; the library's failover lines (WARN) show as they happen.
"$RECCL" testbed run --name "$NAME" --timeout 300 -- /usr/bin/env RECCL_NICS=rail0,rail1 RECCL_DETECTOR=auto \
  RECCL_HOLDDOWN_MS=1000 RECCL_DEBUG=INFO RECCL_DEBUG_SUBSYS=FAILOVER "$BENCH" --fault-plan "$OUT/plan.json" \
  --fault-background "$NAME-h1/rail2" --fault-hold-tap-queues --fault-log "$OUT/plan.jsonl" \
  -e "$SIZE" -w 2 -n 5 --fault-tail-ms "$TAIL" --json "$OUT/demo.json" >"$OUT/ranks.log" 2>&1 &
RUN_PID=$!
# Show the interesting lines live.
tail -n +1 -f "$OUT/ranks.log" --pid "$RUN_PID" 2>/dev/null |
  grep --line-buffered -E 'fault source: |down \(source|failover (of|by)|fail-back (of|by)|up again' |
  sed -u 's/^/   /' &
TAIL_PID=$!
RC=0
wait "$RUN_PID" || RC=$?
RUN_PID=""
wait "$TAIL_PID" 2>/dev/null || true
stop_watchers
if [[ $RC -ne 0 || ! -s $OUT/demo.json ]]; then
  echo "demo: the run failed (exit $RC); last lines of $OUT/ranks.log:" >&2
  tail -15 "$OUT/ranks.log" >&2
  exit 1
fi

# Report and plot data from the bench's JSON and the ranks' log.
# The in-band stall check's bound: the caller's setting, else the default (`reccl params`).
STALL_MS=${RECCL_STALL_TIMEOUT_MS:-$("$RECCL" params 2>/dev/null | awk '$1 == "RECCL_STALL_TIMEOUT_MS" {print $2}' || true)}
python3 - "$OUT" "${STALL_MS:-?}" <<'PY'
import json, re, sys
out, stall_timeout_ms = sys.argv[1], sys.argv[2]
j = json.load(open(out + "/demo.json"))
log = open(out + "/ranks.log", errors="replace").read()
t0 = j["t0_mono_ns"]
with open(out + "/timeline.dat", "w") as f:
    f.write("# t_s busbw_gbps (iteration end, rank 0)\n")
    for it in j["iterations"]:
        f.write("%.4f %.4f\n" % ((it["end_mono_ns"] - t0) / 1e9, it["busbw_gbps"]))
marks = []
for r in j["plan"]["records"]:
    if r["source"] == 0:  # the neighbour NIC's flaps
        continue
    marks.append(((r["start_mono_ns"] - t0) / 1e9, "recovery" if r["undo"] else "fault"))
for x in j["faults"]:
    if x.get("failed_back_at_s") is not None:
        marks.append((x["failed_back_at_s"], "fail-back done"))
colors = {"fault": "#c0392b", "recovery": "#27ae60", "fail-back done": "#2980b9"}
with open(out + "/marks.gp", "w") as f:
    for i, (t, what) in enumerate(marks):
        color = colors[what]
        f.write('set arrow %d from %.4f, graph 0 to %.4f, graph 1 nohead lw 2 dt 2 lc rgb "%s"\n' % (i + 1, t, t, color))
        f.write('set label %d "%s" at %.4f, graph %.2f offset 0.5,0 tc rgb "%s"\n' % (
            i + 1, what, t, 0.96 if what != "fail-back done" else 0.90, color))
src = re.search(r"rail 0 \(rail0\) down \(source ([^)]*)\)", log)
# Rank 0's fault source at the end of the run (recclCommGetStats), the same one the rail-down line
# names: the daemon, the in-process detector (BPF or rtnetlink) or the NIC poll.
fs = j.get("fault_source") or {}
det = "%s (%s)" % (fs["kind"], fs["name"]) if fs.get("kind") else "-"
f = j["faults"][0] if j["faults"] else {}
def v(x, fmt="%.2f"):
    return "-" if x is None else fmt % x
c = j["counters"]
exact = j["out_of_bounds"] == 0 and j["status"] == "ok"
lines = [
    "failover demo: allreduce %d bytes (%s %s), 2 ranks on 2 hosts x 2 rails, %d iterations" % (
        j["collective"]["bytes"], j["collective"]["type"], j["collective"]["op"], len(j["iterations"])),
    "  fault                 %s %s at +%s s, recovered at +%s s" % (f.get("action", "-"), f.get("target", "-"),
        v(f.get("at_s"), "%.3f"), v(f.get("recover_at_s"), "%.3f")),
    "  fault source in use   %s" % det,
    "  detection source      %s" % (src.group(1) if src else "-"),
    "  detection latency     %s ms (fault syscall -> first kernel/netlink signal)" % v(f.get("signal_after_fault_ms"), "%.3f"),
    "  switch                %s ms (first signal -> new path committed)" % v(f.get("fault_to_switch_ms"), "%.3f"),
    "  stall                 %s ms (fault syscall -> the held-up work moving on the new paths)" % v(f.get("stall_ms"), "%.3f"),
    "  first step            %s ms (fault syscall -> first step completed on a new path)" % v(f.get("first_step_ms"), "%.3f"),
    "  bytes resent          %d" % c["bytes_resent"],
    "  failovers / failbacks %d / %d (connections, both ranks)" % (c["failovers"], c["failbacks"]),
    "  bus bandwidth GB/s    before %s | iteration hit by the fault %s | on one rail %s | after fail-back %s" % (
        v(f.get("busbw_before_gbps"), "%.3f"), v(f.get("busbw_during_gbps"), "%.3f"),
        v(f.get("busbw_degraded_gbps"), "%.3f"), v(f.get("busbw_after_gbps"), "%.3f")),
    "  results               %s" % ("bit-exact (every iteration checked on every rank)" if exact
                                     else "WRONG: %d elements, status %s" % (j["out_of_bounds"], j["status"])),
    "  each source alone on the same fault (reccl detector watch beside the ranks; fault -> link down decided):",
]
# The fault's moment as reccl-bench takes it (the plan's effect_mono_ns: the start of the carrier
# syscall through the held queue, or of a link action).
if f.get("at_s") is not None:
    fault_ns = t0 + round(f["at_s"] * 1e9)
    for src, name in (("bpf", "BPF detector"), ("netlink", "rtnetlink")):
        first = None
        try:
            for line in open("%s/watch_%s.jsonl" % (out, src)):
                e = json.loads(line)
                if e.get("type") == "link_down" and e.get("emit_ns", 0) >= fault_ns:
                    first = e
                    break
        except (OSError, ValueError):
            pass
        if first is None:
            lines.append("    %-13s no link-down seen" % name)
        else:
            lines.append("    %-13s %10.3f ms (its first signal at %.3f ms, %s)" % (
                name, (first["emit_ns"] - fault_ns) / 1e6, (first["signal_ns"] - fault_ns) / 1e6, first["source"]))
lines.append("    %-13s not watched: the data path's stall check, after %s ms without progress (RECCL_STALL_TIMEOUT_MS)"
             % ("in-band only", stall_timeout_ms))
open(out + "/report.txt", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if exact and f.get("stall_ms") is not None else 1)
PY
gnuplot <<EOF
set terminal pngcairo size 1100,480 font "sans,10"
set output "$OUT/timeline.png"
set title "reccl allreduce $SIZE on 2 hosts x 2 rails: bus bandwidth per iteration across a last-hop fault"
set xlabel "time since the loop started (s)"
set ylabel "bus bandwidth (GB/s)"
set yrange [0:*]
set grid
set key bottom right
load "$OUT/marks.gp"
plot "$OUT/timeline.dat" using 1:2 with linespoints pt 7 ps 0.6 lc rgb "#2c3e50" title "iteration (rank 0)"
EOF
[[ -s $OUT/timeline.png ]] || { echo "demo: gnuplot wrote no PNG" >&2; exit 1; }
echo
echo "== written: $OUT/report.txt, $OUT/timeline.png (bus bandwidth per iteration), $OUT/demo.json"
