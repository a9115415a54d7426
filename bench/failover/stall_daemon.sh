#!/bin/sh
# Stall per last-hop fault with the node daemon reccl-detectord as the fault source, against the
# in-process BPF detector, runs interleaved (daemon, bpf, daemon, ...) so both see the same load.
# 2 hosts x 2 rails testbed (root); each run: allreduce loop (COUNT floats) on 2 ranks, FAULT_AT
# seconds (env, 1.5) after the job starts the switch port of host 0 rail 0 goes down (the
# in-process detector loads BPF after start, seconds on a busy host: FAULT_AT=4 compares the
# sources once both run; 1.5 shows the start-up window the daemon removes). Stall = slowest iteration ending within 3 s of
# the fault minus the median iteration (as bench/failover/stall.sh); fault-to-switch = the
# initiating rank's logged first signal -> new path committed, per connection.
# Usage: bench/failover/stall_daemon.sh BUILD_DIR [RUNS] [COUNT]
set -eu
B=${1:?build dir}; RUNS=${2:-5}; COUNT=${3:-262144}; FAULT_AT=${FAULT_AT:-1.5}
R="$B/bin/reccl"; W="$B/bin/failover_worker"; D="$B/bin/reccl-detectord"
NAME=fd$$
SOCK=/tmp/reccl-stalld-$$.sock
DLOG=$(mktemp)
DPID=
cleanup() {
  [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
  rm -f "$SOCK" "$DLOG"
  "$R" testbed down --name "$NAME" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
"$R" testbed up --name "$NAME" --hosts 2 --rails 2 >/dev/null
"$D" --socket "$SOCK" --metrics-port -1 --source auto --hold-down-ms 1000 >"$DLOG" 2>&1 &
DPID=$!
i=0; while ! grep -q '"started"' "$DLOG"; do i=$((i+1)); [ $i -gt 300 ] && { echo "daemon did not start"; cat "$DLOG"; exit 1; }; sleep 0.1; done
for k in $(seq 1 "$RUNS"); do
  for SRC in daemon bpf; do
    OUT=$(mktemp)
    "$R" testbed run --name "$NAME" --timeout 60 -- /usr/bin/env RECCL_DETECTOR=$SRC RECCL_DETECTORD_SOCKET="$SOCK" \
      RECCL_STALL_TIMEOUT_MS=200 RECCL_TIMEOUT_MS=30000 WORKER_TIMELINE=1 WORKER_SECONDS=$(awk "BEGIN{print $FAULT_AT + 2}") WORKER_COUNT=$COUNT \
      "$W" >"$OUT" 2>&1 &
    PID=$!
    sleep "$FAULT_AT"
    T=$(date +%s%N)
    ip -n "$NAME-fab" link set h0r0 down
    wait $PID || echo "run failed: $(tail -3 "$OUT")"
    ip -n "$NAME-fab" link set h0r0 up
    python3 - "$OUT" "$T" "$SRC" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
lines = text.splitlines()
t = int(sys.argv[2])
it = [(int(m.group(1)), float(m.group(2))) for m in (re.search(r"end_ns ([0-9]+) dur_us ([0-9.]+)", l) for l in lines) if m]
if not it:
    print(sys.argv[3], "no timeline"); sys.exit()
med = statistics.median(d for _, d in it)
after = [d for e, d in it if t <= e <= t + 3_000_000_000]
stall = max(0.0, (max(after) - med) / 1000) if after else float("nan")
src = re.findall(r"rail 0 \(rail0\) down \(source ([a-z-]+(?: [a-z_-]+)?)\)", text)
f2s = [int(x) / 1000 for x in re.findall(r"failover of rank .*fault-to-switch ([0-9]+) us", text)]
print(f"{sys.argv[3]} stall_ms {stall:.2f} median_iter_ms {med/1000:.2f} iters {len(it)} "
      f"source {src[0] if src else '?'} fault_to_switch_ms {','.join(f'{x:.2f}' for x in f2s) or '?'}")
PY
    rm -f "$OUT"
    sleep 1.5  # > the daemon's and the job's hold-down before the next run
  done
done
