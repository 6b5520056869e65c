#!/usr/bin/env bash
# Sets up, builds, and runs the reference link on every bundled golden, printing the compare tables.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PATH:/usr/local/cuda/bin"
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
exec build/harness/harness compare --stage "${STAGE:-ref}" "$@"
