#!/bin/sh
# config_tables.sh EXE EXPECTED MODE [ARGS...]: EXE MODE ARGS must exit 0 and print EXPECTED exactly.
# Regenerate: EXE MODE ARGS > EXPECTED
exe=$1 expected=$2
shift 2
out=$("$exe" "$@") || { printf '%s\n' "$out"; echo "FAIL: $exe $1 exited non-zero"; exit 1; }
if ! printf '%s\n' "$out" | diff -u "$expected" -; then
    echo "FAIL: $expected is stale; regenerate with: $exe $* > $expected"
    exit 1
fi
printf '%s\n' "$out"
