#!/usr/bin/env bash
# scripts/gpu-engine.sh BUILD_DIR: the engine's GPU checks, run on the GPU machine after
#   meson setup BUILD_DIR -Dcuda=enabled && ninja -C BUILD_DIR
# 1. meson test: the engine unit test and every engine GPU test (compare in every memory mode and combination,
#    f32 and bf16, on the core goldens and qwen3_5 / qwen3_5_short; bit-identity across modes; bad inputs;
#    bench --shape tiny)
# 2. the bit-identity tables those tests printed (engine --logits in each mode, files compared byte for byte)
# 3. compute-sanitizer memcheck / racecheck on small runs, when the tool is installed
# 4. engine bench --shape llama3-8b: full resident vs 2 streamed slots, then KV offload + vocab on CPU
# 5. engine bench --shape qwen3.5-9b: its rows and the DeltaNet decode step per linear layer
# and last a compact table of results (RC_SKIP_BENCH=1 skips 4-5; RC_SKIP_TESTS=1 skips 1-2, when the GPU lane already ran the suites). Exit 0 iff everything passed. Budget: about 4 minutes on an H200.
set -u
B=${1:?usage: scripts/gpu-engine.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
E=$B/engine/engine
export ENGINE=$E HARNESS=$B/harness/harness GOLDEN_DIR=$ROOT/golden
OUT=$(mktemp -d "${TMPDIR:-/tmp}/gpu-engine.XXXXXX")
rows=()
status=0
row() { rows+=("$(printf '%-34s %-8s %s' "$1" "$2" "$3")"); [ "$2" = PASS ] || [ "$2" = INFO ] || status=1; }
t0=$(date +%s)

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
if ! "$E" devices; then
    echo "gpu-engine: no usable GPU; nothing to do" >&2
    exit 2
fi

if [ "${RC_SKIP_TESTS:-0}" != 1 ]; then
echo "== 1. meson test: unit.engine_host and the engine suite (compare in every mode, identity, bad input, bench tiny)"
mapfile -t names < <(meson test -C "$B" --list --suite engine 2>/dev/null | sed -n 's|.* / ||p')
meson test -C "$B" --num-processes 6 --print-errorlogs unit.engine_host "${names[@]}" >"$OUT/meson.txt" 2>&1
mrc=$?
cp "$B/meson-logs/testlog.txt" "$OUT/testlog.txt" 2>/dev/null
grep -E '^ *[0-9]+/[0-9]+ ' "$OUT/meson.txt" | grep -v ' OK ' | head -40
grep -E '^(Ok|Fail|Skipped|Timeout):' "$OUT/meson.txt"
nok=$(grep -cE '^ *[0-9]+/[0-9]+ .* OK ' "$OUT/meson.txt")
nbad=$(grep -E '^ *[0-9]+/[0-9]+ ' "$OUT/meson.txt" | grep -cv ' OK ')
row "meson engine tests ($((nok + nbad)))" "$([ $mrc -eq 0 ] && echo PASS || echo FAIL)" "$nok ok, $nbad not ok (log: $OUT/testlog.txt)"
# one line per compare test: mode and its verdict (worst scaled error, greedy tokens)
awk '/^test: .*engine\.compare\./ { sub(/.*engine\.compare\./, ""); name = $0 }
     /^VERDICT .*stage=engine/ && name != "" { v = $0; sub(/^VERDICT [^ ]+ stage=engine: /, "", v);
                                               printf "%-32s %s\n", name, substr(v, 1, 150); name = "" }' \
    "$OUT/testlog.txt" >"$OUT/verdicts.txt"
echo "compare verdicts: $(grep -c ' PASS' "$OUT/verdicts.txt") PASS, $(grep -c ' FAIL' "$OUT/verdicts.txt") FAIL"
cat "$OUT/verdicts.txt"
row "compare verdicts" "$([ "$(grep -c ' FAIL' "$OUT/verdicts.txt")" -eq 0 ] && [ -s "$OUT/verdicts.txt" ] && echo PASS || echo FAIL)" \
    "$(grep -c ' PASS' "$OUT/verdicts.txt") PASS, $(grep -c ' FAIL' "$OUT/verdicts.txt") FAIL"

echo "== 2. bit-identity across modes (engine --logits per mode, byte comparison; from the identity tests)"
awk '/^test: .*engine\.identity\./ { on = 1; out = 0; next }
     on && /^-+ stdout -+$/ { out = 1; next }
     on && /^(=+|-+ stderr -+)$/ { on = 0; out = 0; next }
     out { print }' "$OUT/testlog.txt" | tee "$OUT/identity.txt"
nid=$(printf '%s\n' "${names[@]}" | grep -c '^engine\.identity\.')
row "identity tables" "$([ "$(grep -c '^PASS: every mode' "$OUT/identity.txt")" -eq "$nid" ] && echo PASS || echo FAIL)" \
    "$(grep -c '^PASS: every mode' "$OUT/identity.txt") of $nid groups bit-identical"

fi # RC_SKIP_TESTS

echo "== 3. compute-sanitizer"
if command -v compute-sanitizer >/dev/null 2>&1; then
    # qwen3_5: gated delta net + gated attention; gemma4: ring KV (24 tokens + 4 steps wrap its 8-row rings), PLE
    for L in "$GOLDEN_DIR/llama.h5" "$GOLDEN_DIR/qwen3_5.h5" "$GOLDEN_DIR/gemma4.h5"; do
    for spec in "memcheck|" "memcheck|--resident-layers 1 --kv-offload --vocab-on-cpu" "memcheck|--resident-layers 0" \
                "racecheck|" "racecheck|--kv-offload" "synccheck|"; do
        tool=${spec%%|*}
        flags=${spec#*|}
        # shellcheck disable=SC2086
        if compute-sanitizer --tool "$tool" --error-exitcode 3 "$E" --model "$L" --prompt-golden --steps 4 \
            --kv-tile 8 --quiet $flags >"$OUT/san.txt" 2>&1; then
            row "sanitizer $(basename "$L" .h5) $tool $flags" PASS "$(grep -m1 'ERROR SUMMARY' "$OUT/san.txt")"
        else
            row "sanitizer $(basename "$L" .h5) $tool $flags" FAIL "$(grep -m1 -E 'ERROR SUMMARY|error' "$OUT/san.txt")"
            head -40 "$OUT/san.txt"
        fi
    done
    done
    # the long-chunk prefill attention forms (256-row blocks; the pipelined one syncs by mbarriers), which runs of
    # the small goldens never pick: test_engk_attn --sanitize launches each once on llama3-8b-shaped heads
    T=$B/tests/engine/test_engk_attn
    skip=""
    if [ ! -x "$T" ]; then
        skip="$T not built (-Dtests=disabled): skipped"
    elif "$T" --sanitize >/dev/null 2>&1; [ $? = 77 ]; then
        skip="no tensor-core prefill on this GPU: skipped"
    fi
    for tool in memcheck racecheck synccheck; do
        if [ -n "$skip" ]; then
            row "sanitizer attn prefill $tool" INFO "$skip"
        elif compute-sanitizer --tool "$tool" --error-exitcode 3 "$T" --sanitize >"$OUT/san.txt" 2>&1; then
            row "sanitizer attn prefill $tool" PASS "$(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san.txt")"
        else
            row "sanitizer attn prefill $tool" FAIL "$(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY|error' "$OUT/san.txt")"
            head -40 "$OUT/san.txt"
        fi
    done
else
    row "compute-sanitizer" INFO "not installed: skipped"
fi

if [ "${RC_SKIP_BENCH:-0}" != 1 ]; then # RC_SKIP_BENCH=1: sanitizers only (scripts/gpu-dev.sh bench times these)
echo "== 4. engine bench --shape llama3-8b"
for flags in "" "--kv-offload --vocab-on-cpu" "--weights int8" "--weights int4-g128"; do
    # shellcheck disable=SC2086
    if "$E" bench --shape llama3-8b --steps 16 $flags >"$OUT/bench.txt" 2>"$OUT/bench.err"; then
        cat "$OUT/bench.txt"
        tail -n 2 "$OUT/bench.txt" | while IFS= read -r l; do echo "$l"; done >>"$OUT/bench_rows.txt"
        head -n 3 "$OUT/bench.txt" | tail -n 1 >"$OUT/roof.txt"
        grep -m1 '^mode ' "$OUT/bench.txt" >"$OUT/bench_head.txt"
        row "bench llama3-8b ${flags:-(full, 2 slots)}" PASS "see table"
    else
        cat "$OUT/bench.txt" "$OUT/bench.err"
        row "bench llama3-8b ${flags:-(full, 2 slots)}" FAIL "$(tail -n 1 "$OUT/bench.err")"
    fi
    grep -E '^engine: (plan|device memory)' "$OUT/bench.err" | head -6
done

echo "== 5. engine bench --shape qwen3.5-9b (its last line: the DeltaNet decode step per linear layer)"
if "$E" bench --shape qwen3.5-9b --steps 16 >"$OUT/bench_q35.txt" 2>"$OUT/bench_q35.err"; then
    cat "$OUT/bench_q35.txt"
    row "bench qwen3.5-9b" PASS "$(grep -m1 '^deltanet' "$OUT/bench_q35.txt")"
else
    cat "$OUT/bench_q35.txt" "$OUT/bench_q35.err"
    row "bench qwen3.5-9b" FAIL "$(tail -n 1 "$OUT/bench_q35.err")"
fi
fi # RC_SKIP_BENCH

echo
echo "================ gpu-engine summary ($(($(date +%s) - t0)) s) ================"
printf '%s\n' "${rows[@]}"
if [ -s "$OUT/bench_rows.txt" ]; then
    echo "-- bench llama3-8b: $(cat "$OUT/roof.txt" 2>/dev/null)"
    cat "$OUT/bench_head.txt"
    cat "$OUT/bench_rows.txt"
fi
echo "RESULT: $([ $status -eq 0 ] && echo PASS || echo FAIL)  (logs in $OUT)"
exit $status
