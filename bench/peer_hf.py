#!/usr/bin/env python3
"""Same-run peers of `engine bench` on the GPU machine (no network needed): HF transformers LlamaForCausalLM
(bf16, random weights, batch 1; sdpa and eager attention) timed on prefill and greedy decode after the same
prompt lengths, cuBLAS GEMV through torch on the model's matrix shapes, the bf16 dense matmul peak, and torch's
scaled_dot_product_attention alone at each prompt length as HF's sdpa path calls it (time and kernel names).

    engine bench --print-shape llama3-8b > shape.json
    python3 bench/peer_hf.py --config shape.json --out peer.json [--prompt-len 16,2048,8192,32768]

The shape comes from the engine's own table (engine/eng_cli.c, printed by `engine bench --print-shape`), so
both sides run the same numbers. Timings: torch.cuda.synchronize around each prefill / decode step (host
clock), CUDA events around CUDA-graph replays for the GEMVs and the matmul; median of the repeats, with the
same spread statistics as engine bench (bench/README.md). A run that does not fit the GPU is recorded as
"OOM", not skipped. The JSON is rewritten atomically after every measurement.
"""
import argparse
import json
import math
import os
import sys
import time


def stats(samples_by_round):
    """ms samples grouped by round -> median, min, max, MAD, half-range of the round medians, spread."""
    def med(v):
        v = sorted(v)
        n = len(v)
        return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    flat = [x for r in samples_by_round for x in r]
    m = med(flat)
    rmeds = [med(r) for r in samples_by_round]
    mad = med([abs(x - m) for x in flat])
    rs = 0.5 * (max(rmeds) - min(rmeds))
    return {"median_ms": m, "min_ms": min(flat), "max_ms": max(flat), "mad_ms": mad, "round_spread_ms": rs,
            "spread_ms": max(mad, rs), "samples": len(flat)}


def write_json(path, obj):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def prompt_ids(n, vocab):
    # the engine bench's prompt: id i = (1000003 i + 17) mod V
    return [(1000003 * i + 17) % vocab for i in range(n)]


def is_oom(exc, torch):
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def graph_time_ms(torch, fn, calls, reps):
    """median ms per call of `calls` calls of fn captured in one CUDA graph, replayed reps times"""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / calls)
    del g
    return times


def measure_peak(torch, n=8192):
    """bf16 dense matmul rate (cuBLAS through torch.matmul), random data (zeros run faster), FLOP/s"""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    t = graph_time_ms(torch, lambda i: torch.matmul(a, b, out=c), 5, 10)
    del a, b, c
    torch.cuda.empty_cache()
    st = stats([t])
    flop = 2.0 * n * n * n
    return {"m": n, "n": n, "k": n, "what": "torch.matmul bf16 %dx%dx%d, random data, CUDA graph of 5, median of 10"
            % (n, n, n), "tflops_median": flop / st["median_ms"] / 1e9, "tflops_best": flop / st["min_ms"] / 1e9,
            **st}


def gemv_shapes(cfg):
    h, d = cfg["hidden_size"], cfg["head_dim"]
    q, kv, i, v = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d, cfg["intermediate_size"], cfg["vocab_size"]
    return [("q|k|v", q + 2 * kv, h), ("o", h, q), ("gate|up", 2 * i, h), ("gate", i, h), ("down", h, i),
            ("lm_head", v, h)]


def measure_gemv(torch, name, n, k, l2_bytes):
    """y[1, N] = x[1, K] W[N, K]^T in bf16 (torch.nn.functional.linear -> cuBLAS), weights rotated over enough
    copies that L2 holds none of them between uses; GB/s counts W, x and y once per call"""
    wbytes = n * k * 2
    copies = max(2, math.ceil(4 * l2_bytes / wbytes))
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(1, n, device="cuda", dtype=torch.bfloat16)
    calls = max(copies, 8 * copies if wbytes < 64 << 20 else copies)
    t = graph_time_ms(torch, lambda i: torch.matmul(x, ws[i % copies].t(), out=y), calls, 10)
    del ws, x, y
    torch.cuda.empty_cache()
    st = stats([t])
    byt = wbytes + 2 * k + 2 * n
    return {"name": name, "n": n, "k": k, "bytes": byt, "copies": copies, "us": 1e3 * st["median_ms"],
            "gbs": byt / st["median_ms"] / 1e6, "gbs_best": byt / st["min_ms"] / 1e6, **st}


