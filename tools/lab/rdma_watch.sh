#!/bin/sh
# Guest side of lab.RdmaPortEvent's CLI check (tests/lab/CMakeLists.txt): `reccl detector watch
# --signals --json` on a veth whose peer goes down under an rxe device must print the RDMA port
# events, the kernel hook's (fentry on ib_dispatch_event, on the rxe device) and the verbs async
# event's (on the veth), beside the LinkDown. Exit 0 when it shows them, 1 otherwise.
set -u
a=lw$$a
b=lw$$b
rxe=rxw$$
out=/tmp/rdma_watch.$$
err=/tmp/rdma_watch.$$.err
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null
  rdma link delete "$rxe" 2>/dev/null
  ip link del "$a" 2>/dev/null
  rm -f "$out" "$err"
}
trap cleanup EXIT
fail() { echo "rdma_watch: FAILED: $*"; echo "--- watch stdout"; cat "$out"; echo "--- watch stderr"; cat "$err"; exit 1; }
ip link add "$a" type veth peer name "$b" && ip link set "$a" up && ip link set "$b" up || fail "veth pair"
rdma link add "$rxe" type rxe netdev "$a" || fail "rdma link add (rdma_rxe not loaded?)"
i=0
until grep -q ACTIVE "/sys/class/infiniband/$rxe/ports/1/state" 2>/dev/null; do
  i=$((i + 1)); [ $i -le 300 ] || fail "$rxe never ACTIVE"; sleep 0.01
done
reccl detector watch --signals --json --dev "$a" --duration 60 >"$out" 2>"$err" &
pid=$!
i=0
until grep -q "watching" "$err" 2>/dev/null; do
  i=$((i + 1)); [ $i -le 3000 ] || fail "the watch never started"; sleep 0.01
done
ip link set "$b" down
want_hook='"kind":"rdma_port_err".*"source":"fentry_ib_dispatch"'
want_async='"kind":"rdma_port_err".*"source":"rdma_async"'
i=0
until grep '"op":"signal"' "$out" | grep -q "$want_hook" && grep '"op":"signal"' "$out" | grep -q "$want_async" &&
  grep -q '"op":"event".*"type":"link_down"' "$out"; do
  i=$((i + 1)); [ $i -le 1000 ] || fail "no ib_dispatch_event and async port errors with a LinkDown within 10 s"; sleep 0.01
done
echo "rdma_watch: ok: reccl detector watch --signals showed:"
grep "rdma_port_err\|link_down" "$out"
exit 0
