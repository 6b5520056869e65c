/* Decode GEMV family and device argmax (see eng_gemv.h). Built with -fmad=false like eng_kernels.cu: the only
 * fused multiply-adds are the explicit fmaf() calls. Speed comes from memory-level parallelism, never from a
 * different order: each lane keeps U 16-byte loads per row in flight (a ring refilled as it is consumed, in
 * order), with enough warps per SM that every GEMV shape of an 8B model fills the GPU in one or a few waves. */
#include "eng_gemv.h"

#include "eng_kdev.cuh"

namespace {

constexpr int GV_WARPS = NORM_THREADS / 32; /* the argmax block */

__device__ __forceinline__ uint4 ld_stream(const uint16_t *p)
{
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

/* sm_90 bulk prefetch of bytes (a multiple of 16) at a 16-byte aligned p into L2: a hint that changes no value. */
__device__ __forceinline__ void l2_prefetch(const void *p, unsigned bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
    (void)p;
    (void)bytes;
#endif
}

/* The next matrix the stream reads (engk_warm), asked of L2 by every warp once its rows are done, so DRAM keeps
 * busy through the kernel's tail and whatever small kernels run before that matrix's GEMV: warp g of G issues
 * the WARM_PIECE pieces g + G * (lane + 32 i). */
constexpr int64_t WARM_PIECE = 16384;
__device__ __noinline__ void warm_range(const char *p, int64_t bytes, const int64_t *pos, int64_t pos_max, int lane)
{
    if (!p || bytes < 16 || (pos && *pos > pos_max))
        return;
    const int64_t nw = (int64_t)gridDim.x * (blockDim.x >> 5), gw = (int64_t)blockIdx.x * (blockDim.x >> 5) +
                                                                     (threadIdx.x >> 5);
    const int64_t pieces = (bytes + WARM_PIECE - 1) / WARM_PIECE;
    for (int64_t i = gw + nw * lane; i < pieces; i += nw * 32) {
        const int64_t off = i * WARM_PIECE, left = bytes - off;
        const unsigned n = (unsigned)((left < WARM_PIECE ? left : WARM_PIECE) & ~(int64_t)15);
        if (n)
            l2_prefetch(p + off, n);
    }
}
/* Out of line, its operands by value: the ring's registers stay the kernel's. */
__device__ __forceinline__ void warm_next(const engk_warm &w, int lane)
{
    warm_range((const char *)w.p, w.bytes, w.pos, w.pos_max, lane);
}

/* 8 consecutive weights in flight: raw bits, converted when consumed. */
template <typename W> struct Chunk;
template <> struct Chunk<uint16_t> {
    uint4 u;
    __device__ __forceinline__ void load(const uint16_t *p) { u = ld_stream(p); }
    __device__ __forceinline__ void get(float *v) const
    {
        v[0] = __uint_as_float(u.x << 16); v[1] = __uint_as_float(u.x & 0xffff0000u);
        v[2] = __uint_as_float(u.y << 16); v[3] = __uint_as_float(u.y & 0xffff0000u);
        v[4] = __uint_as_float(u.z << 16); v[5] = __uint_as_float(u.z & 0xffff0000u);
        v[6] = __uint_as_float(u.w << 16); v[7] = __uint_as_float(u.w & 0xffff0000u);
    }
};
template <> struct Chunk<float> {
    float4 a, b;
    __device__ __forceinline__ void load(const float *p)
    {
        a = __ldg(reinterpret_cast<const float4 *>(p));
        b = __ldg(reinterpret_cast<const float4 *>(p + 4));
    }
    __device__ __forceinline__ void get(float *v) const
    {
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    }
};

/* One warp per R weight rows (GLU: R/2 gate rows n and the R/2 up rows I + n), WARPS warps per block. Lane l
 * walks its chunks l, l+32, ... through a ring of U slots per row: chunk j is consumed from slot j % U and the
 * slot is refilled with chunk j + U at once, so U 16-byte loads per row stay in flight until the row's end
 * (the ring is filled before a fused norm's prologue, which hides under it). NORM: the block first normalizes
 * x into shared memory exactly as k_rmsnorm (its first 256 threads run the same strided fmaf, block_sum over
 * warps 0..7, inv_rms, norm_apply). Per row: fmaf over the lane's chunks in order from 0, then warp_sum: the
 * order of eng_dot_model, whatever R, U and WARPS. bf16 shapes with at most 8 loads in flight per lane are
 * held to 64 registers a thread, so that 32 warps fit an SM. PF > 0: lane r also asks L2 for row r's next PF
 * steps (32 chunks each) past the ring, one bulk prefetch, before waiting on the kernel before: more of the rows
 * in flight from the first instruction without registers to hold them. PER (persistent): the grid is what the
 * device holds at once and warp w takes the outputs of w, w + (warps of the grid), ... in turn; where a lane's
 * chunks per row are a multiple of U, the ring's refills past a row's end load the next rows' first chunks, so
 * the loads stay in flight across rows and the norm runs once per block (not once per wave of blocks). The same
 * per-row order, hence the same bits. Then warm_next. */
/* ROPE (engk_gemv_norm_qkv_rope): the q|k|v rows [H q heads | Hkv k heads | Hkv v heads] x D, a warp's two
 * outputs the RoPE pair (i, i + D / 2) of one head, and in the epilogue qkv_post's decode work for them. */
struct GemvRope {
    float *q;                   /* roped q, fp32 [H][D] */
    uint16_t *kc, *vc;          /* the caches: row p at p * pos_row, bf16 [Hkv][D] */
    const float *cos_t, *sin_t; /* the decode row's [D / 2] */
    const int64_t *pos_dev;     /* the row written: *pos_dev - back */
    int64_t pos_row, row_off; /* row_off: D / 2 rows of the matrix, in elements */
    int qd, kd, D, back;
};

/* The widest row whose normed copy and norm weight (norm_w_stage) fit the 48 KiB of shared memory a launch gets
 * without opting in, with the 16 floats engk_gemv_norm_fits keeps; a wider fused-norm row (up to what
 * engk_gemv_norm_fits allows) reads its weight from global memory after the wait, with the same bits. */
constexpr int NW_STAGE_K = (int)((48 * 1024 - 16 * sizeof(float)) / (2 * sizeof(float)));

template <typename W, int R, int U, int WARPS, bool NORM, bool GLU, int PF, bool PER, bool ROPE = false>
__global__ void __launch_bounds__(WARPS * 32, sizeof(W) == 2 && R * U <= 8 ? 1024 / (WARPS * 32) : 1)
    k_gemv(float *y, float *xn, const float *x, const float *nw, float eps, int kind, const W *Wm, const float *b,
           const float *res, int N, int K, int act, engk_warm warm, GemvRope rp)
{
    static_assert(!NORM || WARPS >= NORM_THREADS / 32, "the fused norm needs k_rmsnorm's 256 threads");
    static_assert(!GLU || R % 2 == 0, "GLU rows come in gate|up pairs");
    static_assert(!ROPE || (R == 2 && !GLU && !PER), "ROPE: one RoPE pair a warp");
    extern __shared__ float xs[];
    __shared__ float part[WARPS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    constexpr int RP = GLU ? R / 2 : R; /* outputs per warp */
    int64_t o0 = ((int64_t)blockIdx.x * WARPS + warp) * RP;
    const int64_t ostep = PER ? (int64_t)gridDim.x * WARPS * RP : 0; /* PER: the next outputs of this warp */
    const int nc = K >> 3, nj = lane < nc ? (nc - lane + 31) >> 5 : 0; /* this lane's chunks */
    const W *wr[R];
    bool ok[R];
    const int hp = ROPE ? rp.D / 2 : 1;
    /* ROPE: outputs 2 m, 2 m + 1 are rows A = (m / hp) D + m % hp and A + hp (the same order per row, so the same
     * bits as the rows in order) */
    auto row_a = [&](int64_t first) -> int64_t { /* 32-bit arithmetic: N < 2^31 */
        const int m = (int)(first >> 1);
        return ROPE ? (int64_t)(m / hp * rp.D + m % hp) : first;
    };
    auto rows = [&](int64_t first, const W *(&w)[R], bool (&in)[R]) { /* the rows of outputs first .. + RP - 1 */
        if (ROPE) { /* the pair: A, A + hp (both in or both out: heads are whole) */
            const int64_t A = row_a(first);
            const bool on = A < N;
#pragma unroll
            for (int r = 0; r < R; r++) {
                in[r] = on;
                w[r] = Wm + (on ? A : 0) * K + (int64_t)lane * 8 + (on ? r * rp.row_off : 0);
            }
        } else {
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int64_t o = first + (GLU ? r % RP : r);
                in[r] = o < N;
                const int64_t row = GLU && r >= RP ? N + o : o;
                w[r] = Wm + (in[r] ? row : 0) * K + (int64_t)lane * 8;
            }
        }
    };
    rows(o0, wr, ok);
    if (NORM) /* a weight: its copies first, so that no ring register is live across them and they lead the queue */
        norm_w_stage(xs + K, nw, kind, K, K <= NW_STAGE_K);
    Chunk<W> ch[U][R];
    auto fill = [&]() { /* the ring's first U chunks of the rows in wr */
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int r = 0; r < R; r++)
                if (u < nj && ok[r])
                    ch[u][r].load(wr[r] + (int64_t)u * 256);
    };
    fill();
    if (PF > 0) {
        const int64_t k0 = (int64_t)U * 256, k1 = (int64_t)(U + PF) * 256 < K ? (int64_t)(U + PF) * 256 : K;
#pragma unroll
        for (int r = 0; r < R; r++)
            if (lane == r && ok[r] && k1 > k0) /* wr[r] - lane * 8: the row's start */
                l2_prefetch(wr[r] - lane * 8 + k0, (unsigned)((k1 - k0) * (int64_t)sizeof(W)));
    }
    /* ROPE: the warp's pair's cos and sin and the cache row it writes, read before the wait (no kernel of the step
     * writes them: the decode graph's memcpy nodes do, before its first kernel), kept in shared memory so that no
     * register is held across the loop (the 64-register bound: held, they spilled) */
    __shared__ float rcs[ROPE ? WARPS : 1][2];
    __shared__ int64_t rrow[ROPE ? WARPS : 1];
    if (ROPE && lane == 0) {
        const int64_t A = row_a(o0);
        const bool rot = A < N && A < rp.qd + rp.kd;
        rcs[warp][0] = rot ? rp.cos_t[A % rp.D] : 0.0f;
        rcs[warp][1] = rot ? rp.sin_t[A % rp.D] : 0.0f;
        rrow[warp] = (*rp.pos_dev - rp.back) * rp.pos_row;
    }
    dep_launch();
    dep_wait(); /* x, b, res and y belong to the kernels before */
    if (NORM) {
        if (!NW_LATE_WAIT)
            norm_w_landed(); /* norm_row's block_sum syncs before it reads the row */
        norm_row<false, NW_LATE_WAIT != 0>(SlotFlat{xs}, xn, x, norm_w_row(xs + K, nw, kind, K <= NW_STAGE_K), eps,
                                           kind, K, part);
        __syncthreads();
    }
    while (o0 < N) {
        const int64_t o1 = o0 + ostep;
        const W *wn[R];
        bool okn[R];
        if (PER)
            rows(o1, wn, okn);
        const bool more = PER && o1 < N, cross = more && nj % U == 0; /* cross: refills run into the next rows */
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            acc[r] = 0.0f;
        for (int j0 = 0; j0 < nj; j0 += U) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int j = j0 + u;
                if (j >= nj)
                    break;
                const int64_t k0 = ((int64_t)lane + 32 * (int64_t)j) * 8;
                float xa[8];
                if (NORM) {
                    const float4 p = *reinterpret_cast<const float4 *>(xs + k0);
                    const float4 q = *reinterpret_cast<const float4 *>(xs + k0 + 4);
                    xa[0] = p.x; xa[1] = p.y; xa[2] = p.z; xa[3] = p.w; xa[4] = q.x; xa[5] = q.y; xa[6] = q.z; xa[7] = q.w;
                } else
                    load8(x + k0, xa);
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (ok[r]) {
                        float w8[8];
                        ch[u][r].get(w8);
                        float sum = acc[r];
#pragma unroll
                        for (int e = 0; e < 8; e++)
                            sum = fmaf(w8[e], xa[e], sum);
                        acc[r] = sum;
                        if (j + U < nj)
                            ch[u][r].load(wr[r] + (int64_t)(j + U) * 256);
                        else if (PER && cross && okn[r]) /* slot u holds chunk j + U - nj of the next row next */
                            ch[u][r].load(wn[r] + (int64_t)(j + U - nj) * 256);
                    }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++)
            acc[r] = warp_sum(acc[r]);
        if (!PER)
            warm_next(warm, lane);
        if (ROPE && lane == 0 && ok[0]) { /* as k_qkv_post_rows: + b, rope_rot for q and K, then q fp32, K/V bf16 */
            const int64_t A = row_a(o0), B = A + hp;
            float x1 = acc[0], x2 = acc[1];
            if (b) {
                x1 = x1 + b[A];
                x2 = x2 + b[B];
            }
            if (A < rp.qd + rp.kd)
                rope_rot(x1, x2, rcs[warp][0], rcs[warp][1]);
            if (A < rp.qd) {
                rp.q[A] = x1;
                rp.q[B] = x2;
            } else {
                uint16_t *d = A < rp.qd + rp.kd ? rp.kc + rrow[warp] + (A - rp.qd)
                                                : rp.vc + rrow[warp] + (A - rp.qd - rp.kd);
                d[0] = (uint16_t)bf16_rne(x1);
                d[hp] = (uint16_t)bf16_rne(x2);
            }
        } else if (!ROPE && lane == 0)
#pragma unroll
            for (int q = 0; q < RP; q++) {
                const int64_t o = o0 + q;
                if (o >= N)
                    break;
                if (GLU) {
                    float g = acc[q], u = acc[RP + q];
                    if (b) {
                        g = g + b[o];
                        u = u + b[N + o];
                    }
                    y[o] = glu_apply(g, u, act);
                } else {
                    float v = acc[q];
                    if (b)
                        v = v + b[o];
                    if (res)
                        v = res[o] + v;
                    y[o] = v;
                }
            }
        if (!more) {
            trace_mark();
            if (PER)
                warm_next(warm, lane);
            return;
        }
        o0 = o1;
#pragma unroll
        for (int r = 0; r < R; r++) {
            wr[r] = wn[r];
            ok[r] = okn[r];
        }
        if (!cross)
            fill();
    }
    trace_mark();
    warm_next(warm, lane);
}

