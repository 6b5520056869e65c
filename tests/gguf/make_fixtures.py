#!/usr/bin/env python3
"""Writes the committed GGUF fixtures of tests/gguf/ (run once; needs the gguf package, and torch,
transformers and accelerate for the HF side):

    python3 tests/gguf/make_fixtures.py

dequant.gguf: for each supported ggml type a [4, 64] tensor '<type>' (random data, quantized by
gguf.quants.quantize, with extreme rows: zeros, tiny values whose scale is an fp16 subnormal, large values)
and '<type>.expected', the F32 result of gguf.quants.dequantize on the stored bytes; the K-quants Q2_K, Q3_K, Q4_K, Q5_K and Q6_K,
which the gguf package cannot quantize, as [4, 256] tensors of random block bytes (every bit of the scales, mins
and codes exercised) with fp16 scales drawn as for real weights, one block's zero and one subnormal; the generator
and the gguf package's version in the keys 'refchain.generator' and 'refchain.gguf_version'.
tiny_llama.gguf: a 2-layer llama (tied embeddings, q/k permuted as llama.cpp's convert script does, mixed
F32/F16/Q8_0/Q4_0/Q4_1/BF16 tensors); tiny_llama_hf.gguf: what transformers loads from it, every tensor
fp32 under its HF name, and the HF config as the string 'hf.config_json'.
tiny_gemma3.gguf: a 6-layer gemma3 (five sliding layers and a full one, by HF's default pattern; norms stored as
llama.cpp's converter stores gemma's, 1 + w; a SentencePiece vocabulary; mixed F32/F16/Q8_0/Q5_0/Q4_0/Q4_1/BF16
tensors); tiny_gemma3_hf.gguf: what transformers loads from it, as for the llama.
"""
import importlib.metadata
import json
import os
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

HERE = os.path.dirname(os.path.abspath(__file__))
TYPES = [("f32", Q.F32), ("f16", Q.F16), ("bf16", Q.BF16), ("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("q4_1", Q.Q4_1),
         ("q5_0", Q.Q5_0), ("q5_1", Q.Q5_1)]
# block bytes, offsets of its fp16 scales
K_TYPES = [("q4_k", Q.Q4_K, 144, (0, 2)), ("q6_k", Q.Q6_K, 210, (208,)), ("q2_k", Q.Q2_K, 84, (80, 82)),
           ("q3_k", Q.Q3_K, 110, (108,)), ("q5_k", Q.Q5_K, 176, (0, 2))]


def sample(rng, rows=4, cols=64):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[1] = 0.0                                         # all-zero blocks (scale 0)
    x[2] *= np.float32(1e-6)                           # fp16-subnormal scales
    x[3, :32] *= np.float32(300.0)                     # large values
    x[3, 32:] = np.linspace(-2, 1, 32, dtype=np.float32)  # an asymmetric block
    return x


def add(w, name, data, qtype):
    raw = gguf.quants.quantize(data, qtype)
    w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)
    return raw


def k_blocks(rng, size, scale_at, n=4):
    """n random blocks of a K-quant: random bytes, each fp16 scale replaced by a plausible one (block 1's zero,
    block 2's an fp16 subnormal)."""
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for b in range(n):
        for at in scale_at:
            v = np.float16(0.0) if b == 1 else np.float16(3e-7) if b == 2 else np.float16(rng.uniform(1e-4, 2e-2))
            raw[b, at:at + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
    return raw


def dequant_fixture(path):
    rng = np.random.default_rng(11)
    w = gguf.GGUFWriter(path, "none")
    w.add_string("refchain.generator", "tests/gguf/make_fixtures.py")
    w.add_string("refchain.gguf_version", importlib.metadata.version("gguf"))
    for name, qtype in TYPES:
        raw = add(w, name, sample(rng), qtype)
        w.add_tensor(name + ".expected", gguf.quants.dequantize(raw, qtype).astype(np.float32))
    krng = np.random.default_rng(13)
    for name, qtype, size, scale_at in K_TYPES:
        raw = k_blocks(krng, size, scale_at)
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)
        w.add_tensor(name + ".expected", gguf.quants.dequantize(raw, qtype).astype(np.float32).reshape(4, 256))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def permute(w, n_head, n_head_kv):  # llama.cpp convert_hf_to_gguf.py LlamaModel.permute
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def writer(path, arch, L, H, I, NH, NKV):
    """A fixture's writer with the sizes every architecture records, in this order."""
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"tiny {arch} fixture")
    w.add_context_length(256)
    w.add_block_count(L)
    w.add_embedding_length(H)
    w.add_feed_forward_length(I)
    w.add_head_count(NH)
    w.add_head_count_kv(NKV)
    return w


