#!/usr/bin/env bash
# The main job (for now): bring up a 2-host x 2-rail testbed, show every rail passing traffic
# (RTT and a 1-second TCP flow per rail), show a last-hop fault taking out exactly one rail, and
# tear everything down again, also when interrupted.
set -euo pipefail
BUILD_DIR=${1:-build}
RECCL="$BUILD_DIR/bin/reccl"
HOSTS=2
RAILS=2
NAME="demo-$$"

if [[ $EUID -ne 0 ]]; then
  echo "demo: needs root (the testbed creates network namespaces); run: sudo make demo" >&2
  exit 1
fi
[[ -x $RECCL ]] || { echo "demo: $RECCL not built; run: make build" >&2; exit 1; }

cleanup() {
  echo
  echo "== tear down: reccl testbed down --name $NAME"
  "$RECCL" testbed down --name "$NAME" | sed 's/^/   /'
}
trap cleanup EXIT

onhost() { local h=$1; shift; "$RECCL" testbed exec --name "$NAME" --host "$h" -- "$@"; }

# "avg ms" of 5 pings, or "no reply".
rtt() {
  local out
  if out=$(onhost "$1" ping -n -q -c 5 -i 0.2 -W 1 "$2" 2>/dev/null); then
    echo "$out" | awk -F/ '/^rtt/ {printf "%.3f ms", $5}'
  else
    echo "no reply"
  fi
}

# Gbit/s of a 1-second TCP flow from host $1 to address $2 (iperf3 server on host $3).
tcp_gbps() {
  local port=$((5201 + RANDOM % 1000))
  onhost "$3" iperf3 -s -1 -D -B "$2" -p "$port" >/dev/null 2>&1 || { echo "n/a"; return; }
  sleep 0.2
  onhost "$1" iperf3 -c "$2" -p "$port" -t 1 -f g 2>/dev/null |
    awk '/receiver/ {for (i = 1; i <= NF; i++) if ($i == "Gbits/sec") print $(i-1) " Gbit/s"}'
}

table() {
  printf "   %-6s %-9s %-16s %-12s %s\n" "rail" "hosts" "destination" "rtt (avg 5)" "tcp 1 s"
  for ((r = -1; r < RAILS; r++)); do
    local label dst
    if ((r < 0)); then label=mgmt; dst=10.99.0.2; else label=rail$r; dst=10.$((100 + r)).0.2; fi
    local t="-"
    [[ ${1:-} == tcp ]] && t=$(tcp_gbps 0 "$dst" 1)
    printf "   %-6s %-9s %-16s %-12s %s\n" "$label" "h0 -> h1" "$dst" "$(rtt 0 "$dst")" "$t"
  done
}

echo "== bring up: reccl testbed up --name $NAME --hosts $HOSTS --rails $RAILS"
start=$(date +%s%N)
"$RECCL" testbed up --name "$NAME" --hosts $HOSTS --rails $RAILS | sed 's/^/   /'
echo "   (took $(( ($(date +%s%N) - start) / 1000000 )) ms)"

echo
echo "== every rail passes traffic (ping RTT, iperf3 TCP flow of 1 s)"
table tcp

echo
echo "== last-hop fault: switch port h1r0 down (ip -n $NAME-fab link set h1r0 down)"
ip -n "$NAME-fab" link set h1r0 down
echo "   host 1 sees: $(ip -n "$NAME-h1" -br link show rail0 | awk '{print $1, $2}')"
table
echo "== repaired: switch port h1r0 up"
ip -n "$NAME-fab" link set h1r0 up
sleep 0.2
table

echo
echo "== ranks: reccl testbed run --name $NAME --ranks-per-host 2 -- ..."
"$RECCL" testbed run --name "$NAME" --ranks-per-host 2 --timeout 10 -- \
  sh -c 'echo "rank $RANK/$WORLD_SIZE local $LOCAL_RANK master $MASTER_ADDR:$MASTER_PORT"' | sed 's/^/   /'
