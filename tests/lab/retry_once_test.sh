#!/usr/bin/env bash
# retry_once_test.sh LAB_SH: lab.sh's retries. A failed run whose console holds a stall verdict
# boots once more with --retry-emulation-stall --retry-stall-verdict and returns the second run's
# status; without --retry-stall-verdict, or when the run passed, there is no second boot; the flag
# alone is a usage error.
# Exits 77 when lab.sh skips (no qemu, no kernel).
set -uo pipefail
[[ $# -eq 1 && -x $1 ]] || { echo "usage: retry_once_test.sh LAB_SH" >&2; exit 64; }
lab=$1
out=$(mktemp /tmp/reccl-lab-retry.XXXXXX)
trap 'rm -f "$out"' EXIT
line='reccl warn FAILOVER: rank 1: no verbs ack for 10043 ms on rank 1->3 ch 0 (rail 1): path stalled'
fail=0

# run EXPECTED_RC EXPECTED_BOOTS WHAT LAB_ARGS... -- COMMAND
run() {
  local want_rc=$1 want_boots=$2 what=$3
  shift 3
  "$lab" run --timeout 60 "$@" >"$out" 2>&1
  local rc=$? boots
  ((rc == 77)) && { echo "skipped: lab.sh cannot boot here"; cat "$out"; exit 77; }
  boots=$(grep -c '^lab: wall ' "$out")
  if ((rc != want_rc || boots != want_boots)); then
    echo "FAIL: $what: exit $rc after $boots boot(s), expected exit $want_rc after $want_boots"
    cat "$out"
    fail=1
  else
    echo "ok: $what: exit $rc after $boots boot(s)"
  fi
}

run 1 2 "a failed run with a stall verdict, both flags" --retry-emulation-stall --retry-stall-verdict \
  -- sh -c "echo '$line'; exit 1"
grep -q 'booting again, once' "$out" || { echo "FAIL: the retry was not said on stderr"; fail=1; }
run 1 1 "a failed run with a stall verdict, --retry-emulation-stall alone" --retry-emulation-stall \
  -- sh -c "echo '$line'; exit 1"
run 0 1 "a passed run with a stall verdict, both flags" --retry-emulation-stall --retry-stall-verdict \
  -- sh -c "echo '$line'; exit 0"
run 1 1 "a failed run without a retry's signature, both flags" --retry-emulation-stall --retry-stall-verdict \
  -- sh -c "exit 1"
run 64 0 "--retry-stall-verdict alone" --retry-stall-verdict -- true
grep -q 'only with --retry-emulation-stall' "$out" || { echo "FAIL: the usage error does not name --retry-emulation-stall"; fail=1; }
exit $fail
