#!/usr/bin/env bash
# Installs what refchain needs on a fresh Debian machine; does nothing for what is already there.
set -euo pipefail
pkgs=(gcc pkg-config meson ninja-build libhdf5-dev libcjson-dev libcmocka-dev libgsl-dev python3-pip libpcre2-dev libutf8proc-dev)
pkgs+=(libssl-dev clang libclang-rt-dev) # golden SHA-256 (libcrypto); the libFuzzer targets (tests/fuzz)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "setup: all packages present"
fi
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "setup: nvcc found: CUDA sources will be compiled"
else
    echo "setup: nvcc not found: CUDA stages will not be built (install the CUDA toolkit for them)"
fi
