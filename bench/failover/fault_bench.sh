#!/usr/bin/env bash
# Failover under real last-hop faults, side by side, on one fresh 2 hosts x 2 rails testbed, in
# one go: fault-free allreduce on one rail (RECCL_NICS==rail0) and on both rails; then
# `reccl-bench --fault-plan` with N switch-side link-downs of a rail of host 0 (each recovered
# later) for each detection source (BPF detector, rtnetlink, in-band only); then the same fault
# against Gloo (one rail) once with recovery and once held until Gloo gives up. Prints stall
# p50/p99 per source and the bandwidth ratios; writes one JSON file with every run.
#
#   sudo bench/failover/fault_bench.sh --build build --faults 100 --out fault_bench.json
#   sudo bench/failover/fault_bench.sh --faults 5 --size 8M --sources bpf     # a quick look
#
# Options: --build DIR (build), --faults N per source (100), --size BYTES (64M), --down-ms MS
# fault duration (1000), --period-ms MS between faults (2400), --sources "bpf netlink none",
# --baseline-iters N (20), --gloo-timeout-ms MS (15000), --no-gloo, --out FILE
# (fault_bench.json), --keep (leave the testbed and work files), --fifo PRIO (every rank, reccl's
# and Gloo's, under SCHED_FIFO PRIO via chrt: timing on a machine that others load).
# Exit: 0 done and every result exact, 1 a run failed or a result was wrong, 64 usage,
# 77 not root / a tool missing.
set -euo pipefail

BUILD=build
FAULTS=100
SIZE=64M
DOWN_MS=1000
PERIOD_MS=2400
SOURCES="bpf netlink none"
BASE_ITERS=20
GLOO_TIMEOUT_MS=15000
GLOO=1
OUT=fault_bench.json
KEEP=0
NAME="fb$$"
FIFO=0

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --faults) FAULTS="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --down-ms) DOWN_MS="$2"; shift 2 ;;
    --period-ms) PERIOD_MS="$2"; shift 2 ;;
    --sources) SOURCES="$2"; shift 2 ;;
    --baseline-iters) BASE_ITERS="$2"; shift 2 ;;
    --gloo-timeout-ms) GLOO_TIMEOUT_MS="$2"; shift 2 ;;
    --no-gloo) GLOO=0; shift ;;
    --out) OUT="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --fifo) FIFO="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fault_bench.sh: unknown argument $1 (try --help)" >&2; exit 64 ;;
  esac
done
num() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "fault_bench.sh: $1: a positive number, got '$2'" >&2; exit 64; }; }
num --faults "$FAULTS"; num --down-ms "$DOWN_MS"; num --period-ms "$PERIOD_MS"
num --baseline-iters "$BASE_ITERS"; num --gloo-timeout-ms "$GLOO_TIMEOUT_MS"
((PERIOD_MS > DOWN_MS + 600)) || { echo "fault_bench.sh: --period-ms must exceed --down-ms by 600 ms (fail-back)" >&2; exit 64; }
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
for tool in "$BIN/reccl" "$BIN/reccl-bench" "$BIN/gloo_bench"; do
  [[ -x "$tool" ]] || { echo "fault_bench.sh: missing $tool (build it first)" >&2; exit 77; }
done
command -v python3 >/dev/null || { echo "fault_bench.sh: python3 not installed (scripts/setup.sh)" >&2; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "fault_bench.sh: needs root for the testbed's namespaces" >&2; exit 77; }
RECCL="$BIN/reccl"

WORK="$(mktemp -d /tmp/reccl-fault-bench.XXXXXX)"
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  # A run killed half-way may leave a link down: put every cable back before the teardown.
  for h in 0 1; do for r in 0 1; do
    "$RECCL" inject clear --netns "$NAME-h$h" --dev "rail$r" >/dev/null 2>&1 || true
  done; done
  if [[ $KEEP -eq 0 ]]; then
    "$RECCL" testbed down --name "$NAME" >/dev/null 2>&1 || true
    # A failed run's rank logs (every failover line) are what explains it: they stay.
    if [[ $rc -ne 0 && $rc -ne 130 ]]; then
      echo "fault_bench.sh: the ranks' logs of the failed run stay in $WORK" >&2
    else
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

