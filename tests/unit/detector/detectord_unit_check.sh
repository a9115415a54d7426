#!/usr/bin/env bash
# The systemd unit this build installs: none of the sandbox settings that would silently take
# away what the hooks need (detectord_caps_test emulates the capabilities, not systemd's mounts
# and filters), and an exposure level below 4 ("OK") in systemd-analyze security; prints the
# score and, when it fails, every setting that adds to it.
# systemd-analyze verify must have nothing to say about it either (an unknown or misspelt setting
# is only a warning to systemd, and the setting silently missing).
# Usage: detectord_unit_check.sh UNIT_FILE DAEMON_BINARY. Exit 0 ok, 1 not, 77 no systemd-analyze.
set -uo pipefail
unit=${1:?usage: $0 UNIT_FILE DAEMON_BINARY}
daemon=${2:?usage: $0 UNIT_FILE DAEMON_BINARY}
# Each of these turns a hook off without an error at start:
#   ProtectKernelTunables=yes hides /proc/kallsyms (link-watch hooks need its addresses);
#   ProtectKernelLogs=yes drops CAP_SYSLOG from the bounding set (the same addresses);
#   RestrictRealtime=yes refuses the detector thread's SCHED_FIFO.
bad=0
for setting in ProtectKernelTunables=yes ProtectKernelLogs=yes RestrictRealtime=yes; do
  if grep -qx "$setting" "$unit"; then
    echo "$(basename "$unit") sets $setting"
    bad=1
  fi
done
[[ $bad -eq 0 ]] || exit 1
if ! command -v systemd-analyze >/dev/null; then
  echo "systemd-analyze not installed"
  exit 77
fi
if ! systemd-analyze security --help 2>&1 | grep -q -- '--offline'; then
  echo "this systemd-analyze has no --offline (systemd < 250)"
  exit 77
fi
# verify checks that ExecStart= exists: a copy pointing at this build's binary.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|^ExecStart=[^ ]*reccl-detectord|ExecStart=$daemon|" "$unit" >"$tmp/$(basename "$unit")"
said=$(systemd-analyze verify --man=no "$tmp/$(basename "$unit")" 2>&1)
if [[ -n $said ]]; then
  echo "systemd-analyze verify:"
  echo "$said"
  exit 1
fi
out=$(systemd-analyze security --offline=true "$unit" 2>&1)
score=$(sed -n 's/.*Overall exposure level for .*: \([0-9.][0-9.]*\).*/\1/p' <<<"$out")
if [[ -z $score ]]; then
  echo "no exposure level in the output of systemd-analyze security:"
  echo "$out"
  exit 1
fi
echo "exposure level of $(basename "$unit"): $score"
if ! awk -v s="$score" 'BEGIN { exit !(s < 4.0) }'; then
  grep '✗' <<<"$out"
  echo "exposure $score is not below 4"
  exit 1
fi
