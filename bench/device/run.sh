#!/usr/bin/env bash
# The CUDA path's checks and figures on a GPU machine, in one run of under 8 minutes
# (docs/cuda.md). Two steps:
#
#   bench/device/run.sh prepare [--jobs N]
#       Here, on the build machine (no GPU needed). Builds the device targets with RECCL_CUDA=on
#       into build-device/ (ccache when there is one), then build-device-carry/: the programs
#       (debug info stripped), ctest's test registry, and the shared libraries the programs need
#       that a bare CUDA image lacks (libbpf, liburing, libsodium, ...). The CUDA runtime is in
#       the programs (static); the GPU machine needs only its driver. Prints the device call.
#
#   bench/device/run.sh [--out DIR] [--carry DIR] [--budget SECONDS]
#       On the GPU machine, from the repository root, with build-device-carry/ carried along
#       (device tool: run(command="bench/device/run.sh", carry=["build-device-carry"],
#       timeout_s=560)). Without a carried build it builds there (that needs the build
#       dependencies installed). Then:
#         1. ctest -L device: the device kernels against the CPU's bit for bit (every type and
#            op), pointer classification, the stream gate (memop and kernel), every collective on
#            device/pinned/managed/host buffers and streams with 2 and 3 rank processes sharing
#            the GPU, an asynchronous error, the CUDA IPC relay pipe between two processes, and a
#            rail pulled on the testbed during a device allreduce (root), bit-exact;
#         2. reduce_device_bench: each kernel against a device-to-device copy of the same bytes
#            (bar: traffic ratio >= 0.8);
#         3. reccl-device-bench: allreduce on device buffers with 4 rank processes on the one GPU,
#            the host path beside it, every result checked;
#         4. NCCL itself over the reccl net plugin: the image's PyTorch "nccl" backend, two rank
#            processes on the GPU as two hosts (NCCL_HOSTID), every result checked, NCCL's log
#            naming the plugin (bench/nccl_net/torch_nccl_check.py);
#       and prints a short table last. Each step's time is cut to end within --budget (480 s), and
#       summary.md is rewritten after each step, so a run stopped early still returns its table.
#       Figures go to $OUT (the device tool's) or --out DIR: summary.md, ctest-device.log,
#       device-kernels.json, device-allreduce.json, nccl-plugin.json, nccl-plugin.log, run.log
#       (and gtest-device.log where the
#       machine has no ctest and the test programs run directly).
#
# Exit: 0 every check passed, 1 some check failed, 2 could not build or start, 64 usage.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=build-device
CARRY=build-device-carry
PROGRAMS=(cuda_device_test cuda_stream_worker cuda_ipc_peer cuda_railpull_test reccl reduce_device_bench
          reccl-device-bench)
# The NCCL net plugin (lib/), for step 4: NCCL itself over it.
PLUGIN=libnccl-net-reccl.so

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit "${1:-64}"; }

# ------------------------------------------------------------------ prepare (build machine)
# The carry must stand in for the build on the GPU machine, where only it exists: mounted over the
# build directory in a mount namespace of its own, ctest must list every device test the build lists.
check_carry() {
  local ns=(unshare -m) want got
  [[ $EUID -eq 0 ]] || ns=(unshare -m -r)
  want=$(cd "$BUILD" && ctest -N -L device | sed -n 's/^Total Tests: //p')
  if ! "${ns[@]}" true 2>/dev/null; then
    echo "run.sh prepare: WARNING: no mount namespace here (${ns[*]}), so the carry's test registry is unchecked" >&2
    return 0
  fi
  got=$("${ns[@]}" sh -c 'mount --bind "$1" "$2" && cd "$2" && ctest -N -L device' _ "$ROOT/$CARRY" "$ROOT/$BUILD" 2>&1)
  rm -rf "$CARRY/Testing"  # the listing's log
  if [[ $(sed -n 's/^Total Tests: //p' <<<"$got") != "$want" || $want -eq 0 ]]; then
    echo "run.sh prepare: the carried test registry does not stand in for $BUILD (the build lists ${want:-no} device tests):" >&2
    tail -n 15 <<<"$got" >&2
    exit 2
  fi
  echo "run.sh prepare: the carried test registry lists the build's $want device tests"
}