step "testbed $NAME: 2 hosts x 2 rails"
"$RECCL" testbed up --name "$NAME" --hosts 2 --rails 2 >&2

# Runs a command as one rank per host; rank 0's output in $WORK/$tag.log.
ranks() {
  local tag="$1"; shift
  "$RECCL" testbed run --name "$NAME" --timeout 1800 -- "${SCHED[@]}" "$@" >"$WORK/$tag.log" 2>&1
}

# --- fault-free baselines (the same bench, normal mode: out-of-place busbw) --------------------
for b in one:=rail0 two:rail; do
  tag="base_${b%%:*}"
  step "fault-free allreduce $SIZE, RECCL_NICS=${b#*:}"
  ranks "$tag" /usr/bin/env RECCL_NICS="${b#*:}" "$BIN/reccl-bench" -b "$SIZE" -e "$SIZE" -n "$BASE_ITERS" -w 3 \
    --json "$WORK/$tag.json" || { cat "$WORK/$tag.log" >&2; echo "fault_bench.sh: $tag failed" >&2; exit 1; }
done

# One rail, fault-free, in the fault loop's own mode (each result checked, counters agreed after
# each call), so that "degraded after a failover" has a like-for-like one-rail figure: the loop's
# per-call work between calls makes its busbw differ from the plain benchmark's. Its plan only
# touches rail 1 of host 0, which RECCL_NICS==rail0 leaves unused.
step "fault-free allreduce $SIZE in the fault loop, RECCL_NICS==rail0"
python3 -c 'import json,sys; json.dump({"version": 1, "actions": [{"at_ms": 500, "action": "link-down",
  "target": {"netns": sys.argv[2], "dev": "rail1", "side": "switch"}, "duration_ms": 300}]}, open(sys.argv[1], "w"))' \
  "$WORK/plan_loop_one.json" "$NAME-h0"
ranks base_loop_one /usr/bin/env RECCL_NICS==rail0 "$BIN/reccl-bench" --fault-plan "$WORK/plan_loop_one.json" \
  -e "$SIZE" -w 3 -n "$BASE_ITERS" --fault-tail-ms 500 --json "$WORK/base_loop_one.json" ||
  { tail -20 "$WORK/base_loop_one.log" >&2; echo "fault_bench.sh: base_loop_one failed" >&2; exit 1; }

# --- the fault plan per source ------------------------------------------------------------------
# FAULTS link-downs of host 0's cable at the switch, each DOWN_MS long, PERIOD_MS apart, first at
# 3 s. With the BPF or rtnetlink detector the traffic fails back to rail 0 after each recovery, so
# every fault hits rail 0. In-band only has no source that sees a rail come back: its traffic
# stays where the last failover put it, so its faults alternate between rail 0 and rail 1.
plan() {  # $1 file, $2 alternate rails (0/1)
  python3 - "$1" "$NAME-h0" "$FAULTS" "$DOWN_MS" "$PERIOD_MS" "$2" <<'PY'
import json, sys
path, ns, n, down, period, alt = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
acts = [{"at_ms": 3000 + i * period, "action": "link-down",
         "target": {"netns": ns, "dev": "rail%d" % ((i % 2) if alt else 0), "side": "switch"},
         "duration_ms": down} for i in range(n)]
json.dump({"version": 1, "actions": acts}, open(path, "w"))
PY
}
# Same settings for every source: in-band stall check at 200 ms; hold-down 300 ms; flap damping
# forgets within ~1 s (faults PERIOD_MS apart are separate events here, not a flapping link).
FAULT_ENV=(RECCL_STALL_TIMEOUT_MS=200 RECCL_HOLDDOWN_MS=300 RECCL_DAMPING_HALFLIFE_MS=200)
for src in $SOURCES; do
  alt=0; [[ $src == none ]] && alt=1
  plan "$WORK/plan_$src.json" "$alt"
  step "fault plan, RECCL_DETECTOR=$src: $FAULTS link-downs of $NAME-h0 rail (switch side), ${DOWN_MS} ms each, every ${PERIOD_MS} ms"
  ranks "fault_$src" /usr/bin/env RECCL_DETECTOR="$src" "${FAULT_ENV[@]}" "$BIN/reccl-bench" \
    --fault-plan "$WORK/plan_$src.json" --fault-log "$WORK/plan_$src.jsonl" -e "$SIZE" -w 3 -n 5 \
    --fault-tail-ms 1500 --json "$WORK/fault_$src.json" || {
      tail -20 "$WORK/fault_$src.log" >&2; echo "fault_bench.sh: fault run ($src) failed" >&2; exit 1; }
  grep -m1 'link detector on\|sources' "$WORK/fault_$src.log" >&2 || true
  grep '^\[rank 0\] # stall' "$WORK/fault_$src.log" | sed 's/^\[rank 0\] //' >&2 || true
