#!/usr/bin/env bash
# The stock-kernel lab: boots Debian's distribution kernel (BPF trampolines, kprobes, BTF,
# rdma_rxe) under qemu with a busybox initramfs holding the given binaries, runs one command in
# the guest and returns its exit status and output (through the serial console).
#
#   lab.sh fetch                     fetch and unpack the kernel package into the cache (once)
#   lab.sh run [options] -- CMD...   boot N VMs and run CMD in each
#
# Run options:
#   --bin PATH      an executable for the guest's /lab/bin, with its shared libraries (repeatable)
#   --file PATH     a file (script) for the guest's /lab/bin, copied as is (repeatable)
#   --vms N         VMs (hosts), 1 (default) to 8; one VM per host because rxe devices in network
#                   namespaces pass no traffic. Every VM has a management NIC eth0 (qemu id nic0,
#                   10.77.0.<vm+1>/24); the VMs' eth0 share one link (below)
#   --rails R       R rail NICs per VM (0 default, at most 4): rail<k> (qemu id rail<k>,
#                   10.77.<k+1>.<vm+1>/24), each with an rxe device rxe_rail<k>; rail k of every VM
#                   on its own link. Links: with 2 VMs a stream socket (lossless), with more a
#                   UDP multicast group on the host's loopback (a hub: every VM of the link gets
#                   every frame), with 1 VM nothing on the other end
#   --rxe           add rxe0 on eth0 at boot (rdma link add rxe0 type rxe netdev eth0)
#   --module NAME   load another kernel module at boot, with its dependencies (repeatable)
#   --env VAR=VAL   export in the guest (repeatable)
#   --timeout S     hard deadline for boot and command together (default 90): qemu is killed
#   --mem MB        guest memory (default 512)
#   --keep          keep the work directory (console logs, initramfs)
#   --retry-emulation-stall
#                   when the command fails and a guest kernel reported a virtio NIC's transmit
#                   queue stuck (NETDEV WATCHDOG: qemu stopped serving that NIC, which no guest
#                   program can cause), or a rank's same-host relay did not answer its control
#                   handshake in time (a guest starved of host CPU under TCG), boot everything
#                   again once and return that run's status; said on stderr. A real fault fails
#                   the second run too. For fault soaks whose plans never stall a queue themselves
#   --retry-stall-verdict
#                   with --retry-emulation-stall: also when a path's stall check fired (no ack
#                   for the stall time), which a starved TCG guest causes on a healthy rail. For
#                   commands whose faults take carriers down and never make a rail silent
#   -v, --verbose   print the whole console, kernel messages included
#
# In the guest: RECCL_TEST_LAB=1, LAB_INDEX (0..N-1), LAB_VMS, LAB_ADDR (eth0's address/prefix),
# LAB_PEER (the next VM's eth0 address), LAB_RAILS, LAB_RAIL_NICS ("rail0 rail1 ..."), and
# RECCL_LAB_NIC=eth0 / RECCL_LAB_NIC_ID=nic0, the management NIC and its qemu id. The rank
# environment a launcher (torchrun) sets, one rank per VM: RANK (= LAB_INDEX), WORLD_SIZE (= N),
# LOCAL_RANK=0, LOCAL_WORLD_SIZE=1, MASTER_ADDR=10.77.0.1 (VM 0's eth0), MASTER_PORT=29500.
# A guest line "@@lab-monitor set_link ID off|on" makes the host pull or plug that VM's virtual
# cable ID (nic0, rail0, rail1, ...) through the qemu monitor (only set_link is served).
#
# Exit status: the guest command's (the first non-zero one over the VMs); 77 when the lab cannot
# run here (no qemu, no busybox, kernel package unavailable; the reason on stderr); 124 when the
# deadline passed; 125 when the guest never reported (kernel panic: console tail on stderr);
# 64 for bad arguments.
#
# Environment: RECCL_LAB_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/reccl-lab), RECCL_LAB_KERNEL
# (a linux-image package name; default the one linux-image-amd64 depends on), RECCL_LAB_ACCEL
# (auto, kvm or tcg; auto uses KVM when a probe shows it works).
set -euo pipefail

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RECCL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/reccl-lab}
# Modules every boot loads: veth for in-guest links, virtio NIC, and the RDMA stack for rxe
# (crc32_generic first: rxe asks the crypto layer for crc32 and the guest has no modprobe).
BASE_MODULES=(veth virtio_pci virtio_net crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe)

