#!/usr/bin/env bash
# Installs every Debian package reccl's build, tests, benchmarks and lab need.
# Idempotent: quiet when everything is present. Exit 1 with a reason when it cannot install.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  clang llvm libclang-rt-14-dev
  libbpf-dev bpftool libelf-dev zlib1g-dev
  liburing-dev libmnl-dev libsodium-dev
  libibverbs-dev rdma-core ibverbs-utils
  libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
  iproute2 iputils-ping iperf3 procps psmisc kmod
  libgloo-dev
  openmpi-bin libopenmpi-dev libpmix-dev  # mpirun tests; PMIx headers for the mpirun rendezvous (libpmix2 at run time)
  prometheus-cpp-dev  # reccl-detectord's /metrics (prometheus-cpp + civetweb)
  prometheus systemd  # promtool (detectord_metrics_test), systemd-analyze (detectord_unit_check)
  python3-torch libtorch-dev pybind11-dev  # the PyTorch backend (torch/), built for /usr/bin/python3
  gnuplot-nox python3
  graphviz  # dot: the figures of docs/ from their text sources (scripts/render_figures.sh)
  libbpf-tools bpftrace  # runqslower (fault_bench.sh --trace-waits), bench/failover/cpu_holders.bt
  qemu-system-x86 busybox-static cpio xz-utils  # stock-kernel lab (tools/lab/lab.sh; the kernel .deb it fetches itself)
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "setup: missing packages (${missing[*]}) and not root: run 'sudo $0'" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq >/dev/null; then
  echo "setup: apt-get update failed: no package registry reachable" >&2
  exit 1
fi
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/reccl-setup.$$.log 2>&1; then
  echo "setup: apt-get install failed (log: /tmp/reccl-setup.$$.log):" >&2
  tail -5 /tmp/reccl-setup.$$.log >&2
  exit 1
fi
rm -f /tmp/reccl-setup.$$.log
