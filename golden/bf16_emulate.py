"""The engine's bf16 numerics emulated on HF's qwen3_5 goldens (CPU): matrices rounded to bf16, and the inputs of
the prefill matmuls the engine runs on the bf16 GEMM rounded to bf16 (prefill rows only; decode rows keep fp32),
per configuration; prints the prompt logits', teacher-forced steps' and probes' distance from the fp32 forward
(scaled max-abs, nmse as harness compare computes them). engine/README.md, "Bounds against HF", quotes it.

    /opt/hfenv/bin/python golden/bf16_emulate.py qwen3_5 qwen3_5_short

With --hf-bf16 it runs HuggingFace's own bf16 forward instead (the fp32 model cast to bfloat16, every tensor and
activation in bf16, as `dtype=torch.bfloat16` loads it) on each preset's golden (golden/<preset>.h5): teacher-forced
on the golden's greedy tokens, the steps whose top-1 differs from the golden's token (with the golden's top-2
margin there), the largest |logit| difference, and how many tokens its own greedy run keeps. It answers whether a
greedy flip of the engine's bf16 stage at a golden's near-tie is something any bf16 forward does:

    /opt/hfenv/bin/python golden/bf16_emulate.py --hf-bf16 llama qwen3 qwen3_5 qwen3_5_short gemma4
"""
import sys

import torch
import torch.nn.functional as F

import gen

