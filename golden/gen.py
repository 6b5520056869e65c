#!/usr/bin/env python3
"""Write HuggingFace goldens (format: golden/README.md) for refchain.

    python3 golden/gen.py --list
    python3 golden/gen.py llama [-o golden/llama.h5]
    python3 golden/gen.py --all
    python3 golden/gen.py --from-model FILE.gguf|HF_DIR --name N --text "..." -o golden/N.h5

A preset names a tiny config (docs/architectures.md); the model is built from it with random
weights, run once over the prompt in fp32 on the CPU with eager attention, and every probe of
docs/architectures.md §9 is captured with forward hooks (or by wrapping a module-level function of the
HF modeling module where no module boundary exists). Then HF `generate` runs greedily with its own
cache. The file is written to a temporary name, re-read and checked, then renamed into place.
"""
import argparse
import datetime
import hashlib
import importlib
import json
import os
import platform
import shlex
import sys
import tempfile

import h5py
import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

FORMAT = "refchain-golden"
FORMAT_VERSION = 1
GENERATOR = "golden/gen.py"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# --------------------------------------------------------------------------------------------
# Presets: name -> model_type, HF config kwargs, seed, prompt length, greedy steps.

LLAMA_CFG = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False,
    "attention_bias": False, "mlp_bias": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
}
QWEN3_CFG = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "hidden_act": "silu",
    "tie_word_embeddings": True, "attention_bias": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
}

QWEN3_5_CFG = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 24, "linear_conv_kernel_dim": 4, "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
}
GEMMA4_CFG = {  # "Core": every default-on feature, both layer types, sliding window 8 < T
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                    "sliding_attention", "sliding_attention", "full_attention"],
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32,
    "sliding_window": 8, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
    "vocab_size_per_layer_input": 256, "hidden_size_per_layer_input": 8,
    "final_logit_softcapping": 30.0,
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0,
                                           "partial_rotary_factor": 0.25}},
}

GEMMA3_CFG = {  # gemma3_text: both layer types, sliding window 8 < T, a linear RoPE on the full layers (as
    # the larger Gemma 3 checkpoints have), query_pre_attn_scalar other than head_dim, softcapping off
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                    "sliding_attention", "sliding_attention", "full_attention"],
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "query_pre_attn_scalar": 24,
    "sliding_window": 8, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0, "factor": 8.0}},
}

