#!/bin/sh
# Allreduce bus bandwidth before and after a last-hop fault, direct route vs relay route, on a
# 2 hosts x 2 rails testbed with 2 ranks per host (root). Each run: float32 sum allreduce of COUNT
# elements in a loop for SECONDS; 40 % in, the switch port of host 0 rail 0 goes down (the ranks
# of host 0 lose rail 0; rail 1 is left). busbw = bytes * 2(n-1)/n / call time, median over the
# iterations before the fault and over those ending more than 1 s after it (rank 0's timeline).
# Fault source: NIC poll (four ranks loading BPF at once delay an in-process detector by seconds on a small host).
# Usage: bench/failover/relay_bw.sh BUILD_DIR [COUNT] [SECONDS] [RUNS]
set -eu
B=${1:?build dir}; COUNT=${2:-4194304}; SECS=${3:-14}; RUNS=${4:-1}
R="$B/bin/reccl"; W="$B/bin/relay_bw_worker"
NAME=rb$$
"$R" testbed up --name "$NAME" --hosts 2 --rails 2 >/dev/null
trap '"$R" testbed down --name "$NAME" >/dev/null 2>&1 || true' EXIT
for RUN in $(seq 1 "$RUNS"); do
for ROUTE in direct relay; do
  OUT=$(mktemp)
  "$R" testbed run --name "$NAME" --ranks-per-host 2 --timeout 120 -- /usr/bin/env RECCL_FAILOVER_ROUTE=$ROUTE RECCL_DETECTOR=poll \
    RECCL_TIMEOUT_MS=30000 RECCL_HOLDDOWN_MS=60000 WORKER_SECONDS="$SECS" WORKER_COUNT="$COUNT" "$W" >"$OUT" 2>&1 &
  PID=$!
  k=0
  while [ "$(grep -c 'started rank' "$OUT" || true)" -lt 4 ] && [ $k -lt 600 ]; do sleep 0.1; k=$((k + 1)); done
  sleep "$(python3 -c "print($SECS * 0.4)")"
  T=$(date +%s%N)
  ip -n "$NAME-fab" link set h0r0 down
  wait $PID || echo "$ROUTE run failed: $(grep -v '^iter' "$OUT" | tail -5)"
  ip -n "$NAME-fab" link set h0r0 up
  python3 - "$OUT" "$T" "$ROUTE" "$COUNT" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
t, route, count = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
it = [(int(m.group(1)), float(m.group(2))) for m in re.finditer(r"end_ns ([0-9]+) dur_us ([0-9.]+)", text)]
n = 4
bw = lambda us: count * 4 * 2 * (n - 1) / n / (us * 1e-6) / 1e9
before = [bw(d) for e, d in it[2:] if e < t]
after = [bw(d) for e, d in it if e > t + 1_000_000_000]
relay = re.findall(r"relay rank ([0-9]+) migrations ([0-9]+) forwarded ([0-9]+)", text)
fwd = sum(int(f) for _, _, f in relay)
mig = sum(int(m) for _, m, _ in relay)
med = lambda x: statistics.median(x) if x else float("nan")
print(f"{route:6s} busbw_before_GBps {med(before):.3f} ({len(before)} iters) busbw_after_GBps {med(after):.3f} "
      f"({len(after)} iters) after/before {med(after)/med(before):.2f} relay_migrations {mig} relay_forwarded_MB {fwd/1e6:.0f}")
PY
  rm -f "$OUT"
  sleep 1.5
done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
