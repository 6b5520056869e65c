#!/usr/bin/env bash
# Nsight Compute detail (speed of light, occupancy, warp stalls, memory) of chosen engine kernels on the GPU machine
# (from the repo root, .debs/ carried): builds build-gpu like scripts/gpu-prof.sh, then one ncu report per spec
#   OUT=/tmp/out bash scripts/gpu-ncu.sh 'NAME|KERNEL_REGEX|SKIP|COUNT|COMMAND...' ...
# e.g. 'mma|k_attn_mma|108|1|build-gpu/tests/engine/test_engk_attn --bench'  -> $OUT/ncu-NAME.txt
set -u
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/out}
B=${RC_BUILD:-build-gpu}
mkdir -p "$OUT" || exit 2
export LD_LIBRARY_PATH=${RC_PREFIX:-/tmp/rcprefix}/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ ! -x "$B/engine/engine" ]; then
    OUT=$OUT/lane RC_BUILD=$B RC_SANITIZERS=" " RC_TEST_ARGS="engine.gemm" bash scripts/gpu-lane.sh >"$OUT/lane.txt" 2>&1
    tail -n 1 "$OUT/lane.txt"
fi
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for spec in "$@"; do
    IFS='|' read -r name re skip count cmd <<<"$spec"
    # shellcheck disable=SC2086
    timeout 240 "$NCU" --clock-control none -k "regex:$re" --launch-skip "$skip" --launch-count "$count" \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis $cmd >"$OUT/ncu-$name.txt" 2>&1
    echo "ncu $name: exit $? ($(grep -c 'Duration' "$OUT/ncu-$name.txt") kernels)"
done
