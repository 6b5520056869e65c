"""Writes the fuzz seed corpus (tests/fuzz/corpus/): config.json texts from the bundled goldens, a small
safetensors file, a tiny golden (vocab 8, hidden 4, one layer), GGUF models with their tokenizers in their
metadata (gguf/tiny.gguf: a llama with a BPE tokenizer; gguf/gemma3.gguf: a one-layer gemma3 with K-quant rows and
a SentencePiece vocabulary; gguf/qwen3.gguf: a one-layer qwen3; gguf/dequant.gguf is tests/gguf's fixture), three
tokenizer.json files (tokenizer/: copies of tests/tokenizer's tiny ones) and a GPTQ safetensors file of two
16 x 64 matrices (gptq/: a leading scheme byte, then the file). Developer-only (needs h5py, numpy, safetensors,
gguf); the seeds are committed, CI only reads them.  python3 tests/fuzz/make_seeds.py"""
import json, os, glob, shutil
import numpy as np, h5py
from safetensors.numpy import save_file

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
out = os.path.join(here, "corpus")
for d in ("config", "safetensors", "golden", "gguf", "tokenizer", "gptq"):
    os.makedirs(os.path.join(out, d), exist_ok=True)
for g in sorted(glob.glob(os.path.join(root, "golden", "*.h5"))):
    with h5py.File(g) as f:
        with open(os.path.join(out, "config", os.path.basename(g)[:-3] + ".json"), "w") as o:
            o.write(f.attrs["config_json"])
rng = np.random.default_rng(0)
cfg = {"model_type": "llama", "vocab_size": 8, "hidden_size": 4, "intermediate_size": 4, "num_hidden_layers": 1,
       "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 4, "rms_norm_eps": 1e-6,
       "rope_theta": 10000.0, "max_position_embeddings": 16, "tie_word_embeddings": True, "hidden_act": "silu"}
w = {"model.embed_tokens.weight": (8, 4), "model.norm.weight": (4,)}
for n, s in [("input_layernorm.weight", (4,)), ("post_attention_layernorm.weight", (4,)),
             ("self_attn.q_proj.weight", (4, 4)), ("self_attn.k_proj.weight", (4, 4)),
             ("self_attn.v_proj.weight", (4, 4)), ("self_attn.o_proj.weight", (4, 4)),
             ("mlp.gate_proj.weight", (4, 4)), ("mlp.up_proj.weight", (4, 4)), ("mlp.down_proj.weight", (4, 4))]:
    w["model.layers.0." + n] = s
w = {k: (0.1 * rng.standard_normal(s)).astype(np.float32) for k, s in w.items()}
save_file({k: w[k] for k in list(w)[:3]}, os.path.join(out, "safetensors", "f32.safetensors"))
save_file({"a": np.arange(6, dtype=np.float16).reshape(2, 3), "b": np.ones(2, dtype=np.float32)},
          os.path.join(out, "safetensors", "mixed.safetensors"))
T, N = 3, 2
with h5py.File(os.path.join(out, "golden", "tiny.h5"), "w") as f:
    for k, v in {"format": "refchain-golden", "generator": "tests/fuzz/make_seeds.py", "preset": "tiny",
                 "model_type": "llama", "regenerate": "python3 tests/fuzz/make_seeds.py",
                 "config_json": json.dumps(cfg), "probe_order": "emb\nlogits"}.items():
        f.attrs[k] = v
    f.attrs["format_version"] = np.int64(1)
    f.attrs["seed"] = np.int64(0)
    f.create_dataset("input_ids", data=np.array([1, 2, 3], dtype=np.int64))
    for k, v in w.items():
        f.create_dataset("weights/" + k, data=v)
    f.create_dataset("probes/emb", data=rng.standard_normal((T, 4)).astype(np.float32))
    f.create_dataset("probes/logits", data=rng.standard_normal((T, 8)).astype(np.float32))
    f.create_dataset("greedy/tokens", data=np.array([4, 5], dtype=np.int64))
    f.create_dataset("greedy/logits", data=rng.standard_normal((N, 8)).astype(np.float32))

# the GGUF reader's seeds: tests/gguf's dequantization fixture, and a one-layer llama (hidden 32, mixed tensor
# types) whose metadata holds a gpt2-style BPE tokenizer (66 tokens, two merges, bos/eos, a chat template)
shutil.copy(os.path.join(root, "tests", "gguf", "dequant.gguf"), os.path.join(out, "gguf", "dequant.gguf"))
import gguf
from gguf import GGMLQuantizationType as Q


def seed_writer(name, arch, H, I, NH, NKV):
    """A one-layer seed's writer with the sizes every architecture records (context 64)."""
    w = gguf.GGUFWriter(os.path.join(out, "gguf", name), arch)
    w.add_context_length(64)
    w.add_block_count(1)
    w.add_embedding_length(H)
    w.add_feed_forward_length(I)
    w.add_head_count(NH)
    w.add_head_count_kv(NKV)
    return w


