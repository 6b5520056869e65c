#!/bin/sh
# quantize_cli.sh QUANTIZE GOLDEN CALIB_IDS: the quantize command end to end on a tiny golden: RTN and GPTQ
# folders written (safetensors + config with quantization_config), two GPTQ runs byte-identical, an existing
# output and a group that does not divide a row refused with exit 2 and nothing (no temporary folder) left.
set -u
q=$1
golden=$2
calib=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/quantize_cli.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$q" --model "$golden" --scheme int8 --method rtn --out "$tmp/int8" || fail "int8 rtn exit $?"
"$q" --model "$golden" --scheme int4-g32 --method gptq --calib "$calib" --out "$tmp/a" 2>"$tmp/log" ||
    fail "gptq exit $?"
grep -q 'layer 2/2' "$tmp/log" || fail "no progress lines"
"$q" --model "$golden" --scheme int4-g32 --method gptq --calib "$calib" --out "$tmp/b" 2>/dev/null ||
    fail "second gptq run"
for d in int8 a; do
    [ -s "$tmp/$d/model.safetensors" ] && [ -s "$tmp/$d/config.json" ] || fail "$d: files missing"
done
grep -q '"quant_method":	"gptq"' "$tmp/a/config.json" || fail "no quantization_config"
grep -q '"group_size":	-1' "$tmp/int8/config.json" || fail "int8 is not per row"
grep -q 'q_proj.qweight' "$tmp/a/model.safetensors" || fail "no GPTQ tensors"
grep -q "\"method\":.*\"gptq\"" "$tmp/a/quantize.json" || fail "no quantize.json provenance"
cmp "$tmp/a/model.safetensors" "$tmp/b/model.safetensors" || fail "two GPTQ runs differ"
# --lm-head: lm_head in the GPTQ layout too, the config's flag set (the folder is loaded back before it is renamed)
"$q" --model "$golden" --scheme int4-g32 --method gptq --calib "$calib" --lm-head --out "$tmp/lm" 2>"$tmp/log" ||
    fail "gptq --lm-head exit $?: $(tail -n 1 "$tmp/log")"
grep -q 'quantize: lm_head:' "$tmp/log" || fail "no lm_head progress line"
grep -q 'lm_head.qweight' "$tmp/lm/model.safetensors" || fail "no quantized lm_head"
grep -q '"lm_head":	true' "$tmp/lm/config.json" || fail "the config's lm_head flag is not set"
grep -q '"lm_head":	false' "$tmp/a/config.json" || fail "lm_head flag set without --lm-head"
grep -q 'lm_head.qweight' "$tmp/a/model.safetensors" && fail "lm_head quantized without --lm-head"
"$q" --model "$golden" --scheme int4-g32 --method rtn --out "$tmp/a" >"$tmp/log" 2>&1
[ $? -eq 2 ] && grep -q 'already exists' "$tmp/log" || fail "an existing output was not refused"
"$q" --model "$golden" --scheme int4-g128 --method rtn --out "$tmp/c" >"$tmp/log" 2>&1
[ $? -eq 2 ] && grep -q 'q_proj.weight: 64 input columns are not a whole number of groups of 128' "$tmp/log" ||
    fail "a group that does not divide the row was not refused: $(cat "$tmp/log")"
[ "$(wc -l <"$tmp/log")" -le 2 ] || fail "more than the header and one error line"
ls "$tmp" | grep -q 'tmp\|^c$' && fail "a partial output was left: $(ls "$tmp")"
echo "PASS"
