#!/usr/bin/env bash
# The main job: bring up the built-in testbed and show it working.
set -euo pipefail
BUILD_DIR=${1:-build}
RECCL="$BUILD_DIR/bin/reccl"
echo "demo: the testbed is not built yet; the BPF build path and CLI are:"
"$RECCL" --help | head -12