/* The launch shapes: RO outputs per warp (GLU: RO gate|up pairs), a ring of U chunks per weight row, WARPS warps
 * per block, PF steps of each row asked of L2 past the ring, PER a persistent grid (k_gemv). Every shape computes
 * each output in the same order, hence the same bits. */
struct Shape {
    int ro, u, warps, pf;
    const char *name;
    bool per = false;
};
constexpr Shape shapes[] = {
    {1, 8, 8, 0, "1 out/warp, ring 8, 8 warps"},          {2, 4, 8, 0, "2 out/warp, ring 4, 8 warps"},
    {2, 8, 8, 0, "2 out/warp, ring 8, 8 warps"},          {1, 8, 16, 0, "1 out/warp, ring 8, 16 warps"},
    {1, 4, 16, 0, "1 out/warp, ring 4, 16 warps"},        {1, 16, 8, 0, "1 out/warp, ring 16, 8 warps"},
    {2, 8, 16, 0, "2 out/warp, ring 8, 16 warps"},        {2, 4, 16, 0, "2 out/warp, ring 4, 16 warps"},
    {4, 2, 8, 0, "4 out/warp, ring 2, 8 warps"},          {4, 4, 8, 0, "4 out/warp, ring 4, 8 warps"},
    {2, 4, 8, 4, "2 out/warp, ring 4, 8 warps, L2 +4"},   {2, 4, 8, 12, "2 out/warp, ring 4, 8 warps, L2 +12"},
    {1, 4, 16, 4, "1 out/warp, ring 4, 16 warps, L2 +4"}, {1, 4, 16, 12, "1 out/warp, ring 4, 16 warps, L2 +12"},
    {1, 8, 8, 0, "1 out/warp, ring 8, 8 warps, persistent", true},
    {1, 4, 16, 0, "1 out/warp, ring 4, 16 warps, persistent", true},
    {1, 8, 16, 0, "1 out/warp, ring 8, 16 warps, persistent", true},
    {2, 4, 8, 0, "2 out/warp, ring 4, 8 warps, persistent", true},
    /* rings that divide the 15 chunks a lane of a 3840-wide row (gemma4-12b), so a persistent warp's loads run on
     * into its next rows there as ring 8's do at 4096 */
    {1, 5, 8, 0, "1 out/warp, ring 5, 8 warps, persistent", true},
    {1, 5, 16, 0, "1 out/warp, ring 5, 16 warps, persistent", true},
    {1, 15, 8, 0, "1 out/warp, ring 15, 8 warps, persistent", true},
};
constexpr int NSHAPES = (int)(sizeof shapes / sizeof shapes[0]);

