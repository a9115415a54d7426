#!/bb/sh
# Guest side of the two-VM RDMA check (lab.sh run --vms 2 --rxe): ibv_rc_pingpong over rxe0 on
# eth0, vm0 serving, vm1 connecting. Uses the IPv4-mapped GID of the VM's own address (RoCEv2).
iters=${1:-100}
deadline=$(($(cut -d. -f1 /proc/uptime) + 40))
gid_index() {
  want=$(echo "${LAB_ADDR%/*}" | awk -F. '{ printf "ffff:%02x%02x:%02x%02x", $1, $2, $3, $4 }')
  for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
    grep -q "$want\$" "$g" 2>/dev/null && { basename "$g"; return 0; }
  done
  return 1
}
until idx=$(gid_index); do
  [ "$(cut -d. -f1 /proc/uptime)" -lt "$deadline" ] || { echo "rxe0: no GID for $LAB_ADDR"; exit 1; }
  sleep 0.1
done
echo "rxe0 GID index $idx for $LAB_ADDR"
if [ "$LAB_INDEX" = 0 ]; then
  exec timeout 40 ibv_rc_pingpong -d rxe0 -g "$idx" -n "$iters"
fi
while :; do
  timeout 40 ibv_rc_pingpong -d rxe0 -g "$idx" -n "$iters" "$LAB_PEER" && exit 0
  [ "$(cut -d. -f1 /proc/uptime)" -lt "$deadline" ] || exit 1
  sleep 0.3  # the server may not listen yet
done