done

# --- Gloo under the same fault ------------------------------------------------------------------
# Gloo runs on rail 0 only (it has one TCP device). (a) rail 0's cable down DOWN_MS and back,
# during a loop of GLOO_ITERS allreduces of 1 MiB (short iterations, so the loop's length is
# known to a few ms): the loop's extra time over the same loop without a fault, run just before
# and just after (the faster of the two), is Gloo's stall. (b) the cable stays down: how long
# until Gloo reports an error (its I/O timeout, --gloo-timeout-ms), or whether it hangs.
GLOO_ITERS=1500
gloo() {  # $1 tag, $2 size, then extra args
  local tag="$1" size="$2"; shift 2
  ranks "$tag" "$BIN/gloo_bench" --iface rail0 --store-dir "$WORK/gs-$tag" --algo ring -b "$size" -e "$size" -w 1 \
    --timeout-ms "$GLOO_TIMEOUT_MS" "$@" --json "$WORK/$tag.json"
}
mono_ms() { python3 -c 'import time; print(int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1000))'; }
if [[ $GLOO -eq 1 ]]; then
  step "gloo fault-free, rail0: $SIZE, and 1 MiB x $GLOO_ITERS"
  gloo gloo_free "$SIZE" -n 10 || { tail -5 "$WORK/gloo_free.log" >&2; echo "fault_bench.sh: gloo baseline failed" >&2; exit 1; }
  gloo gloo_free_small1 1M -n "$GLOO_ITERS" || { tail -5 "$WORK/gloo_free_small1.log" >&2; exit 1; }
  step "gloo 1 MiB x $GLOO_ITERS, rail0 cable of host 0 down ${DOWN_MS} ms at ~2 s"
  gloo gloo_recover 1M -n "$GLOO_ITERS" --timeline &
  GPID=$!
  sleep 2
  T_DOWN=$(mono_ms)
  "$RECCL" inject link-down --netns "$NAME-h0" --dev rail0 --side switch >&2
  sleep "$(python3 -c "print($DOWN_MS / 1000)")"
  T_UP=$(mono_ms)
  "$RECCL" inject link-up --netns "$NAME-h0" --dev rail0 --side switch >&2
  GRC=0; wait $GPID || GRC=$?
  echo "$GRC" >"$WORK/gloo_recover.rc"
  echo "$T_DOWN $T_UP" >"$WORK/gloo_recover.fault"  # CLOCK_MONOTONIC ms, as the timeline
  gloo gloo_free_small2 1M -n "$GLOO_ITERS" || { tail -5 "$WORK/gloo_free_small2.log" >&2; exit 1; }
  step "gloo, rail0 cable of host 0 down at ~4 s and kept down (Gloo timeout ${GLOO_TIMEOUT_MS} ms)"
  gloo gloo_hold "$SIZE" -n 1000 --timeline &
  GPID=$!
  sleep 4
  T_FAULT=$(mono_ms)
  "$RECCL" inject link-down --netns "$NAME-h0" --dev rail0 --side switch >&2
  # A Gloo that never reports an error is a hang: stopped 30 s after its own timeout.
  ( sleep $((GLOO_TIMEOUT_MS / 1000 + 30)); kill -TERM $GPID 2>/dev/null && touch "$WORK/gloo_hold.hung" ) &
  WATCH=$!
  GRC=0; wait $GPID || GRC=$?
  T_END=$(mono_ms)
  kill $WATCH 2>/dev/null || true
  "$RECCL" inject link-up --netns "$NAME-h0" --dev rail0 --side switch >&2
  echo "$GRC $((T_END - T_FAULT)) $T_FAULT" >"$WORK/gloo_hold.rc"