/* One launch's arguments (k_gemv's). */
struct Args {
    float *y, *xn;
    const float *x, *nw;
    float eps;
    int kind;
    const void *W;
    const float *b, *res;
    int N, K, act;
    engk_warm warm;
    GemvRope rp;
};

template <typename W, int RO, int U, int WARPS, int PF, bool NORM, bool GLU, bool PER, bool ROPE = false>
cudaError_t launch(const Args &a, cudaStream_t s)
{
    constexpr int R = GLU ? 2 * RO : RO;
    auto k = k_gemv<W, R, U, WARPS, NORM, GLU, PF, PER, ROPE>;
    /* x's normed copy, then (K <= NW_STAGE_K) the staged norm weight */
    const size_t smem = NORM ? (a.K <= NW_STAGE_K ? 2 : 1) * (size_t)a.K * sizeof(float) : 0;
    int64_t grid = ((int64_t)a.N + WARPS * RO - 1) / (WARPS * RO);
    if (PER) { /* at most the blocks the device holds at once at this shared memory */
        static Held h;
        const cudaError_t err = held_blocks((const void *)k, WARPS * 32, smem, h);
        if (err != cudaSuccess)
            return err;
        grid = grid < h.blocks() ? grid : h.blocks();
    }
    return launch_dep(k, dim3((unsigned)grid), dim3(WARPS * 32), smem, s, a.y, a.xn, a.x, a.nw, a.eps, a.kind,
                      (const W *)a.W, a.b, a.res, a.N, a.K, a.act, a.warm, a.rp);
}

