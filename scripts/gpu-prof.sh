#!/usr/bin/env bash
# Per-kernel profile of the engine on the GPU machine (from the repo root, .debs/ carried): builds build-gpu through
# scripts/gpu-lane.sh (one quick test), then runs Nsight Compute over `engine bench` and writes one CSV per prompt
# length with every kernel's duration, DRAM bytes read and grid:
#   OUT=/tmp/out [PROF_PROMPTS="16 2048"] [PROF_SHAPE=llama3-8b] [PROF_FLAGS="--weights int8"] [PROF_FILTER=regex] \
#       bash scripts/gpu-prof.sh
# $OUT/prof-<len>.csv (ncu --csv --page raw) and $OUT/prof.txt (a per-kernel-name summary: count, total µs, GB/s;
# then the same for one decode step alone: the shortest stretch between two device argmaxes).
# With --sections, Nsight Compute's detail (speed of light, occupancy, launch, warp states, memory, compute, scheduler,
# instruction mix, and the sampled stall reasons per source line) for
# chosen kernels instead, one report per spec:
#   OUT=/tmp/out bash scripts/gpu-prof.sh --sections 'NAME|KERNEL_REGEX|SKIP|COUNT|COMMAND...' ...
#   e.g. 'mma|k_attn_mma|108|1|build-gpu/tests/engine/test_engk_attn --bench'  -> $OUT/ncu-NAME.txt
set -u
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/out}
B=${RC_BUILD:-build-gpu}
mkdir -p "$OUT" || exit 2
export LD_LIBRARY_PATH=${RC_PREFIX:-/tmp/rcprefix}/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ ! -x "$B/engine/engine" ]; then
    OUT=$OUT/lane RC_BUILD=$B RC_SANITIZERS=" " RC_TEST_ARGS="engine.gemm" bash scripts/gpu-lane.sh >"$OUT/lane.txt" 2>&1
    tail -n 2 "$OUT/lane.txt"
fi
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
if [ "${1:-}" = --sections ]; then
    shift
    for spec in "$@"; do
        IFS='|' read -r name re skip count cmd <<<"$spec"
        # shellcheck disable=SC2086 # cmd: the program and its arguments, word-split on purpose
        timeout 240 "$NCU" --clock-control none -k "regex:$re" --launch-skip "$skip" --launch-count "$count" \
            --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
            --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats \
            --section InstructionStats --section SourceCounters $cmd >"$OUT/ncu-$name.txt" 2>&1
        echo "ncu $name: exit $? ($(grep -c 'Duration' "$OUT/ncu-$name.txt") kernels)"
    done
    exit 0
fi
for len in ${PROF_PROMPTS:-16 2048}; do
    # shellcheck disable=SC2086 # PROF_FLAGS: engine bench flags, word-split on purpose
    "$NCU" --clock-control none --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size \
        ${PROF_FILTER:+-k "$PROF_FILTER"} ${PROF_SKIP:+--launch-skip "$PROF_SKIP"} --launch-count "${PROF_COUNT:-4000}" \
        "$B/engine/engine" bench --shape "${PROF_SHAPE:-llama3-8b}" --prompt-len "$len" --steps "${PROF_STEPS:-3}" --rounds 1 --no-stream \
        ${PROF_FLAGS:-} \
        >"$OUT/prof-$len.csv" 2>"$OUT/prof-$len.err"
    echo "ncu $len: exit $? ($(wc -l <"$OUT/prof-$len.csv") lines)"
done
python3 - "$OUT" <<'PY' | tee "$OUT/prof.txt"
import csv, glob, os, sys, collections

def table(rows, ki, ti, bi, gi, limit):
    """Per (kernel name, grid): launches, total time, DRAM bytes; printed longest first. Returns the total time."""
    agg, tot = collections.OrderedDict(), 0.0
    for r in rows:
        try: t = float(r[ti].replace(",", "")); b = float(r[bi].replace(",", ""))
        except ValueError: continue
        a = agg.setdefault((r[ki][:60], r[gi]), [0, 0.0, 0.0]); a[0] += 1; a[1] += t; a[2] += b; tot += t
    for (k, g), (n, t, b) in sorted(agg.items(), key=lambda x: -x[1][1])[:limit]:
        print("%-60s grid %-8s n %5d  total %12.0f  mean %10.1f  bytes/launch %12.0f" % (k, g, n, t, t / n, b / n))
    return tot

for path in sorted(glob.glob(os.path.join(sys.argv[1], "prof-*.csv"))):
    rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
    if len(rows) < 3:
        print(path, "no rows"); continue
    h = rows[0]; data = rows[2:]
    cols = h.index("Kernel Name"), h.index("gpu__time_duration.sum"), h.index("dram__bytes_read.sum"), h.index("launch__grid_size")
    print("==", os.path.basename(path), "units: time as ncu reports (ns unless header says otherwise)", rows[1][cols[1]], rows[1][cols[2]])
    table(data, *cols, 40)
    # one decode step: every step ends in a device argmax, and so does a prefill (its first token); the shortest
    # stretch between two consecutive argmaxes is a decode step alone (a prefill adds its chunk's launches)
    ends = [i for i, r in enumerate(data) if "k_argmax_final" in r[cols[0]]]
    if len(ends) >= 2:
        j = min(range(1, len(ends)), key=lambda m: ends[m] - ends[m - 1])
        print("== one decode step: %d launches, longest first" % (ends[j] - ends[j - 1]))
        tot = table(data[ends[j - 1] + 1:ends[j] + 1], *cols, 30)
        print("   kernels alone %.1f (sum of durations; a graph adds its gaps)" % tot)
PY
