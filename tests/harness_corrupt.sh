#!/bin/sh
# harness_corrupt.sh HARNESS CORRUPT_GOLDEN GOLDEN: damaged copies of a golden make `harness compare` exit 2
# (bad input) with a reason, changed numbers make it exit 1 at the right probe; never a crash.
set -u
harness=$1 mk=$2 golden=$3
here=$(dirname "$0")
dir=$(mktemp -d "${TMPDIR:-/tmp}/harness_corrupt.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
"$mk" "$golden" "$dir" || exit 2
fail=0
check() { # CODE FILE ERE
    sh "$here/expect_exit.sh" -o "$3" "$1" "$harness" compare --stage ref --golden "$dir/$2" --tol 1e-5 || fail=1
}
check 2 truncated.h5 'truncated|corrupt|HDF5'
check 2 superblock_only.h5 'truncated|corrupt|HDF5'
check 2 v2.h5 'format_version 2.*regenerate'
check 2 missing_weight.h5 "model\.layers\.0\.mlp\.up_proj\.weight' is missing"
check 2 shape.h5 "model\.layers\.0\.mlp\.up_proj\.weight' has shape \[128, 63\]"
check 2 extra.h5 "unexpected tensor 'model\.layers\.0\.self_attn\.rotary_emb\.inv_freq'"
check 2 vocab.h5 'greedy/logits'
check 2 probe_shape.h5 "golden probe 'L0\.attn\.q' has shape \[24, 3, 16\], its config and prompt imply \[24, 4, 16\]"
check 2 bad_ids.h5 '1000000'
check 2 bad_tokens.h5 '1000000'
check 1 weight_changed.h5 'first divergence: L1\.mlp\.up '
check 2 nan_probe.h5 "probes/L0\.attn\.q holds NaN at flat index 0 \(a golden must be finite\)"
# hostile files (issue 13): one line naming the problem, exit 2; never a crash, never a pass
check 2 seed_list.h5 "attribute 'seed' holds 256 values, expected one"
check 2 format_version_pair.h5 "attribute 'format_version' holds 2 values, expected one"
check 2 created_list.h5 "attribute 'created' holds 1000 values, expected one"
check 2 torch_version_list.h5 "attribute 'torch_version' holds 500 values, expected one"
check 2 huge_ids.h5 "dataset 'input_ids' declares 17179869184 bytes, more than the file"
check 2 gzip_probe.h5 "dataset 'emb' declares 4194304 elements, the config implies at most"
check 2 null_probe.h5 "dataset 'L0\.attn\.q' has no data \(null dataspace\)"
check 2 nan_weight.h5 "weights/model\.layers\.0\.mlp\.up_proj\.weight holds NaN"
check 2 nan_logits.h5 "greedy/logits holds NaN"
check 2 inf_probe.h5 "probes/logits holds an infinity"
check 2 token_300.h5 "greedy/tokens\[0\] = 300 is outside the vocabulary \[0, 256\)"
# a bundled golden whose bytes changed is refused before HDF5 reads it; an unlisted one gets a warning
cp "$golden" "$dir/flipped.h5"
(cd "$(dirname "$golden")" && grep " $(basename "$golden")\$" SHA256SUMS) | awk '{print $1 "  flipped.h5"}' \
    > "$dir/SHA256SUMS"
printf '\001' | dd of="$dir/flipped.h5" bs=1 seek=4000 conv=notrunc 2>/dev/null
check 2 flipped.h5 "flipped\.h5: SHA-256 [0-9a-f]{64}, .*SHA256SUMS lists [0-9a-f]{64} \(corrupt or changed file; not opened\)"
cp "$golden" "$dir/unlisted.h5"
sh "$here/expect_exit.sh" -o "^warning: .*unlisted\.h5: no SHA256SUMS entry" -o "PASS" 0 "$harness" compare --stage ref \
    --golden "$dir/unlisted.h5" --tol 1e-5 --quiet || fail=1
# a FIFO as the golden is refused at once, not waited on
if mkfifo "$dir/fifo.h5"; then
    sh "$here/expect_exit.sh" -o "fifo\.h5: golden is not a regular file" 2 timeout 20 "$harness" compare --stage ref \
        --golden "$dir/fifo.h5" || fail=1
fi
# chain: bad input is exit 2 with its line on stderr
if "$harness" chain --golden "$dir/nan_logits.h5" --quiet 2>"$dir/err" >/dev/null; then fail=1; fi
grep -q "greedy/logits holds NaN" "$dir/err" || { echo "FAIL: chain's error is not on stderr" >&2; fail=1; }
# with the tolerance file's bounds (no --tol) the noise floor applies: a changed weight moves the
# double-precision forward too, and the floor cap must keep that from excusing the stage
sh "$here/expect_exit.sh" -o 'first divergence: L1\.mlp\.up ' 1 "$harness" compare --stage ref \
    --golden "$dir/weight_changed.h5" || fail=1
exit "$fail"
