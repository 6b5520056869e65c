/* Engine kernels for the gemma4 extras (see eng_gemma.h). Built with -fmad=false like the other kernels: every
 * reduction is the rmsnorm's (eng_kdev.cuh), one fixed order. Every launch is launch_dep's (programmatic inside the
 * captured decode graph): each kernel waits on the kernels before it (dep_wait) before touching memory, so in the
 * graph its launch overlaps the kernel before instead of draining the GPU between them. */
#include "eng_gemma.h"

#include "fault.h"
#include "softcap.h"

#include "eng_kdev.cuh"

namespace {

__global__ void __launch_bounds__(NORM_THREADS) k_head_norm(float *x, int64_t stride, int nh, int D, const float *w,
                                                            float eps, int kind)
{
    dep_launch();
    dep_wait(); /* inputs come from the kernels before: launch_dep */
    __shared__ float part[NORM_THREADS / 32];
    const int t = blockIdx.x / nh, h = blockIdx.x % nh;
    float *xr = x + (int64_t)t * stride + (int64_t)h * D;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < D; i += NORM_THREADS)
        ss = fmaf(xr[i], xr[i], ss);
    const float inv = inv_rms(block_sum(ss, part), D, eps);
    for (int i = threadIdx.x; i < D; i += NORM_THREADS)
        xr[i] = norm_apply(xr[i], inv, w, i, kind);
}

/* x += rmsnorm(o), one block a row. Rows of at most NA_PER * NORM_THREADS values (gemma4-12b's 3840: 15 a thread)
 * take every load of the row in one round trip: the norm weights before dep_wait (no kernel writes them), then o and
 * x together, kept in registers for the second pass; longer rows loop. Either way thread t sums fmaf(o_i, o_i) over
 * i = t, t + NORM_THREADS, ... in order and writes x_i + norm_apply(o_i): the same bits. */
constexpr int NA_PER = 16;
__global__ void __launch_bounds__(NORM_THREADS) k_norm_add(float *x, const float *o, const float *w, int n, float eps,
                                                           int kind)
{
    dep_launch();
    __shared__ float part[NORM_THREADS / 32];
    const float *orow = o + (int64_t)blockIdx.x * n;
    float *xr = x + (int64_t)blockIdx.x * n;
    const int t = threadIdx.x;
    if (n <= NA_PER * NORM_THREADS) {
        float ov[NA_PER], xv[NA_PER], wv[NA_PER];
#pragma unroll
        for (int j = 0; j < NA_PER; j++) { /* the weight row: read by norm_apply for kinds 0-2 */
            const int i = t + j * NORM_THREADS;
            wv[j] = i < n && kind != 3 ? w[i] : 0.0f;
        }
        dep_wait(); /* o and x come from the kernels before: launch_dep */
#pragma unroll
        for (int j = 0; j < NA_PER; j++) {
            const int i = t + j * NORM_THREADS;
            ov[j] = i < n ? orow[i] : 0.0f;
            xv[j] = i < n ? xr[i] : 0.0f;
        }
        float ss = 0.0f;
#pragma unroll
        for (int j = 0; j < NA_PER; j++)
            if (t + j * NORM_THREADS < n)
                ss = fmaf(ov[j], ov[j], ss);
        const float inv = inv_rms(block_sum(ss, part), n, eps);
#pragma unroll
        for (int j = 0; j < NA_PER; j++) {
            const int i = t + j * NORM_THREADS;
            if (i < n)
                xr[i] = xv[j] + norm_apply_w(ov[j], inv, wv[j], kind);
        }
        return;
    }
    dep_wait(); /* inputs come from the kernels before: launch_dep */
    float ss = 0.0f;
#pragma unroll 8 /* the loads issued together (a decode row is one block: latency, not bandwidth); same order */
    for (int i = t; i < n; i += NORM_THREADS)
        ss = fmaf(orow[i], orow[i], ss);
    const float inv = inv_rms(block_sum(ss, part), n, eps);
#pragma unroll 8
    for (int i = t; i < n; i += NORM_THREADS)
        xr[i] = xr[i] + norm_apply(orow[i], inv, w, i, kind);
}