template <int V, bool NORM, bool GLU> cudaError_t launch_v(int f32, const Args &a, cudaStream_t s)
{
    constexpr Shape sh = shapes[V];
    return f32 ? launch<float, sh.ro, sh.u, sh.warps, sh.pf, NORM, GLU, sh.per>(a, s)
               : launch<uint16_t, sh.ro, sh.u, sh.warps, sh.pf, NORM, GLU, sh.per>(a, s);
}

template <bool NORM, bool GLU> cudaError_t launch_any(int v, int f32, const Args &a, cudaStream_t s)
{
    static_assert(NSHAPES == 21, "one case per shape");
    switch (v) {
    case 0: return launch_v<0, NORM, GLU>(f32, a, s);
    case 1: return launch_v<1, NORM, GLU>(f32, a, s);
    case 2: return launch_v<2, NORM, GLU>(f32, a, s);
    case 3: return launch_v<3, NORM, GLU>(f32, a, s);
    case 4: return launch_v<4, NORM, GLU>(f32, a, s);
    case 5: return launch_v<5, NORM, GLU>(f32, a, s);
    case 6: return launch_v<6, NORM, GLU>(f32, a, s);
    case 7: return launch_v<7, NORM, GLU>(f32, a, s);
    case 8: return launch_v<8, NORM, GLU>(f32, a, s);
    case 9: return launch_v<9, NORM, GLU>(f32, a, s);
    case 10: return launch_v<10, NORM, GLU>(f32, a, s);
    case 11: return launch_v<11, NORM, GLU>(f32, a, s);
    case 12: return launch_v<12, NORM, GLU>(f32, a, s);
    case 13: return launch_v<13, NORM, GLU>(f32, a, s);
    case 14: return launch_v<14, NORM, GLU>(f32, a, s);
    case 15: return launch_v<15, NORM, GLU>(f32, a, s);
    case 16: return launch_v<16, NORM, GLU>(f32, a, s);
    case 17: return launch_v<17, NORM, GLU>(f32, a, s);
    case 18: return launch_v<18, NORM, GLU>(f32, a, s);
    case 19: return launch_v<19, NORM, GLU>(f32, a, s);
    case 20: return launch_v<20, NORM, GLU>(f32, a, s);
    default: return cudaErrorInvalidValue;
    }
}

