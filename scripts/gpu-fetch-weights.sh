#!/usr/bin/env bash
# The real checkpoint in parts for the GPU machine, whose run takes at most 64 MiB of files (work tree
# included: ~55 MiB of it after scripts/gpu-slim.sh out, so PART_MIB=8 there): PART_MIB (default 12) MiB parts,
# .weights/partK-of-N, one carried per run.
#   here, once:   bash scripts/gpu-fetch-weights.sh             (fetches, splits: part1-of-8 .. part8-of-8)
#   GPU runs, back to back while the machine stays up, K = 1..N:
#       run(command="bash scripts/gpu-fetch-weights.sh --store", carry=[".weights/partK-of-N"])
#   the last run may go on: "bash scripts/gpu-fetch-weights.sh --store && bash scripts/gpu-harness.sh"
# --store keeps the carried part in /tmp/refchain-weights/ (outside the work tree, which each run replaces);
# once all N parts are there it joins them, checks the sha256 and puts the GGUF where the harness looks:
# ~/.cache/refchain/. Exit 0 when a part was stored (and, when complete, joined), 2 on any mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."
file=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
keep=/tmp/refchain-weights
cache=${XDG_CACHE_HOME:-$HOME/.cache}/refchain
case "${1:-}" in
"")
    bash scripts/fetch-weights.sh
    rm -rf .weights
    mkdir -p .weights
    split -b "${PART_MIB:-12}M" -d -a 2 "$cache/$file" .weights/p
    n=$(ls .weights | wc -l)
    k=0
    for p in .weights/p*; do
        k=$((k + 1))
        mv "$p" ".weights/part$k-of-$n"
    done
    ls -l .weights/
    ;;
--store)
    mkdir -p "$keep"
    ls .weights/part*-of-* >/dev/null 2>&1 || { echo "gpu-fetch-weights: no .weights/partK-of-N carried" >&2; exit 2; }
    for p in .weights/part*-of-*; do
        cp "$p" "$keep/"
        echo "gpu-fetch-weights: $(basename "$p") ($(stat -c %s "$p") bytes) kept in $keep"
    done
    n=$(basename "$p" | sed 's/.*-of-//')
    for k in $(seq 1 "$n"); do
        [ -f "$keep/part$k-of-$n" ] || { echo "gpu-fetch-weights: part $k of $n not yet stored"; exit 0; }
    done
    mkdir -p "$cache"
    for k in $(seq 1 "$n"); do cat "$keep/part$k-of-$n"; done >"$cache/$file.tmp"
    if ! echo "$sha  $cache/$file.tmp" | sha256sum -c --status; then
        rm -f "$cache/$file.tmp"
        echo "gpu-fetch-weights: the $n joined parts have the wrong sha256" >&2
        exit 2
    fi
    mv "$cache/$file.tmp" "$cache/$file"
    echo "gpu-fetch-weights: $cache/$file in place (sha256 ok)"
    ;;
*)
    echo "usage: gpu-fetch-weights.sh [--store]" >&2
    exit 2
    ;;
esac