__global__ void k_scale_dev(float *x, const float *scale, int64_t n)
{
    dep_launch();
    dep_wait(); /* inputs come from the kernels before: launch_dep */
    const float a = *scale;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= a;
}

/* the final logit softcap, element by element: rc_softcap1 (model/softcap.h), the host's function, so the same bits */
__global__ void k_softcap(float *x, int64_t n, float c)
{
    dep_launch();
    dep_wait(); /* the logits come from the kernel before: launch_dep */
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = rc_softcap1(x[i], c);
}

/* one block per (t, l) row of P */
__global__ void __launch_bounds__(NORM_THREADS) k_ple_inputs(float *in, const float *mproj, const float *tok,
                                                             const float *w, int P, float eps, int kind,
                                                             float proj_scale, float in_scale)
{
    dep_launch();
    dep_wait(); /* inputs come from the kernels before: launch_dep */
    __shared__ float part[NORM_THREADS / 32];
    const int64_t off = (int64_t)blockIdx.x * P;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < P; i += NORM_THREADS) {
        const float v = mproj[off + i] * proj_scale;
        ss = fmaf(v, v, ss);
    }
    const float inv = inv_rms(block_sum(ss, part), P, eps);
    for (int i = threadIdx.x; i < P; i += NORM_THREADS)
        in[off + i] = (norm_apply(mproj[off + i] * proj_scale, inv, w, i, kind) + tok[off + i]) * in_scale;
}

__global__ void k_ple_gate(float *g, const float *in, int T, int L, int P, int l, int act)
{
    dep_launch();
    dep_wait(); /* inputs come from the kernels before: launch_dep */
    const int64_t n = (int64_t)T * P;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = k / P, i = k % P;
        g[k] = glu_apply(g[k], in[(t * L + l) * P + i], act);
    }
}

/* position p between ring row p % W and linear row p - base, by the block's threads as 16-byte words */
__device__ void ring_row(uint4 *ring, uint4 *lin, int64_t words, int64_t p, int64_t base, int W, int to_ring,
                         int unwrapped)
{
    /* fault ring_kv_unwrapped: the ring is written as a linear cache of W rows, clamped at its last row */
    const int64_t rrow = to_ring && unwrapped ? (p < W ? p : W - 1) : p % W;
    uint4 *r = ring + rrow * words, *q = lin + (p - base) * words;
    for (int64_t i = threadIdx.x; i < words; i += blockDim.x) {
        if (to_ring)
            r[i] = q[i];
        else
            q[i] = r[i];
    }
}

/* one block per position */
__global__ void k_ring_move(uint4 *ring, uint4 *lin, int64_t words, int64_t p0, int64_t base, int W, int to_ring,
                           int unwrapped)
{
    dep_launch();
    dep_wait(); /* inputs come from the kernels before: launch_dep */
    ring_row(ring, lin, words, p0 + blockIdx.x, base, W, to_ring, unwrapped);
}

/* The decode step's moves with pos and rel = pos - base read from device memory: gather positions [base, pos)
 * (blocks striding over them), or write position pos back (to_ring); blockIdx.y picks the pair (K's, V's). */
__global__ void k_ring_move_dev(uint4 *ring0, uint4 *lin0, uint4 *ring1, uint4 *lin1, int64_t words,
                                const int64_t *pos_dev, const int64_t *rel_dev, int W, int to_ring, int unwrapped)
{
    uint4 *ring = blockIdx.y ? ring1 : ring0, *lin = blockIdx.y ? lin1 : lin0; /* y: K, then V */
    dep_launch();
    dep_wait(); /* inputs come from the kernels before: launch_dep */
    const int64_t pos = *pos_dev, base = pos - *rel_dev;
    if (to_ring) {
        if (blockIdx.x == 0)
            ring_row(ring, lin, words, pos, base, W, 1, unwrapped);
        return;
    }
    for (int64_t p = base + blockIdx.x; p < pos; p += gridDim.x)
        ring_row(ring, lin, words, p, base, W, 0, unwrapped);
}