# RoPE scaling (llama3, linear, yarn). head_dim 16 with theta 10000 gives wavelengths 2*pi*10000^(2i/16) = 6.3,
# 19.9, 62.8, 199, ... positions. llama3 with original_max_position_embeddings 32, low_freq_factor 1 and
# high_freq_factor 4 puts the boundaries at 32 / 1 = 32 and 32 / 4 = 8 positions: pair 0 (6.3) stays, pair 1
# (19.9) is blended, pairs 2.. (62.8 and up) are divided by the factor, so all three bands are used. yarn
# (qwen3, head_dim 32, the default beta_fast 32 / beta_slow 1) ramps over pairs floor(-3.2) -> 0 .. ceil(2.8) = 3:
# pair 0 extrapolated, pairs 1-2 blended, pairs 3.. interpolated, and cos/sin scaled by 0.1 ln 4 + 1.
# The 40-token prompt (plus 16 greedy steps) runs past the original context of 32 and past every boundary.
LLAMA3_ROPE_CFG = {**LLAMA_CFG, "rope_parameters": {
    "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32}}
LINEAR_ROPE_CFG = {**LLAMA_CFG, "rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}}
YARN_ROPE_CFG = {**QWEN3_CFG, "rope_parameters": {
    "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32}}

PRESETS = {
    "llama": dict(model_type="llama", config=LLAMA_CFG, seed=1234, prompt_len=24, steps=16),
    "llama_bias": dict(model_type="llama", config={**LLAMA_CFG, "attention_bias": True, "mlp_bias": True},
                       seed=1235, prompt_len=24, steps=16),
    "qwen3": dict(model_type="qwen3", config=QWEN3_CFG, seed=1236, prompt_len=24, steps=16),
    # Mistral-7B-v0.3's shape of model: llama without bias options, sliding_window null (full attention).
    "mistral": dict(model_type="mistral", config={k: v for k, v in LLAMA_CFG.items()
                                                  if k not in ("attention_bias", "mlp_bias")} | {"sliding_window": None},
                    seed=1243, prompt_len=24, steps=16),
    # T = 66 > 64: the prefill uses two chunks of the chunked delta rule (T = 80 would make the
    # file 3.4 MB; 66 keeps it under 3 MB).
    "qwen3_5": dict(model_type="qwen3_5_text", config=QWEN3_5_CFG, seed=1237, prompt_len=66, steps=16),
    # T = 2 < K - 1: the conv state after the prefill is zero-padded; decode starts from it.
    "qwen3_5_short": dict(model_type="qwen3_5_text", config=QWEN3_5_CFG, seed=1239, prompt_len=2, steps=16),
    # T = 24 > W = 8; 16 decode steps run on past the window with HF's sliding cache.
    "gemma4": dict(model_type="gemma4_text", config=GEMMA4_CFG, seed=1238, prompt_len=24, steps=16),
    # seed 1248: of 1244..1251, the one whose 16 greedy tokens change most often (a tied head on random weights
    # tends to repeat one token)
    "gemma3": dict(model_type="gemma3_text", config=GEMMA3_CFG, seed=1248, prompt_len=24, steps=16),
    # RoPE scaling: see LLAMA3_ROPE_CFG for why these sizes reach past every scaling boundary.
    "llama_rope_llama3": dict(model_type="llama", config=LLAMA3_ROPE_CFG, seed=1240, prompt_len=40, steps=16),
    "llama_rope_linear": dict(model_type="llama", config=LINEAR_ROPE_CFG, seed=1241, prompt_len=40, steps=16),
    "qwen3_rope_yarn": dict(model_type="qwen3", config=YARN_ROPE_CFG, seed=1242, prompt_len=40, steps=16),
    # Quantized (see QUANT below): the llama shape with its matrices RTN-quantized in numpy, weights in a GPTQ
    # safetensors file beside the golden, probes from HF's forward on the dequantized fp32 weights.
    "llama_int8": dict(model_type="llama", config=LLAMA_CFG, seed=1250, prompt_len=24, steps=16,
                       quant=dict(bits=8, group=-1, sym=True, v1=False)),
    "llama_int4_g32": dict(model_type="llama", config=LLAMA_CFG, seed=1251, prompt_len=24, steps=16,
                           quant=dict(bits=4, group=32, sym=False, v1=True)),
    # hidden 128 / intermediate 256, so every matrix's K is a multiple of 128
    "llama_int4_g128": dict(model_type="llama", config={**LLAMA_CFG, "hidden_size": 128, "intermediate_size": 256},
                            seed=1252, prompt_len=24, steps=16, quant=dict(bits=4, group=128, sym=False, v1=False)),
}

# --------------------------------------------------------------------------------------------
# Architectures: how HF modules map to probe names (docs/architectures.md §9).
#
# hooks[layer_type]: (probe, module path under model.layers.<i>, "out" | "in0", view)
#   "out" = module output, "in0" = first positional input; view(t, d) turns the raw HF tensor
#   (batch dim included) into the stored one, d = dims(cfg, layer) plus d["T"].
# wraps: module-level function of the HF modeling module -> factory(orig, rec, mod) returning the
#   replacement; rec(probe, tensor) records into the current layer (no module boundary there);
#   orig is HF's pure-torch function (a hub-kernel dispatcher is bypassed via __wrapped__).
# order[layer_type]: per-layer probe names in data-flow order.
# pre / post: global probes before / after the layers; rope: (kind, inv_freq buffer of rotary_emb);
# globals: (probe, module path under the CausalLM, "out", view) for global module boundaries.


def B(t, d):  # drop the batch dim
    return t[0]


def heads(key):  # [1, T, n*w] -> [T, n, w] with w = d[key]
    return lambda t, d: t[0].reshape(t.shape[1], -1, d[key])


def rows(t, d):  # any layout with T*... elements -> [T, -1] (HF flattens batch and tokens in the gated norm)
    return t.reshape(d["T"], -1)


def q_of_qgate(t, d):  # qwen3_5 q_proj: [1, T, H*2D] per head [query | gate]
    return t[0].reshape(t.shape[1], -1, 2 * d["D"])[..., :d["D"]]


def gate_of_qgate(t, d):
    return t[0].reshape(t.shape[1], -1, 2 * d["D"])[..., d["D"]:].reshape(t.shape[1], -1)


def wrap_rope_pair(orig, rec, mod):  # llama/qwen: (q, k) in [B, n, T, D] -> [T, n, D]
    def f(q, k, *a, **kw):
        qr, kr = orig(q, k, *a, **kw)
        rec("attn.q_rope", qr[0].transpose(0, 1))
        rec("attn.k_rope", kr[0].transpose(0, 1))
        return qr, kr
    return f


def wrap_rope_single(orig, rec, mod):  # gemma4: called for q, then for k, in [B, T, n, D]
    def f(x, *a, **kw):
        y = orig(x, *a, **kw)
        rec("attn.k_rope" if rec.has("attn.q_rope") else "attn.q_rope", y[0])
        return y
    return f


def wrap_attn_ctx(orig, rec, mod):  # eager attention output [B, T, H, D] -> ctx [T, H*D]
    def f(module, q, k, v, *a, **kw):
        out, w = orig(module, q, k, v, *a, **kw)
        rec("attn.ctx", out[0].reshape(out.shape[1], -1))
        return out, w
    return f


def wrap_conv(orig, rec, mod):  # qwen3_5 causal_conv1d_fn: [B, C, T] -> gdn.conv [T, C] (after conv + act)
    def f(x, *a, **kw):
        y = orig(x, *a, **kw)
        rec("gdn.conv", y[0].transpose(0, 1))
        return y
    return f


def wrap_gdn_chunk(orig, rec, mod):
    """qwen3_5 torch_chunk_gated_delta_rule: inputs are [B, T, Hv, *] after the q/k head expansion.
    gdn.q/gdn.k repeat the kernel's own first steps (fp32, HF's l2norm, q * dk^-0.5); the final
    state is requested from the kernel (it does not change the output) and dropped again when
    the caller did not ask for it."""
    def f(query, key, value, g, beta, *a, output_final_state=False, use_qk_l2norm_in_kernel=False, **kw):
        core, state = orig(query, key, value, g, beta, *a, output_final_state=True,
                           use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, **kw)
        q, k = query.to(torch.float32), key.to(torch.float32)
        if use_qk_l2norm_in_kernel:
            q, k = mod.l2norm(q, dim=-1, eps=1e-6), mod.l2norm(k, dim=-1, eps=1e-6)
        q = q * (q.shape[-1] ** -0.5)
        for name, t in (("gdn.q", q), ("gdn.k", k), ("gdn.v", value), ("gdn.beta", beta), ("gdn.g", g),
                        ("gdn.core", core), ("gdn.state", state)):
            rec(name, t[0])
        return core, (state if output_final_state else None)
    return f


def post_qwen3_5(cap, cfg):
    """Conv state after the call: the last K-1 pre-conv rows [K-1, C], zero rows first when T < K-1."""
    n = cfg.linear_conv_kernel_dim - 1
    for i, typ in enumerate(layer_types(cfg)):
        if typ == "linear_attention":
            qkv = cap[f"L{i}.gdn.qkv"]
            cap[f"L{i}.gdn.conv_state"] = torch.cat([qkv.new_zeros(n, qkv.shape[1]), qkv])[-n:].clone()


def check_qwen3_5(model, ids, cap):
    """The recurrent/conv state probes equal what HF's own cache holds after a cached prefill."""
    cfg = model.config
    with torch.no_grad():
        out = model(input_ids=ids[None], use_cache=True)
    for i, typ in enumerate(layer_types(cfg)):
        if typ != "linear_attention":
            continue
        layer = out.past_key_values.layers[i]
        s = layer.recurrent_states[0][0]
        c = layer.conv_states[0][0, :, 1:].transpose(0, 1)
        ds = (s - cap[f"L{i}.gdn.state"]).abs().max().item()
        assert ds <= 1e-5, f"L{i}.gdn.state differs from HF cache by {ds}"
        assert torch.equal(c, cap[f"L{i}.gdn.conv_state"]), f"L{i}.gdn.conv_state != HF cache"


_ATTN_IN = [("attn_norm", "input_layernorm", "out", B)]
_LLAMA_ATTN = [
    ("attn.q", "self_attn.q_proj", "out", heads("D")),
    ("attn.k", "self_attn.k_proj", "out", heads("D")),
    ("attn.v", "self_attn.v_proj", "out", heads("D")),
    ("attn.ctx", "self_attn.o_proj", "in0", B),
    ("attn.out", "self_attn.o_proj", "out", B),
]
_QK_NORM = [("attn.q_norm", "self_attn.q_norm", "out", B), ("attn.k_norm", "self_attn.k_norm", "out", B)]
_MID_MLP = [  # llama/qwen naming: post_attention_layernorm is the PRE-MLP norm
    ("mid", "post_attention_layernorm", "in0", B),
    ("mlp_norm", "post_attention_layernorm", "out", B),
]
_MLP = [
    ("mlp.gate", "mlp.gate_proj", "out", B),
    ("mlp.up", "mlp.up_proj", "out", B),
    ("mlp.act", "mlp.down_proj", "in0", B),
    ("mlp.out", "mlp.down_proj", "out", B),
]
_QWEN35_ATTN = [
    ("attn.q", "self_attn.q_proj", "out", q_of_qgate),
    ("attn.gate", "self_attn.q_proj", "out", gate_of_qgate),
    ("attn.k", "self_attn.k_proj", "out", heads("D")),
    ("attn.v", "self_attn.v_proj", "out", heads("D")),
    ("attn.ctx_gated", "self_attn.o_proj", "in0", B),
    ("attn.out", "self_attn.o_proj", "out", B),
] + _QK_NORM
_QWEN35_GDN = [
    ("gdn.qkv", "linear_attn.in_proj_qkv", "out", B),
    ("gdn.z", "linear_attn.in_proj_z", "out", heads("dv")),
    ("gdn.b", "linear_attn.in_proj_b", "out", B),
    ("gdn.a", "linear_attn.in_proj_a", "out", B),
    ("gdn.normed", "linear_attn.norm", "out", rows),
    ("gdn.out", "linear_attn.out_proj", "out", B),
]
def head_major(t, d):  # [1, n, T, D] (gemma3's q/k norms run after the transpose) -> [T, n, D]
    return t[0].transpose(0, 1)


_GEMMA_LAYER = [  # what gemma3 and gemma4 layers share; their q/k norms differ in layout
    ("attn.q", "self_attn.q_proj", "out", heads("D")),
    ("attn.k", "self_attn.k_proj", "out", heads("D")),
    ("attn.v", "self_attn.v_proj", "out", heads("D")),
    ("attn.ctx", "self_attn.o_proj", "in0", B),
    ("attn.out", "self_attn.o_proj", "out", B),
    ("attn.post_norm", "post_attention_layernorm", "out", B),
    ("mid", "pre_feedforward_layernorm", "in0", B),  # gemma naming: pre_feedforward is the pre-MLP norm
    ("mlp_norm", "pre_feedforward_layernorm", "out", B),
    ("mlp.post_norm", "post_feedforward_layernorm", "out", B),
]
_GEMMA3_LAYER = _GEMMA_LAYER + [
    ("attn.q_norm", "self_attn.q_norm", "out", head_major),
    ("attn.k_norm", "self_attn.k_norm", "out", head_major),
]
_GEMMA4_LAYER = _GEMMA_LAYER + [
    ("attn.q_norm", "self_attn.q_norm", "out", B),
    ("attn.k_norm", "self_attn.k_norm", "out", B),
    ("attn.v_norm", "self_attn.v_norm", "out", B),
    ("ple.gate", "per_layer_input_gate", "out", B),
    ("ple.act", "per_layer_projection", "in0", B),
    ("ple.proj", "per_layer_projection", "out", B),
    ("ple.norm", "post_per_layer_input_norm", "out", B),
]


def _o(s):
    return s.split()


_MLP_ORDER = _o("mid mlp_norm mlp.gate mlp.up mlp.act mlp.out out")
_LLAMA_ORDER = _o("in attn_norm attn.q attn.k attn.v attn.q_rope attn.k_rope attn.ctx attn.out") + _MLP_ORDER
_QWEN3_ORDER = _o("in attn_norm attn.q attn.k attn.v attn.q_norm attn.k_norm attn.q_rope attn.k_rope "
                  "attn.ctx attn.out") + _MLP_ORDER
_QWEN35_FULL_ORDER = _o("in attn_norm attn.q attn.gate attn.k attn.v attn.q_norm attn.k_norm attn.q_rope "
                        "attn.k_rope attn.ctx attn.ctx_gated attn.out") + _MLP_ORDER
_QWEN35_LINEAR_ORDER = _o("in attn_norm gdn.qkv gdn.z gdn.b gdn.a gdn.conv gdn.q gdn.k gdn.v gdn.beta gdn.g "
                          "gdn.core gdn.normed gdn.out gdn.state gdn.conv_state") + _MLP_ORDER
_GEMMA3_ORDER = _o("in attn_norm attn.q attn.k attn.v attn.q_norm attn.k_norm attn.q_rope attn.k_rope attn.ctx "
                   "attn.out attn.post_norm mid mlp_norm mlp.gate mlp.up mlp.act mlp.out mlp.post_norm out")
_GEMMA4_ORDER = _o("in attn_norm attn.q attn.q_norm attn.q_rope attn.k attn.v attn.k_norm attn.k_rope "
                   "attn.v_norm attn.ctx attn.out attn.post_norm mid mlp_norm mlp.gate mlp.up mlp.act "
                   "mlp.out mlp.post_norm ple.gate ple.act ple.proj ple.norm out")


def _dims_attn(cfg, layer):
    return {"D": layer.self_attn.head_dim}


def _dims_qwen3_5(cfg, layer):
    return {"D": cfg.head_dim, "dv": cfg.linear_value_head_dim}


_ROPE_ALL = [("all", "inv_freq")]
_PRE_ALL = _o("emb rope.all.inv_freq rope.all.cos rope.all.sin")

ARCHS = {
    "llama": dict(
        module="transformers.models.llama.modeling_llama",
        hooks={"full_attention": _ATTN_IN + _LLAMA_ATTN + _MID_MLP + _MLP},
        order={"full_attention": _LLAMA_ORDER},
        wraps={"apply_rotary_pos_emb": wrap_rope_pair},
        dims=_dims_attn, rope=_ROPE_ALL, pre=_PRE_ALL, post=_o("final_norm logits")),
    "qwen3": dict(
        module="transformers.models.qwen3.modeling_qwen3",
        hooks={"full_attention": _ATTN_IN + _LLAMA_ATTN + _QK_NORM + _MID_MLP + _MLP},
        order={"full_attention": _QWEN3_ORDER},
        wraps={"apply_rotary_pos_emb": wrap_rope_pair},
        dims=_dims_attn, rope=_ROPE_ALL, pre=_PRE_ALL, post=_o("final_norm logits")),
    "qwen3_5_text": dict(
        module="transformers.models.qwen3_5.modeling_qwen3_5",
        hooks={"full_attention": _ATTN_IN + _QWEN35_ATTN + _MID_MLP + _MLP,
               "linear_attention": _ATTN_IN + _QWEN35_GDN + _MID_MLP + _MLP},
        order={"full_attention": _QWEN35_FULL_ORDER, "linear_attention": _QWEN35_LINEAR_ORDER},
        wraps={"apply_rotary_pos_emb": wrap_rope_pair, "eager_attention_forward": wrap_attn_ctx,
               "causal_conv1d_fn": wrap_conv, "torch_chunk_gated_delta_rule": wrap_gdn_chunk},
        dims=_dims_qwen3_5, rope=_ROPE_ALL, pre=_PRE_ALL, post=_o("final_norm logits"),
        post_fn=post_qwen3_5, check=check_qwen3_5),
    "gemma4_text": dict(
        module="transformers.models.gemma4.modeling_gemma4",
        hooks={t: _ATTN_IN + _GEMMA4_LAYER + _MLP for t in ("sliding_attention", "full_attention")},
        order={"sliding_attention": _GEMMA4_ORDER, "full_attention": _GEMMA4_ORDER},
        wraps={"apply_rotary_pos_emb": wrap_rope_single},
        globals=[("ple.tok", "model.embed_tokens_per_layer", "out", B),
                 ("ple.mproj", "model.per_layer_model_projection", "out", B),
                 ("ple.mproj_norm", "model.per_layer_projection_norm", "out", B),
                 ("logits_raw", "lm_head", "out", B)],
        layer_arg1="ple.in",  # second positional input of each layer, stacked to [T, L, P]
        dims=_dims_attn,
        rope=[("sliding", "sliding_attention_inv_freq"), ("full", "full_attention_inv_freq")],
        pre=_o("emb ple.tok ple.mproj ple.mproj_norm ple.in rope.sliding.inv_freq rope.sliding.cos "
               "rope.sliding.sin rope.full.inv_freq rope.full.cos rope.full.sin"),
        post=_o("final_norm logits_raw logits")),
    "gemma3_text": dict(
        module="transformers.models.gemma3.modeling_gemma3",
        hooks={t: _ATTN_IN + _GEMMA3_LAYER + _MLP for t in ("sliding_attention", "full_attention")},
        order={"sliding_attention": _GEMMA3_ORDER, "full_attention": _GEMMA3_ORDER},
        wraps={"apply_rotary_pos_emb": wrap_rope_pair},
        dims=_dims_attn,
        rope=[("sliding", "sliding_attention_inv_freq"), ("full", "full_attention_inv_freq")],
        pre=_o("emb rope.sliding.inv_freq rope.sliding.cos rope.sliding.sin rope.full.inv_freq rope.full.cos "
               "rope.full.sin"),
        post=_o("final_norm logits")),
}
# Mistral's modeling is llama's (sliding_window null): the same hooks on its own module.
ARCHS["mistral"] = {**ARCHS["llama"], "module": "transformers.models.mistral.modeling_mistral"}


# --------------------------------------------------------------------------------------------

def layer_types(cfg):
    lt = getattr(cfg, "layer_types", None)
    return list(lt) if lt else ["full_attention"] * cfg.num_hidden_layers


def probe_order(cfg, arch):
    names = list(arch["pre"])
    for i, typ in enumerate(layer_types(cfg)):
        names += [f"L{i}.{n}" for n in arch["order"][typ]]
    return names + list(arch["post"])


def build_model(p):
    torch.manual_seed(p["seed"])
    cfg = AutoConfig.for_model(p["model_type"], **p["config"])
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    # Randomise every parameter (and persistent float buffer, e.g. gemma4 layer_scalar) in order.
    g = torch.Generator().manual_seed(p["seed"])
    with torch.no_grad():
        tensors = list(model.named_parameters())
        params = {id(t) for _, t in tensors}
        sd_names = set(model.state_dict().keys())
        tensors += [(n, b) for n, b in model.named_buffers()
                    if n in sd_names and b.is_floating_point() and id(b) not in params]
        for _, t in tensors:
            noise = 0.1 * torch.randn(t.shape, generator=g, dtype=torch.float32)
            base = 1.0 if bool(torch.all(t == 1)) else 0.0
            t.copy_(base + noise)
    ids = torch.randint(0, cfg.vocab_size, (p["prompt_len"],), generator=g, dtype=torch.int64)
    return model, ids


def _get(mod, path):
    for part in path.split("."):
        mod = getattr(mod, part)
    return mod


def _first(x):
    return x[0] if isinstance(x, (tuple, list)) else x


def _arr(t):
    return t.detach().to(torch.float32).contiguous().clone()


def capture_probes(model, ids, arch):
    """One no-cache forward over the prompt; returns (probes name -> fp32 tensor, batch dropped; logits)."""
    cfg = model.config
    T = ids.shape[0]
    cap, state, handles, arg1 = {}, {"layer": None}, [], {}

    def put(name, t):
        assert name not in cap, f"probe {name} captured twice"
        cap[name] = _arr(t)

    def rec(name, t):
        assert state["layer"] is not None, f"{name} recorded outside a decoder layer"
        put(f"L{state['layer']}.{name}", t)
    rec.has = lambda name: f"L{state['layer']}.{name}" in cap

    def layer_pre(i):
        def hook(mod, args, kwargs):
            state["layer"] = i
            put(f"L{i}.in", (args[0] if args else kwargs["hidden_states"])[0])
            if arch.get("layer_arg1"):
                arg1[i] = _arr((args[1] if len(args) > 1 else kwargs["per_layer_input"])[0])
        return hook

    def layer_post(i):
        def hook(mod, args, kwargs, out):
            put(f"L{i}.out", _first(out)[0])
            state["layer"] = None
        return hook

    def mod_hook(name, where, view, d):
        def hook(mod, args, out):
            put(name, view(_first(out) if where == "out" else args[0], d))
        return hook

    inner = model.model
    handles.append(inner.embed_tokens.register_forward_hook(lambda m, a, o: put("emb", o[0])))
    handles.append(inner.norm.register_forward_hook(lambda m, a, o: put("final_norm", o[0])))
    for name, path, where, view in arch.get("globals", []):
        handles.append(_get(model, path).register_forward_hook(mod_hook(name, where, view, {"T": T})))

    kinds = dict(arch["rope"])

    def rope_hook(mod, args, kwargs, out):
        if len(kinds) == 1:
            kind = next(iter(kinds))
        else:  # gemma3/4: rotary_emb(x, position_ids, layer_type), once per layer type
            kind = (args[2] if len(args) > 2 else kwargs["layer_type"]).split("_")[0]
        put(f"rope.{kind}.cos", out[0][0])
        put(f"rope.{kind}.sin", out[1][0])
    handles.append(inner.rotary_emb.register_forward_hook(rope_hook, with_kwargs=True))
    for kind, buf in arch["rope"]:
        cap[f"rope.{kind}.inv_freq"] = _arr(getattr(inner.rotary_emb, buf))

    for i, (layer, typ) in enumerate(zip(inner.layers, layer_types(cfg))):
        handles.append(layer.register_forward_pre_hook(layer_pre(i), with_kwargs=True))
        handles.append(layer.register_forward_hook(layer_post(i), with_kwargs=True))
        d = {**arch["dims"](cfg, layer), "T": T}
        for name, path, where, view in arch["hooks"][typ]:
            handles.append(_get(layer, path).register_forward_hook(mod_hook(f"L{i}.{name}", where, view, d)))

    # Wrap module-level functions of the HF modeling module where there is no module boundary.
    hf_mod = importlib.import_module(arch["module"])
    originals = {fn: getattr(hf_mod, fn) for fn in arch["wraps"]}
    for fn, factory in arch["wraps"].items():
        setattr(hf_mod, fn, factory(getattr(originals[fn], "__wrapped__", originals[fn]), rec, hf_mod))
    try:
        with torch.no_grad():
            out = model(input_ids=ids[None], use_cache=False)
    finally:
        for fn, orig in originals.items():
            setattr(hf_mod, fn, orig)
        for h in handles:
            h.remove()
    if arch.get("layer_arg1"):
        put(arch["layer_arg1"], torch.stack([arg1[i] for i in range(cfg.num_hidden_layers)], dim=1))
    put("logits", out.logits[0])
    if arch.get("post_fn"):
        arch["post_fn"](cap, cfg)
    return cap, out.logits[0].detach().to(torch.float32)


def run_greedy(model, ids, steps):
    gc = model.generation_config
    gc.eos_token_id = None
    gc.pad_token_id = None
    gc.bos_token_id = None
    with torch.no_grad():
        out = model.generate(ids[None], attention_mask=torch.ones_like(ids[None]),
                             max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                             output_logits=True, return_dict_in_generate=True, use_cache=True,
                             eos_token_id=None, pad_token_id=None)
    tokens = out.sequences[0, ids.shape[0]:].clone()
    logits = torch.stack([l[0] for l in out.logits]).to(torch.float32)
    assert tokens.shape == (steps,), tokens.shape
    assert logits.shape == (steps, model.config.vocab_size), logits.shape
    return tokens, logits


# --------------------------------------------------------------------------------------------
# Quantized goldens: round-to-nearest in numpy, written in the HF GPTQ layout, independently of model/quant.c.
# Rules (docs/quantization.md), each operation rounded to fp32: symmetric w = s*q; asymmetric w = (s*q) + m with
# m = -(s*z). Scales are rounded to fp16 (the layout stores fp16) before the codes are chosen.
QUANT_SUFFIXES = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                  "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")


def rtn_quantize(w, bits, group, sym):
    """w [N, K] float32 -> (q [N, K] int, s [N, G] f32 (fp16 values), z [N, G] int or None)."""
    N, K = w.shape
    g = K if group == -1 else group
    assert K % g == 0, (K, g)
    x = w.reshape(N, K // g, g).astype(np.float32)
    if sym:
        qmax = 2 ** (bits - 1) - 1
        s = (np.abs(x).max(-1) / np.float32(qmax)).astype(np.float16).astype(np.float32)
        s[s == 0] = np.float32(1)
        q = np.clip(np.rint(x / s[..., None]), -qmax - 1, qmax).astype(np.int64)
        return q.reshape(N, K), s, None
    qmax = 2 ** bits - 1
    lo, hi = np.minimum(x.min(-1), 0), np.maximum(x.max(-1), 0)
    s = ((hi - lo) / np.float32(qmax)).astype(np.float16).astype(np.float32)
    s[s == 0] = np.float32(1)
    z = np.clip(np.rint(-lo / s), 0, qmax).astype(np.int64)
    q = np.clip(np.rint(x / s[..., None]) + z[..., None], 0, qmax).astype(np.int64)
    return q.reshape(N, K), s, z


def dequant(q, s, z, group):
    N, K = q.shape
    g = K if group == -1 else group
    qf = q.reshape(N, K // g, g).astype(np.float32)
    sq = (s[..., None] * qf).astype(np.float32)
    if z is None:
        return sq.reshape(N, K)
    m = -(s * z.astype(np.float32)).astype(np.float32)
    return (sq + m[..., None]).astype(np.float32).reshape(N, K)


def gptq_pack(q, s, z, bits, group, sym, v1):
    """The HF GPTQ tensors of one matrix: qweight int32 [K*bits/32, N] (codes along K, low bits first), qzeros
    int32 [G, N*bits/32] (along N), scales fp16 [G, N], g_idx int32 [K]."""
    N, K = q.shape
    per, G = 32 // bits, s.shape[1]
    g = K // G
    half = 2 ** (bits - 1)
    u = (q + half if sym else q).astype(np.uint32)  # stored codes are unsigned
    zs = (np.full((N, G), half, np.int64) if sym else z) - (1 if v1 else 0)
    assert zs.min() >= 0 and zs.max() < 2 ** bits, "zero not storable"
    qweight = np.zeros((K // per, N), np.uint32)
    ut = u.T  # [K, N]
    for j in range(per):
        qweight |= ut[j::per, :] << np.uint32(bits * j)
    qzeros = np.zeros((G, N // per), np.uint32)
    zt = zs.T.astype(np.uint32)  # [G, N]
    for j in range(per):
        qzeros |= zt[:, j::per] << np.uint32(bits * j)
    return {"qweight": qweight.view(np.int32), "qzeros": qzeros.view(np.int32),
            "scales": np.ascontiguousarray(s.T.astype(np.float16)), "g_idx": (np.arange(K) // g).astype(np.int32)}


def gptq_unpack(t, bits, group, sym, v1, N, K):
    """Independent inverse of gptq_pack (the validation round trip)."""
    per = 32 // bits
    mask = np.uint32(2 ** bits - 1)
    qw, qz = t["qweight"].view(np.uint32), t["qzeros"].view(np.uint32)
    u = np.stack([(qw >> np.uint32(bits * j)) & mask for j in range(per)], 1).reshape(K, N).T.astype(np.int64)
    zs = np.stack([(qz >> np.uint32(bits * j)) & mask for j in range(per)], 2).reshape(qz.shape[0], N).T
    z = zs.astype(np.int64) + (1 if v1 else 0)
    s = t["scales"].astype(np.float32).T
    half = 2 ** (bits - 1)
    if sym:
        assert np.all(z == half)
        return u - half, s, None
    return u, s, z


def quantize_model(model, qp, st_path):
    """Quantizes the model's matrices in place to their dequantized fp32 values; writes the GPTQ safetensors file
    (every other tensor F32). Returns the quantization_config."""
    from safetensors.numpy import load_file, save_file
    bits, group, sym, v1 = qp["bits"], qp["group"], qp["sym"], qp["v1"]
    sd = model.state_dict()
    tensors, n_q = {}, 0
    with torch.no_grad():
        for name, t in sd.items():
            if name == "lm_head.weight" and model.config.tie_word_embeddings:
                continue
            w = t.detach().to(torch.float32).numpy().copy()
            if not name.endswith(QUANT_SUFFIXES):
                tensors[name] = w
                continue
            q, s, z = rtn_quantize(w, bits, group, sym)
            wq = dequant(q, s, z, group)
            prefix = name[: -len(".weight")]
            for k, a in gptq_pack(q, s, z, bits, group, sym, v1).items():
                tensors[f"{prefix}.{k}"] = a
            t.copy_(torch.from_numpy(wq))
            n_q += 1
    assert n_q == 7 * model.config.num_hidden_layers, n_q
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(st_path) + ".", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(st_path)))
    os.close(fd)
    try:
        save_file({k: np.ascontiguousarray(a) for k, a in tensors.items()}, tmp, metadata={"format": "pt"})
        back = load_file(tmp)
        for name, t in model.state_dict().items():  # the file dequantizes to exactly the weights HF runs
            if not name.endswith(QUANT_SUFFIXES):
                continue
            prefix = name[: -len(".weight")]
            q, s, z = gptq_unpack({k: back[f"{prefix}.{k}"] for k in ("qweight", "qzeros")} |
                                  {"scales": back[f"{prefix}.scales"]}, bits, group, sym, v1, *t.shape)
            assert np.array_equal(dequant(q, s, z, group), t.numpy()), name
            assert np.array_equal(back[f"{prefix}.g_idx"], tensors[f"{prefix}.g_idx"])
        os.chmod(tmp, 0o644)
        os.replace(tmp, st_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": False, "sym": sym,
            "checkpoint_format": "gptq" if v1 else "gptq_v2", "lm_head": False, "pack_dtype": "int32"}


def generate(preset_name, out_path, command):
    p = PRESETS[preset_name]
    arch = ARCHS[p["model_type"]]
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    model, ids = build_model(p)
    cfg = model.config
    qconfig, st_path = None, None
    if p.get("quant"):
        st_path = os.path.splitext(out_path)[0] + ".safetensors"
        qconfig = quantize_model(model, p["quant"], st_path)

    probes, logits = capture_probes(model, ids, arch)
    order = probe_order(cfg, arch)
    missing = [n for n in order if n not in probes]
    extra = [n for n in probes if n not in order]
    assert not missing, f"probes not captured: {missing}"
    assert not extra, f"captured probes not in probe_order: {extra}"
    assert torch.equal(probes["logits"], logits)
    with torch.no_grad():
        last = probes[f"L{cfg.num_hidden_layers - 1}.out"]
        assert torch.equal(model.model.norm(last[None])[0], probes["final_norm"]), "final_norm mismatch"
        c = getattr(cfg, "final_logit_softcapping", None)
        if "logits_raw" in probes:
            assert torch.equal(torch.tanh(probes["logits_raw"] / c) * c, probes["logits"]), "softcap mismatch"
    if arch.get("check"):
        arch["check"](model, ids, probes)

    tokens, glogits = run_greedy(model, ids, p["steps"])
    assert torch.equal(glogits.argmax(-1), tokens), "greedy argmax != tokens"
    d0 = (glogits[0] - logits[-1]).abs().max().item()
    assert d0 <= 1e-5, f"greedy logits[0] differs from prompt last row by {d0}"

    sd = model.state_dict()
    weights = {}
    for name, t in sd.items():
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            assert t.data_ptr() == sd["model.embed_tokens.weight"].data_ptr()
            continue
        weights[name] = t.detach().to(torch.float32).numpy()
    config_json = cfg.to_json_string(use_diff=False)
    quant_attrs = {}
    if qconfig:
        import safetensors
        weights = None
        config_json = json.dumps(json.loads(config_json) | {"quantization_config": qconfig}, indent=2, sort_keys=True)
        quant_attrs = dict(weights_file=os.path.basename(st_path), weights_size=np.int64(os.path.getsize(st_path)),
                           weights_sha256=sha256_file(st_path), safetensors_version=safetensors.__version__,
                           quantization="round-to-nearest in numpy (golden/gen.py rtn_quantize), GPTQ layout; "
                                        "probes: HF on the dequantized fp32 weights")

    attrs = {
        "format": FORMAT,
        "format_version": np.int64(FORMAT_VERSION),
        "generator": GENERATOR,
        "regenerate": command,
        "preset": preset_name,
        "model_type": p["model_type"],
        "seed": np.int64(p["seed"]),
        **run_attrs(),
        "config_json": config_json,
        "probe_order": "\n".join(order),
        **quant_attrs,
    }
    assert cfg._attn_implementation == "eager"

    write_golden(out_path, attrs, ids, order, probes, tokens, glogits, weights, compress=bool(qconfig))
    return dict(path=out_path, size=os.path.getsize(out_path),
                max_logit=float(logits.abs().max()), n_probes=len(order),
                tokens=tokens.tolist())


def run_attrs():
    """Versions and time of this run, recorded in every golden."""
    return {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "h5py_version": h5py.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "created": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        "attn_implementation": "eager",
    }


def write_golden(out_path, attrs, ids, order, probes, tokens, glogits, weights, links=None, compress=False):
    """Writes to a temporary name, re-reads and checks, then renames into place. links: probe -> earlier
    probe holding the same values, stored as an HDF5 hard link to it (no second copy)."""
    links = links or {}
    opts = dict(compression="gzip", compression_opts=6, shuffle=True) if compress else {}
    out_dir = os.path.dirname(os.path.abspath(out_path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out_path) + ".", suffix=".tmp", dir=out_dir)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            for k, v in attrs.items():  # str subclasses (torch's TorchVersion) -> plain str
                f.attrs[k] = v if isinstance(v, np.integer) else str(v)
            f.create_dataset("input_ids", data=ids.numpy().astype(np.int64))
            if weights is not None:
                wg = f.create_group("weights")
                for name, a in weights.items():
                    wg.create_dataset(name, data=a.astype(np.float32))
            pg = f.create_group("probes")
            for name in order:
                if name in links:
                    assert torch.equal(probes[name], probes[links[name]]), (name, links[name])
                    pg[name] = pg[links[name]]
                else:
                    pg.create_dataset(name, data=probes[name].numpy().astype(np.float32), **opts)
            gg = f.create_group("greedy")
            gg.create_dataset("tokens", data=tokens.numpy().astype(np.int64))
            gg.create_dataset("logits", data=glogits.numpy().astype(np.float32), **opts)
        validate(tmp, order, probes, weights or {})
        os.chmod(tmp, 0o644)
        os.replace(tmp, out_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _dist_version(name):  # the installed distribution's version (the gguf package has no __version__)
    import importlib.metadata
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# Fields transformers' GGUF loader adds to the config that describe the file, not the math (the file is
# recorded in weights_file / weights_sha256 instead).
_GGUF_CONFIG_EXTRAS = ("quantization_config", "_model_name_or_path", "unk_token_id")


def generate_from_model(src, name, text, steps, probes_per_layer, out_path, command, origin, tokenizer="hf"):
    """A golden of an existing checkpoint: an HF folder (weights copied into the file) or a GGUF file
    (weights referenced by name, size and sha256; HF dequantizes it to fp32 on load)."""
    from transformers import AutoTokenizer
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    kw = {}
    is_gguf = os.path.isfile(src)
    if is_gguf:
        kw["gguf_file"] = os.path.basename(src)
        src_dir = os.path.dirname(os.path.abspath(src))
    else:
        src_dir = src
    model = AutoModelForCausalLM.from_pretrained(src_dir, attn_implementation="eager", dtype=torch.float32, **kw)
    model.eval()
    cfg = model.config
    arch = ARCHS[cfg.model_type]
    if tokenizer == "gguf-spm":  # the file's own SentencePiece vocabulary (golden/gguf_spm.py says why)
        assert is_gguf, "--tokenizer gguf-spm needs a .gguf file"
        import gguf_spm
        toks, scores, types, bos, add_bos = gguf_spm.load_vocab(src)
        spm = gguf_spm.Spm(toks, scores, types)
        body = spm.encode(text)
        ids = torch.tensor(([bos] if add_bos else []) + body, dtype=torch.int64)
        assert spm.decode(body) == text, "the prompt text does not round-trip through the tokenizer"
        decode = spm.decode
    else:
        tok = AutoTokenizer.from_pretrained(src_dir, **kw)
        ids = torch.tensor(tok(text)["input_ids"], dtype=torch.int64)
        assert tok.decode(ids.tolist()) == text, "the prompt text does not round-trip through the tokenizer"
        decode = tok.decode

    probes, logits = capture_probes(model, ids, arch)
    layer_probes = probes_per_layer.split()
    order = ["emb"] + [f"L{i}.{p}" for i in range(cfg.num_hidden_layers)
                       for p in arch["order"][layer_types(cfg)[i]] if p in layer_probes]
    order += ["final_norm", "logits"]
    missing = [n for n in order if n not in probes]
    assert not missing, f"probes not captured: {missing}"
    probes = {n: probes[n] for n in order}
    # a layer's input is the previous layer's output (the embedding for layer 0): one copy in the file
    links = {f"L{i}.in": (f"L{i - 1}.out" if i else "emb") for i in range(cfg.num_hidden_layers)
             if f"L{i}.in" in probes and (i == 0 or f"L{i - 1}.out" in probes)}

    tokens, glogits = run_greedy(model, ids, steps)
    assert torch.equal(glogits.argmax(-1), tokens), "greedy argmax != tokens"

    config = cfg.to_dict()
    for k in _GGUF_CONFIG_EXTRAS:
        config.pop(k, None)
    attrs = {
        "format": FORMAT,
        "format_version": np.int64(FORMAT_VERSION),
        "generator": GENERATOR,
        "regenerate": command,
        "preset": name,
        "model_type": cfg.model_type,
        "seed": np.int64(0),
        "source": os.path.basename(src) if is_gguf else os.path.basename(os.path.abspath(src)),
        "origin": origin,
        "prompt_text": text,
        **run_attrs(),
        "config_json": json.dumps(config, indent=2, sort_keys=True),
        "probe_order": "\n".join(order),
    }
    weights = None
    if is_gguf:
        attrs.update(weights_file=os.path.basename(src), weights_size=np.int64(os.path.getsize(src)),
                     weights_sha256=sha256_file(src), gguf_version=_dist_version("gguf"))
    else:
        sd = model.state_dict()
        weights = {n: t.detach().to(torch.float32).numpy() for n, t in sd.items()
                   if not (n == "lm_head.weight" and cfg.tie_word_embeddings)}
    write_golden(out_path, attrs, ids, order, probes, tokens, glogits, weights, links=links, compress=True)
    return dict(path=out_path, size=os.path.getsize(out_path), max_logit=float(logits.abs().max()),
                n_probes=len(order), tokens=tokens.tolist(), n_ids=int(ids.shape[0]),
                continuation=decode(tokens.tolist()))


def validate(path, order, probes, weights):
    """Re-read the written file: attributes, every probe and weight present with dtype, shape, values."""
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == FORMAT and int(f.attrs["format_version"]) == FORMAT_VERSION
        got = f.attrs["probe_order"].split("\n")
        assert got == order
        for n in order:
            ds = f["probes"][n]
            assert ds.dtype == np.float32 and np.array_equal(ds[()], probes[n].numpy()), n
        for n, a in weights.items():
            ds = f["weights"][n]
            assert ds.dtype == np.float32 and np.array_equal(ds[()], a), n
        assert f["input_ids"].dtype == np.int64 and f["greedy/tokens"].dtype == np.int64
        assert f["greedy/logits"].dtype == np.float32
        assert f["greedy/logits"].shape == (f["greedy/tokens"].shape[0], json.loads(f.attrs["config_json"])["vocab_size"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("preset", nargs="?", help="preset name (see --list)")
    ap.add_argument("-o", "--out", help="output file (default golden/<preset>.h5)")
    ap.add_argument("--all", action="store_true", help="write every preset to golden/<preset>.h5")
    ap.add_argument("--list", action="store_true", help="list presets")
    ap.add_argument("--from-model", metavar="PATH", help="an HF folder or a .gguf file instead of a preset")
    ap.add_argument("--name", help="with --from-model: the golden's name (its 'preset' attribute)")
    ap.add_argument("--text", help="with --from-model: the prompt text")
    ap.add_argument("--steps", type=int, default=16, help="with --from-model: greedy steps (default 16)")
    ap.add_argument("--layer-probes", default="in attn.ctx mid out",
                    help="with --from-model: per-layer probes to keep (default 'in attn.ctx mid out')")
    ap.add_argument("--origin", default="", help="with --from-model: where the checkpoint comes from, recorded")
    ap.add_argument("--tokenizer", choices=("hf", "gguf-spm"), default="hf",
                    help="with --from-model: HF's tokenizer (default), or the GGUF's own SentencePiece vocabulary "
                         "(golden/gguf_spm.py)")
    a = ap.parse_args(argv)
    if a.from_model:
        if a.preset or a.all or not a.name or not a.text or not a.out:
            ap.error("--from-model takes --name, --text and -o, and no preset or --all")
        rel = os.path.relpath(os.path.abspath(a.out), ROOT)
        command = (f"python3 {GENERATOR} --from-model {shlex.quote(a.from_model)} --name {a.name} "
                   f"--text {shlex.quote(a.text)} --steps {a.steps} --layer-probes {shlex.quote(a.layer_probes)} "
                   f"--origin {shlex.quote(a.origin)}" + (f" --tokenizer {a.tokenizer}" if a.tokenizer != "hf" else "")
                   + f" -o {rel}")
        r = generate_from_model(a.from_model, a.name, a.text, a.steps, a.layer_probes, a.out, command, a.origin,
                                a.tokenizer)
        print(f"{a.name}: {r['path']} {r['size']} bytes, {r['n_ids']} prompt tokens, {r['n_probes']} probes, "
              f"max|logit| {r['max_logit']:.4f}, greedy {r['tokens']} = {r['continuation']!r}")
        return 0
    if a.list:
        for name, p in PRESETS.items():
            print(f"{name:14s} {p['model_type']:14s} seed={p['seed']} T={p['prompt_len']} steps={p['steps']}")
        return 0
    if a.all:
        if a.preset or a.out:
            ap.error("--all takes no preset and no -o")
        jobs = [(n, os.path.join(HERE, n + ".h5")) for n in PRESETS]
    else:
        if not a.preset:
            ap.error("give a preset, --all or --list")
        if a.preset not in PRESETS:
            ap.error(f"unknown preset {a.preset!r}; known: {', '.join(PRESETS)}")
        jobs = [(a.preset, a.out or os.path.join(HERE, a.preset + ".h5"))]
    for name, path in jobs:
        rel = os.path.relpath(os.path.abspath(path), ROOT)
        shown = rel if not rel.startswith("..") else os.path.abspath(path)
        command = f"python3 {GENERATOR} {name} -o {shown}"
        r = generate(name, path, command)
        print(f"{name}: {r['path']} {r['size']} bytes, {r['n_probes']} probes, "
              f"max|logit| {r['max_logit']:.4f}, greedy {r['tokens']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
