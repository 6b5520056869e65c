#!/bin/sh
# gptq_cli.sh EXPECT_EXIT HARNESS WEIGHTS FIXTURES: HF GPTQ folders built from golden/llama_int4_g32.safetensors (an
# AutoGPTQ v1, group 32, asymmetric checkpoint) and the config fixtures here, run by `harness compare --stage ref
# --against ref --model DIR`: the checkpoint as it is passes (its scheme in config.json, or in quantize_config.json
# beside a plain config.json); each unsupported option (act-order by desc_act or by a g_idx out of order, bits other
# than 4/8, a group size that does not divide a row) or a layout the config contradicts is refused by name, exit 2.
# Fixtures: config.json is golden/llama_int4_g32.h5's config_json; config_plain.json the same without its
# quantization_config, which quantize_config.json holds.
set -u
ee=$1 h=$2 w=$3 fx=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gptq_cli.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
fail=0
weights=$w
run() { # name code ERE config sed-expression [quantize_config sed-expression]
    d="$tmp/$1"
    mkdir "$d" && ln -s "$weights" "$d/model.safetensors" && sed "$5" "$fx/$4" > "$d/config.json" || exit 2
    [ $# -ge 6 ] && sed "$6" "$fx/quantize_config.json" > "$d/quantize_config.json"
    echo "=== $1"
    sh "$ee" -o "$3" "$2" "$h" compare --stage ref --against ref --model "$d" --prompt "1 2 3" --steps 2 || fail=1
}
run as_is 0 'stage=ref: PASS' config.json 's/x/x/'
run quantize_config_json 0 'stage=ref: PASS' config_plain.json 's/x/x/' 's/x/x/'
run desc_act 2 'quantization_config.desc_act \(act-order\) true is not supported' config.json 's/"desc_act": false/"desc_act": true/'
run bits_3 2 'quantization_config.bits 3 is not supported' config.json 's/"bits": 4/"bits": 3/'
run bits_8_asym 2 'asymmetric int8' config.json 's/"bits": 4/"bits": 8/'
run group_48 2 'group_size 48 does not divide the 128 input columns of .model.layers.0.mlp.down_proj.weight.' config.json 's/"group_size": 32/"group_size": 48/'
run group_64 2 "down_proj.qzeros' has shape \[4, 8\], the layout implies \[2, 8\]" config.json 's/"group_size": 32/"group_size": 64/'
run sym_true 2 'is symmetric \(sym true\) but row' config.json 's/"sym": false/"sym": true/'
run format_marlin 2 'checkpoint_format "marlin" is not supported' config.json 's/"checkpoint_format": "gptq"/"checkpoint_format": "marlin"/'
run awq 2 'quantization_config.quant_method. = "awq": not implemented' config.json 's/"quant_method": "gptq"/"quant_method": "awq"/'
run no_config 2 "the checkpoint has .model.layers.0.self_attn.q_proj.qweight. \\(a GPTQ checkpoint without its quantization_config" config_plain.json 's/x/x/'
run bits_2 2 'quantization_config.bits 2 is not supported' config.json 's/"bits": 4/"bits": 2/'
run bits_16 2 'quantization_config.bits 16 is not supported' config.json 's/"bits": 4/"bits": 16/'
run group_100 2 'group_size 100 does not divide the 128 input columns' config.json 's/"group_size": 32/"group_size": 100/'
# act-order with desc_act false: the checkpoint's own column order (a g_idx that is not k / g) is what counts. A copy
# of the weights with q_proj's g_idx[3] (in group 0) set to 1; the offset from the safetensors header (u64 length, JSON)
hlen=$(od -An -tu8 -N8 "$w" | tr -d ' ')
off=$(dd if="$w" bs=1 skip=8 count="$hlen" 2>/dev/null | tr -d ' ' |
      sed -n 's/.*"model\.layers\.0\.self_attn\.q_proj\.g_idx":{[^}]*"data_offsets":\[\([0-9]*\),.*/\1/p')
[ -n "$hlen" ] && [ -n "$off" ] || { echo "FAIL: cannot find q_proj.g_idx in $w"; exit 1; }
cp "$w" "$tmp/act_order.safetensors" &&
    printf '\001\000\000\000' | dd of="$tmp/act_order.safetensors" bs=1 seek=$((8 + hlen + off + 12)) conv=notrunc \
        2>/dev/null || exit 2
weights=$tmp/act_order.safetensors
run g_idx_act_order 2 "q_proj.g_idx'\\[3\\] = 1, not 0: act-order \\(desc_act\\) column order is not supported" config.json 's/x/x/'
exit $fail