int blocks_for(int64_t n) { return (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096); }

} // namespace

cudaError_t engk_head_norm(float *x, int64_t stride, int T, int nh, int D, const float *w, float eps, int kind,
                           cudaStream_t s)
{
    if (T * nh > 0)
        return launch_dep(k_head_norm, dim3(T * nh), dim3(NORM_THREADS), 0, s, x, stride, nh, D, w, eps, kind);
    return cudaGetLastError();
}

cudaError_t engk_norm_add(float *x, const float *o, const float *w, int T, int n, float eps, int kind, cudaStream_t s)
{
    if (T > 0)
        return launch_dep(k_norm_add, dim3(T), dim3(NORM_THREADS), 0, s, x, o, w, n, eps, kind);
    return cudaGetLastError();
}

cudaError_t engk_scale_dev(float *x, const float *scale, int64_t n, cudaStream_t s)
{
    if (n > 0)
        return launch_dep(k_scale_dev, dim3(blocks_for(n)), dim3(256), 0, s, x, scale, n);
    return cudaGetLastError();
}

cudaError_t engk_softcap(float *x, int64_t n, float c, cudaStream_t s)
{
    if (n > 0)
        return launch_dep(k_softcap, dim3(blocks_for(n)), dim3(256), 0, s, x, n, c);
    return cudaGetLastError();
}

cudaError_t engk_ple_inputs(float *in, const float *mproj, const float *tok, const float *w, int T, int L, int P,
                            float eps, int kind, float proj_scale, float in_scale, cudaStream_t s)
{
    if (T * L > 0)
        return launch_dep(k_ple_inputs, dim3(T * L), dim3(NORM_THREADS), 0, s, in, mproj, tok, w, P, eps, kind, proj_scale,
                          in_scale);
    return cudaGetLastError();
}

cudaError_t engk_ple_gate(float *g, const float *in, int T, int L, int P, int l, int act, cudaStream_t s)
{
    const int64_t n = (int64_t)T * P;
    if (n > 0)
        return launch_dep(k_ple_gate, dim3(blocks_for(n)), dim3(256), 0, s, g, in, T, L, P, l, act);
    return cudaGetLastError();
}

cudaError_t engk_ring_move(void *ring, void *lin, int64_t rowbytes, int64_t p0, int64_t n, int64_t base, int W,
                           int to_ring, cudaStream_t s)
{
    if (n > 0)
        return launch_dep(k_ring_move, dim3((unsigned)n), dim3(128), 0, s, (uint4 *)ring, (uint4 *)lin, rowbytes / 16, p0,
                          base, W, to_ring, rc_fault_active("ring_kv_unwrapped"));
    return cudaGetLastError();
}

cudaError_t engk_ring_move_dev(void *ring, void *lin, void *ring2, void *lin2, int64_t rowbytes, const int64_t *pos_dev,
                               const int64_t *rel_dev, int W, int max_rows, int to_ring, cudaStream_t s)
{
    const int blocks = to_ring ? 1 : max_rows < 1024 ? max_rows : 1024;
    if ((ring2 == NULL) != (lin2 == NULL))
        return cudaErrorInvalidValue;
    if (blocks > 0)
        return launch_dep(k_ring_move_dev, dim3((unsigned)blocks, ring2 ? 2u : 1u), dim3(128), 0, s, (uint4 *)ring,
                          (uint4 *)lin, (uint4 *)ring2, (uint4 *)lin2, rowbytes / 16, pos_dev, rel_dev, W, to_ring,
                          rc_fault_active("ring_kv_unwrapped"));
    return cudaGetLastError();
}
