#!/bin/sh
# expect_exit.sh [-o ERE]... CODE CMD [ARG]...: passes iff CMD exits with CODE and its stdout+stderr match
# every extended regular expression given with -o. (meson's should_fail cannot tell exit 1 from exit 2.)
set -u
pats=""
while [ "$#" -gt 0 ] && [ "$1" = "-o" ]; do
    pats="$pats
$2"
    shift 2
done
if [ "$#" -lt 2 ]; then
    echo "usage: expect_exit.sh [-o ERE]... CODE CMD [ARG]..." >&2
    exit 2
fi
want=$1
shift
out=$(mktemp "${TMPDIR:-/tmp}/expect_exit.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
got=$?
cat "$out"
echo "--- $* -> exit $got (want $want)"
fail=0
if [ "$got" -ne "$want" ]; then
    echo "FAIL: exit code $got, expected $want" >&2
    fail=1
fi
printf '%s\n' "$pats" | while IFS= read -r p; do
    [ -z "$p" ] && continue
    if ! grep -Eq -- "$p" "$out"; then
        echo "FAIL: output does not match /$p/" >&2
        exit 1
    fi
done || fail=1
exit "$fail"
