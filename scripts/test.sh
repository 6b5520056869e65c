#!/usr/bin/env bash
# Sets up and runs every test: the main build (CUDA sources compiled with nvcc when present; GPU tests
# skip without a GPU) and an ASan+UBSan build. Ends with one "N passed, N failed, N skipped" line.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
# the real checkpoints the referenced goldens need (cached in ~/.cache/refchain); without them they skip
for w in smollm2 gemma3; do
    bash scripts/fetch-weights.sh "$w" || echo "test.sh: $w weights not fetched: its real-checkpoint tests will skip"
done
export PATH="$PATH:/usr/local/cuda/bin"
cuda=disabled
command -v nvcc >/dev/null 2>&1 && cuda=enabled
fail_setup=0
run_build() { # dir, meson options...
    local dir=$1; shift
    rm -rf "$dir"
    if ! meson setup "$dir" "$@" >"$dir.setup.log" 2>&1; then
        cat "$dir.setup.log"; echo "test.sh: meson setup $dir failed"; fail_setup=$((fail_setup + 1)); return
    fi
    if ! ninja -C "$dir" >"$dir.build.log" 2>&1; then
        tail -50 "$dir.build.log"; echo "test.sh: build $dir failed"; fail_setup=$((fail_setup + 1)); return
    fi
    meson test -C "$dir" --print-errorlogs --num-processes 2 || true
}
run_build build-test -Dcuda=$cuda -Dfaults=true
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_build build-asan -Dcuda=disabled -Dfaults=true -Db_sanitize=address,undefined -Db_lundef=false
# the fuzz targets (tests/fuzz), a bounded run each: clang's libFuzzer with ASan+UBSan, only the fuzz suite
rm -rf build-fuzz
if CC=clang meson setup build-fuzz -Dcuda=disabled -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
        >build-fuzz.setup.log 2>&1 && ninja -C build-fuzz tests/fuzz/fuzz_config tests/fuzz/fuzz_safetensors \
        tests/fuzz/fuzz_golden tests/fuzz/fuzz_gguf tests/fuzz/fuzz_tokenizer tests/fuzz/fuzz_gptq \
        >build-fuzz.build.log 2>&1; then
    meson test -C build-fuzz --suite fuzz --print-errorlogs --num-processes 2 -v 2>&1 | grep -E '^fuzz |^ *[0-9]+/[0-9]+ ' || true
else
    tail -50 build-fuzz.setup.log build-fuzz.build.log; echo "test.sh: fuzz build failed"; fail_setup=$((fail_setup + 1))
fi
pass=0 failn=$fail_setup skip=0
for log in build-test/meson-logs/testlog.json build-asan/meson-logs/testlog.json build-fuzz/meson-logs/testlog.json; do
    [ -f "$log" ] || continue
    pass=$((pass + $(grep -c '"result": "OK"' "$log" || true) + $(grep -c '"result": "EXPECTEDFAIL"' "$log" || true)))
    failn=$((failn + $(grep -cE '"result": "(FAIL|TIMEOUT|UNEXPECTEDPASS|ERROR)"' "$log" || true)))
    skip=$((skip + $(grep -c '"result": "SKIP"' "$log" || true)))
done
[ $((pass + failn + skip)) -gt 0 ] || failn=$((failn + 1))
echo "$pass passed, $failn failed, $skip skipped"
[ "$failn" -eq 0 ]