def measure_sdpa(torch, cfg, P):
    """torch's scaled_dot_product_attention as HF's sdpa path calls it in a prefill of P tokens (bf16, batch 1,
    causal, the shape's heads with enable_gqa, torch's default backend choice): ms per layer (CUDA events, median
    of 10 after 2 warm-up calls), TFLOP/s on the causal half (4 P^2 D H / 2, as engine bench counts attention), and
    the CUDA kernels one call ran (torch.profiler), so the table names what HF's attention is"""
    import torch.nn.functional as F
    h, hk, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    q = torch.randn(1, h, P, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, hk, P, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, hk, P, d, device="cuda", dtype=torch.bfloat16)

    def call():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hk != h)

    for _ in range(2):
        call()
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        call()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    kernels = []
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA and ev.name not in kernels:
                kernels.append(ev.name[:160])
    except Exception as e:  # the timing stands without the names
        kernels = ["(profiler: %s)" % str(e).splitlines()[0][:120]]
    del q, k, v
    torch.cuda.empty_cache()
    st = stats([ts])
    flop = 4.0 * P * P * d * h / 2
    return {"prompt_len": P, "heads": h, "kv_heads": hk, "head_dim": d, "ms_layer": st["median_ms"],
            "tflops": flop / st["median_ms"] / 1e9, "kernels": kernels, **st}


def build_model(torch, cfg):
    from transformers import LlamaConfig, LlamaForCausalLM
    c = dict(cfg)
    c.pop("model_type", None)
    config = LlamaConfig(**c)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(old)
    model = model.to(torch.bfloat16).eval()
    return model, config


