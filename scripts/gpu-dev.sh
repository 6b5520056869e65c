#!/usr/bin/env bash
# A development run on the GPU machine (from the repo root, .debs/ carried), in two back-to-back calls that share
# the machine's build (the second must start within the warm window):
#   OUT=/tmp/out bash scripts/gpu-dev.sh tests   build-gpu (-Dfaults=true) + the engine and faults suites (every
#                                                kernel checker included), then each engine kernel checker's --bench
#   OUT=/tmp/out bash scripts/gpu-dev.sh bench   scripts/gpu-bench.sh on build-gpu (engine bench + same-run peers), then
#                                                engine rows for BENCH_EXTRA (qwen3.5-9b, gemma4-12b, int8, int4-g128)
#                                                and the gemma4-12b memory banner at 32k
# Everything lands in $OUT/dev.tgz (one file: a GPU call returns at most 8); the summary lines go to stdout.
set -u
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/out}
B=${RC_BUILD:-build-gpu}
W=$(mktemp -d) || exit 2
mkdir -p "$OUT" || exit 2
export LD_LIBRARY_PATH=${RC_PREFIX:-/tmp/rcprefix}/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
case ${1:?usage: gpu-dev.sh tests|bench} in
tests)
    OUT=$W/lane RC_BUILD=$B RC_MESON_OPTS=-Dfaults=true RC_SANITIZERS="${RC_SANITIZERS- }" \
        RC_TEST_ARGS="${RC_TEST_ARGS---suite engine --suite faults}" bash scripts/gpu-lane.sh >"$W/lane.txt" 2>&1
    grep -E "^ *[0-9]+/[0-9]+ " "$W/lane/testlog.txt" >/dev/null 2>&1
    grep -vE ' OK | SKIP ' "$W/lane.txt" | grep -E '^ *[0-9]+/[0-9]+ ' | head -40
    tail -n 3 "$W/lane.txt"
    for t in engk_attn engk_gemm engk_gemv engk engk_qgemv engk_gdn; do
        x=$B/tests/engine/test_$t
        [ -x "$x" ] || continue
        timeout "${KBENCH_TIMEOUT:-50}" "$x" --bench >"$W/kbench_$t.txt" 2>&1
        echo "kbench $t: rc=$? $(tail -n 1 "$W/kbench_$t.txt")"
    done
    ;;
bench)
    OUT=$W/bench COMMIT=${COMMIT:-} BENCH_PEER_TIMEOUT=${BENCH_PEER_TIMEOUT:-220} \
        BENCH_ENGINE_TIMEOUT=${BENCH_ENGINE_TIMEOUT:-240} bash scripts/gpu-bench.sh "$B" >"$W/bench.txt" 2>&1
    echo "gpu-bench rc=$?"
    cat "$W/bench/bench.md" 2>/dev/null || tail -n 30 "$W/bench.txt"
    # the other families and the quantized weights: engine rows only (no HF peer for these shapes here)
    for spec in ${BENCH_EXTRA-"qwen3.5-9b|" "gemma4-12b|" "llama3-8b|--weights int8" "llama3-8b|--weights int4-g128"}; do
        shape=${spec%%|*} flags=${spec#*|}
        f=$W/extra_${shape}${flags:+_${flags##* }}
        # shellcheck disable=SC2086
        timeout "${BENCH_EXTRA_TIMEOUT:-120}" "$B/engine/engine" bench --shape "$shape" --prompt-len "${BENCH_EXTRA_PROMPTS:-16,2048}" \
            --steps 16 --rounds 2 $flags >"$f.txt" 2>"$f.err"
        echo "== engine bench --shape $shape $flags: exit $?"
        cat "$f.txt"
        grep -E '^engine: (plan|device memory|ring|quantized|error)' "$f.err" | head -6
    done
    "$B/engine/engine" --synth gemma4-12b --ids "1 2 3" --max-ctx 32768 --steps 2 2>&1 >/dev/null | grep -iE 'ring|plan|memory' | head -8
    ;;
esac
tar czf "$OUT/dev.tgz" -C "$W" .