fi

# --- report -------------------------------------------------------------------------------------
python3 - "$WORK" "$OUT" "$SOURCES" "$FAULTS" "$SIZE" "$DOWN_MS" "$PERIOD_MS" "$GLOO" "$GLOO_TIMEOUT_MS" "$NAME" "$FIFO" <<'PY'
import json, os, sys, time
work, out, sources, nfaults, size, down, period, gloo, gtimeout, name, fifo = sys.argv[1:12]
sources = sources.split()
def load(tag):
    p = os.path.join(work, tag + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
def log_tail(tag, n=3):
    p = os.path.join(work, tag + ".log")
    if not os.path.exists(p): return ""
    return "".join(open(p, errors="replace").readlines()[-n:])
def oop(run): return run["rows"][0]["out_of_place"]["busbw_gbps"]
r = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "testbed": {"name": name, "hosts": 2, "rails": 2},
     "size": size, "faults_per_source": int(nfaults), "down_ms": int(down), "period_ms": int(period),
     "settings": "RECCL_STALL_TIMEOUT_MS=200 RECCL_HOLDDOWN_MS=300 RECCL_DAMPING_HALFLIFE_MS=200",
     "ranks_sched": "SCHED_FIFO %s" % fifo if fifo != "0" else "normal", "runs": {}}
