#!/bin/sh
# quality_real.sh HARNESS TEXT: harness quality, ref against itself, on the real SmolLM2 GGUF over the first 48
# tokens of TEXT: ΔNLL and KL exactly 0, top-1 100%. Skips (exit 77) when the GGUF is not on the weights search
# path ($REFCHAIN_WEIGHTS_PATH, then ~/.cache/refchain; scripts/fetch-weights.sh puts it there).
set -u
harness=$1
text=$2
name=SmolLM2-135M-Instruct.Q4_1.gguf
model=
IFS=:
for d in ${REFCHAIN_WEIGHTS_PATH:-} "${XDG_CACHE_HOME:-$HOME/.cache}/refchain"; do
    if [ -n "$d" ] && [ -f "$d/$name" ]; then
        model=$d/$name
        break
    fi
done
unset IFS
if [ -z "$model" ]; then
    echo "SKIP: $name is not fetched (bash scripts/fetch-weights.sh)"
    exit 77
fi
out=$(mktemp "${TMPDIR:-/tmp}/quality_real.XXXXXX") || exit 2
trap 'rm -f "$out"' EXIT
"$harness" quality --stage ref --against ref --model "$model" --text "$text" --max-tokens 48 >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] && grep -q 'scoring the first 48' "$out" && grep -q 'tokens scored  *47$' "$out" &&
    grep -Eq 'NLL \(stage - ref\) +\+0\.000000e\+00$' "$out" &&
    grep -Eq 'mean 0\.000000e\+00  max 0\.000000e\+00' "$out" && grep -q 'top-1 agreement  *100\.00% (47/47)' "$out"
