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
check 2 bad_ids.h5 '1000000'
check 2 bad_tokens.h5 '1000000'
check 1 weight_changed.h5 'first divergence: L1\.mlp\.up '
check 2 nan_probe.h5 "probes/L0\.attn\.q holds NaN at flat index 0 \(a golden must be finite\)"
# with the tolerance file's bounds (no --tol) the noise floor applies: a changed weight moves the
# double-precision forward too, and the floor cap must keep that from excusing the stage
sh "$here/expect_exit.sh" -o 'first divergence: L1\.mlp\.up ' 1 "$harness" compare --stage ref \
    --golden "$dir/weight_changed.h5" || fail=1
exit "$fail"
