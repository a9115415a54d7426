#!/bb/sh
# /init of the lab's initramfs (tools/lab/lab.sh builds it): mounts the kernel filesystems, loads
# the modules the host picked (in dependency order), sets up the NIC, runs /lab/cmd and reports
# its exit status on the serial console, then powers the VM off. Runs under busybox only.
/bb/busybox --install -s /bb
export PATH=/lab/bin:/usr/sbin:/usr/bin:/bb
mount -t devtmpfs dev /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sys /sys
# A tmpfs over a directory of the image keeps what the image put there: lab.sh copies programs and
# their libraries to their host paths, and a build tree may lie under /tmp.
mount_tmpfs() {  # NAME DIR
  mkdir -p /.keep
  for f in "$2"/* "$2"/.[!.]*; do [ -e "$f" ] && mv "$f" /.keep/; done
  mount -t tmpfs "$1" "$2"
  for f in /.keep/* /.keep/.[!.]*; do [ -e "$f" ] && mv "$f" "$2"/; done
  rmdir /.keep
}
mount_tmpfs tmp /tmp
mount_tmpfs run /run
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm  # POSIX shared memory: ranks of one host
mount -t bpf bpf /sys/fs/bpf
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
ln -s /proc/self/fd /dev/fd 2>/dev/null
if grep -q ' lab.probe' /proc/cmdline; then  # lab.sh asks whether KVM runs this kernel
  echo "@@lab-probe-ok"
  reboot -f
fi
. /lab/env

kver=$(uname -r)
while read -r m; do
  insmod "/lib/modules/$kver/$m" || echo "lab: insmod $m failed"
done </lab/modules

ip link set lo up
# Rail NICs by their MAC's link byte (52:54:00:77:LINK:..; link 0 is eth0, link k+1 rail k),
# not by probe order.
for dev in /sys/class/net/eth*; do
  [ -e "$dev" ] || continue
  read -r mac <"$dev/address"
  case $mac in
    52:54:00:77:00:*) ;;
    52:54:00:77:*)
      link=$(echo "$mac" | cut -d: -f5)
      ip link set "${dev##*/}" name "rail$((0x$link - 1))" || echo "lab: renaming ${dev##*/} failed"
      ;;
  esac
done
if [ -e /sys/class/net/eth0 ]; then
  [ -n "$LAB_ADDR" ] && ip addr add "$LAB_ADDR" dev eth0
  ip link set eth0 up
fi
if [ "$LAB_RXE" = 1 ]; then
  rdma link add rxe0 type rxe netdev eth0 || echo "lab: rdma link add rxe0 failed"
fi
for nic in $LAB_RAIL_NICS; do
  k=${nic#rail}
  ip addr add "10.77.$((k + 1)).$((LAB_INDEX + 1))/24" dev "$nic" || echo "lab: addressing $nic failed"
  ip link set "$nic" up
  rdma link add "rxe_$nic" type rxe netdev "$nic" || echo "lab: rdma link add rxe_$nic failed"
done

read -r up _ </proc/uptime
echo "@@lab-begin vm=$LAB_INDEX kernel=$kver uptime=$up"
cd /lab && /bin/sh /lab/cmd
rc=$?
read -r up _ </proc/uptime
echo "@@lab-exit $rc uptime=$up"
reboot -f