usage() {
  [[ -n ${1:-} ]] && echo "lab: $1" >&2
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 64
}
die() { echo "lab: $*" >&2; exit 125; }
skip() { echo "lab: skipped: $*" >&2; exit 77; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

WORK="" FETCH_TMP="" QPIDS=() KEEP=0
cleanup() {
  local p
  for p in "${QPIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${QPIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ -n $FETCH_TMP ]] && rm -rf "$FETCH_TMP"
  if [[ -n $WORK ]]; then
    if ((KEEP)); then echo "lab: kept $WORK" >&2; else rm -rf "$WORK"; fi
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# --- kernel package ------------------------------------------------------------------------

# The package: RECCL_LAB_KERNEL, else the one fetched last (`lab.sh fetch` asks apt again),
# else the one linux-image-amd64 depends on.
kernel_package() {
  if [[ -n ${RECCL_LAB_KERNEL:-} ]]; then
    echo "$RECCL_LAB_KERNEL"
    return
  fi
  if [[ ${1:-} != fresh && -f $CACHE/kernel && -f $CACHE/$(cat "$CACHE/kernel")/.complete ]]; then
    cat "$CACHE/kernel"
    return
  fi
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}

# Sets KDIR (the unpacked package), KVER, VMLINUZ, MODDIR.
fetch_kernel() {
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
    skip "apt-get and dpkg-deb not found: the lab fetches Debian's kernel package"
  DEPMOD=$(PATH=$PATH:/usr/sbin:/sbin command -v depmod || true)
  [[ -n $DEPMOD ]] || skip "depmod not found (scripts/setup.sh: kmod)"
  local pkg
  pkg=$(kernel_package "${1:-}")
  [[ -n $pkg ]] || skip "linux-image-amd64 not in the apt package lists (run apt-get update)"
  [[ $pkg =~ ^linux-image-[A-Za-z0-9.+~-]+$ ]] || usage "RECCL_LAB_KERNEL: not a linux-image package name: $pkg"
  KDIR=$CACHE/$pkg
  if [[ ! -f $KDIR/.complete ]]; then
    mkdir -p "$CACHE" || die "cannot create the cache $CACHE"
    # Several lab tests may start at once: one fetches, the others wait for it.
    exec 8>"$CACHE/.lock"
    flock -w 900 8 || die "waited 900 s for another fetch into $CACHE"
    if [[ ! -f $KDIR/.complete ]]; then
      FETCH_TMP=$(mktemp -d "$CACHE/.fetch.XXXXXX")
      echo "lab: fetching $pkg into $CACHE (once)" >&2
      if ! (cd "$FETCH_TMP" && apt-get download "$pkg") >"$FETCH_TMP/log" 2>&1; then
        skip "apt-get download $pkg failed: $(grep -E '^(E|Err):' "$FETCH_TMP/log" | head -1)"
      fi
      dpkg-deb -x "$FETCH_TMP"/*.deb "$FETCH_TMP/root" || die "dpkg-deb -x of $pkg failed"
      # The package leaves modules.dep to depmod in its postinst.
      local kv
      for kv in "$FETCH_TMP"/root/lib/modules/* "$FETCH_TMP"/root/usr/lib/modules/*; do
        [[ -d $kv/kernel ]] || continue
        "$DEPMOD" -b "${kv%/lib/modules/*}" "${kv##*/}" || die "depmod for ${kv##*/} failed"
      done
      rm -rf "$KDIR"
      mv "$FETCH_TMP/root" "$KDIR"
      touch "$KDIR/.complete"
      rm -rf "$FETCH_TMP"
      FETCH_TMP=""
    fi
    exec 8>&-
  fi
  [[ -n ${RECCL_LAB_KERNEL:-} || $(cat "$CACHE/kernel" 2>/dev/null) == "$pkg" ]] || echo "$pkg" >"$CACHE/kernel"
  local m
  for m in "$KDIR"/lib/modules/* "$KDIR"/usr/lib/modules/*; do
    [[ -f $m/modules.dep ]] && MODDIR=$m
  done
  [[ -n ${MODDIR:-} ]] || die "no lib/modules/*/modules.dep in $KDIR"
  KVER=${MODDIR##*/}
  VMLINUZ=$KDIR/boot/vmlinuz-$KVER
  [[ -r $VMLINUZ ]] || die "no readable $VMLINUZ"
  KERNEL=$VMLINUZ
  extract_vmlinux
}

# Under TCG the kernel's own xz decompression is half of a boot. A kernel with a PVH entry
# (CONFIG_PVH) boots from its uncompressed ELF image, which qemu loads as is: unpack it once.
extract_vmlinux() {
  local out=$KDIR/boot/vmlinux-$KVER off
  if [[ ! -s $out ]]; then
    grep -q '^CONFIG_PVH=y' "$KDIR/boot/config-$KVER" 2>/dev/null || return 0
    command -v xz >/dev/null || return 0
    exec 8>"$CACHE/.lock"
    flock -w 900 8 || die "waited 900 s for the cache lock"
    if [[ ! -s $out ]]; then
      off=$(LC_ALL=C grep -abo $'\xfd7zXZ\x00' "$VMLINUZ" | head -1 | cut -d: -f1)
      # xz stops at the stream's end and tail dies of SIGPIPE: judge by the result, an ELF file.
      [[ -n $off ]] && { tail -c +$((off + 1)) "$VMLINUZ" | xz -dc --single-stream >"$out.$$" 2>/dev/null || true; }
      if [[ -s $out.$$ && $(head -c 4 "$out.$$" | od -An -tx1 | tr -d ' ') == 7f454c46 ]]; then
        mv "$out.$$" "$out"
      else
        rm -f "$out.$$"
      fi
    fi
    exec 8>&-
  fi
  [[ -s $out ]] && KERNEL=$out
  return 0
}

# Relative module paths (from modules.dep) of the named modules and their dependencies, in a
# load order; built-in ones are left out, unknown ones named on stderr.
resolve_modules() {
  awk -v want="$*" '
    function base(p) { sub(/.*\//, "", p); sub(/\.ko.*$/, "", p); gsub(/-/, "_", p); return p }
    function load(nm,   d, k, i) {
      if (nm in done) return
      done[nm] = 1
      if (!(nm in path)) { if (!(nm in builtin)) missing = missing " " nm; return }
      k = split(deps[nm], d, " ")
      for (i = k; i >= 1; i--) load(base(d[i]))
      print path[nm]
    }
    FILENAME ~ /modules\.builtin$/ { builtin[base($0)] = 1; next }
    { i = index($0, ":"); p = substr($0, 1, i - 1); path[base(p)] = p; deps[base(p)] = substr($0, i + 1) }
    END {
      n = split(want, w, " ")
      for (j = 1; j <= n; j++) { x = w[j]; gsub(/-/, "_", x); load(x) }
      if (missing != "") print "lab: modules not in this kernel:" missing > "/dev/stderr"
    }' "$MODDIR/modules.builtin" "$MODDIR/modules.dep"
}

# --- initramfs -----------------------------------------------------------------------------

ROOT=""
copy_file() {  # SRC [DST]: DST inside the guest, default the same path
  local src=$1 dst=${2:-$1}
  mkdir -p "$(dirname "$ROOT$dst")"
  cp -L "$src" "$ROOT$dst"
}

# An executable and its shared-library closure (ldd), libraries at their host paths.
copy_elf() {  # SRC [DST] [strip]
  local src=$1 dst=${2:-$1} lib
  mkdir -p "$(dirname "$ROOT$dst")"
  if [[ ${3:-} == strip ]]; then
    strip --strip-debug -o "$ROOT$dst" "$src" 2>/dev/null || cp -L "$src" "$ROOT$dst"
  else
    cp -L "$src" "$ROOT$dst"
  fi
  while read -r lib; do
    [[ -e $ROOT$lib ]] || copy_file "$lib"
  done < <(ldd "$src" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
}

build_initramfs() {  # -> $WORK/common.cpio
  ROOT=$WORK/root
  mkdir -p "$ROOT"/{usr/bin,usr/sbin,usr/lib,usr/lib64,bb,dev,proc,sys,tmp,run,etc,lab/bin}
  # The host's merged-/usr layout, so libraries land where the loader looks.
  ln -s usr/bin "$ROOT/bin"
  ln -s usr/sbin "$ROOT/sbin"
  ln -s usr/lib "$ROOT/lib"
  ln -s usr/lib64 "$ROOT/lib64"
  [[ $(id -u) -eq 0 ]] && mknod -m 600 "$ROOT/dev/console" c 5 1

  copy_elf "$BUSYBOX" /bb/busybox
  ln -s busybox "$ROOT/bb/sh" # the other applets' links are made by /init
  # /bin/sh (system(3), the command) is the host's dash: busybox's shell would run its own
  # applets before PATH, so `ip` and friends would not be iproute2's.
  copy_elf "$(readlink -f /bin/sh)" /usr/bin/sh
  ln -sf /bb/busybox "$ROOT/sbin/modprobe" # a request_module() fails quietly
  cp "$LAB_DIR/guest_init.sh" "$ROOT/init"
  chmod 755 "$ROOT/init"

  # iproute2 (namespaces, veth, rdma link), the verbs library's rxe provider and its tools.
  local tool
  for tool in ip rdma ibv_devinfo ibv_rc_pingpong; do
    local p
    p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$tool" || true)
    [[ -n $p ]] && copy_elf "$p" "/usr/bin/$tool"
  done
  local prov
  for prov in /usr/lib/*/libibverbs/librxe-*.so /etc/libibverbs.d/rxe.driver; do
    [[ -e $prov ]] || continue
    if [[ $prov == *.so ]]; then copy_elf "$prov"; else copy_file "$prov"; fi
  done

  local b
  for b in "${BINS[@]}"; do copy_elf "$b" "/lab/bin/$(basename "$b")" strip; done
  for b in "${FILES[@]}"; do copy_file "$b" "/lab/bin/$(basename "$b")"; done

  local mods m
  mods=$(resolve_modules "${BASE_MODULES[@]}" "${MODULES[@]}")
  : >"$ROOT/lab/modules"
  for m in $mods; do
    local out=${m%.xz}
    out=${out%.zst}
    mkdir -p "$(dirname "$ROOT/lib/modules/$KVER/$out")"
    case $m in
      *.xz) xz -dc "$MODDIR/$m" >"$ROOT/lib/modules/$KVER/$out" ;;
      *.zst) zstd -qdc "$MODDIR/$m" >"$ROOT/lib/modules/$KVER/$out" ;;
      *) cp "$MODDIR/$m" "$ROOT/lib/modules/$KVER/$out" ;;
    esac
    # Without the appended signature: checking it costs seconds under TCG, and the kernel
    # loads unsigned modules unless it enforces signatures (then insmod says so).
    strip --strip-debug "$ROOT/lib/modules/$KVER/$out" 2>/dev/null || true
    echo "$out" >>"$ROOT/lab/modules"
  done

  printf '%q ' "${CMD[@]}" >"$ROOT/lab/cmd"
  echo >>"$ROOT/lab/cmd"
  (cd "$ROOT" && find . -print0 | cpio --null -o -H newc -R 0:0 --quiet) >"$WORK/common.cpio"
}

# A second archive per VM: only /lab/env differs; the kernel unpacks both, in order.
build_vm_initrd() {  # INDEX
  local i=$1 d=$WORK/vm$1 e k nics=""
  for ((k = 0; k < RAILS; k++)); do nics+="${nics:+ }rail$k"; done
  mkdir -p "$d/lab"
  {
    echo "export LAB_INDEX=$i LAB_VMS=$VMS LAB_ADDR=10.77.0.$((i + 1))/24 LAB_PEER=10.77.0.$(((i + 1) % VMS + 1)) LAB_RXE=$RXE"
    echo "export LAB_RAILS=$RAILS LAB_RAIL_NICS='$nics'"
    echo "export RECCL_TEST_LAB=1 RECCL_LAB_NIC=eth0 RECCL_LAB_NIC_ID=nic0"
    # What a launcher sets for one rank per host, rendezvous on the management network.
    echo "export RANK=$i WORLD_SIZE=$VMS LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=10.77.0.1 MASTER_PORT=29500"
    for e in "${ENVS[@]}"; do printf 'export %q\n' "$e"; done
  } >"$d/lab/env"
  (cd "$d" && find lab -print0 | cpio --null -o -H newc -R 0:0 --quiet) >"$d/env.cpio"
  cat "$WORK/common.cpio" "$d/env.cpio" >"$WORK/initrd.$i"
}

# --- qemu ----------------------------------------------------------------------------------

# Kernel command line: quiet console, no crypto self-tests and no speculation mitigations
# (seconds under TCG, nothing the tests look at).
APPEND="console=ttyS0 loglevel=3 panic=-1 rdinit=/init mitigations=off cryptomgr.notests no_timer_check"

# KVM when it runs this kernel, else TCG. /dev/kvm can exist and even open while a guest still
# hangs (nested virtualisation: the kernel stops right after the real-mode setup), so the probe
# boots the lab kernel to its init; the answer is remembered per host kernel, qemu and guest kernel.
probe_accel() {
  case ${RECCL_LAB_ACCEL:-auto} in
    kvm | tcg) echo "$RECCL_LAB_ACCEL"; return ;;
    auto) ;;
    *) usage "RECCL_LAB_ACCEL: auto, kvm or tcg, got '$RECCL_LAB_ACCEL'" ;;
  esac
  if [[ ! -r /dev/kvm || ! -w /dev/kvm ]]; then
    echo tcg
    return
  fi
  local key memo
  key="$(uname -r)-$(qemu-system-x86_64 --version | head -1 | tr -cd '0-9.')-$KVER"
  memo=$CACHE/accel.$key
  if [[ ! -f $memo ]]; then
    timeout 10 qemu-system-x86_64 -nodefaults -no-user-config -display none -no-reboot -machine pc \
      -accel kvm -cpu host,-arch-capabilities -smp 1 -m 256 -kernel "$KERNEL" -initrd "$WORK/common.cpio" \
      -append "$APPEND lab.probe" -serial "file:$WORK/probe.log" >/dev/null 2>&1 || true
    if grep -aq '@@lab-probe-ok' "$WORK/probe.log" 2>/dev/null; then echo kvm; else echo tcg; fi >"$memo.$$"
    mv "$memo.$$" "$memo"
  fi
  cat "$memo"
}

udp_port_free() { ! ss -Hlun "sport = :$1" 2>/dev/null | grep -q .; }
# The links (link 0: the management NICs, link k+1: rail k). Two VMs: a stream socket per link,
# a Unix socket in the run's folder that VM 0 listens on and VM 1 connects to: lossless, as a
# RoCE fabric is (PFC), where a slow guest holds its peer back instead of losing frames (a
# datagram link drops them whenever a TCG guest's qemu falls behind reading it). More VMs: a multicast group
# on the host's loopback per link (qemu's socket hub), port LINK_BASE + l: a frame reaches every
# VM of the link, as on a shared segment (the sender gets its own back too; a NIC drops frames
# not for its address, and IPv6 duplicate-address detection knows its own probes by their nonce).
# Ports are random and checked free, so concurrent lab runs on one host do not share a link.
pick_links() {
  local links=$((RAILS + 1)) l ok
  for _ in $(seq 50); do
    LINK_BASE=$((20000 + RANDOM % 40000))
    ok=1
    for ((l = 0; l < links; l++)); do udp_port_free $((LINK_BASE + l)) || { ok=0; break; }; done
    ((ok)) && return 0
  done
  die "no $links free UDP ports for the VM links"
}
link_socket() { echo "$WORK/link$1.sock"; }  # LINK: the two-VM link's socket

# The qemu -netdev of link L for VM I.
link_netdev() {  # INDEX LINK
  local i=$1 l=$2 id=n$2
  if ((VMS == 1)); then
    echo "hubport,id=$id,hubid=$l"
  elif ((VMS == 2)); then
    local server=off
    ((i == 0)) && server=on
    echo "stream,id=$id,server=$server,addr.type=unix,addr.path=$(link_socket "$l")"
  else
    echo "socket,id=$id,mcast=239.255.77.1:$((LINK_BASE + l)),localaddr=127.0.0.1"
  fi
}

start_vm() {  # INDEX
  local i=$1 cpu=${RECCL_LAB_CPU:-qemu64} l nets=()
  # arch-capabilities: nested KVM refuses its MSR (qemu aborts).
  [[ $ACCEL == kvm ]] && cpu=host,-arch-capabilities
  # The NIC's MAC names its link (52:54:00:77:LINK:1VM): the guest renames rail NICs by it.
  for ((l = 0; l <= RAILS; l++)); do
    local devid=nic0
    ((l > 0)) && devid=rail$((l - 1))
    nets+=(-netdev "$(link_netdev "$i" "$l")"
      -device "virtio-net-pci,netdev=n$l,id=$devid,mac=$(printf '52:54:00:77:%02x:%02x' "$l" $((0x10 + i)))")
  done
  mkfifo "$WORK/mon.$i.in" "$WORK/mon.$i.out"
  # Held open read-write here, so neither side ever blocks on the other's open.
  exec {fd}<>"$WORK/mon.$i.in"
  MONFD[$i]=$fd
  exec {fd}<>"$WORK/mon.$i.out"
  : >"$WORK/console.$i.log"
  # timeout(1) bounds qemu even when this script is killed without a chance to clean up.
  timeout -k 5 $((TIMEOUT + 10)) qemu-system-x86_64 -nodefaults -no-user-config -display none \
    -no-reboot -machine pc -accel "$ACCEL" -cpu "$cpu" -smp 1 -m "$MEM" \
    -kernel "$KERNEL" -initrd "$WORK/initrd.$i" \
    -append "$APPEND" \
    -serial "file:$WORK/console.$i.log" -monitor "pipe:$WORK/mon.$i" \
    "${nets[@]}" >"$WORK/qemu.$i.log" 2>&1 &
  QPIDS[$i]=$!
}

# FILE's text up to its last newline: a guest writes its console a byte at a time, so a read
# can catch a request half printed, and serving that half would refuse (and lose) the request.
whole_lines() {  # FILE
  local size
  size=$(stat -c %s "$1")
  ((size > 0)) || return 0
  # $(...) drops a trailing newline: empty means the file ends one.
  if [[ -z $(tail -c +"$size" "$1" | head -c 1) ]]; then
    head -c "$size" "$1"
  else
    head -c "$size" "$1" | sed '$d'
  fi
}

# Serves "@@lab-monitor ..." requests a guest printed (whole lines) since the last call.
declare -a SERVED=()
serve_monitor() {  # INDEX
  local i=$1 req reqs
  mapfile -t reqs < <(whole_lines "$WORK/console.$i.log" | tr -d '\r' | grep -a -o '@@lab-monitor [[:print:]]*' || true)
  while ((${SERVED[$i]:-0} < ${#reqs[@]})); do
    req=${reqs[${SERVED[$i]:-0}]#@@lab-monitor }
    SERVED[$i]=$((${SERVED[$i]:-0} + 1))
    if [[ $req =~ ^set_link\ [A-Za-z0-9_]+\ (on|off)$ ]]; then
      echo "$req" >&"${MONFD[$i]}"
      echo "lab: vm$i monitor: $req" >&2
    else
      echo "lab: vm$i: refused monitor request '$req' (only set_link ID on|off)" >&2
    fi
  done
}

# --- main ----------------------------------------------------------------------------------

[[ $# -ge 1 ]] || usage
SUB=$1
shift
case $SUB in
  fetch)
    [[ $# -eq 0 ]] || usage "fetch takes no arguments"
    fetch_kernel fresh
    echo "$KDIR"
    exit 0
    ;;
  run) ;;
  -h | --help) usage ;;
  *) usage "unknown subcommand '$SUB'" ;;
esac

BINS=() FILES=() MODULES=() ENVS=() VMS=1 RAILS=0 RXE=0 TIMEOUT=90 MEM=512 VERBOSE=0 RETRY_STALL=0 RETRY_VERDICT=0
RUN_ARGS=()  # this run's arguments without the --retry-* flags: the retry's
for a in "$@"; do [[ $a == --retry-emulation-stall || $a == --retry-stall-verdict ]] || RUN_ARGS+=("$a"); done
while (($#)); do
  case $1 in
    --bin) [[ $# -ge 2 && -x $2 && -f $2 ]] || usage "--bin: not an executable file: ${2:-}"; BINS+=("$2"); shift 2 ;;
    --file) [[ $# -ge 2 && -f $2 ]] || usage "--file: not a file: ${2:-}"; FILES+=("$2"); shift 2 ;;
    --vms) [[ ${2:-} =~ ^[1-8]$ ]] || usage "--vms: 1 to 8, got '${2:-}'"; VMS=$2; shift 2 ;;
    --rails) [[ ${2:-} =~ ^[0-4]$ ]] || usage "--rails: 0 to 4, got '${2:-}'"; RAILS=$2; shift 2 ;;
    --rxe) RXE=1; shift ;;
    --module) [[ ${2:-} =~ ^[A-Za-z0-9_-]+$ ]] || usage "--module: not a module name: '${2:-}'"; MODULES+=("$2"); shift 2 ;;
    --env) [[ ${2:-} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || usage "--env: not VAR=VALUE: '${2:-}'"; ENVS+=("$2"); shift 2 ;;
    --timeout) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage "--timeout: seconds, got '${2:-}'"; TIMEOUT=$2; shift 2 ;;
    --mem) [[ ${2:-} =~ ^[1-9][0-9]*$ && $2 -ge 128 ]] || usage "--mem: MB (>= 128), got '${2:-}'"; MEM=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --retry-emulation-stall) RETRY_STALL=1; shift ;;
    --retry-stall-verdict) RETRY_VERDICT=1; shift ;;
    -v | --verbose) VERBOSE=1; shift ;;
    --) shift; break ;;
    *) usage "unknown option '$1'" ;;
  esac
done
[[ $# -ge 1 ]] || usage "run: no command after --"
((RETRY_VERDICT && !RETRY_STALL)) && usage "--retry-stall-verdict: only with --retry-emulation-stall"
CMD=("$@")

T0=$(now_ms)
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (scripts/setup.sh)"
command -v cpio >/dev/null || skip "cpio not installed (scripts/setup.sh)"
BUSYBOX=$(command -v busybox || true)
[[ -n $BUSYBOX ]] || skip "busybox not installed (scripts/setup.sh: busybox-static)"
fetch_kernel

WORK=$(mktemp -d "${TMPDIR:-/tmp}/reccl-lab.$$.XXXXXX")
build_initramfs
ACCEL=$(probe_accel)
for ((i = 0; i < VMS; i++)); do build_vm_initrd "$i"; done
T1=$(now_ms)
((VMS > 2)) && pick_links
declare -a MONFD=()
for ((i = 0; i < VMS; i++)); do
  start_vm "$i"
  ((VMS == 2 && i == 0)) || continue
  # VM 1 connects to the sockets VM 0 listens on (qemu 7.2's stream client does not retry).
  for ((w = 0; w < 100; w++)); do
    up=1
    for ((l = 0; l <= RAILS; l++)); do [[ -S $(link_socket "$l") ]] || up=0; done
    ((up)) && break
    kill -0 "${QPIDS[0]}" 2>/dev/null || break
    sleep 0.1
  done
  ((up)) || { cat "$WORK/qemu.0.log" >&2; die "vm0 did not listen on its link sockets within 10 s"; }
done

TIMED_OUT=0
deadline=$((T0 + TIMEOUT * 1000))
while :; do
  alive=0
  for ((i = 0; i < VMS; i++)); do
    kill -0 "${QPIDS[$i]}" 2>/dev/null && alive=1
    serve_monitor "$i"
  done
  ((alive)) || break
  if (($(now_ms) >= deadline)); then
    TIMED_OUT=1
    for p in "${QPIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    break
  fi
  sleep 0.05
done
for p in "${QPIDS[@]}"; do wait "$p" 2>/dev/null || true; done
QPIDS=()
T2=$(now_ms)

rc=0
for ((i = 0; i < VMS; i++)); do
  log=$WORK/console.$i.log
  prefix=""
  ((VMS > 1)) && prefix="[vm$i] "
  if ((VERBOSE)); then
    tr -d '\r' <"$log" | sed "s/^/$prefix/"
  else
    tr -d '\r' <"$log" | awk -v p="$prefix" '/@@lab-exit/ { on = 0 } on { print p $0 } /@@lab-begin/ { on = 1 }'
  fi
  begin=$(tr -d '\r' <"$log" | grep -a -o '@@lab-begin .*' | head -1 || true)
  exitline=$(tr -d '\r' <"$log" | grep -a -o '@@lab-exit .*' | head -1 || true)
  if [[ -z $exitline ]]; then
    if ((TIMED_OUT)); then
      echo "lab: vm$i: deadline of ${TIMEOUT} s passed; console tail:" >&2
    else
      echo "lab: vm$i: guest ended without reporting; console tail:" >&2
    fi
    tr -d '\r' <"$log" | tail -25 | sed 's/^/  /' >&2
    sed 's/^/  qemu: /' "$WORK/qemu.$i.log" >&2
    ((TIMED_OUT)) && vmrc=124 || vmrc=125
  else
    read -r _ vmrc rest <<<"$exitline"
    bootS=${begin##*uptime=}
    endS=${rest##*uptime=}
    echo "lab: vm$i: kernel $KVER ($ACCEL), booted in ${bootS} s, command ${vmrc:+exited $vmrc} after $(awk -v a="$bootS" -v b="$endS" 'BEGIN { printf "%.2f", b - a }') s" >&2
  fi
  ((rc == 0)) && rc=$vmrc
done
echo "lab: wall $(((T2 - T0) / 1000)).$(((T2 - T0) % 1000 / 100)) s (initramfs $((T1 - T0)) ms), $VMS VM(s), $ACCEL" >&2
# Every VM's console, as one text: where a retry looks for its signature.
consoles() { cat "$WORK"/console.*.log | tr -d '\r'; }
if ((rc != 0 && rc != 77 && RETRY_STALL)); then
  stall=$(consoles | grep -a -m1 -o 'virtio_net .*NETDEV WATCHDOG: .*transmit queue [0-9]* timed out.*' || true)
  what="a guest's virtio NIC stalled under qemu"
  if [[ -z $stall ]]; then
    stall=$(consoles | grep -a -m1 -o -E 'relay control: no challenge from @[^ ]*|relay rank [0-9]+ did not answer' || true)
    what="a guest's same-host relay did not answer in time under emulation"
  fi
  if [[ -z $stall ]] && ((RETRY_VERDICT)); then
    stall=$(consoles | grep -a -m1 -o -E 'no verbs ack for [0-9]+ ms on [^:]*: path stalled' || true)
    what="a path went silent for the stall time, as on a guest starved of host CPU under emulation"
  fi
  if [[ -n $stall ]]; then
    echo "lab: $what (\"$stall\"): booting again, once" >&2
    set +e
    "${BASH_SOURCE[0]}" run "${RUN_ARGS[@]}"
    exit $?
  fi
fi
exit "$rc"
