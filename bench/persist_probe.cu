// A speed probe, not engine code (bench/persist_probe.py compiles and runs it with CuPy on the GPU machine):
// one llama3-8b decode layer's four GEMVs (norm + q|k|v, o + residual, norm + gate|up + SiLU GLU, down + residual;
// attention left out: o reads the first 4096 q|k|v outputs as its ctx) as four separate kernels, and as one
// persistent kernel whose phases meet at grid barriers, each warp issuing the first loads of its next phase's
// rows before it arrives at the barrier (the weights never depend on the activations). bf16 weights (raw
// uint16), fp32 activations; each row's sum in the same order in both forms (lane l: chunks l, l + 32, ... by
// fmaf in order, then a butterfly), so they give the same floats.
#include <stdint.h>

#define FULL 0xffffffffu
#ifndef PROBE_U
#define PROBE_U 8
#endif
#ifndef PROBE_WARPS
#define PROBE_WARPS 8
#endif
#ifndef PROBE_MINB
#define PROBE_MINB 2
#endif
constexpr int U = PROBE_U;         // 16-byte loads in flight per row and lane
constexpr int WARPS = PROBE_WARPS; // warps per block
constexpr int MINB = PROBE_MINB;   // blocks an SM (the launch bound; the persistent grid is MINB x SMs)

__device__ __forceinline__ uint4 ldw(const uint4 *p)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ float dot8(uint4 w, const float *xa, float acc)
{
    acc = fmaf(__uint_as_float(w.x << 16), xa[0], acc);
    acc = fmaf(__uint_as_float(w.x & 0xffff0000u), xa[1], acc);
    acc = fmaf(__uint_as_float(w.y << 16), xa[2], acc);
    acc = fmaf(__uint_as_float(w.y & 0xffff0000u), xa[3], acc);
    acc = fmaf(__uint_as_float(w.z << 16), xa[4], acc);
    acc = fmaf(__uint_as_float(w.z & 0xffff0000u), xa[5], acc);
    acc = fmaf(__uint_as_float(w.w << 16), xa[6], acc);
    acc = fmaf(__uint_as_float(w.w & 0xffff0000u), xa[7], acc);
    return acc;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(FULL, v, o);
    return v;
}

// rmsnorm(x[0:K]) * nw into xs (shared), by the whole block
__device__ void norm_into(float *xs, const float *x, const float *nw, int K, float *part)
{
    float ss = 0.0f;
    for (int i = threadIdx.x; i < K; i += blockDim.x) {
        const float v = __ldcg(x + i); /* L2: other blocks wrote x in this launch (past a grid barrier) */
        xs[i] = v;
        ss = fmaf(v, v, ss);
    }
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = ss;
    __syncthreads();
    float t = 0.0f;
    for (int w = 0; w < WARPS; w++)
        t += part[w];
    const float inv = rsqrtf(t / (float)K + 1e-5f);
    for (int i = threadIdx.x; i < K; i += blockDim.x)
        xs[i] = xs[i] * inv * nw[i];
    __syncthreads();
}

// A phase: rows of W (R = 2: gate row n and up row N + n, GLU), K columns (K % 256 == 0), x from shared (xs) or
// global (xg), y[n] = (res ? res[n] : 0) + sum, or silu(g) u. The warp takes outputs w0, w0 + step, ...; its ring
// holds the first U chunks of its first rows on entry (pre), and on exit the first U chunks of the next phase's
// first rows (nW, nN, nK, nR; nW NULL: none), loaded by the last row's refills.
struct Phase {
    const uint4 *W;
    int N, K, R;
    const float *xs, *xg, *res;
    float *y;
};

__device__ void fill(uint4 (&ring)[2][U], const Phase &p, int w0, int lane)
{
    if (w0 >= p.N)
        return;
    const int nc = p.K / 8;
    const uint4 *r0 = p.W + (int64_t)w0 * nc, *r1 = p.W + ((int64_t)p.N + w0) * nc;
#pragma unroll
    for (int u = 0; u < U; u++) {
        ring[0][u] = ldw(r0 + lane + 32 * u);
        if (p.R == 2)
            ring[1][u] = ldw(r1 + lane + 32 * u);
    }
}

