#!/usr/bin/env bash
# Installs reccl into a temporary prefix and uses it as a user would, from there only:
#   - libreccl.so exports the C API and nothing else (nm -D), every function of reccl.h among it;
#   - the installed examples build with pkg-config (cc/c++) and with find_package(reccl) (CMake),
#     and run as two ranks on loopback (torchrun-style environment), each checking its results;
#   - reccl.hpp refuses a pre-C++20 compiler with a message saying so;
#   - the installed reccl-bench finds libreccl.so in the prefix (RPATH) and runs;
#   - the NCCL net plugin sits where NCCL looks for it (libnccl-net-reccl.so beside libreccl.so)
#     and exports NCCL's table and its counters only.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail

build=${1:?usage: install_test.sh BUILD_DIR}
tmp=$(mktemp -d /tmp/reccl-install-test.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
prefix=$tmp/prefix
passed=0
failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAILED: $*"; failed=$((failed + 1)); }

for component in runtime development doc; do
  cmake --install "$build" --prefix "$prefix" --component "$component" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; echo "FAILED: cmake --install --component $component (is the build complete?)"; exit 1; }
done
pc=$(find "$prefix" -name reccl.pc)
[[ -n $pc ]] || { echo "FAILED: no reccl.pc installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir reccl)
lib=$libdir/libreccl.so.0
examples=$prefix/share/doc/reccl/examples

# Exports: reccl* only, and all of reccl.h's functions.
nm -D --defined-only "$lib" | awk '{print $3}' | sort -u >"$tmp/exports"
others=$(grep -v '^reccl' "$tmp/exports" || true)
if [[ -z $others ]]; then ok "libreccl.so exports only reccl* ($(wc -l <"$tmp/exports") symbols)"
else bad "libreccl.so exports $(wc -l <<<"$others") symbols besides reccl*: $(head -3 <<<"$others" | tr '\n' ' ')"; fi
grep -oE '^RECCL_API [A-Za-z_ ]+\*? *reccl[A-Za-z]+\(' "$prefix/include/reccl/reccl.h" | grep -oE 'reccl[A-Za-z]+\($' |
  tr -d '(' | sort -u >"$tmp/declared"
missing=$(comm -23 "$tmp/declared" "$tmp/exports")
if [[ -s $tmp/declared && -z $missing ]]; then ok "every function reccl.h declares ($(wc -l <"$tmp/declared")) is exported"
else bad "declared in reccl.h but not exported: $missing"; fi

# pkg-config: the C examples with a C compiler, the C++ one with -std=c++20.
mkdir -p "$tmp/pc"
cflags=$(pkg-config --cflags reccl)
libs=$(pkg-config --libs reccl)
rpath=-Wl,-rpath,$libdir
for c in allreduce failover_loop; do
  if cc -std=c99 -Wall -Werror $cflags "$examples/$c.c" $libs $rpath -o "$tmp/pc/$c" 2>"$tmp/cc.log"; then
    ok "pkg-config: $c.c builds"
  else bad "pkg-config: $c.c: $(cat "$tmp/cc.log")"; fi
done
if c++ -std=c++20 -Wall -Werror $cflags "$examples/raii.cpp" $libs $rpath -o "$tmp/pc/raii" 2>"$tmp/cc.log"; then
  ok "pkg-config: raii.cpp builds with -std=c++20"
else bad "pkg-config: raii.cpp: $(cat "$tmp/cc.log")"; fi
if echo '#include <reccl/reccl.hpp>' | c++ -std=c++17 -fsyntax-only $cflags -x c++ - 2>"$tmp/cc.log"; then
  bad "reccl.hpp compiled as C++17"
elif grep -q "needs C++20" "$tmp/cc.log"; then ok "reccl.hpp under -std=c++17 says it needs C++20"
else bad "reccl.hpp under -std=c++17 failed without saying why: $(head -3 "$tmp/cc.log")"; fi

# find_package(reccl): the examples' own CMakeLists.txt against the prefix.
if env -u CMAKE_C_COMPILER_LAUNCHER -u CMAKE_CXX_COMPILER_LAUNCHER \
    cmake -S "$examples" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_RPATH="$libdir" >"$tmp/cm.log" 2>&1 &&
    cmake --build "$tmp/cm" >>"$tmp/cm.log" 2>&1; then
  ok "find_package(reccl): the examples build"
else bad "find_package(reccl): $(tail -15 "$tmp/cm.log")"; fi

# The version file: 0.1 is what this is, 0.2 (a newer minor of a 0.x API) is not.
mkdir -p "$tmp/ver"
printf 'cmake_minimum_required(VERSION 3.16)\nproject(v NONE)\nfind_package(reccl ${WANT} REQUIRED)\n' >"$tmp/ver/CMakeLists.txt"
if cmake -S "$tmp/ver" -B "$tmp/ver/b1" -DWANT=0.1 -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1 &&
    ! cmake -S "$tmp/ver" -B "$tmp/ver/b2" -DWANT=0.2 -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
  ok "find_package(reccl 0.1) is found, find_package(reccl 0.2) is not"
else bad "recclConfigVersion.cmake: 0.1 must be found and 0.2 not"; fi

# A free port out of the ephemeral range, which no connection of a test beside this one is given
# (as reccl/common/free_port.h picks one).
free_port() {
  python3 - <<'PY'
import random, socket, sys
low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
lo, hi = 10000, low - 1
if hi - lo < 1000:
    lo, hi = high + 1, 65535
if hi < lo:
    sys.exit("no port outside the ephemeral range %d-%d" % (low, high))
for _ in range(1000):
    port = random.randint(lo, hi)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit("no free port outside the ephemeral range")
PY
}

# Two ranks of `prog args...` torchrun-style on loopback; both must exit 0 and print `want`.
run2() {
  local name=$1 want=$2
  shift 2
  local port
  port=$(free_port)
  local common=(env -u RECCL_COMM_ID -u OMPI_COMM_WORLD_RANK -u PMI_RANK -u SLURM_PROCID
                WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" RECCL_BOOTSTRAP_TIMEOUT_MS=20000)
  timeout 120 "${common[@]}" RANK=1 "$@" >"$tmp/r1.out" 2>&1 &
  local p1=$!
  pids+=("$p1")
  local rc0=0 rc1=0
  timeout 120 "${common[@]}" RANK=0 "$@" >"$tmp/r0.out" 2>&1 || rc0=$?
  wait "$p1" || rc1=$?
  if [[ $rc0 -eq 0 && $rc1 -eq 0 ]] && grep -q "$want" "$tmp/r0.out" && grep -q "$want" "$tmp/r1.out"; then
    ok "$name runs as 2 ranks"
  else
    bad "$name: exit $rc0/$rc1: $(cat "$tmp/r0.out" "$tmp/r1.out" | tail -6 | tr '\n' '|')"
  fi
}
for dir in pc cm; do
  [[ -x $tmp/$dir/allreduce ]] && run2 "$dir/allreduce" "allreduce of 1048576 floats: ok" "$tmp/$dir/allreduce"
  [[ -x $tmp/$dir/raii ]] && run2 "$dir/raii" "allgather ok, split: 1 ranks.*ring ok" "$tmp/$dir/raii"
  [[ -x $tmp/$dir/failover_loop ]] && run2 "$dir/failover_loop" "5 steps, .* last result exact" "$tmp/$dir/failover_loop" 5
done

# The installed benchmark: its RPATH leads to the prefix's libreccl.so.
if out=$(env -u LD_LIBRARY_PATH "$prefix/bin/reccl-bench" -t 2 -b 4K -e 4K -n 1 -w 0 2>&1) &&
    grep -q "Out of bounds values : 0 OK" <<<"$out"; then
  loaded=$(ldd "$prefix/bin/reccl-bench" | awk '/libreccl.so/ {print $3}')
  if [[ -n $loaded && $(realpath "$loaded") == $(realpath "$lib") ]]; then ok "installed reccl-bench runs on the prefix's libreccl.so"
  else bad "installed reccl-bench loads libreccl.so from elsewhere: ${loaded:-none}"; fi
else bad "installed reccl-bench: $(tail -3 <<<"$out")"; fi

# The NCCL net plugin (built where its room is): NCCL_NET_PLUGIN=reccl finds this file name.
if [[ -f $build/lib/libnccl-net-reccl.so ]]; then
  plugin=$libdir/libnccl-net-reccl.so
  if [[ -f $plugin ]]; then
    exports=$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort -u | tr '\n' ' ')
    if [[ $exports == "ncclNetPlugin_v8 recclNetCommStats " ]]; then ok "libnccl-net-reccl.so exports ncclNetPlugin_v8 and recclNetCommStats only"
    else bad "libnccl-net-reccl.so exports: $exports"; fi
    if [[ -f $prefix/include/reccl/nccl_net_plugin.h ]]; then ok "reccl/nccl_net_plugin.h is installed"
    else bad "reccl/nccl_net_plugin.h is not installed"; fi
  else bad "libnccl-net-reccl.so is not installed in $libdir"; fi
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
