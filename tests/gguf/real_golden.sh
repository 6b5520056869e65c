#!/bin/sh
# real_golden.sh HARNESS GOLDEN [ARG]...: harness compare on a golden whose weights file is referenced by
# checksum. Skips (exit 77) only when the file is not on the weights search path (scripts/fetch-weights.sh
# puts it there); a checksum mismatch or any other failure fails.
set -u
harness=$1
golden=$2
shift 2
out=$(mktemp "${TMPDIR:-/tmp}/real_golden.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
start=$(date +%s)
"$harness" compare --golden "$golden" "$@" >"$out" 2>&1
rc=$?
cat "$out"
echo "--- $golden: exit $rc in $(( $(date +%s) - start )) s"
if [ "$rc" -eq 2 ] && grep -q "not found in \$REFCHAIN_WEIGHTS_PATH" "$out"; then
    echo "SKIP: the weights file is not fetched (bash scripts/fetch-weights.sh [smollm2|gemma3])"
    exit 77
fi
[ "$rc" -eq 0 ] && grep -q "VERDICT .*: PASS" "$out" && grep -q "tokens equal" "$out"
