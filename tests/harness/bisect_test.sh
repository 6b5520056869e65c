#!/bin/sh
# bisect_test.sh HARNESS SOURCE_ROOT: copies the source tree into a scratch git repository under /tmp, makes
# 9 commits of which one (the 6th) drops ref's 1/sqrt(d) attention scale and one (the 7th) does not build,
# and checks that `harness bisect` skips the unbuildable commit, names exactly the 6th and the probe that
# broke (L0.attn.ctx), and cleans up its worktree. Needs git, meson and ninja (skips, exit 77, without them).
set -u
harness=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") src=$2
for tool in git meson ninja; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not found"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/refchain-bisect-test.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
repo=$tmp/repo
mkdir "$repo" || exit 2

# the tree as it is (committed or not), without build folders, reports and the large goldens
(cd "$src" && tar --exclude=./.git --exclude='./build*' --exclude=./reports --exclude='./golden/*.h5' \
    --exclude=./.debs --exclude=./.whl --exclude=./.gpu-prefix \
    --exclude='__pycache__' -cf - .) | (cd "$repo" && tar -xf -) || exit 2
cp "$src/golden/llama.h5" "$repo/golden/" || exit 2

cd "$repo" || exit 2
git init -q . && git config user.email bisect@test && git config user.name bisect-test &&
    git config commit.gpgsign false || exit 2
git add -A && git commit -qm "c1: baseline" || exit 2
good=$(git rev-parse HEAD)
bad_commit=
for i in 2 3 4 5 6 7 8 9; do
    if [ "$i" -eq 6 ]; then
        # the injected reference bug: ref_attention called with scale 1 instead of 1/sqrt(d)
        sed -i 's/ref_attention(\(.*\)d->attn_scale/ref_attention(\11.0f/' ref/forward.c
        if ! grep -q 'ref_attention(.*1\.0f' ref/forward.c; then
            echo "FAIL: could not inject the bug (ref_attention call with d->attn_scale not found in ref/forward.c)"
            exit 1
        fi
        git commit -qam "c$i: ref: simplify the attention call" || exit 2
        bad_commit=$(git rev-parse HEAD)
    elif [ "$i" -eq 7 ]; then # a commit that does not build: bisect must skip it (exit 125), not blame it
        echo '#error bisect test: broken build' >>model/err.c
        git commit -qam "c$i: broken build" || exit 2
    elif [ "$i" -eq 8 ]; then
        sed -i '/#error bisect test/d' model/err.c
        git commit -qam "c$i: fix the build" || exit 2
    elif [ $((i % 2)) -eq 0 ]; then
        printf '/* bisect test note %s */\n' "$i" >>model/err.c # a rebuild that changes nothing
        git commit -qam "c$i: comment in model/err.c" || exit 2
    else
        printf 'note %s\n' "$i" >>NOTES.txt
        git add NOTES.txt && git commit -qm "c$i: notes" || exit 2
    fi
done

out=$tmp/bisect.out
"$harness" bisect --good "$good" --bad HEAD --stage ref --golden golden/llama.h5 --repo "$repo" >"$out" 2>&1
code=$?
cat "$out"
fail=0
[ "$code" -eq 0 ] || { echo "FAIL: harness bisect exited $code, expected 0"; fail=1; }
grep -q "^FIRST BAD COMMIT: $bad_commit " "$out" || { echo "FAIL: the first bad commit is not $bad_commit"; fail=1; }
grep -Eq '^BROKEN PROBE at [0-9a-f]+: L0\.attn\.ctx ' "$out" || { echo "FAIL: the broken probe is not L0.attn.ctx"; fail=1; }
grep -q 'build failed: skip' "$out" || { echo "FAIL: the unbuildable commit was not skipped"; fail=1; }
[ "$(git worktree list | wc -l)" -eq 1 ] || { echo "FAIL: the scratch worktree was not removed"; git worktree list; fail=1; }
scratch=$(sed -n 's/^bisect: removed the scratch worktree \(.*\)\/wt$/\1/p' "$out")
[ -n "$scratch" ] && [ ! -e "$scratch" ] || { echo "FAIL: the scratch folder '$scratch' is still there"; fail=1; }
[ -z "$(git status --porcelain)" ] || { echo "FAIL: the repository was modified"; git status --short; fail=1; }
[ "$fail" -eq 0 ] && echo "ok: bisect found $bad_commit and L0.attn.ctx"
exit "$fail"