/* eng_argmax's order: a before b iff a is a number and (b is none, or larger, or equal with a smaller index). */
__device__ __forceinline__ bool better(float av, int ai, float bv, int bi)
{
    if (ai < 0)
        return false;
    if (bi < 0)
        return true;
    return av > bv || (av == bv && ai < bi);
}

/* The best (v, i) of a block of NORM_THREADS; the order is total, so the result does not depend on the
 * reduction's shape. Returns it in thread 0. */
__device__ void block_best(float &v, int &i)
{
    __shared__ float sv[GV_WARPS];
    __shared__ int si[GV_WARPS];
#pragma unroll
    for (int off = 16; off; off >>= 1) {
        const float ov = __shfl_xor_sync(FULL, v, off);
        const int oi = __shfl_xor_sync(FULL, i, off);
        if (better(ov, oi, v, i)) {
            v = ov;
            i = oi;
        }
    }
    if ((threadIdx.x & 31) == 0) {
        sv[threadIdx.x >> 5] = v;
        si[threadIdx.x >> 5] = i;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < GV_WARPS; w++)
            if (better(sv[w], si[w], v, i)) {
                v = sv[w];
                i = si[w];
            }
}

/* Each thread's best of x[V] over the grid's stride (NaN never wins), then the block's, which thread 0 stores into
 * (pv, pi)[blockIdx.x]. */
__device__ __forceinline__ void grid_part_best(const float *x, int64_t V, float *pv, int *pi)
{
    float v = -INFINITY;
    int i = -1;
    for (int64_t k = (int64_t)blockIdx.x * NORM_THREADS + threadIdx.x; k < V; k += (int64_t)gridDim.x * NORM_THREADS) {
        const float xk = x[k];
        if (!isnan(xk) && better(xk, (int)k, v, i)) {
            v = xk;
            i = (int)k;
        }
    }
    block_best(v, i);
    if (threadIdx.x == 0) {
        pv[blockIdx.x] = v;
        pi[blockIdx.x] = i;
    }
}

/* The best of the n blocks' (pv, pi) in thread 0; L2: read through L2 (other blocks of this grid wrote them). */
template <bool L2>
__device__ __forceinline__ void parts_best(const float *pv, const int *pi, int n, float &v, int &i)
{
    v = -INFINITY;
    i = -1;
    for (int k = threadIdx.x; k < n; k += NORM_THREADS) {
        const float kv = L2 ? __ldcg(pv + k) : pv[k];
        const int ki = L2 ? __ldcg(pi + k) : pi[k];
        if (better(kv, ki, v, i)) {
            v = kv;
            i = ki;
        }
    }
    block_best(v, i);
}

