#!/usr/bin/env bash
# Long fuzz runs: builds build-fuzz (clang, libFuzzer, ASan+UBSan) and runs each target for SECONDS (default
# 3600), keeping what it learns in fuzz-corpus/<target> and crashes in fuzz-artifacts/ (both gitignored).
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]      targets: config safetensors golden gguf tokenizer gptq
# A crash found becomes a regression test: add its input to tests/fuzz/corpus/<target>/ (CI replays it) and a
# named test of the refusal it should have been.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config safetensors golden gguf tokenizer gptq)
if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang meson setup build-fuzz -Dcuda=disabled -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false
fi
ninja -C build-fuzz
for t in "${targets[@]}"; do
    mkdir -p "fuzz-corpus/$t" fuzz-artifacts
    extra=()
    [ "$t" = golden ] && extra=(-fork=1 -ignore_timeouts=1 -ignore_ooms=1 -timeout=3 -malloc_limit_mb=2048)
    RC_FUZZ_CORPUS="fuzz-corpus/$t" RC_FUZZ_ARTIFACTS="$PWD/fuzz-artifacts" \
        sh tests/fuzz/run.sh "build-fuzz/tests/fuzz/fuzz_$t" "tests/fuzz/corpus/$t" -max_total_time="$secs" "${extra[@]}"
done