def tiny_llama(path):
    rng = np.random.default_rng(12)
    V, H, I, L, NH, NKV = 66, 64, 96, 2, 4, 2
    D = H // NH
    w = writer(path, "llama", L, H, I, NH, NKV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(D)
    w.add_vocab_size(V)
    w.add_tokenizer_model("gpt2")
    toks = [bytes([0x21 + i]).decode() for i in range(64)] + ["TH", "HE"]  # '!'..'`', two merges
    w.add_token_list(toks)
    w.add_token_types([1] * V)
    w.add_token_merges(["T H", "H E"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)

    def r(*shape, scale=0.1):
        return (scale * rng.standard_normal(shape)).astype(np.float32)
    add(w, "token_embd.weight", r(V, H), Q.Q8_0)
    for i in range(L):
        add(w, f"blk.{i}.attn_norm.weight", 1 + r(H), Q.F32)
        add(w, f"blk.{i}.attn_q.weight", permute(r(NH * D, H), NH, NH), Q.Q4_1)
        add(w, f"blk.{i}.attn_k.weight", permute(r(NKV * D, H), NH, NKV), Q.Q4_0)
        add(w, f"blk.{i}.attn_v.weight", r(NKV * D, H), Q.F16)
        add(w, f"blk.{i}.attn_output.weight", r(H, NH * D), Q.BF16)
        add(w, f"blk.{i}.ffn_norm.weight", 1 + r(H), Q.F32)
        add(w, f"blk.{i}.ffn_gate.weight", r(I, H), Q.Q4_1)
        add(w, f"blk.{i}.ffn_up.weight", r(I, H), Q.Q8_0)
        add(w, f"blk.{i}.ffn_down.weight", r(H, I), Q.Q4_0)
    add(w, "output_norm.weight", 1 + r(H), Q.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def qk_norm_stack(w, rng, sizes, qt, sandwich):
    """token_embd, the layers (qk_norm_layer; layer i's matrix types qt rotated by i, so every type takes every role
    somewhere in the stack), output_norm; returns the draw function for what follows. sizes: V, H, I, L, NH, NKV, D."""
    V, H, I, L, NH, NKV, D = sizes

    def r(*shape, scale=0.1):
        return (scale * rng.standard_normal(shape)).astype(np.float32)
    add(w, "token_embd.weight", r(V, H), Q.Q8_0)
    for i in range(L):
        qk_norm_layer(w, i, r, qt[i:] + qt[:i], H, I, NH, NKV, D, sandwich)
    add(w, "output_norm.weight", 1 + r(H), Q.F32)
    return r


def qk_norm_layer(w, i, r, t, H, I, NH, NKV, D, sandwich):
    """blk.i of a layer with q/k norms (gemma3, qwen3), its matrices typed t[0..5]; sandwich: gemma3's post-attention
    and post-MLP norms too. The draws from r come in the order the committed fixtures were made with."""
    add(w, f"blk.{i}.attn_norm.weight", 1 + r(H), Q.F32)
    add(w, f"blk.{i}.attn_q.weight", r(NH * D, H), t[0])
    add(w, f"blk.{i}.attn_k.weight", r(NKV * D, H), t[1])
    add(w, f"blk.{i}.attn_v.weight", r(NKV * D, H), t[2])
    add(w, f"blk.{i}.attn_q_norm.weight", 1 + r(D), Q.F32)
    add(w, f"blk.{i}.attn_k_norm.weight", 1 + r(D), Q.F32)
    add(w, f"blk.{i}.attn_output.weight", r(H, NH * D), t[3])
    if sandwich:
        add(w, f"blk.{i}.post_attention_norm.weight", 1 + r(H), Q.F32)
    add(w, f"blk.{i}.ffn_norm.weight", 1 + r(H), Q.F32)
    add(w, f"blk.{i}.ffn_gate.weight", r(I, H), t[4])
    add(w, f"blk.{i}.ffn_up.weight", r(I, H), t[5])
    add(w, f"blk.{i}.ffn_down.weight", r(H, I), t[0])
    if sandwich:
        add(w, f"blk.{i}.post_ffw_norm.weight", 1 + r(H), Q.F32)


def tiny_gemma3(path):
    rng = np.random.default_rng(13)
    V, H, I, L, NH, NKV, D = 70, 64, 96, 6, 4, 2, 16
    w = writer(path, "gemma3", L, H, I, NH, NKV)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(8)
    w.add_tokenizer_model("llama")
    toks = ["<pad>", "<eos>", "<bos>", "<unk>"] + [chr(0x61 + i) for i in range(26)] + \
        ["\u2581" + chr(0x61 + i) for i in range(26)] + [f"<0x{b:02X}>" for b in range(14)]
    w.add_token_list(toks)
    w.add_token_scores([-1000.0] * 4 + [-float(i) for i in range(V - 4)])
    w.add_token_types([3] * 4 + [1] * 52 + [6] * 14)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    qk_norm_stack(w, rng, (V, H, I, L, NH, NKV, D), [Q.Q5_0, Q.Q4_0, Q.Q4_1, Q.F16, Q.BF16, Q.Q8_0], sandwich=True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tiny_qwen3(path):
    """Qwen3's layer: llama's with q/k RMSNorms (per head), no q/k permutation (llama.cpp's converter does none);
    head_dim 128 (not hidden / heads), which HF's qwen3 GGUF mapping takes from Qwen3Config's default, not from
    attention.key_length; an untied output.weight; a byte-level BPE with the qwen2 pre-tokenizer."""
    rng = np.random.default_rng(14)
    V, H, I, L, NH, NKV, D = 66, 64, 96, 2, 2, 1, 128
    w = writer(path, "qwen3", L, H, I, NH, NKV)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_rope_dimension_count(D)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    toks = [bytes([0x21 + i]).decode() for i in range(64)] + ["TH", "HE"]
    w.add_token_list(toks)
    w.add_token_types([1] * V)
    w.add_token_merges(["T H", "H E"])
    w.add_eos_token_id(1)
    r = qk_norm_stack(w, rng, (V, H, I, L, NH, NKV, D), [Q.Q4_1, Q.Q4_0, Q.F16, Q.BF16, Q.Q8_0, Q.Q5_0],
                      sandwich=False)
    add(w, "output.weight", r(V, H), Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def hf_expected(src, path):
    import torch
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(os.path.dirname(src), gguf_file=os.path.basename(src),
                                             dtype=torch.float32)
    w = gguf.GGUFWriter(path, "none")
    cfg = json.loads(m.config.to_json_string(use_diff=False))
    cfg["_name_or_path"] = ""  # where this machine keeps the file: not part of the fixture
    w.add_string("hf.config_json", json.dumps(cfg, indent=2, sort_keys=True))
    for name, t in m.state_dict().items():
        if name == "lm_head.weight" and m.config.tie_word_embeddings:
            continue
        w.add_tensor(name, t.detach().numpy().astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    dequant_fixture(os.path.join(HERE, "dequant.gguf"))
    tiny = os.path.join(HERE, "tiny_llama.gguf")
    tiny_llama(tiny)
    hf_expected(tiny, os.path.join(HERE, "tiny_llama_hf.gguf"))
    g3 = os.path.join(HERE, "tiny_gemma3.gguf")
    tiny_gemma3(g3)
    hf_expected(g3, os.path.join(HERE, "tiny_gemma3_hf.gguf"))
    q3 = os.path.join(HERE, "tiny_qwen3.gguf")
    tiny_qwen3(q3)
    hf_expected(q3, os.path.join(HERE, "tiny_qwen3_hf.gguf"))
    for f in ("dequant.gguf", "tiny_llama.gguf", "tiny_llama_hf.gguf", "tiny_gemma3.gguf", "tiny_gemma3_hf.gguf",
              "tiny_qwen3.gguf", "tiny_qwen3_hf.gguf"):
        print(f, os.path.getsize(os.path.join(HERE, f)), "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