__global__ void __launch_bounds__(NORM_THREADS) k_argmax_part(float *pv, int *pi, const float *x, int64_t V)
{
    grid_part_best(x, V, pv, pi);
}

__global__ void __launch_bounds__(NORM_THREADS) k_argmax_final(int32_t *out, const float *pv, const int *pi, int n)
{
    float v;
    int i;
    parts_best<false>(pv, pi, n, v, i);
    if (threadIdx.x == 0)
        *out = i;
}

/* The two kernels above in one launch: each block's best into (pv, pi), then the block that arrives last on *cnt
 * (every other block's best stored before its arrival) resets *cnt to 0 for the next launch and picks among the
 * blocks' bests into *out, and into *out_host if not NULL (pinned host memory, written through its device mapping).
 * The order is total, so the token does not depend on which block is last. Launched by launch_dep: the logits are the
 * kernel before's. */
__global__ void __launch_bounds__(NORM_THREADS)
    k_argmax_one(int32_t *out, int32_t *out_host, float *pv, int *pi, unsigned *cnt, const float *x, int64_t V)
{
    __shared__ int last;
    dep_wait();
    grid_part_best(x, V, pv, pi);
    if (threadIdx.x == 0) {
        __threadfence(); /* the block's best, visible on the device before its arrival (release) */
        const int is_last = atomicAdd(cnt, 1u) == gridDim.x - 1u;
        if (is_last) {
            atomicExch(cnt, 0u); /* every block of this launch has arrived: nobody else touches *cnt */
            __threadfence();     /* the other blocks' bests are read after their arrivals */
        }
        last = is_last;
    }
    __syncthreads();
    if (!last)
        return;
    float v;
    int i;
    parts_best<true>(pv, pi, (int)gridDim.x, v, i);
    if (threadIdx.x == 0) {
        *out = i;
        if (out_host) {
            *out_host = i;
            __threadfence_system();
        }
    }
}

} // namespace

