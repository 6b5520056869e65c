#!/bin/sh
# gguf_chat.sh TOKENIZE CHAT_JSON: the SmolLM2 GGUF's own tokenizer (tokenizer.ggml.* metadata, through
# rc_text_load_gguf) encodes the chat render of tests/tokenizer/chat.json into HF's ids. Skips (77) when the
# GGUF is not in the weights cache (scripts/fetch-weights.sh puts it there).
set -u
gguf=${XDG_CACHE_HOME:-$HOME/.cache}/refchain/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$gguf" ] || { echo "SKIP: $gguf not fetched (bash scripts/fetch-weights.sh)"; exit 77; }
text=$(python3 -c 'import json,sys; r=[r for r in json.load(open(sys.argv[1]))["renders"] if r["template"]=="smollm2"][0]; print(r["text"] + "x", end="")' "$2") || exit 2
text=${text%x} # the render ends in a newline, which $(...) would strip
want=$(python3 -c 'import json,sys; r=[r for r in json.load(open(sys.argv[1]))["renders"] if r["template"]=="smollm2"][0]; print(" ".join(map(str, r["smollm2_ids"])))' "$2") || exit 2
got=$("$1" "$gguf" "$text") || { echo "FAIL: tokenize exited $?"; exit 1; }
echo "HF:  $want"
echo "C:   $got"
[ "$got" = "$want" ] && echo "PASS: GGUF tokenizer ids = HF ids" && exit 0
echo "FAIL: ids differ"; exit 1
