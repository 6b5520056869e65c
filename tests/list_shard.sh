#!/usr/bin/env bash
# gpu-env.sh's list_shard, which splits the GPU lane's tests into calls (gpu-lane.sh RC_TEST_SHARD), on the forms of
# `meson test --list` it meets: meson 1.0's (this machine's) and 1.12's (the GPU machine's; a test in no suite has no
# "SUITES - " there). Session 42's first shard read only the first form and ran 0 tests on the GPU machine. Exit 0 if
# every case gives the expected names.
set -u
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=scripts/gpu-env.sh
source scripts/gpu-env.sh
fail=0
check() { # check WHAT I N EXPECTED (names joined by spaces), the list on stdin
    local got
    got=$(list_shard "$2" "$3" | tr '\n' ' ')
    if [ "$got" != "$4" ]; then
        echo "list_shard $2/$3 of $1: got '$got', want '$4'"
        fail=1
    fi
}
old='ninja: no work to do.
refchain:gpu+engine / engine.compare.llama.f32
refchain:engine / engine.bad_input
refchain:gpu+engine / engine.kernels.qgemv'
new='gpu+engine - refchain:engine.compare.llama.f32
refchain:engine.bad_input
gpu+engine - refchain:engine.kernels.qgemv'
for form in old new; do
    if [ $form = old ]; then list=$old; else list=$new; fi
    check "$form" 1 2 "engine.compare.llama.f32 engine.kernels.qgemv " <<<"$list"
    check "$form" 2 2 "engine.bad_input " <<<"$list"
    check "$form" 1 1 "engine.compare.llama.f32 engine.bad_input engine.kernels.qgemv " <<<"$list"
    check "$form" 3 3 "engine.kernels.qgemv " <<<"$list"
    check "$form" 2 4 "engine.bad_input " <<<"$list"
    check "$form" 4 4 "" <<<"$list"
done
check "nothing" 1 2 "" <<<"ninja: no work to do."
[ $fail = 0 ] && echo "list_shard: both list forms split as expected"
exit $fail