b1, b2 = load("base_one"), load("base_two")
r["runs"]["base_one_rail"], r["runs"]["base_two_rails"] = b1, b2
r["baseline_busbw_gbps"] = {"one_rail": oop(b1), "two_rails": oop(b2)}
wrong = b1["out_of_bounds"] + b2["out_of_bounds"]
bl = load("base_loop_one")
r["runs"]["base_one_rail_fault_loop"] = bl
one_loop = None
if bl is not None and bl.get("iterations"):
    bws = sorted(i["busbw_gbps"] for i in bl["iterations"])
    one_loop = bws[len(bws) // 2]
    wrong += bl["out_of_bounds"] + (0 if bl["status"] == "ok" else 1)
r["baseline_busbw_gbps"]["one_rail_fault_loop"] = one_loop
r["sources"] = {}
for s in sources:
    f = load("fault_" + s)
    r["runs"]["fault_" + s] = f
    if f is None:
        r["sources"][s] = {"error": "no result"}; wrong += 1; continue
    wrong += f["out_of_bounds"] + (0 if f["status"] == "ok" else 1)
    sm = f["summary"]
    r["sources"][s] = {"faults": sm["faults"], "faults_with_failover": sm["faults_with_failover"],
                       "stall_ms": sm["stall_ms"], "stall_ms_fault_inside_a_call": sm["stall_ms_fault_inside_a_call"],
                       "signal_after_fault_ms": sm["signal_after_fault_ms"], "fault_to_switch_ms": sm["fault_to_switch_ms"],
                       "first_step_ms": sm.get("first_step_ms"), "resume_after_switch_ms": sm.get("resume_after_switch_ms"),
                       "busbw_gbps": sm["busbw_gbps"], "counters": f["counters"], "status": f["status"]}
ratios = {}
one, two = r["baseline_busbw_gbps"]["one_rail"], r["baseline_busbw_gbps"]["two_rails"]
for s in sources:
    x = r["sources"][s]
    if "busbw_gbps" not in x: continue
    bw = x["busbw_gbps"]
    if bw["degraded"] is not None and s != "none":
        ratios["degraded_over_one_rail_" + s] = bw["degraded"] / one
        if one_loop: ratios["degraded_over_one_rail_fault_loop_" + s] = bw["degraded"] / one_loop
    if bw["before"] is not None and s != "none":
        ratios["before_over_two_rails_" + s] = bw["before"] / two
    if bw["after"] is not None:
        ratios["after_over_two_rails_" + s] = bw["after"] / two
if "bpf" in r["sources"] and r["sources"]["bpf"].get("stall_ms", {}).get("p50"):
    for s in sources:
        p = r["sources"][s].get("stall_ms", {})
        if p.get("p50"): ratios["stall_p50_%s_over_bpf" % s] = p["p50"] / r["sources"]["bpf"]["stall_ms"]["p50"]
ratios["two_rails_over_one_rail"] = two / one
r["ratios"] = ratios
if gloo == "1":
    g = {"timeout_ms": int(gtimeout)}
    free, rec = load("gloo_free"), load("gloo_recover")
    s1, s2 = load("gloo_free_small1"), load("gloo_free_small2")
    for k in ("gloo_free", "gloo_recover", "gloo_free_small1", "gloo_free_small2"): r["runs"][k] = load(k)
    rc_rec = int(open(os.path.join(work, "gloo_recover.rc")).read().split()[0])
    if free: g["busbw_fault_free_gbps"] = free["rows"][0]["in_place"]["busbw_gbps"]
    if s1 and s2 and rec and rc_rec == 0:
        tf = min(s1["rows"][0]["in_place"]["time_us"], s2["rows"][0]["in_place"]["time_us"])
        tr = rec["rows"][0]["in_place"]["time_us"]
        g["recovered_fault_extra_ms"] = (tr - tf) * 1500 / 1000  # GLOO_ITERS: loop time difference
        g["recovered_fault"] = "completed, loop %.0f ms longer than fault-free (cable down %s ms)" % (g["recovered_fault_extra_ms"], down)
    else:
        g["recovered_fault"] = "failed (exit %d): %s" % (rc_rec, log_tail("gloo_recover").strip())
    rc, ms = map(int, open(os.path.join(work, "gloo_hold.rc")).read().split()[:2])
    g["held_fault_exit_code"], g["held_fault_exit_after_ms"] = rc, ms
    if os.path.exists(os.path.join(work, "gloo_hold.hung")):
        g["held_fault"] = "hang: no error within %.1f s (stopped 30 s after its timeout)" % (ms / 1000)
    else:
        g["held_fault"] = ("error after %.1f s: %s" % (ms / 1000, log_tail("gloo_hold", 2).strip().replace("\n", " | "))
                           if rc != 0 else "no error: completed (%d ms)" % ms)
    # Per iteration (rank 0's CLOCK_MONOTONIC, gloo_bench --timeline), relative to the fault, next
    # to reccl's iterations around its first fault of each source.
    def gloo_iters(tag):
        run = load(tag)
        loops = (run or {}).get("timeline", {}).get("loops", [])
        return loops[-1] if loops else None
    def around(iters, fault_ms, key_start, key_end, lo=-1000, hi=4000):
        out = []
        for it in iters:
            t = it[key_start] / 1e6 - fault_ms
            if lo <= t <= hi: out.append({"t_ms": round(t, 3), "ms": round((it[key_end] - it[key_start]) / 1e6, 3)})
        return out
    def describe(rows):
        before = sorted(x["ms"] for x in rows if x["t_ms"] < 0)
        after = [x for x in rows if x["t_ms"] >= 0]
        d = {"iterations": len(rows), "median_ms_before": before[len(before) // 2] if before else None}
        if after:
            worst = max(after, key=lambda x: x["ms"])
            d["slowest_ms_after_fault"], d["slowest_started_at_ms"] = worst["ms"], worst["t_ms"]
        return d
    tl = {}
    loop = gloo_iters("gloo_recover")
    if loop and os.path.exists(os.path.join(work, "gloo_recover.fault")):
        t_down, t_up = map(int, open(os.path.join(work, "gloo_recover.fault")).read().split())
        rows = around(loop["iterations"], t_down, "start_mono_ns", "end_mono_ns")
        tl["gloo_recovered"] = {"bytes": loop["bytes"], "completed": loop["completed"], "fault_mono_ms": t_down,
                                "recover_after_ms": t_up - t_down, **describe(rows), "per_iteration": rows}
    loop = gloo_iters("gloo_hold")
    if loop:
        hold = open(os.path.join(work, "gloo_hold.rc")).read().split()
        t_fault = int(hold[2]) if len(hold) > 2 else None  # CLOCK_MONOTONIC ms of the link-down
        if t_fault is not None:
            rows = around(loop["iterations"], t_fault, "start_mono_ns", "end_mono_ns", hi=10 ** 9)
            tl["gloo_held"] = {"bytes": loop["bytes"], "completed": loop["completed"], "fault_mono_ms": t_fault,
                               **describe(rows), "per_iteration": rows}
    for s in sources:
        f = r["runs"].get("fault_" + s)
        if not f or not f.get("plan"): continue
        faults = [x for x in (f.get("faults") or [])]
        if not faults: continue
        t0 = f["t0_mono_ns"] / 1e6
        fault_ms = t0 + faults[0]["at_s"] * 1000
        rows = around(f["iterations"], fault_ms, "start_mono_ns", "end_mono_ns")
        tl["reccl_" + s] = {"bytes": f["collective"]["bytes"], "fault_mono_ms": fault_ms, **describe(rows),
                            "per_iteration": rows}
    g["timeline"] = tl
    r["gloo"] = g
r["wrong_or_failed"] = wrong
json.dump(r, open(out, "w"), indent=1)

def f2(v, d=2): return "-" if v is None else ("%." + str(d) + "f") % v
print()
print("allreduce %s, 2 hosts x 2 rails (veth), %s faults per source, cable down %s ms every %s ms" % (size, nfaults, down, period))
print("fault-free busbw GB/s: one rail %s, two rails %s (ratio %s); one rail in the fault loop %s" % (f2(one, 3), f2(two, 3), f2(two / one), f2(one_loop, 3)))
print("%-8s %8s %8s %8s %8s %8s %10s %10s %9s %9s %9s %9s" % ("source", "faults", "stall50", "stall99", "stallmax",
      "step99", "signal50", "switch50", "bw before", "during", "degraded", "after"))
for s in sources:
    x = r["sources"][s]
    if "stall_ms" not in x: print("%-8s failed" % s); continue
    st, bw = x["stall_ms"], x["busbw_gbps"]
    fs = x.get("first_step_ms") or {}
    print("%-8s %8s %8s %8s %8s %8s %10s %10s %9s %9s %9s %9s" % (s, "%d/%d" % (x["faults_with_failover"], x["faults"]),
          f2(st["p50"]), f2(st["p99"]), f2(st["max"]), f2(fs.get("p99")), f2(x["signal_after_fault_ms"]["p50"]),
          f2(x["fault_to_switch_ms"]["p50"]), f2(bw["before"], 3), f2(bw["during"], 3), f2(bw["degraded"], 3), f2(bw["after"], 3)))
print("(stall ms: fault syscall -> the held-up work moving on the new paths: the first step of a connection")
print(" that had steps outstanding, the new path's start for an idle one; step99: fault -> first step")
print(" completed on a new path, p99, which for an idle connection waits for the next call; signal: fault ->")
print(" first fault signal; switch: first signal -> new path committed; bandwidth: medians over the fault")
print(" windows, GB/s)")
print("ratios:")
for k, v in ratios.items():
    goal = "   (goal >= 0.9)" if k.startswith("degraded_over_one_rail") else ""
    print("  %-34s %.3f%s" % (k, v, goal))
if "gloo" in r:
    g = r["gloo"]
    print("gloo (rail0 only): fault recovered after %s ms: %s" % (down, g["recovered_fault"]))
    print("gloo: fault held: %s" % g["held_fault"])
    print("per iteration around the fault (ms; t = iteration start after the fault):")
    print("  %-16s %10s %10s %12s %12s %11s" % ("run", "bytes", "iters", "median before", "slowest after", "at t ms"))
    for k, v in g["timeline"].items():
        print("  %-16s %10d %10d %12s %12s %11s" % (k, v["bytes"], v["iterations"], f2(v.get("median_ms_before")),
              f2(v.get("slowest_ms_after_fault")), f2(v.get("slowest_started_at_ms"), 1)))
print("wrong results or failed runs: %d" % wrong)
print("written: %s" % out, file=sys.stderr)
sys.exit(1 if wrong else 0)
PY