BASE = ("self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
GDN_IN = ("linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.in_proj_b", "linear_attn.in_proj_a")
CONFIGS = {  # round: inputs rounded once; split: bf16(x) + bf16(x - bf16(x)); gate: q_proj's gate rows rounded too
    "weights only": dict(round=(), split=(), q=False, gate=False),
    "DeltaNet and gate fp32 (engine before)": dict(round=BASE, split=(), q=True, gate=False),
    "all rounded once": dict(round=BASE + GDN_IN + ("linear_attn.out_proj",), split=(), q=True, gate=True),
    "in-projection in two halves (engine)": dict(round=BASE + ("linear_attn.out_proj",), split=GDN_IN, q=True,
                                                 gate=True),
}


def bf(t):
    return t.to(torch.bfloat16).to(torch.float32)


def halves(t):
    h = bf(t)
    return h + bf(t - h)


def metrics(a, r):
    return ((a - r).abs().max().item() / max(r.abs().max().item(), 1.0),
            ((a - r) ** 2).sum().item() / (r ** 2).sum().item())


def probes(model, cap):  # inputs of out_proj / o_proj / down_proj (gdn.normed, attn.ctx_gated, mlp.act), layer outs
    def put(k, v):
        cap.setdefault(k, v[0].clone())
    for n, m in model.named_modules():
        if n.endswith(("linear_attn.out_proj", "mlp.down_proj", "self_attn.o_proj")):
            m.register_forward_pre_hook(lambda mod, a, n=n: put(n + ".in", a[0]))
        if n.startswith("model.layers.") and n.count(".") == 2:
            m.register_forward_hook(lambda mod, a, o, n=n: put(n + ".out", o[0] if isinstance(o, tuple) else o))


def teacher_forced(model, ids, toks):
    with torch.no_grad():
        out = model(ids[None], use_cache=True)
        prompt, steps = out.logits[0].clone(), [out.logits[0, -1].clone()]
        for t in toks[:-1]:
            out = model(t.view(1, 1), past_key_values=out.past_key_values, use_cache=True)
            steps.append(out.logits[0, -1].clone())
    return prompt, torch.stack(steps)


def emulate(model, cfg):
    H, D = model.config.num_attention_heads, model.config.head_dim
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.copy_(bf(m.weight))
        model.model.embed_tokens.weight.copy_(bf(model.model.embed_tokens.weight))
    for n, m in model.named_modules():
        if not isinstance(m, torch.nn.Linear):
            continue
        for names, fn in ((cfg["split"], halves), (cfg["round"], bf)):
            if any(n.endswith(s) for s in names):
                m.register_forward_pre_hook(lambda mod, a, fn=fn: (fn(a[0]),) if a[0].shape[-2] > 1 else None)
                break
        else:
            if n.endswith("self_attn.q_proj") and cfg["q"]:  # rows per head [query | gate]
                def qhook(mod, a, out, gate=cfg["gate"]):
                    x = a[0]
                    if x.shape[-2] == 1:
                        return None
                    y = F.linear(bf(x), mod.weight).view(*x.shape[:-1], H, 2 * D)
                    if not gate:
                        y[..., D:] = F.linear(x, mod.weight).view(*x.shape[:-1], H, 2 * D)[..., D:]
                    return y.reshape(*x.shape[:-1], H * 2 * D)
                m.register_forward_hook(qhook)


def hf_bf16(preset):
    import os

    import h5py
    import numpy as np
    p = gen.PRESETS[preset]
    with h5py.File(os.path.join(os.path.dirname(os.path.abspath(__file__)), preset + ".h5"), "r") as f:
        gtok = torch.from_numpy(np.asarray(f["greedy/tokens"], dtype=np.int64))
        glog = torch.from_numpy(np.asarray(f["greedy/logits"], dtype=np.float32))
    ref, ids = gen.build_model(p)
    toks, _ = gen.run_greedy(ref, ids, p["steps"])
    if not torch.equal(toks, gtok):
        sys.exit(f"{preset}: this torch/transformers does not reproduce the golden's greedy tokens")
    model = ref.to(torch.bfloat16)
    _, steps = teacher_forced(model, ids, gtok)
    steps = steps.float()
    top2 = glog.topk(2, dim=-1).values
    flips = [(i, (top2[i, 0] - top2[i, 1]).item()) for i in range(len(gtok)) if steps[i].argmax().item() != gtok[i]]
    free, _ = gen.run_greedy(model, ids, p["steps"])
    kept = next((i for i in range(len(gtok)) if free[i] != gtok[i]), len(gtok))
    print(f"{preset} / HF bf16 forward: teacher-forced top-1 differs at steps "
          f"{', '.join(f'{i} (golden margin {m:.3e})' for i, m in flips) or 'none'}; max |logit diff| "
          f"{(steps - glog).abs().max().item():.3e} (max |logit| {glog.abs().max().item():.2f}); its own greedy run "
          f"keeps {kept}/{len(gtok)} tokens", flush=True)


def main():
    torch.set_num_threads(2)
    if sys.argv[1:2] == ["--hf-bf16"]:
        for preset in sys.argv[2:] or ["qwen3_5", "qwen3_5_short"]:
            hf_bf16(preset)
        return
    for preset in sys.argv[1:] or ["qwen3_5", "qwen3_5_short"]:
        p = gen.PRESETS[preset]
        ref, ids = gen.build_model(p)
        toks, _ = gen.run_greedy(ref, ids, p["steps"])
        rcap = {}
        probes(ref, rcap)
        rp, rs = teacher_forced(ref, ids, toks)
        for name, cfg in CONFIGS.items():
            emu, _ = gen.build_model(p)
            cap = {}
            probes(emu, cap)  # before emulate's hooks: the probes see the fp32 inputs, as the engine's do
            emulate(emu, cfg)
            ep, es = teacher_forced(emu, ids, toks)
            sp, npr = metrics(ep, rp)
            steps = [metrics(es[i], rs[i]) for i in range(len(es))]
            worst = max(((k,) + metrics(cap[k], rcap[k]) for k in rcap), key=lambda v: v[2])
            print(f"{preset} / {name}: prompt logits scaled {sp:.3e} nmse {npr:.3e}; steps scaled <= "
                  f"{max(s for s, _ in steps):.3e} nmse <= {max(n for _, n in steps):.3e}; worst probe nmse "
                  f"{worst[2]:.3e} ({worst[0]})", flush=True)


if __name__ == "__main__":
    main()
