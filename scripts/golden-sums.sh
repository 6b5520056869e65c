#!/usr/bin/env bash
# Rewrites golden/SHA256SUMS from the goldens there (run after regenerating or adding a golden), or with
# --check says whether it is in sync: every golden listed, every listed file present, every digest right.
set -euo pipefail
cd "$(dirname "$0")/../golden"
if [ "${1:-}" = "--check" ]; then
    listed=$(awk '{print $2}' SHA256SUMS | sed 's/^\*//' | sort)
    present=$(ls -1 ./*.h5 | sed 's|^\./||' | sort)
    if [ "$listed" != "$present" ]; then
        echo "golden/SHA256SUMS lists: $(echo $listed); golden/ has: $(echo $present)." \
             "Run: bash scripts/golden-sums.sh" >&2
        exit 1
    fi
    sha256sum --check --strict --quiet SHA256SUMS || { echo "Run: bash scripts/golden-sums.sh" >&2; exit 1; }
    echo "golden/SHA256SUMS: $(echo "$present" | wc -l) goldens, in sync"
    exit 0
fi
sha256sum ./*.h5 | sed 's|  \./|  |' > SHA256SUMS
echo "golden/SHA256SUMS: $(wc -l < SHA256SUMS) goldens"
