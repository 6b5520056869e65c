#!/bin/sh
# gptq_cli.sh EXPECT_EXIT HARNESS WEIGHTS FIXTURES: HF GPTQ folders built from golden/llama_int4_g32.safetensors (an
# AutoGPTQ v1, group 32, asymmetric checkpoint) and the config fixtures here, run by `harness compare --stage ref
# --against ref --model DIR`: the checkpoint as it is passes (its scheme in config.json, or in quantize_config.json
# beside a plain config.json); each unsupported option or a layout the config contradicts is refused by name, exit 2.
# Fixtures: config.json is golden/llama_int4_g32.h5's config_json; config_plain.json the same without its
# quantization_config, which quantize_config.json holds.
set -u
ee=$1 h=$2 w=$3 fx=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gptq_cli.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
fail=0
run() { # name code ERE config sed-expression [quantize_config sed-expression]
    d="$tmp/$1"
    mkdir "$d" && ln -s "$w" "$d/model.safetensors" && sed "$5" "$fx/$4" > "$d/config.json" || exit 2
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
exit $fail
