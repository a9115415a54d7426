#!/bin/sh
# Stall per last-hop fault, by detection source, on a 2 hosts x 2 rails testbed (root).
# Each run: allreduce loop (WORKER_COUNT floats) on 2 ranks; after 1.5 s the switch port of host 0
# rail 0 goes down. Stall = duration of the slowest iteration ending within 3 s of the fault minus
# the median iteration (what the fault cost), read from rank 0's timeline. Prints one line per run.
# Usage: bench/failover/stall.sh BUILD_DIR [RUNS] [COUNT]
set -eu
B=${1:?build dir}; RUNS=${2:-5}; COUNT=${3:-262144}
R="$B/bin/reccl"; W="$B/bin/failover_worker"
NAME=fb$$
"$R" testbed up --name "$NAME" --hosts 2 --rails 2 >/dev/null
trap '"$R" testbed down --name "$NAME" >/dev/null 2>&1 || true' EXIT
for SRC in bpf netlink poll none; do
  for k in $(seq 1 "$RUNS"); do
    OUT=$(mktemp)
    "$R" testbed run --name "$NAME" --timeout 60 -- /usr/bin/env RECCL_DETECTOR=$SRC RECCL_STALL_TIMEOUT_MS=200 \
      RECCL_TIMEOUT_MS=30000 WORKER_TIMELINE=1 WORKER_SECONDS=3.5 WORKER_COUNT=$COUNT "$W" >"$OUT" 2>&1 &
    PID=$!
    sleep 1.5
    T=$(date +%s%N)
    ip -n "$NAME-fab" link set h0r0 down
    wait $PID || echo "run failed: $(tail -3 "$OUT")"
    ip -n "$NAME-fab" link set h0r0 up
    python3 - "$OUT" "$T" "$SRC" <<'PY'
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
t = int(sys.argv[2])
it = [(int(m.group(1)), float(m.group(2))) for m in (re.search(r"end_ns ([0-9]+) dur_us ([0-9.]+)", l) for l in lines) if m]
if not it:
    print(sys.argv[3], "no timeline"); sys.exit()
med = statistics.median(d for _, d in it)
# The fault can land at the tail of one iteration and stall the next: take the slowest iteration
# ending within 3 s after the fault.
after = [d for e, d in it if t <= e <= t + 3_000_000_000]
stall = max(0.0, (max(after) - med) / 1000) if after else float("nan")
print(f"{sys.argv[3]} stall_ms {stall:.2f} median_iter_ms {med/1000:.2f} iters {len(it)}")
PY
    rm -f "$OUT"
    sleep 1.5  # hold-down before the next run
  done
done