prepare() {
  local jobs
  jobs=$(nproc)
  while [[ $# -gt 0 ]]; do
    case $1 in
      --jobs) jobs=$2; shift 2 ;;
      -h|--help) usage 0 ;;
      *) echo "run.sh prepare: unknown argument $1" >&2; usage ;;
    esac
  done
  local launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
              -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$ROOT")}
  fi
  local t0=$SECONDS
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRECCL_CUDA=on "${launcher[@]}" >/dev/null ||
    { echo "run.sh prepare: cmake configure failed" >&2; exit 2; }
  cmake --build "$BUILD" -j "$jobs" --target "${PROGRAMS[@]}" reccl_nccl_net ||
    { echo "run.sh prepare: build failed" >&2; exit 2; }
  echo "run.sh prepare: built in $((SECONDS - t0)) s"

  rm -rf "$CARRY"
  mkdir -p "$CARRY/bin" "$CARRY/devlibs"
  # ctest's registry (the gtest lists included), so ctest runs from the copy.
  (cd "$BUILD" && find . \( -name CTestTestfile.cmake -o -name '*_tests.cmake' -o -name '*_include.cmake' \) -print0 |
     xargs -0 cp --parents -t "../$CARRY")
  # Files the registry includes besides those lists (tests/sanitize_trees.cmake): each must lie in
  # the build tree to travel. A list include guarded by if(EXISTS) may name a file never made.
  local inc
  while read -r inc; do
    [[ $inc == "$ROOT/$BUILD/"* ]] ||
      { echo "run.sh prepare: the test registry includes $inc, outside $BUILD: it cannot be carried" >&2; exit 2; }
    [[ -e $inc ]] || continue
    (cd "$BUILD" && cp --parents -t "../$CARRY" "${inc#"$ROOT/$BUILD/"}") ||
      { echo "run.sh prepare: could not carry $inc" >&2; exit 2; }
  done < <(grep -rhoE 'include\("[^"]+"\)' "$CARRY" --include='*.cmake' | sed -E 's/^include\("(.*)"\)$/\1/' | sort -u)
  cp "$BUILD/CMakeCache.txt" "$CARRY/"
  for p in "${PROGRAMS[@]}"; do strip --strip-debug -o "$CARRY/bin/$p" "$BUILD/bin/$p"; done
  mkdir -p "$CARRY/ccl"
  for f in "$BUILD"/ccl/libreccl.so*; do
    if [[ -L $f ]]; then cp -P "$f" "$CARRY/ccl/"; else strip --strip-debug -o "$CARRY/ccl/$(basename "$f")" "$f"; fi
  done
  mkdir -p "$CARRY/lib"
  strip --strip-debug -o "$CARRY/lib/$PLUGIN" "$BUILD/lib/$PLUGIN"
  cp bench/nccl_net/torch_nccl_check.py "$CARRY/bin/torch_nccl_check"
  # Shared libraries outside the C/C++ runtime that the programs and the plugin load.
  local base='^(linux-vdso|libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl\.so|librt\.so|libreccl)'
  for p in "${PROGRAMS[@]/#/bin/}" "lib/$PLUGIN"; do
    ldd "$BUILD/$p" | awk '$3 ~ /^\// { print $1, $3 }'
  done | sort -u | while read -r name path; do
    [[ $name =~ $base ]] || cp -L "$path" "$CARRY/devlibs/$name"
  done
  if ldd "$BUILD/bin/cuda_device_test" | grep -q 'libcudart\.so'; then
    echo "run.sh prepare: cuda_device_test links libcudart.so; the CUDA runtime must be static" >&2; exit 2
  fi
  { git rev-parse HEAD 2>/dev/null || echo unknown; git status --porcelain 2>/dev/null | grep -q . && echo "(with uncommitted changes)"; } \
    >"$CARRY/reccl-commit.txt"
  check_carry
  local mib
  mib=$(du -sm "$CARRY" | cut -f1)
  echo "run.sh prepare: $CARRY is $mib MiB (the device tool carries 64 MiB with the working tree)"
  [[ $mib -le 56 ]] || echo "run.sh prepare: WARNING: too large to carry with the working tree" >&2
  echo "run.sh prepare: on the GPU machine: run(command=\"bench/device/run.sh\", carry=[\"$CARRY\"], timeout_s=560)"
}