def run_hf(torch, model, config, impl, P, steps, rounds):
    """rounds x (fresh cache, prefill of P tokens keeping the last row's logits, `steps` greedy decode steps)"""
    from transformers import DynamicCache
    model.set_attn_implementation(impl)
    ids = torch.tensor([prompt_ids(P, config.vocab_size)], device="cuda", dtype=torch.long)
    pre, dec = [], []
    with torch.inference_mode():
        for _ in range(rounds):
            cache = DynamicCache(config=config)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize()
            pre.append([1e3 * (time.perf_counter() - t0)])
            del out
            d = []
            for _ in range(steps):
                t1 = time.perf_counter()
                out = model(input_ids=tok, past_key_values=cache, use_cache=True)
                tok = out.logits[:, -1].argmax(-1, keepdim=True)
                torch.cuda.synchronize()
                d.append(1e3 * (time.perf_counter() - t1))
                del out
            dec.append(d)
            del cache
    ps, ds = stats(pre), stats(dec)
    return {"prefill_ms": ps["median_ms"], "prefill_tok_s": 1e3 * P / ps["median_ms"],
            **{"prefill_" + k: v for k, v in ps.items() if k != "median_ms"},
            "ms_tok": ds["median_ms"], "tok_s": 1e3 / ds["median_ms"],
            **{"decode_" + k: v for k, v in ds.items() if k != "median_ms"}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="HF config.json of the shape (engine bench --print-shape NAME)")
    ap.add_argument("--out", required=True, help="JSON written here (atomically, after every measurement)")
    ap.add_argument("--prompt-len", default="16,2048,8192,32768")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--impl", default="sdpa,eager", help="HF attention implementations to time")
    ap.add_argument("--commit", default=None)
    ap.add_argument("--no-model", action="store_true", help="peak and GEMV only")
    a = ap.parse_args()
    try:
        with open(a.config) as f:
            cfg = json.load(f)
        prompts = [int(x) for x in a.prompt_len.split(",")]
        if not prompts or min(prompts) < 1 or a.steps < 2 or a.rounds < 1:
            raise ValueError("--prompt-len needs positive lengths, --steps >= 2, --rounds >= 1")
        for key in ("hidden_size", "head_dim", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                    "vocab_size", "num_hidden_layers"):
            if not isinstance(cfg.get(key), int):
                raise ValueError("%s: no integer '%s'" % (a.config, key))
    except (OSError, ValueError) as e:
        print("peer_hf: error: %s" % e, file=sys.stderr)
        return 2
    import torch
    import transformers
    if not torch.cuda.is_available():
        print("peer_hf: error: no CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    res = {"format": "refchain-peer", "format_version": 1, "commit": a.commit, "device": props.name,
           "torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.version.cuda,
           "config": cfg, "steps": a.steps, "rounds": a.rounds, "prompt_lens": prompts,
           "timing": "prefill/decode: torch.cuda.synchronize + host clock per call; peak/GEMV: CUDA events around "
                     "CUDA-graph replays", "peak": None, "gemv": [], "hf": []}
    l2 = getattr(props, "L2_cache_size", 64 << 20) or (64 << 20)
    res["peak"] = measure_peak(torch)
    print("peak: %.0f TFLOP/s median (%.0f best), %s" % (res["peak"]["tflops_median"], res["peak"]["tflops_best"],
                                                       res["peak"]["what"]), flush=True)
    write_json(a.out, res)
    for name, n, k in gemv_shapes(cfg):
        g = measure_gemv(torch, name, n, k, l2)
        res["gemv"].append(g)
        print("gemv %-8s %6d x %-6d %8.1f us %7.0f GB/s" % (name, n, k, g["us"], g["gbs"]), flush=True)
        write_json(a.out, res)
    res["sdpa"] = []
    for P in prompts:
        if P < 2:
            continue
        try:
            r = measure_sdpa(torch, cfg, P)
            print("sdpa attention prompt %6d: %8.3f ms/layer %6.1f TFLOP/s  %s" % (
                P, r["ms_layer"], r["tflops"], " + ".join(r["kernels"])[:200]), flush=True)
        except Exception as e:
            r = {"prompt_len": P, "status": "OOM" if is_oom(e, torch) else "error: %s" % str(e).splitlines()[0][:200]}
            print("sdpa attention prompt %6d: %s" % (P, r["status"]), flush=True)
        res["sdpa"].append(r)
        write_json(a.out, res)
    if a.no_model:
        return 0
    t0 = time.perf_counter()
    model, config = build_model(torch, cfg)
    print("model: %d layers, %.2f GB of bf16 weights, built on the GPU in %.1f s" % (
        config.num_hidden_layers, sum(p.numel() for p in model.parameters()) * 2 / 1e9, time.perf_counter() - t0),
        flush=True)
    for impl in a.impl.split(","):
        try:  # warm-up: the first calls load kernels and pick algorithms
            run_hf(torch, model, config, impl, min(prompts), 2, 1)
        except Exception:
            pass
        torch.cuda.empty_cache()
        for P in prompts:
            row = {"impl": impl, "prompt_len": P}
            try:
                row.update(run_hf(torch, model, config, impl, P, a.steps, a.rounds))
                row["status"] = "ok"
                print("hf %-5s prompt %6d: prefill %9.1f ms (%8.0f tok/s), decode %7.2f ms/token" % (
                    impl, P, row["prefill_ms"], row["prefill_tok_s"], row["ms_tok"]), flush=True)
            except Exception as e:  # an OOM is a result; anything else is recorded and the run goes on
                row["status"] = "OOM" if is_oom(e, torch) else "error: %s" % str(e).splitlines()[0][:200]
                print("hf %-5s prompt %6d: %s" % (impl, P, row["status"]), flush=True)
            torch.cuda.empty_cache()
            res["hf"].append(row)
            write_json(a.out, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