template <int RC>
__device__ __forceinline__ void run_phase(const Phase &p, const Phase &nx, uint4 (&ring)[2][U], int w0, int step,
                                          int lane)
{
    const int nj = p.K / 256, nc = p.K / 8;
    for (int n = w0; n < p.N; n += step) {
        const int n1 = n + step;
        const bool more = n1 < p.N;
        // the rows whose chunks the tail refills load: this phase's next outputs, else the next phase's first
        const uint4 *nr0, *nr1;
        int nrc, nnc;
        if (more) {
            nr0 = p.W + (int64_t)n1 * nc;
            nr1 = p.W + ((int64_t)p.N + n1) * nc;
            nrc = RC;
            nnc = nc;
        } else if (nx.W && w0 < nx.N) {
            nr0 = nx.W + (int64_t)w0 * nx.K / 8;
            nr1 = nx.W + ((int64_t)nx.N + w0) * (nx.K / 8);
            nrc = nx.R;
            nnc = nx.K / 8;
        } else {
            nr0 = nr1 = nullptr;
            nrc = 0;
            nnc = 0;
        }
        const uint4 *r0 = p.W + (int64_t)n * nc, *r1 = p.W + ((int64_t)p.N + n) * nc;
        float acc0 = 0.0f, acc1 = 0.0f;
        for (int j0 = 0; j0 < nj; j0 += U) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int j = j0 + u, k = (lane + 32 * j) * 8;
                float xa[8];
                float4 a, b;
                if (p.xs) {
                    a = *reinterpret_cast<const float4 *>(p.xs + k);
                    b = *reinterpret_cast<const float4 *>(p.xs + k + 4);
                } else { /* q|k|v (o's ctx) and act: written past a barrier, read by no block before it */
                    a = *reinterpret_cast<const float4 *>(p.xg + k);
                    b = *reinterpret_cast<const float4 *>(p.xg + k + 4);
                }
                xa[0] = a.x; xa[1] = a.y; xa[2] = a.z; xa[3] = a.w; xa[4] = b.x; xa[5] = b.y; xa[6] = b.z; xa[7] = b.w;
                acc0 = dot8(ring[0][u], xa, acc0);
                if (RC == 2)
                    acc1 = dot8(ring[1][u], xa, acc1);
                if (j + U < nj) {
                    ring[0][u] = ldw(r0 + lane + 32 * (j + U));
                    if (RC == 2)
                        ring[1][u] = ldw(r1 + lane + 32 * (j + U));
                } else if (nrc) {
                    const int jn = j + U - nj; // nj % U == 0: slot u holds chunk jn of the next rows
                    ring[0][u] = ldw(nr0 + lane + 32 * jn);
                    if (nrc == 2)
                        ring[1][u] = ldw(nr1 + lane + 32 * jn);
                }
            }
        }
        acc0 = warp_sum(acc0);
        if (RC == 2)
            acc1 = warp_sum(acc1);
        if (lane == 0) {
            if (RC == 2)
                p.y[n] = acc0 / (1.0f + expf(-acc0)) * acc1;
            else
                p.y[n] = p.res ? __ldcg(p.res + n) + acc0 : acc0; /* x: other blocks wrote it past a barrier */
        }
        (void)nnc;
    }
    if (w0 >= p.N && nx.W) /* no rows here: the next phase's ring from scratch */
        fill(ring, nx, w0, lane);
}

__device__ void grid_barrier(unsigned *count, volatile unsigned *gen)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned g = *gen;
        __threadfence();
        if (atomicAdd(count, 1u) == gridDim.x - 1) {
            *count = 0u;
            __threadfence();
            atomicAdd((unsigned *)gen, 1u);
        } else {
            while (*gen == g)
                __nanosleep(32);
        }
        __threadfence();
    }
    __syncthreads();
}

struct Layer {
    const uint4 *wq, *wo, *wgu, *wd;
    const float *nw1, *nw2;
    float *x, *qkv, *act;
    int Hd, Nq, I;
};
#define LAYER_ARGS                                                                                                    \
    const uint4 *wq, const uint4 *wo, const uint4 *wgu, const uint4 *wd, const float *nw1, const float *nw2, float *x, \
        float *qkv, float *act, int Hd, int Nq, int I
