#!/usr/bin/env bash
# reccl-sim against the real thing: a seeded trace of link-downs replayed on a fresh 2 hosts x 2
# rails testbed under `reccl-bench --fault-plan`, once per detection source; each run's measured
# costs (--costs: its stall sample, detection, degraded bandwidth) and its fault timestamps
# (--trace) go to reccl-sim, whose loop of the same work under the same faults must take within
# --tolerance % of the measured loop time. Prints both per source; writes one JSON.
#
#   sudo bench/sim/validate.sh --build build --faults 30 --out sim_validation.json
#   sudo bench/sim/validate.sh --faults 12 --sources bpf        # a quick look
#
# Sources: bpf (BPF detector; fail-back after hold-down: simulated as policy reccl) and none
# (in-band stall detection only; nothing sees a rail come back, so the faults alternate between
# the rails and the traffic stays where it was moved: policy reccl-no-failback).
# Options: --build DIR (build), --faults N per source (30), --sources "bpf none", --size BYTES
# (8M), --seed S (1; the plan's), --sim-seeds N (20; stall draws averaged), --tolerance PCT (15),
# --out FILE (sim_validation.json; the work files go to FILE.d/), --keep (leave the testbed),
# --fifo PRIO (both ranks under SCHED_FIFO PRIO via chrt: steadier loop times on a machine that
# others load; the loop's speed otherwise swings by half within seconds).
# Exit: 0 every source within the tolerance, 1 a run failed or a source is off, 64 usage,
# 77 not root / a tool missing.
set -euo pipefail

BUILD=build
FAULTS=30
SOURCES="bpf none"
SIZE=8M
SEED=1
SIM_SEEDS=20
TOL=15
OUT=sim_validation.json
KEEP=0
FIFO=0
NAME="sv$$"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --faults) FAULTS="$2"; shift 2 ;;
    --sources) SOURCES="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --sim-seeds) SIM_SEEDS="$2"; shift 2 ;;
    --tolerance) TOL="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --fifo) FIFO="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "validate.sh: unknown argument $1 (try --help)" >&2; exit 64 ;;
  esac
done
num() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "validate.sh: $1: a positive number, got '$2'" >&2; exit 64; }; }
num --faults "$FAULTS"; num --seed "$SEED"; num --sim-seeds "$SIM_SEEDS"; num --tolerance "$TOL"
[[ "$FIFO" =~ ^([0-9]|[1-9][0-9])$ ]] || { echo "validate.sh: --fifo: a priority 1-99, got '$FIFO'" >&2; exit 64; }
SCHED=()
if ((FIFO > 0)); then
  command -v chrt >/dev/null || { echo "validate.sh: --fifo needs chrt (util-linux)" >&2; exit 77; }
  SCHED=(chrt -f "$FIFO")
fi
for s in $SOURCES; do
  [[ $s == bpf || $s == none ]] || { echo "validate.sh: --sources: bpf or none, got $s" >&2; exit 64; }
done
BIN="$(cd "$BUILD/bin" 2>/dev/null && pwd)" || { echo "validate.sh: --build: no $BUILD/bin" >&2; exit 64; }
for tool in reccl reccl-bench reccl-sim; do
  [[ -x "$BIN/$tool" ]] || { echo "validate.sh: missing $BIN/$tool (build it first)" >&2; exit 77; }
done
PY="$(dirname "$0")/validate.py"
command -v python3 >/dev/null || { echo "validate.sh: python3 not installed (scripts/setup.sh)" >&2; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "validate.sh: needs root for the testbed's namespaces" >&2; exit 77; }
RECCL="$BIN/reccl"

WORK="${OUT%.json}.d"
mkdir -p "$WORK"
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for h in 0 1; do for r in 0 1; do
    "$RECCL" inject clear --netns "$NAME-h$h" --dev "rail$r" >/dev/null 2>&1 || true
  done; done
  if [[ $KEEP -eq 0 ]]; then
    "$RECCL" testbed down --name "$NAME" >/dev/null 2>&1 || true
  else
    echo "kept: testbed $NAME" >&2
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
step() { printf '== %s\n' "$*" >&2; }

step "testbed $NAME: 2 hosts x 2 rails"
"$RECCL" testbed up --name "$NAME" --hosts 2 --rails 2 >&2

# The settings of bench/failover/fault_bench.sh: in-band stall check at 200 ms, hold-down 300 ms,
# damping that forgets within ~1 s. The simulation gets the same hold-down and half-life. 100
# warm-up calls: the first second of a loop runs at half speed (TCP windows still growing).
HOLD_MS=300
HALF_MS=200
FAULT_ENV=(RECCL_STALL_TIMEOUT_MS=200 RECCL_HOLDDOWN_MS=$HOLD_MS RECCL_DAMPING_HALFLIFE_MS=$HALF_MS)
RC=0
RESULTS=()
for src in $SOURCES; do
  policy=reccl; alt=()
  [[ $src == none ]] && { policy=reccl-no-failback; alt=(--alternate); }
  d="$WORK/$src"
  mkdir -p "$d"
  python3 "$PY" plan "$d/plan.json" --netns "$NAME-h0" --faults "$FAULTS" --seed "$SEED" "${alt[@]}"
  step "RECCL_DETECTOR=$src: $FAULTS link-downs of $NAME-h0's rail (switch side), allreduce $SIZE in a loop"
  "$RECCL" testbed run --name "$NAME" --timeout 900 -- "${SCHED[@]}" /usr/bin/env RECCL_DETECTOR="$src" "${FAULT_ENV[@]}" \
    "$BIN/reccl-bench" --fault-plan "$d/plan.json" -e "$SIZE" -w 100 -n 5 --fault-tail-ms 1500 \
    --json "$d/run.json" >"$d/run.log" 2>&1 ||
    { tail -20 "$d/run.log" >&2; echo "validate.sh: the fault run ($src) failed" >&2; exit 1; }
  grep '^\[rank 0\] # stall' "$d/run.log" | sed 's/^\[rank 0\] //' >&2 || true
  python3 "$PY" inputs "$d/run.json" "$d" --policy "$policy" --holddown-ms "$HOLD_MS" --half-life-ms "$HALF_MS"
  "$BIN/reccl-sim" --scenario "$d/scenario.json" --trace "$d/trace.json" --costs "$d/run.json" \
    --policies "$policy" --seeds "$SIM_SEEDS" --no-progress --json "$d/sim.json" >"$d/sim.txt" ||
    { cat "$d/sim.txt" >&2; echo "validate.sh: reccl-sim failed ($src)" >&2; exit 1; }
  python3 "$PY" compare "$d/measured.json" "$d/sim.json" --policy "$policy" --tolerance "$TOL" \
    --out "$d/compare.json" || RC=1
  RESULTS+=("$src=$d/compare.json")
done

python3 - "$OUT" "$FAULTS" "$SIZE" "$SEED" "$TOL" "${RESULTS[@]}" <<'PY'
import json, sys
out, faults, size, seed, tol = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
res = {}
for kv in sys.argv[6:]:
    src, path = kv.split("=", 1)
    res[src] = json.load(open(path))
json.dump({"tool": "bench/sim/validate.sh", "faults_per_source": faults, "size": size, "plan_seed": seed,
           "tolerance_pct": tol, "sources": res, "within": all(r["within"] for r in res.values())},
          open(out, "w"), indent=1)
PY
if ((RC)); then
  echo "validate.sh: simulated loop time off by more than $TOL % (see above)" >&2
fi
exit $RC
