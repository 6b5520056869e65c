#!/bin/sh
# weights_ref.sh HARNESS GOLDEN FIXTURE_DIR: a golden's referenced weights file is refused, one line and
# exit 2, when it is absent, has another size, or another sha256; found through REFCHAIN_WEIGHTS_PATH it runs.
set -u
harness=$1
golden=$2
fixtures=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/weights_ref.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME="$dir/cache"
fail=0
check() { # want_code ERE: the last run
    bad=0
    [ "$rc" -eq "$1" ] || bad=1
    grep -Eq -- "$2" "$dir/out" || bad=1
    if [ "$1" -eq 2 ] && [ "$(wc -l <"$dir/out")" -ne 1 ]; then bad=1; fi
    if [ "$bad" -eq 1 ]; then
        echo "FAIL ($3): exit $rc, want $1 and /$2/:"; cat "$dir/out"; fail=1
    else
        echo "ok ($3): $(head -c 300 "$dir/out" | head -1)"
    fi
}
run() { REFCHAIN_WEIGHTS_PATH="$1" "$harness" compare --stage ref --golden "$golden" --probe 'L0.*' --no-greedy \
    >"$dir/out" 2>&1; rc=$?; }
run "$dir/none"
check 2 "weights file 'tiny_llama.gguf' .*not found in" "absent"
mkdir -p "$dir/short" "$dir/flip"
head -c 1000 "$fixtures/tiny_llama.gguf" >"$dir/short/tiny_llama.gguf"
run "$dir/none:$dir/short"
check 2 "has 1000 bytes, the golden expects" "other size"
cp "$fixtures/tiny_llama.gguf" "$dir/flip/tiny_llama.gguf"
printf 'X' | dd of="$dir/flip/tiny_llama.gguf" bs=1 seek=5000 conv=notrunc 2>/dev/null
run "$dir/flip"
check 2 "sha256 [0-9a-f]{64} differs from the golden's" "other sha256"
run "$dir/none:$fixtures"
check 0 "VERDICT tiny_gguf stage=ref: PASS" "found on the path"
exit $fail
