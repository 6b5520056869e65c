#!/usr/bin/env bash
# The work tree a GPU call sends is capped at 64 MiB (tracked and untracked-not-ignored files plus what is carried);
# the tracked tree is over that (~71 MiB: mostly reports/<commit>.json, 1-3.5 MB each, and the two real-checkpoint
# goldens, which meson's test list names and so must travel). Around a device call, the large per-commit reports
# (which no GPU step reads) step out of the index and the tree, and come back after:
#   bash scripts/gpu-slim.sh out    # reports/*.json over 500 kB -> .slim/, `git rm --cached` (refuses if anything
#                                   # else is staged, so no commit can take the removal along by mistake)
#   ... device calls ...
#   bash scripts/gpu-slim.sh in     # back into reports/ and the index, as they were
#   bash scripts/gpu-slim.sh size   # bytes that would travel (tracked + untracked-not-ignored), .debs not counted
# Exit 0 on success, 1 when the state does not allow the step (said in one line), 2 on bad usage.
set -u
cd "$(dirname "$0")/.." || exit 2
size() {
    { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 -r stat -c %s -- 2>/dev/null |
        awk '{s += $1} END {printf "%d bytes (%.1f MiB) would travel, before what is carried\n", s, s / 1048576}'
}
case ${1:-} in
out)
    if [ -d .slim ] && [ -n "$(ls -A .slim 2>/dev/null)" ]; then
        echo "gpu-slim: .slim/ is not empty: run 'gpu-slim.sh in' first" >&2
        exit 1
    fi
    if ! git diff --cached --quiet; then
        echo "gpu-slim: the index has staged changes: commit or unstage them first" >&2
        exit 1
    fi
    mkdir -p .slim
    n=0
    for f in reports/*.json; do
        if [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 500000 ] && git ls-files --error-unmatch "$f" >/dev/null 2>&1; then
            git rm --cached -q -- "$f" && mv -- "$f" .slim/ && n=$((n + 1))
        fi
    done
    echo "gpu-slim: $n report(s) out of the tree; $(size)"
    ;;
in)
    n=0
    for f in .slim/*.json; do
        [ -f "$f" ] || continue
        b=reports/$(basename "$f")
        mv -- "$f" "$b" && git reset -q -- "$b" && n=$((n + 1))
    done
    rmdir .slim 2>/dev/null
    echo "gpu-slim: $n report(s) back; $(size)"
    ;;
size) size ;;
*)
    echo "usage: scripts/gpu-slim.sh out|in|size" >&2
    exit 2
    ;;
esac