# ------------------------------------------------------------------ run (GPU machine)
OUTDIR=${OUT:-$ROOT/device-out}
declare -A RESULT NOTE
order=()
record() {  # record KEY RESULT NOTE
  RESULT[$1]=$2
  NOTE[$1]=$3
  order+=("$1")
}

# The carried build was configured on another machine: its registry and the programs' compiled-in
# paths name that build directory. Put a link there (we are root on the GPU machine).
place_build() {
  local dir=$1 orig
  orig=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$dir/CMakeCache.txt")
  [[ -n $orig ]] || { echo "no CMAKE_CACHEFILE_DIR in $dir/CMakeCache.txt"; return 1; }
  if [[ -e $orig && "$(realpath "$orig")" == "$(realpath "$dir")" ]]; then echo "$orig"; return 0; fi
  if [[ -e $orig && ! -L $orig ]]; then echo "$orig exists here and is not this build"; return 1; fi
  mkdir -p "$(dirname "$orig")" && ln -sfn "$(realpath "$dir")" "$orig" || return 1
  echo "$orig"
}

build_here() {
  echo "== no carried build: building here (RECCL_CUDA=on)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRECCL_CUDA=on >>"$OUTDIR/run.log" 2>&1 &&
    cmake --build "$BUILD" -j "$(nproc)" --target "${PROGRAMS[@]}" >>"$OUTDIR/run.log" 2>&1
}

group_result() {  # group_result REGEX LABEL: pass/fail/skip of the ctest lines matching REGEX
  local lines pass fail skip
  lines=$(grep -E "Test +#[0-9]+: .*($1)" "$OUTDIR/ctest-device.log" || true)
  pass=$(grep -c ' Passed' <<<"$lines" || true)
  fail=$(grep -cE '\*\*\*(Failed|Timeout|Exception)|Not Run' <<<"$lines" || true)  # incl. "never ended"
  skip=$(grep -c 'Skipped' <<<"$lines" || true)
  if [[ -z $lines ]]; then record "$2" "missing" "no such test ran"
  elif [[ $fail -gt 0 ]]; then record "$2" "FAIL" "$fail failed, $pass passed, $skip skipped"
  elif [[ $pass -eq 0 ]]; then record "$2" "skipped" "$skip skipped (see ctest-device.log)"
  else record "$2" "pass" "$pass passed, $skip skipped"
  fi
}

# A bench's exit 77 is "no CUDA device": not a pass either, so the run still exits 1.
bench_failure() { [[ $1 -eq 77 ]] && echo "skipped (no CUDA device)" || echo FAIL; }

# The device tests without ctest (an image without CMake): each program in turn, its gtest lines
# written in ctest's line format so group_result reads both alike. A test that started and never
# ended (the program crashed or ran out of time) is a failure, and so is a program's non-zero exit.
tests_without_ctest() {  # tests_without_ctest BUILD_DIR SECONDS
  local p rc=0
  echo "(no ctest on this machine: the device test programs run directly)"
  for p in cuda_device_test cuda_railpull_test; do
    # The subshell waits for the program (no exec), so a crash is reported in one line naming it.
    (cd "$1" && "${RUN_CARRIED[@]}" timeout "$2" "bin/$p"; exit $?) 2>&1 | tee -a "$OUTDIR/gtest-device.log" |
      awk -v p="$p" '
        /^\[ RUN +\] / { open = $0; sub(/^\[[^]]*\] /, "", open); next }
        /^\[ +(OK|SKIPPED|FAILED) +\] .* \([0-9]+ ms\)$/ {
          r = $2 == "OK" ? "   Passed" : $2 == "SKIPPED" ? "   Skipped" : "***Failed"
          name = $0; sub(/^\[[^]]*\] /, "", name); sub(/ \([0-9]+ ms\)$/, "", name)
          printf "      Test #%d: %s (%s) ....   %s\n", ++n, name, p, r
          open = ""
        }
        END { if (open != "") printf "      Test #%d: %s (%s) ....***Failed (never ended)\n", ++n, open, p }'
    local prc=${PIPESTATUS[0]}
    if [[ $prc -ne 0 ]]; then echo "$p exited $prc"; rc=1; fi
  done
  return "$rc"
}

