#!/usr/bin/env python3
"""A speed probe for a design question, run on the GPU machine (CuPy, nvcc): how much of a llama3-8b decode
layer's GEMV time over its bytes is the kernel boundaries? bench/persist_probe.cu holds the layer's four GEMVs
(norm + q|k|v, o + residual, norm + gate|up + GLU, down + residual) as four kernels and as one persistent kernel
whose phases meet at grid barriers, each warp loading its next phase's first rows before it arrives. Both run as
captured CUDA graphs over two layers' weights (each layer 436 MB: no replay finds them in L2); the read ceiling
is a plain read of 1 GiB in the same run. Prints one line per form and whether both forms gave the same floats.

    python3 bench/persist_probe.py [--reps 50] [--configs W,B,U;...]

--configs: the persistent kernel's launch shapes, each W warps a block, B blocks an SM (its launch bound; the grid
is B x SMs, every block resident) and a ring of U loads per row and lane (default 8,2,8: session 15's one).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import cupy as cp
import numpy as np

HD, NQ, I = 4096, 6144, 14336


def bf16_rand(n, scale):
    f = cp.random.standard_normal(n, dtype=cp.float32) * cp.float32(scale)
    return (f.view(cp.uint32) >> 16).astype(cp.uint16)


def time_graph(g, stream, reps):
    g.launch(stream)
    stream.synchronize()
    t0, t1 = cp.cuda.Event(), cp.cuda.Event()
    t0.record(stream)
    for _ in range(reps):
        g.launch(stream)
    t1.record(stream)
    t1.synchronize()
    return cp.cuda.get_elapsed_time(t0, t1) / reps  # ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--configs", default="8,2,8")
    a = ap.parse_args()
    configs = [tuple(int(v) for v in c.split(",")) for c in a.configs.split(";") if c]
    if not configs or any(len(c) != 3 or min(c) < 1 for c in configs):
        print(f"persist_probe: error: --configs wants W,B,U;... with positive numbers, got '{a.configs}'",
              file=sys.stderr)
        return 2
    rc = 0
    for warps, minb, u in configs:
        rc |= run_config(a, warps, minb, u)
    return rc


def run_config(a, WARPS, MINB, U):
    here = os.path.dirname(os.path.abspath(__file__))
    cubin = os.path.join(tempfile.mkdtemp(), "persist_probe.cubin")
    cc = cp.cuda.Device().compute_capability
    subprocess.run(["nvcc", "-cubin", f"-arch=sm_{cc}", "-O3", f"-DPROBE_WARPS={WARPS}", f"-DPROBE_MINB={MINB}",
                    f"-DPROBE_U={U}", "-Xptxas=-warn-spills", os.path.join(here, "persist_probe.cu"), "-o", cubin],
                   check=True)
    mod = cp.RawModule(path=cubin)
    k_persist, k_phase, k_read = (mod.get_function(n) for n in ("k_persist", "k_phase", "k_read"))
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    rng = np.random.default_rng(7)
    cp.random.seed(7)
    layers = []
    for _ in range(2):
        layers.append(dict(wq=bf16_rand(NQ * HD, 0.02), wo=bf16_rand(HD * HD, 0.02), wgu=bf16_rand(2 * I * HD, 0.02),
                           wd=bf16_rand(HD * I, 0.02)))
    nw1 = cp.asarray(rng.uniform(0.5, 1.5, HD).astype(np.float32))
    nw2 = cp.asarray(rng.uniform(0.5, 1.5, HD).astype(np.float32))
    x0 = cp.asarray(rng.standard_normal(HD).astype(np.float32))
    bufs = {f: dict(x=x0.copy(), qkv=cp.zeros(NQ, cp.float32), act=cp.zeros(I, cp.float32)) for f in ("sep", "per")}
    bar = cp.zeros(2, cp.uint32)
    smem = HD * 4
    grid_per = MINB * sms  # __launch_bounds__(WARPS * 32, MINB): MINB blocks an SM, every block resident

    def args(L, b):
        return (L["wq"], L["wo"], L["wgu"], L["wd"], nw1, nw2, b["x"], b["qkv"], b["act"], np.int32(HD),
                np.int32(NQ), np.int32(I))

    def sep(L, s):
        for which, n in ((0, NQ), (1, HD), (2, I), (3, HD)):
            k_phase(((n + WARPS - 1) // WARPS,), (WARPS * 32,), args(L, bufs["sep"]) + (np.int32(which),),
                    shared_mem=smem)

    def per(L, s):
        k_persist((grid_per,), (WARPS * 32,), args(L, bufs["per"]) + (bar[0:1], bar[1:2]), shared_mem=smem)

    # the same floats: one layer in each form from the same x
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        sep(layers[0], s)
        per(layers[0], s)
    s.synchronize()
    same = all(bool(cp.array_equal(bufs["sep"][k], bufs["per"][k])) for k in ("x", "qkv", "act"))
    finite = bool(cp.isfinite(bufs["per"]["x"]).all())

    def capture(body):
        """a graph of body() on s, or None where this CuPy cannot capture (then launches time directly)"""
        try:
            s.begin_capture()
            with s:
                body()
            return s.end_capture()
        except Exception as exc:  # noqa: BLE001 - any capture failure falls back to direct launches
            print(f"persist_probe: no graph capture ({exc}); direct launches", file=sys.stderr)
            return None

    def timed(graph, body, reps):
        if graph is not None:
            return time_graph(graph, s, reps)
        with s:
            body()
            t0, t1 = cp.cuda.Event(), cp.cuda.Event()
            t0.record()
            for _ in range(reps):
                body()
            t1.record()
        t1.synchronize()
        return cp.cuda.get_elapsed_time(t0, t1) / reps

    bodies = {"sep": lambda: [sep(L, s) for L in layers], "per": lambda: [per(L, s) for L in layers]}
    graphs = {name: capture(b) for name, b in bodies.items()}
    # read ceiling: 1 GiB
    big = cp.zeros(1 << 30, cp.uint8)
    sink = cp.zeros(1, cp.uint32)
    rbody = lambda: k_read((sms * 8,), (512,), (big, np.int64((1 << 30) // 16), sink))  # noqa: E731
    g_read = capture(rbody)
    read_ms = min(timed(g_read, rbody, 20) for _ in range(3))
    read_gbs = (1 << 30) / read_ms / 1e6
    lbytes = (NQ + HD + 2 * I + I) * HD * 2
    floor_us = lbytes / read_gbs / 1e3
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"persist_probe [{WARPS} warps a block, {MINB} blocks an SM, ring {U}]: {dev}, {sms} SMs, read ceiling "
          f"{read_gbs:.0f} GB/s (1 GiB), layer {lbytes / 1e6:.1f} MB, floor {floor_us:.1f} us; same floats: {same}, "
          f"finite: {finite}")
    for rnd in range(2):
        for name, what in (("sep", "4 kernels a layer (graph, no programmatic launch)"),
                           ("per", "1 persistent kernel, 3 grid barriers, next rows loaded before each")):
            ms = timed(graphs[name], bodies[name], a.reps)
            us = 1e3 * ms / len(layers)
            print(f"  round {rnd} {what:70s} {us:8.1f} us a layer  {100 * floor_us / us:5.1f}% of floor")
    return 0 if same and finite else 1


if __name__ == "__main__":
    sys.exit(main())
