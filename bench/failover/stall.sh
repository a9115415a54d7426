#!/bin/sh
# Stall per last-hop fault, by detection source, on a 2 hosts x 2 rails testbed (root).
# Each run: allreduce loop (WORKER_COUNT floats) on 2 ranks; after 1.5 s the switch port of host 0
# rail 0 goes down. Stall = duration of the iteration in flight at the fault minus the median
# iteration (what the fault cost), read from rank 0's timeline. Prints one line per run and
# p50/max per source.
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
    awk -v t="$T" -v src="$SRC" '
      /iter [0-9]+ end_ns/ { n++; e[n]=$4; d[n]=$6 }
      END {
        m=0; for (i=1;i<=n;i++) s[i]=d[i]; asort(s); med=s[int(n/2)+1];
        for (i=1;i<=n;i++) if (e[i] >= t) { stall=(d[i]-med)/1000; if (stall<0) stall=0; break }
        printf "%s stall_ms %.2f median_iter_ms %.2f iters %d\n", src, stall, med/1000, n }' "$OUT"
    rm -f "$OUT"
    sleep 1.5  # hold-down before the next run
  done
done
