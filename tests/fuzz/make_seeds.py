"""Writes the fuzz seed corpus (tests/fuzz/corpus/): config.json texts from the bundled goldens, a small
safetensors file, a tiny golden (vocab 8, hidden 4, one layer). Developer-only (needs h5py, numpy,
safetensors); the seeds are committed, CI only reads them.  python3 tests/fuzz/make_seeds.py"""
import json, os, glob
import numpy as np, h5py
from safetensors.numpy import save_file

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
out = os.path.join(here, "corpus")
for d in ("config", "safetensors", "golden"):
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