# K-quants: block bytes, offsets of the block's fp16 scales
K_TYPES = {Q.Q2_K: (84, (80, 82)), Q.Q3_K: (110, (108,)), Q.Q4_K: (144, (0, 2)), Q.Q5_K: (176, (0, 2)),
           Q.Q6_K: (210, (208,))}


def seed_tensors(w, rng, specs, norm_one):
    """Adds each (name, shape, type) in order, then writes and closes w: a K-quant as random block bytes with fp16
    scales 0.01 (the gguf package cannot quantize them), any other type quantized from 0.1 N(0, 1) draws (+ 1 for
    1-d tensors where norm_one: norm weights near 1)."""
    for name, shape, qt in specs:
        if qt in K_TYPES:
            size, scale_at = K_TYPES[qt]
            raw = rng.integers(0, 256, size=(shape[0], shape[1] // 256 * size), dtype=np.uint8)
            for at in scale_at:
                raw[:, at:at + 2] = np.frombuffer(np.full(shape[0], 0.01, dtype=np.float16).tobytes(),
                                                  np.uint8).reshape(shape[0], 2)
        else:
            raw = gguf.quants.quantize((0.1 * rng.standard_normal(shape) + (norm_one and len(shape) == 1))
                                       .astype(np.float32), qt)
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


V, H, I, NH, NKV = 66, 32, 32, 2, 1
rng_g = np.random.default_rng(1)
g = seed_writer("tiny.gguf", "llama", H, I, NH, NKV)
g.add_rope_freq_base(10000.0)
g.add_layer_norm_rms_eps(1e-5)
g.add_rope_dimension_count(H // NH)
g.add_vocab_size(V)
g.add_tokenizer_model("gpt2")
g.add_token_list([bytes([0x21 + i]).decode() for i in range(64)] + ["TH", "HE"])
g.add_token_types([1] * V)
g.add_token_merges(["T H", "H E"])
g.add_bos_token_id(0)
g.add_eos_token_id(1)
g.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
seed_tensors(g, rng_g, [("token_embd.weight", (V, H), Q.Q8_0), ("blk.0.attn_norm.weight", (H,), Q.F32),
                       ("blk.0.attn_q.weight", (H, H), Q.Q4_1), ("blk.0.attn_k.weight", (H // NH, H), Q.Q4_0),
                       ("blk.0.attn_v.weight", (H // NH, H), Q.F16), ("blk.0.attn_output.weight", (H, H), Q.BF16),
                       ("blk.0.ffn_norm.weight", (H,), Q.F32), ("blk.0.ffn_gate.weight", (I, H), Q.Q4_1),
                       ("blk.0.ffn_up.weight", (I, H), Q.Q8_0), ("blk.0.ffn_down.weight", (H, I), Q.Q4_0),
                       ("output_norm.weight", (H,), Q.F32)], norm_one=False)
# and a one-layer gemma3 (hidden 256, so that rows of the K-quants fit: Q2_K .. Q6_K blocks of random bytes with
# plausible fp16 scales, as tests/gguf's fixture writes them; Q5_0, Q5_1) with a SentencePiece vocabulary: the
# gemma3 mapping, its (1 + w) norms, the dequantization of those types and the SentencePiece tokenizer reached from a
# loadable model
V3, H3, I3, NH3, D3 = 67, 256, 32, 2, 16
rng_3 = np.random.default_rng(3)
g = seed_writer("gemma3.gguf", "gemma3", H3, I3, NH3, 1)
g.add_key_length(D3)
g.add_value_length(D3)
g.add_rope_freq_base(1000000.0)
g.add_layer_norm_rms_eps(1e-6)
g.add_sliding_window(8)
g.add_tokenizer_model("llama")
g.add_add_space_prefix(False)
g.add_token_list(["<pad>", "<eos>", "<bos>", "<unk>", "\u2581"] + [chr(0x61 + i) for i in range(26)] +
                 ["\u2581" + chr(0x61 + i) for i in range(26)] + [f"<0x{b:02X}>" for b in range(10)])
g.add_token_scores([-1000.0] * 4 + [-float(i) for i in range(V3 - 4)])
g.add_token_types([3] * 4 + [1] * 53 + [6] * 10)
g.add_unk_token_id(3)
g.add_bos_token_id(2)
g.add_eos_token_id(1)
seed_tensors(g, rng_3, [("token_embd.weight", (V3, H3), Q.Q8_0), ("blk.0.attn_norm.weight", (H3,), Q.F32),
                       ("blk.0.attn_q.weight", (NH3 * D3, H3), Q.Q4_K), ("blk.0.attn_k.weight", (D3, H3), Q.Q2_K),
                       ("blk.0.attn_v.weight", (D3, H3), Q.Q6_K), ("blk.0.attn_q_norm.weight", (D3,), Q.F32),
                       ("blk.0.attn_k_norm.weight", (D3,), Q.F32),
                       ("blk.0.attn_output.weight", (H3, NH3 * D3), Q.Q5_1),
                       ("blk.0.post_attention_norm.weight", (H3,), Q.F32), ("blk.0.ffn_norm.weight", (H3,), Q.F32),
                       ("blk.0.ffn_gate.weight", (I3, H3), Q.Q5_K), ("blk.0.ffn_up.weight", (I3, H3), Q.Q3_K),
                       ("blk.0.ffn_down.weight", (H3, I3), Q.Q5_0), ("blk.0.post_ffw_norm.weight", (H3,), Q.F32),
                       ("output_norm.weight", (H3,), Q.F32)], norm_one=True)
# and a one-layer qwen3 (head_dim 128, HF's default for it; q/k norms; an untied output; the qwen2 pre-tokenizer)
Hq, Iq, Dq = 32, 32, 128
rng_q3 = np.random.default_rng(4)
g = seed_writer("qwen3.gguf", "qwen3", Hq, Iq, 2, 1)
g.add_key_length(Dq)
g.add_value_length(Dq)
g.add_rope_dimension_count(Dq)
g.add_rope_freq_base(1000000.0)
g.add_layer_norm_rms_eps(1e-6)
g.add_tokenizer_model("gpt2")
g.add_tokenizer_pre("qwen2")
g.add_token_list([bytes([0x21 + i]).decode() for i in range(64)] + ["TH", "HE"])
g.add_token_types([1] * 66)
g.add_token_merges(["T H", "H E"])
g.add_eos_token_id(1)
seed_tensors(g, rng_q3, [("token_embd.weight", (66, Hq), Q.Q8_0), ("blk.0.attn_norm.weight", (Hq,), Q.F32),
                       ("blk.0.attn_q.weight", (2 * Dq, Hq), Q.Q4_0), ("blk.0.attn_k.weight", (Dq, Hq), Q.Q5_1),
                       ("blk.0.attn_v.weight", (Dq, Hq), Q.F16), ("blk.0.attn_q_norm.weight", (Dq,), Q.F32),
                       ("blk.0.attn_k_norm.weight", (Dq,), Q.F32),
                       ("blk.0.attn_output.weight", (Hq, 2 * Dq), Q.Q4_1),
                       ("blk.0.ffn_norm.weight", (Hq,), Q.F32), ("blk.0.ffn_gate.weight", (Iq, Hq), Q.Q8_0),
                       ("blk.0.ffn_up.weight", (Iq, Hq), Q.BF16), ("blk.0.ffn_down.weight", (Hq, Iq), Q.Q5_0),
                       ("output_norm.weight", (Hq,), Q.F32), ("output.weight", (66, Hq), Q.Q8_0)], norm_one=True)
for name in ("bytefb_tiny", "llama3_tiny", "qwen2_tiny"):
    shutil.copy(os.path.join(root, "tests", "tokenizer", name + ".json"),
                os.path.join(out, "tokenizer", name + ".json"))

# the GPTQ reader's seed: byte 0 = 0 (fuzz_gptq's first scheme: AutoGPTQ v1, 4 bits, group 32, asymmetric), then a
# safetensors file with q_proj and down_proj of layer 0 as qweight / qzeros (zero - 1) / scales / g_idx, and a norm
from safetensors.numpy import save as st_save
rng_q = np.random.default_rng(2)
N, K, G = 16, 64, 32
t = {"model.norm.weight": np.ones(4, dtype=np.float32)}
for name in ("model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj"):
    codes = rng_q.integers(0, 16, size=(K, N), dtype=np.int64)
    qweight = np.zeros((K // 8, N), dtype=np.int64)
    for i in range(8):
        qweight |= codes[i::8] << (4 * i)
    zeros = rng_q.integers(1, 16, size=(K // G, N), dtype=np.int64) - 1
    qzeros = np.zeros((K // G, N // 8), dtype=np.int64)
    for i in range(8):
        qzeros |= zeros[:, i::8] << (4 * i)
    t[name + ".qweight"] = qweight.astype(np.uint32).view(np.int32)
    t[name + ".qzeros"] = qzeros.astype(np.uint32).view(np.int32)
    t[name + ".scales"] = (0.01 + 0.01 * rng_q.random((K // G, N))).astype(np.float16)
    t[name + ".g_idx"] = (np.arange(K) // G).astype(np.int32)
with open(os.path.join(out, "gptq", "v1_g32.bin"), "wb") as f:
    f.write(b"\x00" + st_save(t))
