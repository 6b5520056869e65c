#!/usr/bin/env bash
# GPU lane, step 1 (here, where Debian's registry answers): download the .debs the GPU machine lacks into .debs/.
# The GPU machine (Ubuntu 24.04, no registry) unpacks them with scripts/gpu-lane.sh; carry .debs with the run.
set -euo pipefail
cd "$(dirname "$0")/.."

# cmocka, GSL and cJSON with their runtime libraries; each needs nothing else beyond libc6.
# PCRE2 (the tokenizer's Unicode regexes) and utf8proc (its NFC): each -dev package's .so links to its library.
PKGS=(libcmocka0 libcmocka-dev libgsl27 libgslcblas0 libgsl-dev libcjson1 libcjson-dev libpcre2-8-0 libpcre2-dev
      libutf8proc2 libutf8proc-dev libssl-dev)
# libssl-dev: OpenSSL's headers for the goldens' SHA-256 (model/checksum.c); gpu-lane.sh unpacks it only where the
# machine lacks them and points its .so links at the machine's own libcrypto.so.3 / libssl.so.3.

mkdir -p .debs
rm -f .debs/*.deb .debs/SHA256SUMS
if ! (cd .debs && apt-get download "${PKGS[@]}"); then
    echo "gpu-lane-fetch: apt-get download failed; refreshing the package lists once" >&2
    apt-get update -qq
    (cd .debs && apt-get download "${PKGS[@]}")
fi
n=$(ls .debs/*.deb | wc -l)
if [ "$n" -ne "${#PKGS[@]}" ]; then
    echo "gpu-lane-fetch: expected ${#PKGS[@]} packages, got $n" >&2
    exit 1
fi
(cd .debs && sha256sum *.deb > SHA256SUMS)
echo "gpu-lane-fetch: $n packages in .debs ($(du -sh .debs | cut -f1)):"
ls -1 .debs/*.deb
