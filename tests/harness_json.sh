#!/bin/sh
# harness_json.sh HARNESS JSON_CHECK GOLDEN: `compare --json OUT` writes valid JSON (checked by JSON_CHECK)
# whose exit_code matches the process's, replaces OUT atomically and leaves no temp file, also on failure.
set -u
harness=$1 check=$2 golden=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/harness_json.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
fail=0
expect() { # WHAT WANT GOT
    if [ "$2" != "$3" ]; then
        echo "FAIL: $1: got '$3', want '$2'" >&2
        fail=1
    fi
}
listing() { (cd "$dir" && ls -A | tr '\n' ' '); }

"$harness" compare --stage ref --golden "$golden" --tol 1e-5 --quiet --json "$dir/out.json"
expect "pass exit code" 0 $?
expect "files after a pass" "out.json " "$(listing)"
"$check" "$dir/out.json" 0 || fail=1

"$harness" compare --stage ref --golden "$golden" --tol 1e-12 --quiet --json "$dir/out.json"
expect "bound exit code" 1 $?
expect "files after a failure" "out.json " "$(listing)"
"$check" "$dir/out.json" 1 || fail=1

"$harness" compare --stage ref --golden "$golden" --tol 1e-5 --quiet --json "$dir/no/such/dir/out.json"
expect "unwritable --json exit code" 2 $?
expect "files after an unwritable --json" "out.json " "$(listing)"

"$harness" compare --stage ref --golden "$dir/absent.h5" --tol 1e-5 --quiet --json "$dir/err.json"
expect "missing golden exit code" 2 $?
if [ -e "$dir/err.json" ]; then
    "$check" "$dir/err.json" 2 || fail=1
fi
expect "files after an error" "" "$(listing | sed 's/out.json //; s/err.json //')"
exit "$fail"
