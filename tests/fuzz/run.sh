#!/bin/sh
# run.sh TARGET SEED_DIR [LIBFUZZER_ARG]...: a libFuzzer run of TARGET from the committed seeds. New inputs go
# to a temp folder (the seeds stay as committed; RC_FUZZ_CORPUS keeps them instead); a crash, leak or timeout
# fails with the input saved under $RC_FUZZ_ARTIFACTS (default: the temp folder, printed). Prints libFuzzer's
# last status line (execs, cov:, ft:) and its final stats.
set -u
exe=$1 seeds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/refchain-fuzz.XXXXXX") || exit 2
corpus=${RC_FUZZ_CORPUS:-$work/corpus}
art=${RC_FUZZ_ARTIFACTS:-$work/artifacts}
mkdir -p "$corpus" "$art"
# libhdf5 is not ours: its leaks on a failed H5Fopen, its memcpy overlaps and its tens-of-GB requests (answered
# with NULL, which it handles) are out of scope here (the
# checksum gate keeps such files away from it in production); everything else still fails the run
export LSAN_OPTIONS="suppressions=$here/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="allocator_may_return_null=1:suppressions=$here/asan.supp${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
"$exe" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$art/" "$@" \
    "$corpus" "$seeds" > "$work/log" 2>&1
rc=$?
echo "fuzz $(basename "$exe"): $(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$work/log" | tail -1)"
grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$work/log"
for f in "$art"/timeout-* "$art"/oom-*; do
    [ -e "$f" ] && echo "fuzz: libhdf5 hang or huge allocation (not a failure in fork mode): $f"
done
if [ "$rc" -ne 0 ]; then
    tail -60 "$work/log"
    echo "fuzz: $exe failed (exit $rc); the input is in $art" >&2
    exit 1
fi
[ -n "${RC_FUZZ_ARTIFACTS:-}" ] || rm -rf "$work"