#define LAYER_INIT const Layer L = {wq, wo, wgu, wd, nw1, nw2, x, qkv, act, Hd, Nq, I}

// The four GEMVs in one launch (grid: MINB blocks of WARPS warps an SM, all resident).
extern "C" __global__ void __launch_bounds__(WARPS * 32, MINB)
    k_persist(LAYER_ARGS, unsigned *count, unsigned *gen)
{
    LAYER_INIT;
    extern __shared__ float xs[];     // [Hd] the normed row
    __shared__ float part[WARPS];
    const int lane = threadIdx.x & 31, w0 = blockIdx.x * WARPS + (threadIdx.x >> 5), step = gridDim.x * WARPS;
    const Phase pq = {L.wq, L.Nq, L.Hd, 1, xs, nullptr, nullptr, L.qkv};
    const Phase po = {L.wo, L.Hd, L.Hd, 1, nullptr, L.qkv, L.x, L.x};
    const Phase pgu = {L.wgu, L.I, L.Hd, 2, xs, nullptr, nullptr, L.act};
    const Phase pd = {L.wd, L.Hd, L.I, 1, nullptr, L.act, L.x, L.x};
    const Phase none = {nullptr, 0, 0, 0, nullptr, nullptr, nullptr, nullptr};
    uint4 ring[2][U];
    fill(ring, pq, w0, lane);
    norm_into(xs, L.x, L.nw1, L.Hd, part);
    run_phase<1>(pq, po, ring, w0, step, lane);
    grid_barrier(count, gen);
    run_phase<1>(po, pgu, ring, w0, step, lane);
    grid_barrier(count, gen);
    norm_into(xs, L.x, L.nw2, L.Hd, part);
    run_phase<2>(pgu, pd, ring, w0, step, lane);
    grid_barrier(count, gen);
    run_phase<1>(pd, none, ring, w0, step, lane);
}

// One phase alone (which: 0 q|k|v, 1 o, 2 gate|up, 3 down), one output a warp-step, the grid as wide as needed.
extern "C" __global__ void __launch_bounds__(WARPS * 32, MINB) k_phase(LAYER_ARGS, int which)
{
    LAYER_INIT;
    extern __shared__ float xs[];
    __shared__ float part[WARPS];
    const int lane = threadIdx.x & 31, w0 = blockIdx.x * WARPS + (threadIdx.x >> 5), step = gridDim.x * WARPS;
    const Phase none = {nullptr, 0, 0, 0, nullptr, nullptr, nullptr, nullptr};
    uint4 ring[2][U];
    if (which == 0) {
        const Phase p = {L.wq, L.Nq, L.Hd, 1, xs, nullptr, nullptr, L.qkv};
        fill(ring, p, w0, lane);
        norm_into(xs, L.x, L.nw1, L.Hd, part);
        run_phase<1>(p, none, ring, w0, step, lane);
    } else if (which == 1) {
        const Phase p = {L.wo, L.Hd, L.Hd, 1, nullptr, L.qkv, L.x, L.x};
        fill(ring, p, w0, lane);
        run_phase<1>(p, none, ring, w0, step, lane);
    } else if (which == 2) {
        const Phase p = {L.wgu, L.I, L.Hd, 2, xs, nullptr, nullptr, L.act};
        fill(ring, p, w0, lane);
        norm_into(xs, L.x, L.nw2, L.Hd, part);
        run_phase<2>(p, none, ring, w0, step, lane);
    } else {
        const Phase p = {L.wd, L.Hd, L.I, 1, nullptr, L.act, L.x, L.x};
        fill(ring, p, w0, lane);
        run_phase<1>(p, none, ring, w0, step, lane);
    }
}

// A plain read of n 16-byte words (the read ceiling of this probe).
extern "C" __global__ void k_read(const uint4 *p, int64_t n, unsigned *sink)
{
    unsigned acc = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const uint4 v = ldw(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u)
        *sink = acc;
}