extern "C" {

int engk_gemv_norm_fits(int K) { return K > 0 && (size_t)K * sizeof(float) + 16 * sizeof(float) <= 48 * 1024; }

/* The shape each entry point launches: measured with `test_engk_gemv --bench` on the H200 (every shape, every
 * llama3-8b GEMV). Below ~16k rows a warp's life is a couple of ring fills, so two rows per warp (twice the
 * loads in flight per lane from the first instruction) beat longer rings: q|k|v fused 18.7 us against 25.7 us
 * for 1 out/warp ring 8 x 16 warps; o and down 13.4 / 31.9 us with ring 4 x 16 warps (a plain read of the same bytes
 * takes 15.7 / 12.0 / 30.1 us: the small ones are ramp and tail, not the loop); norm+gate|up+GLU: 62.4 us with ring 8 x 8 warps
 * against 66.8 us with ring 4 x 16 (each of its 3.4 waves of blocks repeats the norm; fewer, fuller blocks). Its
 * persistent form (shape 14: the norm once per block, the ring running on into each warp's next rows) is as fast
 * alone (63.0 against 62.4 us) and wins inside the decode graph, where the next kernel's blocks start behind it:
 * the 4-GEMV layer chain 117.5 against 118.4 us, engine bench llama3-8b after 16 tokens 4.174 against 4.240 and
 * 4.256 ms/token (one call, H200, session 15). */
int engk_gemv_pick(int fuse, int N, int K)
{
    /* gate|up: a persistent ring that divides a lane's chunks of a row (K / 256), so the loads run on into the
     * warp's next rows: 8 at K = 4096 (16 chunks), 5 at gemma4-12b's 3840 (15), where ring 8 stopped at each row's
     * end: `engine bench --shape gemma4-12b --prompt-len 16 --steps 32 --rounds 2 --no-stream`, the gate|up shape
     * switched by REFCHAIN_GEMV_SHAPES in one binary, alternating, one H200 call (session 24), ms/token: ring 8
     * (14) 7.960 / 7.938, ring 5 x 8 warps (18) 7.470 / 7.474, ring 5 x 16 warps (19) 7.470 / 7.463, ring 15 x 8
     * warps (20) 7.778 / 7.780 */
    if (fuse == ENGK_FUSE_GLU) {
        const int step = 32 * 8; /* a warp's step along a row: 8 values a lane, so K / step chunks a lane */
        return K % (step * shapes[14].u) && K % (step * shapes[18].u) == 0 ? 18 : 14;
    }
    /* the L2-prefetching shapes (10, 12) lost to 1 and 4 on the H200 (q|k|v+norm 20.7 vs 18.9 us, o 14.3 vs 13.4),
     * alone; o after the decode attention takes engk_gemv_pick_o. A norm-fused input projection wider than 8192
     * rows (qwen3.5-9b's DeltaNet in-projection, 12352) is more than one wave of shape 1's 16-row blocks (an H200
     * holds 4 a SM at 64 registers: 528 of 772), so it takes the persistent shape 16 (ring 8 x 16 warps), whose
     * warps' loads run on into their next rows: `engine bench --shape qwen3.5-9b --prompt-len 16 --steps 32
     * --rounds 2 --no-stream`, REFCHAIN_GEMV_SHAPES in one binary, alternating, one H200 call (session 25),
     * ms/token, every norm-fused input projection (the in-projection and the attention layers' 6144-row q|k|v) on
     * 1 4.282 / 4.284, on 14 4.271 / 4.261, on 16 4.264 / 4.254 (o 13, GLU 14, down 4 in each). llama3-8b's q|k|v
     * (6144) and gemma4-12b's sliding q|k|v (8192) are one wave: 1 as before. */
    if (fuse == ENGK_FUSE_NORM)
        return N >= 16384 ? 7 : N > 8192 ? 16 : 1;
    return N >= 32768 ? 1 : 4;
}

int engk_gemv_pick_prev(int fuse, int N, int K)
{
    (void)K;
    if (fuse == ENGK_FUSE_GLU)
        return 0;
    if (fuse == ENGK_FUSE_NORM)
        return N >= 16384 ? 7 : 1;
    return N >= 32768 ? 1 : 4;
}

/* The mixer's output projection in a decode step (o, launched after the decode attention; the DeltaNet out_proj,
 * after the DeltaNet step): shape 13, which asks L2 for the whole of each of its rows before its wait, so its bytes
 * stream while the attention (a short chain of dependent loads at short contexts) or the step runs. Alone it loses
 * to 4 (15.0 against 13.2 us: the prefetches are issued ahead of the loads that need them); in the engine's graph
 * after the attention it wins: `engine bench --shape llama3-8b --prompt-len 16 --steps 32 --rounds 3`, two runs
 * each, alternating, one call (H200, session 18):
 * REFCHAIN_GEMV_SHAPES=1,13,14,4 4.025 / 4.050 ms/token, 1,12,14,4 4.034 / 4.041, the picks 1,4,14,4 4.063 / 4.069;
 * with 13 as the pick, next call: 4.055 / 4.052 against 1,4,14,4 4.081 / 4.109 (down on 13 too: 4.126 / 4.143);
 * test_engk_gemv --bench's chain with the gap launched as the attention is: 115.8 against 118.2 us a layer. The
 * DeltaNet out_proj kept 4 until session 25 measured it (qwen3.5-9b, as in engk_gemv_pick's note, IN 1 in both):
 * 4 (o 13) 4.324 / 4.317 ms/token, 13 4.282 / 4.284. */
int engk_gemv_pick_o(int N, int K)
{
    (void)N;
    (void)K;
    return 13;
}

int engk_gemv_variants(void) { return NSHAPES; }

const char *engk_gemv_variant_name(int v) { return v >= 0 && v < NSHAPES ? shapes[v].name : "?"; }

cudaError_t engk_gemv_variant(int v, int fuse, float *y, float *xn, const float *x, const float *nw, float eps,
                              int kind, const void *W, int f32, const float *b, const float *res, int N, int K,
                              int act, const engk_warm *warm, cudaStream_t s)
{
    const int norm = fuse == ENGK_FUSE_NORM || (fuse == ENGK_FUSE_GLU && kind >= 0);
    if (N < 1 || K < 8 || K % 8 || (norm && !engk_gemv_norm_fits(K)) || fuse < 0 || fuse > ENGK_FUSE_GLU)
        return cudaErrorInvalidValue;
    if (warm && warm->p && ((uintptr_t)warm->p % 16 || warm->bytes < 0))
        return cudaErrorInvalidValue;
    Args a = {y, norm ? xn : nullptr, x, norm ? nw : nullptr, norm ? eps : 0.0f, norm ? kind : 0, W, b,
              fuse == ENGK_FUSE_NONE ? res : nullptr, N, K, fuse == ENGK_FUSE_GLU ? act : 0, {}, {}};
    if (warm)
        a.warm = *warm;
    if (fuse == ENGK_FUSE_GLU)
        return norm ? launch_any<true, true>(v, f32, a, s) : launch_any<false, true>(v, f32, a, s);
    return norm ? launch_any<true, false>(v, f32, a, s) : launch_any<false, false>(v, f32, a, s);
}

cudaError_t engk_gemv_w(float *y, const float *x, const void *W, int f32, const float *b, const float *res, int N,
                        int K, const engk_warm *warm, cudaStream_t s)
{
    return engk_gemv_variant(engk_gemv_pick(ENGK_FUSE_NONE, N, K), ENGK_FUSE_NONE, y, nullptr, x, nullptr, 0.0f, 0,
                             W, f32, b, res, N, K, 0, warm, s);
}

cudaError_t engk_gemv(float *y, const float *x, const void *W, int f32, const float *b, const float *res, int N,
                      int K, cudaStream_t s)
{
    return engk_gemv_w(y, x, W, f32, b, res, N, K, nullptr, s);
}

cudaError_t engk_gemv_norm_w(float *y, float *xn, const float *x, const float *nw, float eps, int kind,
                             const void *W, int f32, const float *b, int N, int K, const engk_warm *warm,
                             cudaStream_t s)
{
    return engk_gemv_variant(engk_gemv_pick(ENGK_FUSE_NORM, N, K), ENGK_FUSE_NORM, y, xn, x, nw, eps, kind, W, f32, b,
                             nullptr, N, K, 0, warm, s);
}

cudaError_t engk_gemv_norm(float *y, float *xn, const float *x, const float *nw, float eps, int kind, const void *W,
                           int f32, const float *b, int N, int K, cudaStream_t s)
{
    return engk_gemv_norm_w(y, xn, x, nw, eps, kind, W, f32, b, N, K, nullptr, s);
}

cudaError_t engk_gemv_norm_qkv_rope(float *xn, const float *x, const float *nw, float eps, int kind, const void *W,
                                    const float *b, int K, int H, int Hkv, int D, const float *cos_t,
                                    const float *sin_t, float *q, void *kc, void *vc, const int64_t *pos_dev, int back,
                                    cudaStream_t s)
{
    if (H < 1 || Hkv < 1 || D < 2 || D % 2 || K < 8 || K % 8 || !engk_gemv_norm_fits(K) || !x || !W ||
        !cos_t || !sin_t || !q || !kc || !vc || !pos_dev || back < 0)
        return cudaErrorInvalidValue;
    const int N = (H + 2 * Hkv) * D;
    Args a = {nullptr, xn, x, nw, eps, kind, W, b, nullptr, N, K, 0, {}, {}};
    a.rp = {q,           static_cast<uint16_t *>(kc), static_cast<uint16_t *>(vc), cos_t, sin_t, pos_dev,
            (int64_t)Hkv * D, (int64_t)(D / 2) * K, H * D, Hkv * D, D, back};
    constexpr Shape sh = shapes[ENGK_QKV_ROPE_SHAPE];
    static_assert(sh.ro == 2 && !sh.per && sh.pf == 0, "the RoPE epilogue's shape: 2 outputs a warp");
    return launch<uint16_t, sh.ro, sh.u, sh.warps, sh.pf, true, false, false, true>(a, s);
}

cudaError_t engk_gemv_glu(float *out, float *xn, const float *x, const float *nw, float eps, int kind,
                          const void *Wgu, int f32, const float *bgu, int I, int K, int act, cudaStream_t s)
{
    return engk_gemv_variant(engk_gemv_pick(ENGK_FUSE_GLU, I, K), ENGK_FUSE_GLU, out, xn, x, nw, eps, kind, Wgu, f32,
                             bgu, nullptr, I, K, act, nullptr, s);
}

cudaError_t engk_argmax(int32_t *out, const float *x, int64_t V, void *scratch, cudaStream_t s)
{
    if (V < 1 || V > 0x7fffffff)
        return cudaErrorInvalidValue;
    float *pv = (float *)scratch;
    int *pi = (int *)(pv + ENGK_ARGMAX_BLOCKS);
    k_argmax_part<<<ENGK_ARGMAX_BLOCKS, NORM_THREADS, 0, s>>>(pv, pi, x, V);
    k_argmax_final<<<1, NORM_THREADS, 0, s>>>(out, pv, pi, ENGK_ARGMAX_BLOCKS);
    return cudaGetLastError();
}

cudaError_t engk_argmax_one(int32_t *out, int32_t *out_host, const float *x, int64_t V, void *scratch, cudaStream_t s)
{
    if (V < 1 || V > 0x7fffffff || !out || !x || !scratch)
        return cudaErrorInvalidValue;
    float *pv = (float *)scratch;
    int *pi = (int *)(pv + ENGK_ARGMAX_BLOCKS);
    unsigned *cnt = (unsigned *)(pi + ENGK_ARGMAX_BLOCKS);
    return launch_dep(k_argmax_one, dim3(ENGK_ARGMAX_BLOCKS), dim3(NORM_THREADS), 0, s, out, out_host, pv, pi, cnt, x,
                      V);
}

} // extern "C"