# Tests ctest started and never reported (its run stopped by the step's timeout) are failures,
# named in the log as such.
mark_unfinished() {  # mark_unfinished LOG
  local lines
  lines=$(awk '/^ *Start +[0-9]+: / { id = $2; sub(/:$/, "", id); started[id] = $3 }
               /Test +#[0-9]+: / { id = $0; sub(/^.*Test +#/, "", id); sub(/:.*$/, "", id); delete started[id] }
               END { for (id in started) printf "      Test #%s: %s ....***Failed (never ended)\n", id, started[id] }' "$1")
  [[ -z $lines ]] || echo "$lines" >>"$1"
}

# The table so far, to summary.md: written after each step, so a run stopped from outside still
# leaves what it found in $OUT.
write_summary() {
  local k
  {
    echo "# reccl device run $STARTED"
    echo
    echo "commit $(tr '\n' ' ' <"$CARRIED/reccl-commit.txt" 2>/dev/null), $GPU, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $((SECONDS - T0)) s"
    echo
    echo "| check | result | detail |"
    echo "|---|---|---|"
    for k in "${order[@]}"; do echo "| $k | ${RESULT[$k]} | ${NOTE[$k]} |"; done
  } >"$OUTDIR/summary.md"
}

finish() {
  local failed=0 k
  trap - EXIT TERM INT
  [[ ${#order[@]} -gt 0 ]] || record "run" "FAIL" "no check ran"
  for k in "${order[@]}"; do [[ ${RESULT[$k]} == pass ]] || failed=1; done
  write_summary
  echo
  cat "$OUTDIR/summary.md"
  # Give tee the table before the script ends (up to 2 s: a redirection the trap interrupted may
  # still hold a copy of the pipe, which closes only at exit).
  exec >&- 2>&-
  local i
  for i in {1..20}; do kill -0 "$TEE_PID" 2>/dev/null || break; sleep 0.1; done
  exit "${1:-$failed}"
}

# Seconds for a step: at most CAP, leaving RESERVE for the steps after it, never under 10.
step_budget() {  # step_budget CAP RESERVE
  local left=$((DEADLINE - SECONDS - $2))
  ((left > $1)) && left=$1
  ((left < 10)) && left=10
  echo "$left"
}

# A step runs in the background and the script waits for it: a signal then runs the trap at once
# (bash holds traps while a foreground child runs), and the trap stops the step.
# The redirection is the step's own (a redirection on the call would hold the trap's output too).
STEP_PID=
step() {  # step LOG|- COMMAND...
  local log=$1
  shift
  if [[ $log == - ]]; then "$@" & else "$@" >"$log" 2>&1 & fi
  STEP_PID=$!
  wait "$STEP_PID"
  local rc=$?
  STEP_PID=
  return "$rc"
}
# A step that is a program is `timeout`, which leads a process group of its own: the group is
# stopped. A step that is a function (tests_without_ctest) is a subshell: it and its children.
stop_step() {
  [[ -n $STEP_PID ]] || return 0
  kill -TERM -- -"$STEP_PID" 2>/dev/null
  pkill -TERM -P "$STEP_PID" 2>/dev/null
  kill -TERM "$STEP_PID" 2>/dev/null
}

# The carried libraries go to the carried programs and what ctest starts, not to the rest of the
# script (python3, nvidia-smi). An array, so a step's process is `env`, then `timeout`, by exec.
RUN_CARRIED=()

run_checks() {
  local carry=$CARRY budget=480
  while [[ $# -gt 0 ]]; do
    case $1 in
      --out|--carry|--budget) [[ $# -ge 2 ]] || { echo "run.sh: $1 needs a value" >&2; usage; } ;;&
      --out) OUTDIR=$2; shift 2 ;;
      --carry) carry=$2; shift 2 ;;
      --budget) budget=$2; shift 2 ;;
      -h|--help) usage 0 ;;
      *) echo "run.sh: unknown argument $1" >&2; usage ;;
    esac
  done
  [[ $budget =~ ^[0-9]+$ && $budget -ge 60 ]] || { echo "run.sh: --budget $budget: whole seconds, at least 60" >&2; usage; }
  mkdir -p "$OUTDIR"
  : >"$OUTDIR/run.log"
  # tee ignores the signals that stop the script, so the table still reaches the output.
  exec > >(trap '' TERM INT HUP; exec tee -a "$OUTDIR/run.log") 2>&1
  TEE_PID=$!
  T0=$SECONDS
  DEADLINE=$((SECONDS + budget))
  STARTED=$(date -u +%FT%TZ)
  CARRIED=$carry
  GPU=$(nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader 2>/dev/null | head -1)
  GPU=${GPU:-no nvidia-smi}
  trap 'stop_step
        record "run" "FAIL" "stopped by a signal after $((SECONDS - T0)) s"; finish 1' TERM INT
  trap 'finish' EXIT
  echo "== reccl device run $STARTED on $(hostname): $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), budget $budget s"
  echo "GPU (name, driver, compute mode): $GPU"

  local bdir
  if [[ -f $carry/CMakeCache.txt ]]; then
    bdir=$(place_build "$carry") || { record "start" "FAIL" "cannot place the carried build: $bdir"; finish 2; }
    RUN_CARRIED=(env "LD_LIBRARY_PATH=$(realpath "$carry")/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    echo "== carried build of $(head -1 "$carry/reccl-commit.txt" 2>/dev/null) at $bdir"
  else
    build_here || { record "start" "FAIL" "no carried build, and building here failed (run.log)"; finish 2; }
    bdir=$ROOT/$BUILD
  fi
  # The programs must start here (libraries, C library version).
  "${RUN_CARRIED[@]}" "$bdir/bin/cuda_ipc_peer" >/dev/null 2>&1
  if [[ $? -ne 2 ]]; then  # 2: it started and wants arguments
    "${RUN_CARRIED[@]}" "$bdir/bin/cuda_ipc_peer"
    record "start" "FAIL" "the carried programs do not start on this machine (run.log)"
    finish 2
  fi

  local t
  t=$(step_budget 300 150)
  echo "== 1. device tests (${t} s at most)"
  if command -v ctest >/dev/null; then
    step "$OUTDIR/ctest-device.log" "${RUN_CARRIED[@]}" timeout -k 10 "$t" ctest --test-dir "$bdir" -L device -j 8 \
      --output-on-failure
  else
    step "$OUTDIR/ctest-device.log" tests_without_ctest "$bdir" $((t / 2))
  fi
  local crc=$? summary passed skipped verdict
  mark_unfinished "$OUTDIR/ctest-device.log"
  grep -E 'tests passed|Test +#' "$OUTDIR/ctest-device.log" | tail -n 80
  summary=$(grep -oE '[0-9]+% tests passed.*' "$OUTDIR/ctest-device.log" | tail -1)
  passed=$(grep -cE 'Test +#[0-9]+: .* Passed' "$OUTDIR/ctest-device.log")
  skipped=$(grep -cE 'Test +#[0-9]+: .*Skipped' "$OUTDIR/ctest-device.log")
  # A run in which every test skipped (no usable GPU) exits 0 from ctest, and is no pass.
  if [[ $crc -ne 0 ]]; then verdict=FAIL; elif [[ $passed -eq 0 ]]; then verdict=skipped; else verdict=pass; fi
  record "device tests (ctest -L device)" "$verdict" \
    "exit $crc; ${summary:-no ctest summary}; $passed passed, $skipped skipped"
  group_result 'DeviceKernels' "kernels = CPU bit for bit (every type, op)"
  group_result 'Gate' "stream gate (memop, kernel)"
  group_result 'StreamCollectives|StreamErrors' "collectives on streams, async error"
  group_result 'IpcPipe' "CUDA IPC relay pipe"
  group_result 'DeviceRailPull' "rail pulled mid device allreduce, bit-exact"
  write_summary

  t=$(step_budget 90 100)
  echo "== 2. reduce_device_bench (kernels vs device-to-device copy, ${t} s at most)"
  step - "${RUN_CARRIED[@]}" timeout -k 5 "$t" "$bdir/bin/reduce_device_bench" --bytes 1G --json "$OUTDIR/device-kernels.json"
  local krc=$?
  if [[ $krc -eq 0 && -f $OUTDIR/device-kernels.json ]]; then
    local worst
    worst=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); w=min(j["rows"], key=lambda r: r["traffic_ratio"]); print("%.3f (%s %s)" % (w["traffic_ratio"], w["type"], w["op"]))' "$OUTDIR/device-kernels.json")
    record "kernel bw / D2D copy bw (worst, bar 0.8)" \
      "$(awk -v w="${worst%% *}" 'BEGIN { print (w >= 0.8) ? "pass" : "FAIL" }')" "$worst"
  else
    record "kernel bw / D2D copy bw (worst, bar 0.8)" "$(bench_failure $krc)" "reduce_device_bench exit $krc"
  fi
  write_summary

  t=$(step_budget 150 60)
  echo "== 3. reccl-device-bench (allreduce, 4 rank processes on the GPU, host path beside it, ${t} s at most)"
  step - "${RUN_CARRIED[@]}" timeout -k 5 "$t" "$bdir/bin/reccl-device-bench" --ranks 4 --sizes 1M,16M,64M --iters 20 \
    --json "$OUTDIR/device-allreduce.json"
  local arc=$?
  if [[ $arc -eq 0 && -f $OUTDIR/device-allreduce.json ]]; then
    record "device allreduce, 4 ranks, 64 MiB" "pass" \
      "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["rows"][-1]; print("busbw %.2f GB/s device, %.2f host (x%.2f), %d wrong" % (r["device_busbw_gbs"], r["host_busbw_gbs"], r["device_over_host"], r["wrong"]))' "$OUTDIR/device-allreduce.json")"
  else
    record "device allreduce, 4 ranks, 64 MiB" "$(bench_failure $arc)" "reccl-device-bench exit $arc"
  fi
  write_summary

  # NCCL itself over the plugin: the image's PyTorch with its NCCL, two rank processes on the one
  # GPU calling themselves two hosts (bench/nccl_net/torch_nccl_check.py, docs/nccl_net.md).
  t=$(step_budget 75 5)
  echo "== 4. NCCL over the reccl net plugin (torch nccl backend, 2 ranks as 2 hosts on the GPU, ${t} s at most)"
  local pdir=$bdir/lib lpath= check=$ROOT/bench/nccl_net/torch_nccl_check.py
  if [[ -x $bdir/bin/torch_nccl_check ]]; then
    check=$bdir/bin/torch_nccl_check pdir=$(realpath "$carry/lib") lpath=$(realpath "$carry/devlibs")
  fi
  step "$OUTDIR/nccl-plugin.log" timeout -k 5 "$t" "$check" \
    --plugin-dir "$pdir" --lib-path "$lpath" --timeout $((t > 20 ? t - 10 : 10)) --out "$OUTDIR/nccl-plugin.json"
  local nrc=$?
  tail -n 30 "$OUTDIR/nccl-plugin.log"
  if [[ $nrc -eq 0 && -f $OUTDIR/nccl-plugin.json ]]; then
    record "NCCL over the reccl net plugin, bit-exact" "pass" \
      "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); t=j["all_reduce_16M"]; print("%d checks x 2 ranks, network %s, 64 MiB all_reduce busbw %.2f GB/s" % (len(j["checks"]), ",".join(j["net_name"]), t["busbw_gbs"]))' "$OUTDIR/nccl-plugin.json")"
  else
    record "NCCL over the reccl net plugin, bit-exact" "$(bench_failure $nrc)" "torch_nccl_check exit $nrc (nccl-plugin.log)"
  fi
  finish
}

case ${1:-run} in
  prepare) shift; prepare "$@" ;;
  run) [[ $# -gt 0 ]] && shift; run_checks "$@" ;;
  -h|--help) usage 0 ;;
  --*) run_checks "$@" ;;
  *) echo "run.sh: unknown command $1" >&2; usage ;;
esac
