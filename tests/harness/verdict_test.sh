#!/bin/sh
# verdict_test.sh HARNESS GOLDEN_EDIT CORRUPT_GOLDEN GOLDEN_DIR: one check per verdict class of `harness compare`
# and `chain`: pass, precision (over --tol within fp32's reach: exit 1, no link blamed), link (exit 1, blamed),
# bad input (exit 2, one line), with HF and with the exact forward as the reference.
set -u
harness=$1 edit=$2 corrupt=$3 gdir=$4
here=$(dirname "$0")
dir=$(mktemp -d "${TMPDIR:-/tmp}/verdict_test.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
fail=0
expect() { # CODE ERE ARGS...
    code=$1 re=$2
    shift 2
    sh "$here/../expect_exit.sh" -o "$re" "$code" "$harness" "$@" || fail=1
}
llama="$gdir/llama.h5" q35="$gdir/qwen3_5.h5"
# pass, and precision: ref is within 1.1x of HF's own distance from the exact answer, which is above 1e-6
expect 0 'VERDICT llama stage=ref: PASS' compare --golden "$llama" --quiet
expect 1 "FAIL \(bound below the reference's fp32 precision: HF itself is 1\.01e-06 from the exact answer at L1\.mlp\.act.*tightest meetable bound on this golden 1\.1e-06\)" \
    compare --golden "$llama" --tol 1e-6 --quiet
expect 0 'tightest bound: this stage passes --tol 1\.1e-06 .*no fp32 stage can be held below it' \
    compare --golden "$llama"
expect 1 'CHAIN llama: FAIL, no broken link \(ref ~ HF within its precision' chain --golden "$llama" --tol 1e-6 --quiet
# against the exact answer: llama reaches 1e-6; qwen3_5's deep delta-net stack cannot, and says so with numbers
expect 0 'VERDICT llama stage=ref: PASS - 38 probes within bounds of the exact answer' \
    compare --golden "$llama" --tol 1e-6 --against-exact --quiet
expect 1 'FAIL \(bound below fp32 precision even against the exact answer: HF.s own fp32 is 1\.49e-05 off at final_norm' \
    compare --golden "$q35" --tol 1e-6 --against-exact --quiet
expect 0 'reference: the exact \(double\) forward .*\(54 of 54 rows' compare --golden "$llama" --against-exact
# a link: without the floor as evidence, and a changed weight (its floor is over the cap) even with --tol
expect 1 'VERDICT llama stage=ref: FAIL \(architecture link\)' compare --golden "$llama" --tol 1e-12 --no-floor --quiet
"$corrupt" "$llama" "$dir" >/dev/null || exit 2
expect 1 'FAIL \(architecture link\).*first: L1\.mlp\.up ' compare --golden "$dir/weight_changed.h5" --tol 1e-6 --quiet
expect 1 'FAIL \(architecture link\).*first: L1\.mlp\.up ' \
    compare --golden "$dir/weight_changed.h5" --tol 1e-6 --against-exact --quiet
expect 1 'CHAIN llama: FAIL at the architecture link' chain --golden "$dir/weight_changed.h5" --tol 1e-6 --quiet
if "$harness" --version | grep -q 'faults: on'; then # a real bug under a tight --tol is still a link
    expect 1 'FAIL at the architecture link.*L0\.attn\.q ' \
        chain --golden "$llama" --fault weight_transposed --tol 1e-6 --quiet
    expect 1 'FAIL at the architecture link.*L0\.attn\.q ' \
        chain --golden "$llama" --fault weight_transposed --tol 1e-6 --against-exact --quiet
fi
# bad input: nothing to compare, or a probe no stage produces
for p in 'L99.*' '' '['; do
    expect 2 'nothing to compare' compare --golden "$llama" --probe "$p"
done
expect 2 'nothing to compare' compare --golden "$llama" --probe 'greedy.*' --no-greedy
"$edit" "$llama" "$dir/bogus.h5" rename L0.mlp.act L0.mlp.bogus || exit 2
expect 2 "probe_order names 'L0\.mlp\.bogus', which no stage produces" compare --golden "$dir/bogus.h5"
expect 2 "probe_order names 'L0\.mlp\.bogus'" chain --golden "$dir/bogus.h5" --quiet
"$edit" "$llama" "$dir/empty.h5" empty || exit 2
expect 2 'nothing to compare|probe_order|greedy' compare --golden "$dir/empty.h5"
exit "$fail"
