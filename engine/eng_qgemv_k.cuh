/* The quantized decode GEMV's kernels and launchers (templates), shared by the translation units that instantiate
 * them: eng_qgemv.cu (the k_qgemv family, the picks and the C API), eng_qgemv_s.cu (the k_qgemv_s variants) and
 * eng_qgemv_m.cu (the k_qgemv_mma variants), so the three compile in parallel. Everything here has internal
 * linkage; each unit instantiates what its table names. Built with -fmad=false (see eng_qgemv.cu). */
#ifndef ENG_QGEMV_K_CUH
#define ENG_QGEMV_K_CUH

#include "eng_qgemv.h"

#include <float.h>
#include <string.h>

#include <cuda_fp16.h>

#include "eng_kdev.cuh"

namespace {

/* The two families' rules, each operation rounded on its own (model/quant.h's rc_qf_scale / rc_qf_affine); q is the
 * code as an exact float. */
__device__ __forceinline__ float dq_scale(float s, float q) { return __fmul_rn(s, q); }
__device__ __forceinline__ float dq_affine(float s, float q, float m) { return __fadd_rn(__fmul_rn(s, q), m); }

template <int FAM> __device__ __forceinline__ float dq(float s, float q, float m)
{
    return FAM == 2 ? dq_affine(s, q, m) : dq_scale(s, q);
}

/* Code i (0 .. 128/BITS - 1) of a 16-byte block, in k order, as an exact float: int8 byte i (signed); int4 nibble
 * i, low first, sign-extended for the scale family, unsigned for the affine one. No int-to-float conversion (a
 * quarter-rate instruction): the code's bits, biased to unsigned, become the low mantissa of 2^23, which an exact
 * subtraction removes. */
template <int FAM, int BITS> __device__ __forceinline__ float code(const uint4 &u, int i)
{
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
    constexpr unsigned BIAS = FAM == 2 ? 0u : 1u << (BITS - 1); /* signed codes: flip the sign bit */
    const unsigned c = BITS == 8 ? (w[i >> 2] >> (8 * (i & 3))) & 255u : (w[i >> 3] >> (4 * (i & 7))) & 15u;
    return __uint_as_float(0x4B000000u | (c ^ BIAS)) - (8388608.0f + (float)BIAS);
}

/* L2 eviction priority of the weight stream (codes, scales, offsets: each read once a step). 1: evict_first, by a
 * cache policy (createpolicy, sm_80+), so that what a step reads again (the norm weights, x, the KV cache, the
 * recurrent state) is not pushed out of L2 by the stream; 0: the default priority. A hint changes no value. Measured
 * on the H200 (session 34, llama3-8b, `engine bench --prompt-len 16 --steps 32 --rounds 2 --no-stream`, alternating
 * in one call; engine/README "The fused norm's weight after the wait"): with the hint on the bf16 GEMV's stream too,
 * int4 g128 with a packed lm_head 1.891 against 1.914 ms/token, but bf16 lost (4.014 against 3.977; not profiled),
 * so it is here only; this form and NORM_W_STAGE together against neither: int4 1.884 / 1.886 against 1.906 / 1.906,
 * int8 with a packed lm_head 2.516 / 2.517 against 2.581 / 2.583. An evict_last policy on the norm weights' reads
 * instead gained nothing (int4 1.914, bf16 3.977), nor did a persisting-L2 set-aside of 8 MB beside it. */
#ifndef QW_L2_FIRST
#define QW_L2_FIRST 1
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && QW_L2_FIRST
__device__ __forceinline__ uint64_t l2_evict_first()
{
    uint64_t p;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
/* 16 bytes of codes through the read-only path, not allocated in L1 (read once). */
__device__ __forceinline__ uint4 ld_stream16(const void *p)
{
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p), "l"(l2_evict_first()));
    return r;
}
/* A scale or offset. */
__device__ __forceinline__ float ld_sc(const float *p)
{
    float v;
    asm("ld.global.nc.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(l2_evict_first()));
    return v;
}
#else
/* 16 bytes of codes through the read-only path. */
__device__ __forceinline__ uint4 ld_stream16(const void *p) { return __ldg(reinterpret_cast<const uint4 *>(p)); }
__device__ __forceinline__ float ld_sc(const float *p) { return __ldg(p); }
#endif

struct QMat {
    const unsigned char *codes;
    const float *scale, *offset;
    int64_t row_bytes;
    int ng, group;
    unsigned magic;   /* 0x4B000000 (2^23) as a launch argument: ptxas keeps it in one register and byte_f's
                       * selectors immediate, instead of the reverse and re-materialized selectors */
    unsigned magic19; /* 0x49000000 (2^19), the same for dqh */
};

inline __host__ QMat qmat(const void *W, const eng_qfmt *q, int N, int K)
{
    QMat m;
    m.codes = (const unsigned char *)W;
    m.scale = (const float *)((const char *)W + eng_qscale_off(N, K, q));
    m.offset = q->family == 2 ? (const float *)((const char *)W + eng_qoffset_off(N, K, q)) : nullptr;
    m.row_bytes = (int64_t)K * q->bits / 8;
    m.ng = K / q->group;
    m.group = q->group;
    m.magic = 0x4B000000u;
    m.magic19 = 0x49000000u;
    return m;
}

/* Lane 0's epilogue for the warp's RP outputs from o0: (acc + b) then res + (eng_gemv.cu's order), or the GLU of
 * the gate and up rows. */
template <int RP, bool GLU>
__device__ __forceinline__ void store_rows(float *y, const float *acc, int64_t o0, const float *b, const float *res,
                                           int N, int act)
{
    for (int q = 0; q < RP && o0 + q < N; q++) {
        const int64_t o = o0 + q;
        const float v = b ? acc[q] + b[o] : acc[q];
        if (GLU)
            y[o] = glu_apply(v, b ? acc[RP + q] + b[N + o] : acc[RP + q], act);
        else
            y[o] = res ? res[o] + v : v;
    }
}

/* Byte j of 4-byte word w (codes already biased to unsigned) as the exact float 2^23 + code: one byte_perm puts the
 * byte under the exponent of 2^23. */
__device__ __forceinline__ float byte_f(unsigned w, int j, unsigned mg)
{
    return __uint_as_float(__byte_perm(w, mg, 0x7540u | (unsigned)j));
}

/* Weight j (byte j of wb, the code biased to unsigned) of a block, dequantized: the scale family s * (f - 2^23 -
 * BIAS), exactly code()'s q times s; the affine family fma(s, f, -s * 2^23) = s * f - s * 2^23 = s * q rounded once,
 * i.e. __fmul_rn(s, q), because -s * 2^23 is exact (sb; dot_block takes the out-of-line path where |s| >= 2^100, so it
 * cannot overflow), then + off. */
template <int FAM, int BITS>
__device__ __forceinline__ float dqb(unsigned wb, int j, float s, float sb, float off, unsigned mg)
{
    constexpr float BIAS = FAM == 2 ? 0.0f : (float)(1u << (BITS - 1));
    const float f = byte_f(wb, j, mg);
    return FAM == 2 ? __fadd_rn(__fmaf_rn(s, f, sb), off) : dq_scale(s, __fsub_rn(f, 8388608.0f + BIAS));
}

/* A high nibble in place (byte j of hi: 16 c) under the exponent of 2^19 instead: the exact float 2^19 + c, so its
 * weight needs no rescaled s (the n variants): the scale family s * (f - 2^19 - 8), the affine fma(s, f, -s * 2^19),
 * both s * q rounded once, as dqb. mg19: 0x49000000. */
template <int FAM>
__device__ __forceinline__ float dqh(unsigned hi, int j, float s, float sbh, float off, unsigned mg19)
{
    const float f = byte_f(hi, j, mg19);
    return FAM == 2 ? __fadd_rn(__fmaf_rn(s, f, sbh), off) : dq_scale(s, __fsub_rn(f, 524288.0f + 8.0f));
}

/* code() and dq() as they stand, for the blocks whose scale is too large for dqb's affine form (never in practice);
 * out of line so that it takes no registers from the common path. xb: the block's x, global or shared. */
template <int FAM, int BITS>
__device__ __noinline__ float dot_block_slow(float sum, uint4 u, const float *xb, float s, float off)
{
#pragma unroll
    for (int i = 0; i < 128 / BITS; i++)
        sum = __fmaf_rn(dq<FAM>(s, code<FAM, BITS>(u, i), off), xb[i], sum);
    return sum;
}

/* A block's activations, 4 at a time (unit f = k / 4 of the block): straight from global memory, or from the padded
 * shared copy of x (xpad). */
struct XGlobal {
    const float *xb;
    __device__ __forceinline__ float4 operator()(int f) const { return __ldg(reinterpret_cast<const float4 *>(xb) + f); }
};

/* x's 16-byte unit L sits at unit L + L / 8 of the shared copy (16 bytes of padding after every 128): the 8 lanes of
 * a quarter warp, reading the same unit of 8 consecutive blocks (64 or 128 bytes apart in x), hit 8 different 16-byte
 * bank groups, and a block's units stay contiguous. */
__device__ __forceinline__ int xpad(int L) { return L + (L >> 3); }

struct XShared {
    const float4 *p; /* the block's first unit */
    __device__ __forceinline__ float4 operator()(int f) const { return p[f]; }
};

/* The same from a 32-bit shared-memory address (the n variants: one register, advanced by the loop, immediate
 * offsets; no generic-to-shared conversion per block). Volatile: it stays after the barrier that publishes x. */
struct XSharedA {
    unsigned a; /* the block's first unit */
    __device__ __forceinline__ float4 operator()(int f) const
    {
        float4 v;
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                     : "r"(a + 16u * (unsigned)f));
        return v;
    }
};

/* norm_row's slots in the padded copy: element i in unit xpad(i / 4). */
struct SlotPad {
    float *p;
    __device__ __forceinline__ float &operator()(int i) const { return p[4 * xpad(i >> 2) + (i & 3)]; }
};

/* The fused norm's arguments (k_qgemv_s with NORM): xn (or NULL) receives rmsnorm(x) from block 0. */
struct QNorm {
    float *xn;
    const float *nw;
    float eps;
    int kind;
    bool stage = false; /* k_qgemv_mma: its launch has K more floats of shared memory for nw (norm_w_stage) */
    bool xstage = false; /* k_qgemv_mma's plain form (X_STAGE): its launch has x's flat copy (mma_norm_smem) */
};

/* NB > 1: k_qgemv_mma's fused norm (norm_row, norm_row_max) normalizes the row NB elements a thread at once
 * (norm_apply_slots' NB: the NB elements of x and of the weight loaded first, then normalized and stored); 0: one at a
 * time. The same values, so the same bits. Why: as written, the loop loads the weight through a pointer that may be
 * shared or global (norm_w_row), which the compiler cannot move above the previous element's store to the slot; in
 * sm_90's code of int4's gate|up (i8u4p) each of a thread's 16 elements at K = 4096 waits for a generic load of the
 * weight and a shared load of x. Session 42's timing-only builds put the weight at 27-35 us a step of llama3-8b int4
 * g128 + packed lm_head (H100), none of it in the wait for the staged copies (engine/README.md, "The quantized GEMV's
 * prologue and epilogue"). At NB 16 the int4 q|k|v pick (64 registers, MINB 2) spills 24 bytes; at 4 and 8 none of
 * llama3-8b's int4 and int8 fused-norm picks spills. k_gemv (bf16, f32) keeps 0: its fused-norm picks, capped at 64
 * registers, spill at 4 already. Opt-in until timed. Session 43 timed session 42's form slower (H100,
 * scripts/gpu-ab.sh -p 2, llama3-8b + packed lm_head: int4 g128 2.158 / 2.157 ms/token at NB 8 / 4 against 2.145,
 * int8 3.200 against 3.186); its machine code branched on the norm kind and on i < K at every element (gate|up's
 * loop: 319 instructions, 30 branches). norm_apply_batched (eng_kdev.cuh) is its rewrite, not yet timed: one copy a
 * norm kind, the whole groups without a guard, so gate|up's group is 16 loads back to back, 16 FMUL, 8 stores. */
#ifndef NORM_APPLY_NB
#define NORM_APPLY_NB 0
#endif

/* 1: k_qgemv_mma's fused norm loads x straight into its flat copy (norm_row_max: no copy pass and barrier ahead of the
 * norm) and takes max |x| while it normalizes (no pass over the normed row and barrier of its own); 0: the copy, its
 * barrier, norm_row on the copy, a barrier, then the max pass. The same values, sums and maximum in either form, so
 * the same bits. Opt-in: session 41 timed it at no gain (llama3-8b int4 g128 + packed lm_head 2.177 against 2.175
 * ms/token, H100, scripts/gpu-ab.sh -DNORM_MAX_FUSED=1), so 0 stays. */
#ifndef NORM_MAX_FUSED
#define NORM_MAX_FUSED 0
#endif

/* norm_row's unstaged form (k_rmsnorm's sum, norm_apply, xn from block 0) with its loads batched (thread t of the first
 * NORM_THREADS asks for its next NB elements t, t + NORM_THREADS, ... at once, then stores them into its slots and
 * sums them in order: the same sum), returning the max |value| over the values the thread normalized (NaN ignored;
 * INT: infinity where one is not finite): the caller's max pass, folded in. The staged weight is waited for before
 * block_sum's barrier (as norm_row's LANDW); the caller's barrier after it (its max's) shows the slots to the block.
 * part: NORM_THREADS / 32 floats, not read or written again before that barrier. */
template <bool INT, typename Slot>
__device__ __forceinline__ float norm_row_max(const Slot &slot, float *xn, const float *x, const float *nw, float eps,
                                              int kind, int K, float *part)
{
    constexpr int NB = 16;
    float ss = 0.0f;
    if (threadIdx.x < NORM_THREADS)
        for (int i0 = threadIdx.x; i0 < K; i0 += NB * NORM_THREADS) {
            float v[NB];
#pragma unroll
            for (int j = 0; j < NB; j++) {
                const int i = i0 + j * NORM_THREADS;
                v[j] = i < K ? x[i] : 0.0f;
            }
#pragma unroll
            for (int j = 0; j < NB; j++) {
                const int i = i0 + j * NORM_THREADS;
                if (i < K) {
                    slot(i) = v[j];
                    ss = fmaf(v[j], v[j], ss);
                }
            }
        }
    norm_w_landed();
    return norm_apply_slots<INT ? 2 : 1, NORM_APPLY_NB>(slot, xn, nw, inv_rms(block_sum(ss, part), K, eps), kind, K);
}

/* 1: k_qgemv_mma's plain form (not GLU) with a residual loads each stored row's res[o] right after its wait (and, on
 * a persistent grid, a unit's as the unit before is stored), so that its epilogue adds it without a round trip to L2
 * on the kernel's tail; 0: the epilogue loads it. The same operands and addition, so the same bits. 1 since session
 * 41: llama3-8b int4 g128 + packed lm_head 11 us a step faster alone, 17 us beside the fused step end (H100,
 * scripts/gpu-ab.sh; engine/README.md, "The quantized GEMV's prologue and epilogue"). */
#ifndef RES_EARLY
#define RES_EARLY 1
#endif

/* k_qgemv_mma's plain form (no fused norm), where its launch has room for x's flat copy (the fused norm's,
 * mma_norm_smem): 1, x goes into that copy as max |x| is taken, and the B pieces are made from the copy after the
 * max's barrier; 2, the same only where the pieces take a thread more than one round (K / 8 > the block's threads:
 * llama3-8b's down, not o); 0, the pieces read x from global memory (L2) a second time. The same values, so the same
 * bits. Why: after the wait the prologue is on the step's critical path, and in the plain form it is two dependent
 * passes over x through L2 (down at K = 14336: 7 float4 loads a thread for the max, unrolled by 4, then 3.5 rounds of
 * two for the pieces); from shared memory the second pass takes an L2 round trip out of each round. 1 since session
 * 44: llama3-8b on the H200 (scripts/gpu-ab.sh, five passes), int4 g128 + packed lm_head 1.827 -> 1.819 ms/token,
 * int8 + packed lm_head 2.504 -> 2.508 (its o is the one plain mma GEMV it runs: one round at K = 4096, where the copy
 * only adds stores); 2, timed on the H200 in session 46 (four passes beside 1), ties with 1 (int4 1.814 both, int8
 * 2.504 / 2.505), so 1 stays; engine/README.md, "The quantized GEMV's prologue and epilogue". */
#ifndef X_STAGE
#define X_STAGE 1
#endif
/* 1: where X_STAGE stages x, the copy is made by cp.async (16 bytes a copy, every one of a thread's asked at once,
 * L2 only), and max |x| is then taken over the thread's own copied elements (its own copies need no barrier); 0: by
 * loads and stores, the max taken as they arrive (the compiler unrolls that loop by 4, so at down's 7 float4s a
 * thread two L2 round trips). The same values, so the same bits. Built in session 44; timed on H100s in session 45
 * (scripts/gpu-ab.sh): int4 g128 no change beyond the spread, int8 9-17 us a step slower (o's copies all land before
 * its max begins), so it stays opt-in; engine/README.md, "The quantized GEMV's prologue and epilogue". */
#ifndef X_ASYNC
#define X_ASYNC 0
#endif

/* The same sums as code()/dq() in k order for one 16-byte block of each of R rows (acc[r] += row r's block . x): a
 * word's codes, biased to unsigned (signed codes: the sign bit of each flipped), split into bytes; int4 words into
 * their low nibbles (byte j: k = 2j) and high nibbles (byte j: k = 2j + 1), taken alternately so that each row's
 * fma order stays k = 0, 1, 2, ... The activations are read once for all R rows; xb (global) serves the slow path. */
template <int FAM, int BITS, int R, bool NQ = false, typename X>
__device__ __forceinline__ void dot_block(float *acc, const uint4 *u, const bool *ok, const X &xl, const float *xb,
                                          const float *s, const float *off, unsigned mg, unsigned mg19 = 0x49000000u)
{
    constexpr unsigned FLIP = FAM == 2 ? 0u : BITS == 8 ? 0x80808080u : 0x88888888u;
    /* NQ: high nibbles through dqh (no s / 16: the scale family needs no check at all, the affine one only sb's) */
    float sb[R], s16[R], sb16[R];
    bool fast = true;
#pragma unroll
    for (int r = 0; r < R; r++) {
        sb[r] = -s[r] * 8388608.0f;
        s16[r] = NQ ? s[r] : s[r] * 0.0625f;
        sb16[r] = NQ ? -s[r] * 524288.0f : sb[r] * 0.0625f;
        const float a = fabsf(s[r]);
        fast = fast && (FAM != 2 || a < 0x1p100f) && (NQ || BITS != 4 || a == 0.0f || a >= 0x1p-100f);
    }
    if (!fast) {
#pragma unroll
        for (int r = 0; r < R; r++)
            if (ok[r])
                acc[r] = dot_block_slow<FAM, BITS>(acc[r], u[r], xb, s[r], off[r]);
        return;
    }
#pragma unroll
    for (int wi = 0; wi < 4; wi++) {
        if (BITS == 8) {
            const float4 v = xl(wi);
            const float x4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int r = 0; r < R; r++)
                if (ok[r]) {
                    const unsigned w = (&u[r].x)[wi] ^ FLIP;
                    float a = acc[r];
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        a = __fmaf_rn(dqb<FAM, BITS>(w, j, s[r], sb[r], off[r], mg), x4[j], a);
                    acc[r] = a;
                }
        } else {
            /* A high nibble stays in place: byte j of hi is 16 q (the scale family: 16 (q + 8)), so its weight is
             * dqb's with s / 16 and sb / 16 (exact: the fast path has |s| >= 2^-100 or s = 0): s / 16 * (16 q) = s q,
             * rounded once, the same bits. */
            const float4 v0 = xl(2 * wi), v1 = xl(2 * wi + 1);
            const float x8[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
            for (int r = 0; r < R; r++)
                if (ok[r]) {
                    const unsigned w = (&u[r].x)[wi] ^ FLIP;
                    const unsigned lo = w & 0x0F0F0F0Fu, hi = w & 0xF0F0F0F0u;
                    float a = acc[r];
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        a = __fmaf_rn(dqb<FAM, BITS>(lo, j, s[r], sb[r], off[r], mg), x8[2 * j], a);
                        a = __fmaf_rn(NQ ? dqh<FAM>(hi, j, s16[r], sb16[r], off[r], mg19)
                                         : dqb<FAM, 8>(hi, j, s16[r], sb16[r], off[r], mg),
                                      x8[2 * j + 1], a);
                    }
                    acc[r] = a;
                }
        }
    }
}

/* One warp per R rows (GLU: R/2 gate rows n and the up rows I + n), 8 warps a block, 64 registers (4 blocks an SM)
 * where R * U <= 4, else 128. Each lane loads U blocks of every row before it consumes them in order; RING: the slot
 * just consumed is refilled with the block 32 U ahead at once, so U blocks a row stay in flight (eng_gemv.cu's ring).
 * Lane l owns the blocks c = l, l + 32, ... and sums each in k order, whatever R, U and RING: the same bits. */
template <int FAM, int BITS, int R, int U, bool GLU, bool RING>
__global__ void __launch_bounds__(256, R * U > 4 ? 2 : 4)
    k_qgemv(float *y, const float *x, QMat m, const float *b, const float *res, int N, int K, int act)
{
    constexpr int P = 128 / BITS; /* weights per block */
    constexpr int RP = GLU ? R / 2 : R;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t o0 = ((int64_t)blockIdx.x * 8 + warp) * RP;
    if (o0 >= N)
        return;
    const int nb = K / P;
    const unsigned char *rowp[R];
    const float *sp[R], *op[R];
    bool ok[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int64_t o = o0 + (GLU ? r % RP : r);
        ok[r] = o < N;
        const int64_t row = ok[r] ? (GLU && r >= RP ? N + o : o) : 0;
        rowp[r] = m.codes + row * m.row_bytes;
        sp[r] = m.scale + row * m.ng;
        op[r] = FAM == 2 ? m.offset + row * m.ng : nullptr;
    }
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        acc[r] = 0.0f;
    uint4 ch[U][R];
    if (RING) /* the first U blocks; each slot is refilled 32 U blocks ahead as soon as it is consumed */
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int r = 0; r < R; r++)
                if (lane + 32 * u < nb && ok[r])
                    ch[u][r] = ld_stream16(rowp[r] + (int64_t)(lane + 32 * u) * 16);
    for (int c0 = lane; c0 < nb; c0 += 32 * U) {
        if (!RING)
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int c = c0 + 32 * u;
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (c < nb && ok[r])
                        ch[u][r] = ld_stream16(rowp[r] + (int64_t)c * 16);
            }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + 32 * u;
            if (c >= nb)
                break;
            const int j = c * P / m.group;
            const float *xb = x + (int64_t)c * P;
            float s[R], off[R];
#pragma unroll
            for (int r = 0; r < R; r++) {
                s[r] = ok[r] ? ld_sc(sp[r] + j) : 0.0f;
                off[r] = FAM == 2 && ok[r] ? ld_sc(op[r] + j) : 0.0f;
            }
            dot_block<FAM, BITS, R>(acc, ch[u], ok, XGlobal{xb}, xb, s, off, 0x4B000000u);
            if (RING)
#pragma unroll
                for (int r = 0; r < R; r++)
                    if (c + 32 * U < nb && ok[r])
                        ch[u][r] = ld_stream16(rowp[r] + (int64_t)(c + 32 * U) * 16);
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
        acc[r] = warp_sum(acc[r]);
    if (lane == 0)
        store_rows<RP, GLU>(y, acc, o0, b, res, N, act);
}

template <int FAM, int BITS, int R, int U, bool GLU, bool RING>
cudaError_t launch(float *y, const float *x, const QMat &m, const float *b, const float *res, int N, int K, int act,
                   cudaStream_t s)
{
    constexpr int RP = GLU ? R / 2 : R;
    const unsigned grid = (unsigned)(((int64_t)N + 8 * RP - 1) / (8 * RP));
    k_qgemv<FAM, BITS, R, U, GLU, RING><<<grid, 256, 0, s>>>(y, x, m, b, res, N, K, act);
    return cudaGetLastError();
}

template <int R, int U, bool GLU, bool RING = false>
cudaError_t launch_q(float *y, const float *x, const void *W, const eng_qfmt *q, const float *b, const float *res,
                     int N, int K, int act, cudaStream_t s)
{
    if (N < 1 || !eng_qfmt_ok(q, K))
        return cudaErrorInvalidValue;
    const QMat m = qmat(W, q, GLU ? 2 * N : N, K);
    if (q->family == 2)
        return launch<2, 4, R, U, GLU, RING>(y, x, m, b, res, N, K, act, s);
    if (q->bits == 4)
        return launch<1, 4, R, U, GLU, RING>(y, x, m, b, res, N, K, act, s);
    return launch<1, 8, R, U, GLU, RING>(y, x, m, b, res, N, K, act, s);
}

/* A slot's scales and offsets for dot_block: the ring's (cs, cm) or the row's (PERROW). */
template <int FAM, int R, bool PERROW>
__device__ __forceinline__ void slot_scales(float *s, float *off, const float *cs, const float *cm, const float *srow,
                                            const float *mrow)
{
#pragma unroll
    for (int r = 0; r < R; r++) {
        s[r] = PERROW ? srow[r] : cs[r];
        off[r] = FAM != 2 ? 0.0f : PERROW ? mrow[r] : cm[r];
    }
}

/* The streamed kernel: one warp per RO outputs (R = RO rows, GLU: RO gate rows n and the up rows I + n), WARPS warps
 * a block. Each lane first requests its U first blocks of every row with their scales (and offsets): a ring, each
 * slot refilled with the block 32 U ahead as soon as it is consumed, so U 16-byte loads a row stay in flight to the
 * row's end; meanwhile (a programmatic launch in the decode graph: these loads are weights, so they may start before
 * the kernel before ends) the block waits for that kernel and copies x once into shared memory (padded: xpad), which every warp then reads
 * without bank conflicts instead of through L1 once per row block. PERROW (group == K): one scale per row, loaded
 * once, no scale in the ring. Lane l owns the blocks c = l, l + 32, ... and sums each in k order from 0, then the
 * butterfly: k_qgemv's order, so the same bits whatever the shape. Held to 64 registers (32 warps an SM) where the
 * ring takes at most 32 of them. NORM: the copy is rmsnorm(x) instead, computed by every block exactly as k_rmsnorm
 * (norm_row, as k_gemv's fused norm), and block 0 stores it into nm.xn if not NULL; the dot products are then those
 * of engk_rmsnorm followed by the plain kernel, bit for bit. */
template <int FAM, int PERROW> constexpr int slot_regs() { return 4 + (PERROW ? 0 : FAM == 2 ? 2 : 1); }

/* k_qgemv_s's row set from output o0 (RP outputs; GLU: gate rows o, up rows N + o): each row's offsets in 16-byte
 * units (codes, lane included) and in groups (scales, offsets), 32 bits each (a matrix below 64 GB). A row past N
 * is row 0: its sums are computed, never stored, so the loops need no predicate. */
template <int R, int RP, bool GLU>
__device__ __forceinline__ void row_offsets(unsigned *wo, unsigned *so, const QMat &m, int64_t o0, int N, int lane)
{
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int64_t o = o0 + (GLU ? r % RP : r);
        const int64_t row = o < N ? (GLU && r >= RP ? N + o : o) : 0;
        wo[r] = (unsigned)(row * (m.row_bytes / 16)) + lane;
        so[r] = (unsigned)(row * m.ng);
    }
}

template <int FAM, int BITS, int R, int U, int WARPS, bool GLU, bool PERROW, bool NORM, bool NQ, bool MR = false>
__global__ void __launch_bounds__(WARPS * 32, (R * U * slot_regs<FAM, PERROW>() <= 32 ? 1024 : 512) / (WARPS * 32))
    k_qgemv_s(float *y, const float *x, QMat m, const float *b, const float *res, int N, int K, int act, int gshift,
              QNorm nm, int rs)
{
    static_assert(!MR || NQ, "the multi-row walk is the NQ loop's");
    static_assert(!NORM || WARPS * 32 >= NORM_THREADS, "the fused norm needs k_rmsnorm's 256 threads");
    constexpr int P = 128 / BITS, RP = GLU ? R / 2 : R;
    extern __shared__ float4 xs[];
    __shared__ float part[NORM ? WARPS : 1]; /* block_sum's warp partials */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t o0 = ((int64_t)blockIdx.x * WARPS + warp) * RP * (MR ? rs : 1); /* MR: rs row sets from o0 */
    const int nb = K / P, nj = lane < nb ? (nb - lane + 31) >> 5 : 0; /* this lane's blocks */
    const uint4 *w16 = reinterpret_cast<const uint4 *>(m.codes);
    unsigned wo[R], so[R];
    row_offsets<R, RP, GLU>(wo, so, m, o0, N, lane);
    bool ok[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        ok[r] = true;
    uint4 ch[U][R];
    float cs[U][R], cm[U][R]; /* the slot's scale and offset (not PERROW) */
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
        for (int r = 0; r < R; r++)
            if (u < nj) {
                ch[u][r] = ld_stream16(w16 + wo[r] + 32 * u);
                if (!PERROW) {
                    const unsigned g = so[r] + ((unsigned)(lane + 32 * u) >> gshift);
                    cs[u][r] = ld_sc(m.scale + g);
                    cm[u][r] = FAM == 2 ? ld_sc(m.offset + g) : 0.0f;
                }
            }
    float srow[R], mrow[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        srow[r] = PERROW ? ld_sc(m.scale + so[r]) : 0.0f;
        mrow[r] = PERROW && FAM == 2 ? ld_sc(m.offset + so[r]) : 0.0f;
    }
    dep_launch(); /* the codes and scales above are weights; x, nw, b, res and y belong to the kernels before */
    dep_wait();
    for (int L = threadIdx.x; L < K / 4; L += WARPS * 32)
        xs[xpad(L)] = reinterpret_cast<const float4 *>(x)[L];
    __syncthreads();
    if (NORM) { /* the copy becomes rmsnorm(x) (and xn), as k_rmsnorm: its sums read the copy, not L2 */
        norm_row<true>(SlotPad{reinterpret_cast<float *>(xs)}, nm.xn, x, nm.nw, nm.eps, nm.kind, K, part);
        __syncthreads();
    }
    if (o0 >= N)
        return;
    const float4 *xl = xs + xpad(lane * (P / 4));
    float acc[R] = {};
    if (MR) {
        /* The warp's rs row sets (RP outputs each; those from N on skipped) as one stream of its lanes' blocks: item
         * t = i nj + j is block lane + 32 j of row set i, held in slot t % U. The ring's refill runs on across row
         * sets (a cursor, ir / jr), so U blocks a row stay in flight from the first row set's start to the last one's
         * end, and x's copy (and the norm) is paid once for rs row sets. Each row's blocks are summed in the same
         * order and reduced by the same butterfly as the loops below: the same bits. The launcher runs it only
         * where every lane has the same nj >= U (nb a multiple of 32), so the row sets end together for the whole
         * warp (the butterfly) and at most one row set boundary lies among the U items in flight (PERROW: the next
         * row set's scale, loaded when the refill enters it, srn, and taken when the sums do). */
        const int64_t left = (N - o0 + RP - 1) / RP; /* row sets from o0 with an output below N */
        const int nrs = left < rs ? (int)left : rs;
        const int T = nrs * nj;
        unsigned wr[R], sr[R]; /* the refill's row set (row_offsets) */
        float srn[R], mrn[R];
        auto enter = [&](int i) { /* the refill cursor enters row set i (< nrs) */
            row_offsets<R, RP, GLU>(wr, sr, m, o0 + (int64_t)i * RP, N, lane);
#pragma unroll
            for (int r = 0; r < R; r++) {
                srn[r] = PERROW ? ld_sc(m.scale + sr[r]) : 0.0f;
                mrn[r] = PERROW && FAM == 2 ? ld_sc(m.offset + sr[r]) : 0.0f;
            }
        };
#pragma unroll
        for (int r = 0; r < R; r++) {
            wr[r] = wo[r];
            sr[r] = so[r];
            srn[r] = srow[r];
            mrn[r] = mrow[r];
        }
        int jr = U, ir = 0, jc = 0, ic = 0; /* the refill's next item and the sums' */
        if (jr == nj) {
            jr = 0;
            ir = 1;
            if (ir < nrs)
                enter(ir);
        }
        const unsigned xa0 = smem_u32(xl);
        for (int t0 = 0; t0 < T; t0 += U)
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int t = t0 + u;
                if (t >= T)
                    break;
                float s[R], off[R];
                slot_scales<FAM, R, PERROW>(s, off, cs[u], cm[u], srow, mrow);
                const float *xb = NORM ? reinterpret_cast<const float *>(xl + 9 * P * jc) : x + (int64_t)(lane + 32 * jc) * P;
                dot_block<FAM, BITS, R, true>(acc, ch[u], ok, XSharedA{xa0 + 144u * P * (unsigned)jc}, xb, s, off,
                                              m.magic, m.magic19);
                if (t + U < T) { /* refill slot u with item t + U: block jr of row set ir */
                    const unsigned g = (unsigned)(lane + 32 * jr) >> gshift;
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        ch[u][r] = ld_stream16(w16 + (wr[r] + 32u * (unsigned)jr));
                        if (!PERROW) {
                            cs[u][r] = ld_sc(m.scale + (sr[r] + g));
                            cm[u][r] = FAM == 2 ? ld_sc(m.offset + (sr[r] + g)) : 0.0f;
                        }
                    }
                    if (++jr == nj) {
                        jr = 0;
                        if (++ir < nrs)
                            enter(ir);
                    }
                }
                if (++jc == nj) { /* row set ic summed: the butterfly and its store, as below */
#pragma unroll
                    for (int r = 0; r < R; r++)
                        acc[r] = warp_sum(acc[r]);
                    if (lane == 0)
                        store_rows<RP, GLU>(y, acc, o0 + (int64_t)ic * RP, b, res, N, act);
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        acc[r] = 0.0f;
                        srow[r] = srn[r];
                        mrow[r] = mrn[r];
                    }
                    jc = 0;
                    ic++;
                }
            }
        return;
    }
    if (NQ) { /* the same blocks, sums and loads in the same order; the addresses advanced instead of recomputed */
        const uint4 *wp[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            wp[r] = w16 + wo[r];
        unsigned xa = smem_u32(xl);
        /* slot u of the round at j0 (block j = j0 + u); CHECK: the last rounds, where a slot may be past the lane's
         * blocks or have no block U ahead to load */
        auto slot = [&](int u, int j0, bool check) {
            const int j = j0 + u, c = lane + 32 * j;
            float s[R], off[R];
            slot_scales<FAM, R, PERROW>(s, off, cs[u], cm[u], srow, mrow);
            const float *xb = NORM ? reinterpret_cast<const float *>(xl + 9 * P * j) : x + (int64_t)c * P;
            dot_block<FAM, BITS, R, true>(acc, ch[u], ok, XSharedA{xa + 144u * P * u}, xb, s, off, m.magic,
                                          m.magic19);
            if (!check || j + U < nj) {
                const unsigned g = (unsigned)(c + 32 * U) >> gshift;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    ch[u][r] = ld_stream16(wp[r] + 32 * (u + U));
                    if (!PERROW) {
                        cs[u][r] = ld_sc(m.scale + (so[r] + g));
                        cm[u][r] = FAM == 2 ? ld_sc(m.offset + (so[r] + g)) : 0.0f;
                    }
                }
            }
        };
        int j0 = 0;
        for (; j0 + 2 * U <= nj; j0 += U) { /* every slot full, every refill in the row */
#pragma unroll
            for (int u = 0; u < U; u++)
                slot(u, j0, false);
#pragma unroll
            for (int r = 0; r < R; r++)
                wp[r] += 32 * U;
            xa += 144u * P * U;
        }
        for (; j0 < nj; j0 += U) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (j0 + u >= nj)
                    break;
                slot(u, j0, true);
            }
#pragma unroll
            for (int r = 0; r < R; r++)
                wp[r] += 32 * U;
            xa += 144u * P * U;
        }
    } else {
        for (int j0 = 0; j0 < nj; j0 += U)
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int j = j0 + u, c = lane + 32 * j; /* slot u holds the lane's block j */
                if (j >= nj)
                    break;
                float s[R], off[R];
                slot_scales<FAM, R, PERROW>(s, off, cs[u], cm[u], srow, mrow);
                /* block c = lane + 32 j starts at unit xpad(c P / 4) = xpad(lane P / 4) + 36 (P / 4) j */
                /* the slow path's x: the normed copy where NORM (a block's units are contiguous), else x itself */
                const float *xb = NORM ? reinterpret_cast<const float *>(xl + 9 * P * j) : x + (int64_t)c * P;
                dot_block<FAM, BITS, R>(acc, ch[u], ok, XShared{xl + 9 * P * j}, xb, s, off, m.magic);
                if (j + U < nj)
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        ch[u][r] = ld_stream16(w16 + wo[r] + 32 * (j + U));
                        if (!PERROW) {
                            const unsigned g = so[r] + ((unsigned)(c + 32 * U) >> gshift);
                            cs[u][r] = ld_sc(m.scale + g);
                            cm[u][r] = FAM == 2 ? ld_sc(m.offset + g) : 0.0f;
                        }
                    }
            }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
        acc[r] = warp_sum(acc[r]);
    if (lane == 0)
        store_rows<RP, GLU>(y, acc, o0, b, res, N, act);
}

/* Block c's group is c >> shift: blocks a group (group / P) a power of two, or 31 where group == K (one per row,
 * c < 2^31); -1 otherwise (k_qgemv runs those). */
inline int slot_shift(int group, int K, int P)
{
    if (group == K)
        return 31;
    int sh = 0;
    while ((P << sh) < group)
        sh++;
    return (P << sh) == group ? sh : -1;
}

/* k_qgemv_s indexes the matrix: group by shift, 16-byte blocks and groups by 32-bit offsets. */
inline bool slot_fits(const eng_qfmt *q, int64_t rows, int64_t K)
{
    const int P = 128 / q->bits;
    return slot_shift(q->group, (int)K, P) >= 0 && rows * (K / P) < ((int64_t)1 << 32);
}

/* Shared bytes for x: K floats and their padding (xpad). */
inline size_t xs_bytes(int K) { return ((size_t)K / 4 + (size_t)K / 32 + 1) * 16; }

/* An attribute of the current device, or -1 (the failed query's error cleared: not a kernel's). */
inline int dev_attr(cudaDeviceAttr a)
{
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, a, dev) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return v;
}

/* Row sets a warp for k_qgemv_s's multi-row walk (MR): RS > 1 as given; RS = 0 the fewest that put the whole grid
 * on the device at once (one wave), so x's copy and the norm are paid once a block and no block waits for a second
 * wave. Which warp sums a row never changes its bits, so this may depend on the device. */
inline int rows_sets(int RS, const void *kern, int threads, size_t smem, int64_t blocks1, Held &c)
{
    if (RS > 0)
        return RS;
    if (held_blocks(kern, threads, smem, c) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    if (c.sms < 1 || c.per_sm < 1)
        return 1;
    const int64_t wave = c.blocks();
    return (int)((blocks1 + wave - 1) / wave);
}

/* RS: 1 the one-row-set loops; else the multi-row walk with RS row sets a warp (0: rows_sets' choice), where every
 * lane has the same number of blocks, at least U (nb a multiple of 32); elsewhere the one-row-set loops. */
template <int FAM, int BITS, int RO, int U, int WARPS, bool GLU, bool PERROW, bool NORM, bool NQ, int RS = 1>
cudaError_t launch_s(float *y, const float *x, const QMat &m, const float *b, const float *res, int N, int K, int act,
                     const QNorm &nm, cudaStream_t s)
{
    constexpr int R = GLU ? 2 * RO : RO;
    constexpr bool MR = RS != 1 && NQ;
    const int nb = K / (128 / BITS);
    const bool walk = MR && nb % 32 == 0 && nb / 32 >= U;
    const auto kern = walk ? k_qgemv_s<FAM, BITS, R, U, WARPS, GLU, PERROW, NORM, NQ, MR>
                           : k_qgemv_s<FAM, BITS, R, U, WARPS, GLU, PERROW, NORM, NQ, false>;
    const size_t smem = xs_bytes(K);
    if (smem > 48 * 1024) {
        const cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess)
            return err;
    }
    const int gshift = slot_shift(m.group, K, 128 / BITS);
    const int64_t blocks1 = ((int64_t)N + WARPS * RO - 1) / (WARPS * RO);
    static Held wave; /* the walk's kernel (one per instantiation) */
    const int rs = walk ? rows_sets(RS, (const void *)kern, WARPS * 32, smem, blocks1, wave) : 1;
    const unsigned grid = (unsigned)((blocks1 + rs - 1) / rs);
    return launch_dep(kern, dim3(grid), dim3(WARPS * 32), smem, s, y, x, m, b, res, N, K, act, gshift, nm, rs);
}

/* k_qgemv_s for q's family, bits and grouping (the format checked, slot_fits). */
template <int RO, int U, int WARPS, bool GLU, bool NORM, bool NQ, int RS = 1>
cudaError_t launch_sf(float *y, const float *x, const void *W, const eng_qfmt *q, const float *b, const float *res,
                      int N, int K, int act, const QNorm &nm, cudaStream_t s)
{
    const QMat m = qmat(W, q, GLU ? 2 * N : N, K);
    if (q->family == 2)
        return launch_s<2, 4, RO, U, WARPS, GLU, false, NORM, NQ, RS>(y, x, m, b, res, N, K, act, nm, s);
    if (q->bits == 4)
        return launch_s<1, 4, RO, U, WARPS, GLU, false, NORM, NQ, RS>(y, x, m, b, res, N, K, act, nm, s);
    if (q->group == K)
        return launch_s<1, 8, RO, U, WARPS, GLU, true, NORM, NQ, RS>(y, x, m, b, res, N, K, act, nm, s);
    return launch_s<1, 8, RO, U, WARPS, GLU, false, NORM, NQ, RS>(y, x, m, b, res, N, K, act, nm, s);
}

template <int RO, int U, int WARPS, bool GLU, bool NQ = false, int RS = 1>
cudaError_t launch_sq(float *y, const float *x, const void *W, const eng_qfmt *q, const float *b, const float *res,
                      int N, int K, int act, cudaStream_t s)
{
    if (N < 1 || !eng_qfmt_ok(q, K))
        return cudaErrorInvalidValue;
    if (!slot_fits(q, GLU ? 2 * (int64_t)N : N, K)) /* k_qgemv's r2u2r */
        return launch_q<2, 2, GLU, true>(y, x, W, q, b, res, N, K, act, s);
    return launch_sf<RO, U, WARPS, GLU, false, NQ, RS>(y, x, W, q, b, res, N, K, act, QNorm{nullptr, nullptr, 0.0f, 0},
                                                       s);
}


/* 1 if k_qgemv_s runs q at [rows, K] on the current device: slot_fits, the padded row (and the fused norm's
 * static warp partials, norm) within the opt-in shared memory. */
inline bool s_runs(const eng_qfmt *q, int64_t rows, int K, bool norm)
{
    if (!eng_qfmt_ok(q, K) || !slot_fits(q, rows, K))
        return false;
    const int optin = dev_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin);
    return optin >= 0 && xs_bytes(K) + (norm ? 16 * sizeof(float) : 0) <= (size_t)optin;
}

/* y = W rmsnorm(x) (+ b), or its GLU: k_qgemv_s with the fused norm; refused where norm_runs does not hold. */
template <int RO, int U, int WARPS, bool GLU, bool NQ = false, int RS = 1>
cudaError_t launch_sn(float *y, float *xn, const float *x, const float *nw, float eps, int kind, const void *W,
                      const eng_qfmt *q, const float *b, int N, int K, int act, cudaStream_t s)
{
    if (N < 1 || kind < 0 || kind > 3 || (kind != 3 && !nw) || !s_runs(q, GLU ? 2 * (int64_t)N : N, K, true))
        return cudaErrorInvalidValue;
    return launch_sf<RO, U, WARPS, GLU, true, NQ, RS>(y, x, W, q, b, nullptr, N, K, act, QNorm{xn, nw, eps, kind}, s);
}

/* ---- k_qgemv_mma: the tensor-core variant (sm_80+; see eng_qgemv.h for its order and precision) ----
 * A warp owns a tile of 16 rows (GLU: 8 gate rows n and their up rows I + n) and computes them with
 * mma.sync.m16n8k16 (f16 inputs, f32 accumulation): A = the codes as exact fp16 integers, B column 0 = x's high
 * fp16 part, column 1 = its low part (x scaled by an exact power of two), columns 2..7 zero. A step is 16 bytes of
 * each row per lane: lane (g = lane / 4, t = lane % 4) holds bytes [16 t, 16 t + 16) of the step's 64 bytes of
 * rows g and g + 8 (int4: 128 k, 8 MMAs; int8: 64 k, 4 MMAs). The MMAs permute k within a step; B uses the same
 * permutation, so each product pairs a code with its own x: thread t's A slots (2t, 2t+1 | 2t+8, 2t+9) of MMA i
 * hold, int8: k = 16 t + 4 i + (0, 1 | 2, 3); int4 (MMA 2 w + h, word w): k = 32 t + 8 w + 2 h + (0, 4 | 1, 5). */

template <int BITS> __host__ __device__ constexpr int mma_stepk() { return BITS == 4 ? 128 : 64; } /* k a step covers */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 /* the device helpers of k_qgemv_mma (its body is empty before) */
/* fp16x2 a - b; exact here (integers below 2048) */
__device__ __forceinline__ unsigned hsub2u(unsigned a, unsigned b)
{
    unsigned r;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

/* c += A B: m16n8k16, row-major A (a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)),
 * column-major B (b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g)), c0, c1 = (g, 2t, 2t+1), c2, c3 = (g+8, ...). */
__device__ __forceinline__ void mma16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* fp16x2 a * b + c; exact here (a = 1024 + 16 u, b = 1/16, c = -(64 + bias): integers below 2048 throughout) */
__device__ __forceinline__ unsigned hfma2u(unsigned a, unsigned b, unsigned c)
{
    unsigned r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

/* (w & m) ^ k in one lop3 (k: constant bits outside m, or the nibbles' bias flip inside them) */
template <unsigned M, unsigned K> __device__ __forceinline__ unsigned and_xor(unsigned w)
{
    unsigned r;
    asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(r) : "r"(w), "n"(M), "n"(K));
    return r;
}

/* The four nibble pairs (n, n + 4) of word w as fp16x2 exact codes: q[0] nibbles 0, 4; q[1] 1, 5; q[2] 2, 6; q[3]
 * 3, 7. FLIP (0 or 0x88888888: symmetric codes biased to unsigned u = c + 8) and the magic exponent go in with the
 * mask (one lop3 a pair); the even pairs sit at mantissa bits 0-3 (fp16 1024 + u, minus 1024 + bias by one sub),
 * the odd ones at bits 4-7 (1024 + 16 u, times 1/16 minus 64 + bias by one fma); the upper half of the word after
 * one shift by 8. The same fp16 values as (((w ^ FLIP) >> 4 n) & 0x000F000F | 0x64006400) - (1024 + bias). */
template <unsigned FLIP, unsigned SUB>
__device__ __forceinline__ void nib8(unsigned (&q)[4], unsigned w)
{
    constexpr unsigned MLO = 0x000F000Fu, MHI = 0x00F000F0u, MAGIC = 0x64006400u;
    constexpr unsigned SIXTEENTH = 0x2C002C00u;                              /* fp16x2 (1/16, 1/16) */
    constexpr unsigned HSUB = SUB == 0x64006400u ? 0xD400D400u : 0xD480D480u; /* -(64 + bias): -64 or -72 */
    static_assert(SUB == 0x64006400u || SUB == 0x64086408u, "bias 0 (affine) or 8 (symmetric)");
    const unsigned h = w >> 8;
    q[0] = hsub2u(and_xor<MLO, (FLIP & MLO) | MAGIC>(w), SUB);
    q[1] = hfma2u(and_xor<MHI, (FLIP & MHI) | MAGIC>(w), SIXTEENTH, HSUB);
    q[2] = hsub2u(and_xor<MLO, ((FLIP >> 8) & MLO) | MAGIC>(h), SUB);
    q[3] = hfma2u(and_xor<MHI, ((FLIP >> 8) & MHI) | MAGIC>(h), SIXTEENTH, HSUB);
}

/* Bytes (sel: 0x4140 = bytes 0, 1; 0x4342 = bytes 2, 3) of w (biased to unsigned) as fp16x2 1024 + u, minus 1152. */
__device__ __forceinline__ unsigned byte2(unsigned w, unsigned sel)
{
    return hsub2u(__byte_perm(w, 0x64646464u, sel), 0x64806480u);
}

/* One step's MMAs into c (from zero) for the lane's 16 bytes wa (row g) and wb (row g + 8); xp: the lane's B pieces
 * (16 bytes each, 8 uint4 apart): int4 piece w holds the fp16 x of word w's k in the order 0 4 1 5 2 6 3 7 (b0, b1
 * of MMA 2 w, then of MMA 2 w + 1); int8 piece p the 8 k of words 2 p, 2 p + 1 in order. */
template <int FAM, int BITS>
__device__ __forceinline__ void mma_step(float (&c)[4], const uint4 &wa, const uint4 &wb, const uint4 *xp)
{
    constexpr unsigned FLIP = FAM == 2 ? 0u : BITS == 8 ? 0x80808080u : 0x88888888u;
    constexpr unsigned SUB4 = FAM == 2 ? 0x64006400u : 0x64086408u; /* 1024 (+ 8) */
    if (BITS == 4) {
#pragma unroll
        for (int w = 0; w < 4; w++) {
            const uint4 bx = xp[8 * w];
            unsigned a[4], b[4];
            nib8<FLIP, SUB4>(a, (&wa.x)[w]);
            nib8<FLIP, SUB4>(b, (&wb.x)[w]);
            mma16816(c, a[0], b[0], a[1], b[1], bx.x, bx.y);
            mma16816(c, a[2], b[2], a[3], b[3], bx.z, bx.w);
        }
    } else {
#pragma unroll
        for (int p = 0; p < 2; p++) {
            const uint4 bx = xp[8 * p];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const unsigned a = (&wa.x)[2 * p + h] ^ FLIP, b = (&wb.x)[2 * p + h] ^ FLIP;
                mma16816(c, byte2(a, 0x4140u), byte2(b, 0x4140u), byte2(a, 0x4342u), byte2(b, 0x4342u),
                         (&bx.x)[2 * h], (&bx.x)[2 * h + 1]);
            }
        }
    }
}

/* (a, b) = hi + lo + r as fp16x2 pairs (a low), hi = fp16(x), lo = fp16(x - hi) (x - hi exact in f32), each
 * rounded to nearest even: |r| <= 2^-22 |x| + 2^-25. */
__device__ __forceinline__ void split_f16x2(float a, float b, unsigned &hi, unsigned &lo)
{
    const __half2 h = __floats2half2_rn(a, b);
    const float2 hf = __half22float2(h);
    const __half2 l = __floats2half2_rn(__fsub_rn(a, hf.x), __fsub_rn(b, hf.y));
    memcpy(&hi, &h, 4);
    memcpy(&lo, &l, 4);
}

/* The integer form (INT): c += A B by mma.sync.m16n8k32, A u8 (U8) or s8, B s8, s32 accumulation (exact here).
 * Fragments as mma16816's with 4 k a register: a0 = (g, k 4t..4t+3), a1 = (g+8, 4t..), a2 = (g, 16+4t..), a3 = (g+8,
 * 16+4t..); b0 = (k 4t..4t+3, n g), b1 = (k 16+4t.., n g); c0, c1 = (g, 2t, 2t+1), c2, c3 = (g+8, ...). */
template <bool U8>
__device__ __forceinline__ void imma16832(int (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                          unsigned b1)
{
    if (U8)
        asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* One step's integer MMAs into c (from zero), the lane's 16 bytes wa (row g) and wb (row g + 8); xp: the lane's B
 * digits. int4: each nibble moved into its byte's high half, so A = 16 times the code (s8 16 c for the symmetric
 * family's signed nibbles, u8 16 u for the affine family's), no other decode: MMA 2 p + h takes words 2 p, 2 p + 1,
 * h = 0 their low nibbles (w << 4), h = 1 their high ones (w & 0xF0F0F0F0), so its k are 32 t + 16 p + 2 j + h
 * (a0, a1) and + 8 (a2, a3), j the byte; B registers 2 (2 p + h), + 1 in two uint4 16 apart. int8: the codes as they
 * are (s8), MMA p over words 2 p, 2 p + 1 (k 16 t + 8 p + 0..7), B one uint4. */
template <int FAM, int BITS>
__device__ __forceinline__ void imma_step(int (&c)[4], const uint4 &wa, const uint4 &wb, const uint4 *xp)
{
    constexpr unsigned HI = 0xF0F0F0F0u;
    if (BITS == 4) {
        const uint4 p0 = xp[0], p1 = xp[16];
        const unsigned bx[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
#pragma unroll
        for (int p = 0; p < 2; p++) {
            const unsigned a0 = (&wa.x)[2 * p], a2 = (&wa.x)[2 * p + 1], a1 = (&wb.x)[2 * p], a3 = (&wb.x)[2 * p + 1];
            imma16832<FAM == 2>(c, (a0 << 4) & HI, (a1 << 4) & HI, (a2 << 4) & HI, (a3 << 4) & HI, bx[4 * p],
                                bx[4 * p + 1]);
            imma16832<FAM == 2>(c, a0 & HI, a1 & HI, a2 & HI, a3 & HI, bx[4 * p + 2], bx[4 * p + 3]);
        }
    } else {
        const uint4 b = xp[0];
        imma16832<false>(c, wa.x, wb.x, wa.y, wb.y, b.x, b.y);
        imma16832<false>(c, wa.z, wb.z, wa.w, wb.w, b.z, b.w);
    }
}

/* X (|X| <= 2^30) as balanced base-256 digits, byte i the s8 digit d_i in [-128, 127], X = d0 + 2^8 d1 + 2^16 d2 +
 * 2^24 d3: X + 0x808080 holds d_i + 128 in its three low bytes and d3 above them (no overflow), and flipping those
 * bytes' top bits makes them d_i. */
__device__ __forceinline__ unsigned digits4(int X) { return ((unsigned)X + 0x808080u) ^ 0x808080u; }

/* The 4 x 4 byte transpose: out[g] byte j = byte g of w[j] (digit g of values j = 0..3 in one B register). */
__device__ __forceinline__ void bytes4x4(unsigned (&out)[4], const unsigned (&w)[4])
{
    const unsigned l01 = __byte_perm(w[0], w[1], 0x5140u), h01 = __byte_perm(w[0], w[1], 0x7362u);
    const unsigned l23 = __byte_perm(w[2], w[3], 0x5140u), h23 = __byte_perm(w[2], w[3], 0x7362u);
    out[0] = __byte_perm(l01, l23, 0x5410u);
    out[1] = __byte_perm(l01, l23, 0x7632u);
    out[2] = __byte_perm(h01, h23, 0x5410u);
    out[3] = __byte_perm(h01, h23, 0x7632u);
}

#endif

/* Shared memory of k_qgemv_mma (uint4 units): the B pieces, step-major, [step][piece q][hi, lo][t] (the 8 B lanes
 * of one load read 128 contiguous bytes; INT: [step][i][digit g][t], i < 2 for int4, the 16 B lanes of one load
 * reading 256 contiguous bytes); a zero block (the lanes of columns 2..7, INT 4..7, read it); the affine family's
 * per-step sums of x (f32; INT: times 2^(F - 12)). Both forms take the same bytes. */
inline size_t mma_smem(int K, int bits, int family)
{
    const int SK = bits == 4 ? 128 : 64, S = K / SK, NQ = SK / 32;
    return ((size_t)S * NQ * 8 + (size_t)NQ * 8) * 16 + (family == 2 ? (size_t)S * 4 : 0);
}

/* NORM: x's flat f32 copy follows, at this uint4 unit (mma_smem rounded up to 16 bytes); K floats. */
__host__ __device__ inline int mma_xf_unit(int K, int bits, int family)
{
    const int SK = bits == 4 ? 128 : 64, S = K / SK, NQ = SK / 32;
    return (S + 1) * NQ * 8 + (family == 2 ? (S * 4 + 15) / 16 : 0);
}

/* Bytes of dynamic shared memory of the fused-norm form: the B pieces, then x's flat copy. */
inline size_t mma_norm_smem(int K, int bits, int family)
{
    return (size_t)mma_xf_unit(K, bits, family) * 16 + (size_t)K * 4;
}

/* What a k_qgemv_mma launch keeps free of its opt-in shared memory beyond the dynamic part: red, wmx (static). */
constexpr size_t MMA_SMEM_SPARE = 2048;

/* KS warps split a tile's k steps (warp ks: steps ks, ks + KS, ...), TILES tiles a block, a ring of U steps in
 * flight per lane (loaded before dep_wait: weights); MINB > 0: at least that many blocks an SM (the registers capped
 * to fit; 0: no minimum, the compiler's own choice). Per row: each step's MMAs from zero, v = (c0 + c1) 2^e, then
 * acc = fma(s, v, acc) (+ fma(m, sum of the step's x, acc)) in the warp's step order (PERROW: acc += v, times s at
 * the end); the KS warps' accs summed in warp order; + b, res +. None of it depends on the grid or on U.
 * PER (persistent): the grid is what the device holds at once, and block b takes the units (TILES tiles each) b,
 * b + grid, ... in turn: x's prologue (copy, norm, max, fp16 pieces) runs once a block instead of once a wave of
 * blocks, and where a warp's steps a tile are a multiple of U the ring's refills past a unit's last step load the
 * next unit's first steps, so the loads stay in flight across units. Each row's order is the same, hence the same
 * bits as the form without PER. */
template <int FAM, int BITS, int KS, int TILES, int U, bool GLU, bool PERROW, bool NORM, int MINB, bool PER = false,
          bool INT = false>
__global__ void __launch_bounds__(KS * TILES * 32, MINB)
    k_qgemv_mma(float *y, const float *x, QMat m, const float *b, const float *res, int N, int K, int act, int gshift,
                QNorm nm)
{
    static_assert(!NORM || KS * TILES * 32 >= NORM_THREADS, "the fused norm needs k_rmsnorm's 256 threads");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int WARPS = KS * TILES, NT = WARPS * 32, SK = mma_stepk<BITS>(), NQ = SK / 32, PPS = SK / 8;
    extern __shared__ uint4 xq[];
    __shared__ float red[PER ? 2 : 1][WARPS][16], wmx[WARPS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int tile = warp / KS, ks = warp % KS;
    const int S = K / SK, nj = ks < S ? (S - ks + KS - 1) / KS : 0; /* this warp's steps */
    const int units = ((GLU ? (N + 7) / 8 : (N + 15) / 16) + TILES - 1) / TILES; /* 32-bit: N < 2^31 - 15 */
    int un = blockIdx.x; /* the block's unit: tiles un TILES .. + TILES - 1 */
    const uint4 *w16 = reinterpret_cast<const uint4 *>(m.codes);
    struct Rows {
        unsigned wa, wb, sa, sb; /* the lane's A rows g and g + 8: their first 16 bytes (uint4 units), first groups */
    };
    /* a row past N computes row 0's (or N's) sums, never stored */
    const auto rows_of = [&](int u) {
        const int64_t tl0 = (int64_t)u * TILES + tile;
        int64_t ra, rb;
        if (GLU) {
            const int64_t o = tl0 * 8 + g;
            ra = o < N ? o : 0;
            rb = o < N ? N + o : N;
        } else {
            const int64_t oa = tl0 * 16 + g, ob = oa + 8;
            ra = oa < N ? oa : 0;
            rb = ob < N ? ob : 0;
        }
        return Rows{(unsigned)(ra * (m.row_bytes / 16)) + t, (unsigned)(rb * (m.row_bytes / 16)) + t,
                    (unsigned)(ra * m.ng), (unsigned)(rb * m.ng)};
    };
    Rows cur = rows_of(un);
    if (NORM) /* the norm's weight (a weight) staged after x's flat copy, first: no ring register is live yet */
        norm_w_stage(reinterpret_cast<float *>(xq + mma_xf_unit(K, BITS, FAM)) + K, nm.nw, nm.kind, K, nm.stage);
    uint4 cha[U], chb[U];
    float csa[U], csb[U], cma[U], cmb[U];
    /* ring slot u <- step j of rows rw: the two rows' 16 bytes and (not PERROW) their group's scales and offsets */
    const auto load = [&](int u, unsigned j, const Rows &rw) {
        cha[u] = ld_stream16(w16 + rw.wa + 4 * j);
        chb[u] = ld_stream16(w16 + rw.wb + 4 * j);
        if (!PERROW) {
            csa[u] = ld_sc(m.scale + rw.sa + (j >> gshift));
            csb[u] = ld_sc(m.scale + rw.sb + (j >> gshift));
            cma[u] = FAM == 2 ? ld_sc(m.offset + rw.sa + (j >> gshift)) : 0.0f;
            cmb[u] = FAM == 2 ? ld_sc(m.offset + rw.sb + (j >> gshift)) : 0.0f;
        }
    };
    const auto fill = [&]() {
#pragma unroll
        for (int u = 0; u < U; u++)
            if (u < nj)
                load(u, (unsigned)(ks + KS * u), cur);
    };
    /* PER with the fused norm: the ring's first steps asked of L2 only (no register held across the prologue: held,
     * they spilled into the loop), loaded after it */
    constexpr bool L2FIRST = PER && NORM;
    if (L2FIRST) {
#pragma unroll
        for (int u = 0; u < U; u++)
            if (u < nj) {
                const unsigned j = (unsigned)(ks + KS * u);
                asm volatile("prefetch.global.L2 [%0];" ::"l"(w16 + cur.wa + 4 * j));
                asm volatile("prefetch.global.L2 [%0];" ::"l"(w16 + cur.wb + 4 * j));
            }
    } else
        fill();
    dep_launch(); /* the codes and scales above are weights; x, b, res and y belong to the kernels before */
    dep_wait();
    /* the output this thread stores in unit u's epilogue (tile tid / 16, row tid % 16; GLU: rows 0..7 only), if
     * tid < TILES * 16 and it is below N */
    const auto out_row = [&](int u) {
        const int64_t tt0 = (int64_t)u * TILES + (threadIdx.x >> 4);
        return GLU ? tt0 * 8 + (threadIdx.x & 15) : tt0 * 16 + (threadIdx.x & 15);
    };
    /* RES_EARLY: res[o] of the row this thread stores in unit u, 0 where it stores none */
    constexpr bool RE = RES_EARLY && !GLU && !NORM; /* the fused-norm launches pass no res */
    const auto res_of = [&](int u) {
        const int64_t o = out_row(u);
        return threadIdx.x < TILES * 16 && o < N ? res[o] : 0.0f;
    };
    float rv = RE && res ? res_of(un) : 0.0f;
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    /* max |x| (NaN ignored; exact, so in any order), then 2^e with max |x| 2^-e in [2^14, 2^15) */
    float mx = 0.0f;
    if (NORM && NORM_MAX_FUSED) { /* x into its flat copy as it is normed there (and xn), its max taken meanwhile */
        float *xf = reinterpret_cast<float *>(xq + mma_xf_unit(K, BITS, FAM));
        mx = norm_row_max<INT>(SlotFlat{xf}, nm.xn, x, norm_w_row(xf + K, nm.nw, nm.kind, nm.stage), nm.eps, nm.kind,
                               K, red[0][0]); /* red: free until the loop */
        x4 = reinterpret_cast<const float4 *>(xf);
    } else {
        if (NORM) { /* x into its flat copy, made rmsnorm(x) there as k_rmsnorm (and xn); the prologue then reads it */
            float *xf = reinterpret_cast<float *>(xq + mma_xf_unit(K, BITS, FAM));
            for (int L = threadIdx.x; L < K / 4; L += NT)
                reinterpret_cast<float4 *>(xf)[L] = x4[L];
            if (!NW_LATE_WAIT)
                norm_w_landed();
            __syncthreads();
            norm_row<true, NW_LATE_WAIT != 0, NORM_APPLY_NB>(SlotFlat{xf}, nm.xn, x,
                                                             norm_w_row(xf + K, nm.nw, nm.kind, nm.stage), nm.eps,
                                                             nm.kind, K, wmx); /* wmx: free until the max below */
            __syncthreads();
            x4 = reinterpret_cast<const float4 *>(xf);
        }
        /* X_STAGE (plain form, the launch's copy there): x into the flat copy as its max is taken; the pieces below
         * read the copy, which the max's barrier makes visible */
        float4 *xs = !NORM && X_STAGE && nm.xstage ? reinterpret_cast<float4 *>(xq + mma_xf_unit(K, BITS, FAM))
                                                    : nullptr;
        if (X_ASYNC && xs) { /* the copy first, then the max over the thread's own elements */
            const unsigned base = smem_u32(xs);
            for (int L = threadIdx.x; L < K / 4; L += NT)
                cpa_16(base + 16u * (unsigned)L, x4 + L);
            cpa_commit();
            cpa_wait_all();
            x4 = xs;
        }
        for (int L = threadIdx.x; L < K / 4; L += NT) {
            const float4 v = x4[L];
            if (!X_ASYNC && xs)
                xs[L] = v;
            mx = fmaxf(mx, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
            if (INT &&
                !(fabsf(v.x) <= FLT_MAX && fabsf(v.y) <= FLT_MAX && fabsf(v.z) <= FLT_MAX && fabsf(v.w) <= FLT_MAX))
                mx = INFINITY; /* INT: a NaN or infinity in x makes every output NaN (below) */
        }
        if (xs)
            x4 = xs;
    }
    mx = warp_max(mx);
    if (lane == 0)
        wmx[warp] = mx;
    __syncthreads();
    mx = wmx[0];
    for (int w = 1; w < WARPS; w++)
        mx = fmaxf(mx, wmx[w]);
    const int EX = (int)((__float_as_uint(mx) >> 23) & 255u) - 127;             /* floor(log2 max|x|) */
    const int E = INT ? min(max(EX, -90), 127) : max(EX, -100);                   /* >= -100 (INT: -90) */
    /* fp16: 2^-e, e = E - 14, and 2^e; INT: x to integers X = x 2^F, F = 29 - E (|X| <= 2^30), and back by 2^-F
     * (int4: 2^-F / 16, its A being 16 times the codes); xsc: the affine step sums into the high digits' units */
    const float down = __uint_as_float((unsigned)(127 + (INT ? 29 : 14) - E) << 23);
    const float up = __uint_as_float((unsigned)(127 - (INT ? 29 + (BITS == 4 ? 4 : 0) : 14) + E) << 23);
    const float xsc = INT ? __uint_as_float((unsigned)(127 + 17 - E) << 23) : 1.0f; /* 2^(F - 12) */
    const bool xbad = INT && !(mx <= FLT_MAX);
    /* the B pieces: piece p = x[8 p, 8 p + 8) is (step p / PPS, lane t, piece q) of the layout above */
    float *xsum = reinterpret_cast<float *>(xq + (S + 1) * NQ * 8);
    for (int p0 = warp * 32; p0 < K / 8; p0 += NT) { /* whole warps: the affine sums' shuffles */
        const int p = p0 + lane;
        const bool in = p < K / 8;
        const float4 u0 = x4[2 * (in ? p : 0)], u1 = x4[2 * (in ? p : 0) + 1];
        const float v[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
        if (INT) { /* X = rn(x 2^F), four balanced digits; digit gq into B column gq (the layout above) */
            unsigned dg[2][4]; /* [h][digit]: register h (int4: the even k, then the odd; int8: k 0..3, then 4..7) */
#pragma unroll
            for (int h = 0; h < 2; h++) {
                unsigned w[4];
#pragma unroll
                for (int jb = 0; jb < 4; jb++)
                    w[jb] = digits4(__float2int_rn(__fmul_rn(v[BITS == 4 ? 2 * jb + h : 4 * h + jb], down)));
                bytes4x4(dg[h], w);
            }
            if (in) {
                unsigned *d32 = reinterpret_cast<unsigned *>(xq);
                /* int4: piece p is word w = p % 4 of lane t = p % 16 / 4 at step p / 16, its even k in register
                 * 2 (2 (w / 2)) + w % 2 of that lane, its odd k two further; int8: the 8 k of registers 2 (p % 2),
                 * + 1 of lane p % 8 / 2 at step p / 8 */
                const int st = p / PPS, tt = BITS == 4 ? p % 16 / 4 : p % 8 / 2;
                const int i4 = BITS == 4 ? p % 4 / 2 : 0, c0 = BITS == 4 ? p % 2 : 2 * (p % 2), ch = BITS == 4 ? 2 : 1;
                const int base = (st * NQ * 8 + i4 * 16 + tt) * 4 + c0;
#pragma unroll
                for (int gq = 0; gq < 4; gq++) {
                    d32[base + gq * 16] = dg[0][gq];
                    d32[base + gq * 16 + ch] = dg[1][gq];
                }
            }
        } else {
            unsigned hi[4], lo[4];
#pragma unroll
            for (int w = 0; w < 4; w++) { /* pair w: k (w, w + 4) for int4 (the order 0 4 1 5 2 6 3 7), (2 w, 2 w + 1) */
                const int k0 = BITS == 4 ? w : 2 * w, k1 = BITS == 4 ? w + 4 : 2 * w + 1;
                split_f16x2(__fmul_rn(v[k0], down), __fmul_rn(v[k1], down), hi[w], lo[w]);
            }
            if (in) {
                const int st = p / PPS, q = p % PPS % NQ, tt = p % PPS / NQ;
                uint4 *d = xq + (st * NQ + q) * 8 + tt;
                d[0] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
                d[4] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
            }
        }
        if (FAM == 2) { /* a step's 128 x: 8 in k order a lane, then the 16 lanes' xor butterfly (same bits in each) */
            float s = v[0];
#pragma unroll
            for (int i = 1; i < 8; i++)
                s = __fadd_rn(s, v[i]);
#pragma unroll
            for (int off = 1; off < 16; off <<= 1)
                s = __fadd_rn(s, __shfl_xor_sync(FULL, s, off));
            if (in && (lane & 15) == 0)
                xsum[p / 16] = INT ? __fmul_rn(s, xsc) : s;
        }
    }
    if (threadIdx.x < NQ * 8)
        xq[S * NQ * 8 + threadIdx.x] = make_uint4(0u, 0u, 0u, 0u);
    __syncthreads();
    trace_mark();
    /* B: lanes g = 0 (hi), 1 (lo) read their pieces of step j at xb + j xst (INT: g = 0..3 digit g); the others
     * the zero block */
    const int NBC = INT ? 4 : 2;
    const uint4 *xb = g < NBC ? xq + g * 4 + t : xq + S * NQ * 8 + t;
    const int xst = g < NBC ? NQ * 8 : 0;
    if (L2FIRST)
        fill();
    for (int par = 0;; par ^= 1) {
        const int unx = un + (PER ? (int)gridDim.x : 0); /* PER: the block's next unit */
        const bool more = PER && unx < units, cross = more && nj % U == 0; /* cross: refills run into unit unx */
        float acca = 0.0f, accb = 0.0f;
        for (int j0 = 0; j0 < nj; j0 += U)
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int jj = j0 + u, j = ks + KS * jj;
                if (jj >= nj)
                    break;
                float va, vb;
                if (INT) { /* lane t: digits 2 t, 2 t + 1 (t = 0: units 1, t = 1: units 2^16; t > 1: zero columns) */
                    int ci[4] = {0, 0, 0, 0};
                    imma_step<FAM, BITS>(ci, cha[u], chb[u], xb + j * xst);
                    va = __int2float_rn(ci[0] + 256 * ci[1]);
                    vb = __int2float_rn(ci[2] + 256 * ci[3]);
                } else {
                    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    mma_step<FAM, BITS>(c, cha[u], chb[u], xb + j * xst);
                    va = __fmul_rn(__fadd_rn(c[0], c[1]), up);
                    vb = __fmul_rn(__fadd_rn(c[2], c[3]), up);
                }
                if (PERROW) {
                    acca = __fadd_rn(acca, va);
                    accb = __fadd_rn(accb, vb);
                } else {
                    acca = __fmaf_rn(csa[u], va, acca);
                    accb = __fmaf_rn(csb[u], vb, accb);
                    if (FAM == 2) { /* INT: the offsets in the high digits' lane (t = 1) only */
                        const float xs = INT ? (t == 1 ? xsum[j] : 0.0f) : xsum[j];
                        acca = __fmaf_rn(cma[u], xs, acca);
                        accb = __fmaf_rn(cmb[u], xs, accb);
                    }
                }
                if (jj + U < nj)
                    load(u, (unsigned)(j + KS * U), cur);
                else if (PER && cross) /* slot u holds step jj + U - nj of the next unit next */
                    load(u, (unsigned)(ks + KS * (jj + U - nj)), rows_of(unx));
            }
        if (!more)
            trace_mark();
        if (INT) { /* t = 0: acc (low digits) + 2^16 acc of t = 1, then back by 2^-F (int4: / 16); x not finite: NaN */
            const float ha = __shfl_down_sync(FULL, acca, 1), hb = __shfl_down_sync(FULL, accb, 1);
            acca = xbad ? __int_as_float(0x7fc00000) : __fmul_rn(__fmaf_rn(ha, 65536.0f, acca), up);
            accb = xbad ? __int_as_float(0x7fc00000) : __fmul_rn(__fmaf_rn(hb, 65536.0f, accb), up);
        }
        if (t == 0) { /* columns 0 (hi) and 1 (lo) of rows g, g + 8; the other lanes hold the zero columns */
            red[par][warp][g] = acca;
            red[par][warp][g + 8] = accb;
        }
        __syncthreads(); /* PER: red[par] is written again two units on, after the next unit's barrier */
        const int r = threadIdx.x & 15, tr = threadIdx.x >> 4; /* tile tr's row r */
        const int64_t o = out_row(un);
        if (threadIdx.x < TILES * 16 && !(GLU && r >= 8) && o < N) {
            float va = red[par][tr * KS][r], vb = GLU ? red[par][tr * KS][r + 8] : 0.0f;
            for (int w = 1; w < KS; w++) {
                va = __fadd_rn(va, red[par][tr * KS + w][r]);
                if (GLU)
                    vb = __fadd_rn(vb, red[par][tr * KS + w][r + 8]);
            }
            if (PERROW) { /* one group a row: m.ng == 1 */
                va = __fmul_rn(va, ld_sc(m.scale + o));
                if (GLU)
                    vb = __fmul_rn(vb, ld_sc(m.scale + N + o));
            }
            if (RE && res) { /* store_rows' arithmetic, its res[o] loaded before */
                const float v = b ? va + b[o] : va;
                y[o] = rv + v;
            } else {
                const float acc[2] = {va, vb};
                store_rows<1, GLU>(y, acc, o, b, res, N, act);
            }
        }
        if (!more)
            break;
        un = unx;
        if (RE && res)
            rv = res_of(un);
        cur = rows_of(un);
        if (!cross)
            fill();
    }
#endif
}

/* Step j's group is j >> shift: steps a group (group / step) a power of two, or 31 where group == K; -1 otherwise. */
inline int mma_shift(int group, int K, int SK)
{
    if (group == K)
        return 31;
    if (group % SK)
        return -1;
    int sh = 0;
    while ((SK << sh) < group)
        sh++;
    return (SK << sh) == group ? sh : -1;
}

/* 1 if k_qgemv_mma runs q at [rows, K] on the current device: sm_80+, whole steps, groups by a shift, 32-bit
 * offsets (as k_qgemv_s), the B pieces within the opt-in shared memory. */
inline bool mma_runs(const eng_qfmt *q, int64_t rows, int K)
{
    const int SK = q->bits == 4 ? 128 : 64;
    if (!eng_qfmt_ok(q, K) || K % SK || mma_shift(q->group, K, SK) < 0 || !slot_fits(q, rows, K))
        return false;
    const int major = dev_attr(cudaDevAttrComputeCapabilityMajor);
    const int optin = dev_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin);
    return major >= 8 && optin >= 0 && mma_smem(K, q->bits, q->family) + MMA_SMEM_SPARE <= (size_t)optin;
}

template <int FAM, int BITS, int KS, int TILES, int U, bool GLU, bool PERROW, bool NORM, int MINB, bool PER, bool INT>
cudaError_t launch_m(float *y, const float *x, const QMat &m, const float *b, const float *res, int N, int K, int act,
                     const QNorm &nm, cudaStream_t s)
{
    const auto kern = k_qgemv_mma<FAM, BITS, KS, TILES, U, GLU, PERROW, NORM, MINB, PER, INT>;
    /* NORM: x's flat copy after the B pieces, then the staged norm weight where the device has room for it
     * (without it the norm reads the weight from global memory, same bits) */
    QNorm nms = nm;
    size_t smem = NORM ? mma_norm_smem(K, BITS, FAM) : mma_smem(K, BITS, FAM);
    const int optin = (NORM && NORM_W_STAGE) || (!NORM && X_STAGE) ? dev_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin)
                                                                     : -1;
    if (!NORM && (X_STAGE == 1 || (X_STAGE == 2 && K / 8 > KS * TILES * 32)) && optin > 0 &&
        mma_norm_smem(K, BITS, FAM) + MMA_SMEM_SPARE <= (size_t)optin) {
        smem = mma_norm_smem(K, BITS, FAM); /* x's flat copy; without it the pieces read x again, same bits */
        nms.xstage = true;
    }
    if (NORM && optin > 0 && smem + (size_t)K * 4 + MMA_SMEM_SPARE <= (size_t)optin) {
        smem += (size_t)K * 4;
        nms.stage = true;
    }
    if (smem > 32 * 1024) {
        const cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess)
            return err;
    }
    const int64_t tiles = GLU ? ((int64_t)N + 7) / 8 : ((int64_t)N + 15) / 16, units = (tiles + TILES - 1) / TILES;
    int64_t grid = units;
    if (PER) { /* what the device holds at once (which block sums a row never changes its bits) */
        static Held h;
        const cudaError_t err = held_blocks((const void *)kern, KS * TILES * 32, smem, h);
        if (err != cudaSuccess)
            return err;
        grid = h.blocks() < units ? h.blocks() : units;
    }
    return launch_dep(kern, dim3((unsigned)grid), dim3(KS * TILES * 32), smem, s, y, x, m, b, res, N, K, act,
                      mma_shift(m.group, K, mma_stepk<BITS>()), nms);
}

/* k_qgemv_mma for q's family, bits and grouping (mma_runs). */
template <int KS, int TILES, int U, bool GLU, bool NORM, int MINB, bool PER, bool INT>
cudaError_t launch_mf(float *y, const float *x, const void *W, const eng_qfmt *q, const float *b, const float *res,
                      int N, int K, int act, const QNorm &nm, cudaStream_t s)
{
    const QMat m = qmat(W, q, GLU ? 2 * N : N, K);
    if (q->family == 2)
        return launch_m<2, 4, KS, TILES, U, GLU, false, NORM, MINB, PER, INT>(y, x, m, b, res, N, K, act, nm, s);
    if (q->bits == 4)
        return q->group == K
                   ? launch_m<1, 4, KS, TILES, U, GLU, true, NORM, MINB, PER, INT>(y, x, m, b, res, N, K, act, nm, s)
                   : launch_m<1, 4, KS, TILES, U, GLU, false, NORM, MINB, PER, INT>(y, x, m, b, res, N, K, act, nm, s);
    return q->group == K
               ? launch_m<1, 8, KS, TILES, U, GLU, true, NORM, MINB, PER, INT>(y, x, m, b, res, N, K, act, nm, s)
               : launch_m<1, 8, KS, TILES, U, GLU, false, NORM, MINB, PER, INT>(y, x, m, b, res, N, K, act, nm, s);
}

/* The tensor-core kernel where mma_runs, else k_qgemv_s's s2u2w8 (eng_qdot_model's order). */
template <int KS, int TILES, int U, bool GLU, int MINB = 0, bool PER = false, bool INT = false>
cudaError_t launch_mq(float *y, const float *x, const void *W, const eng_qfmt *q, const float *b, const float *res,
                      int N, int K, int act, cudaStream_t s)
{
    if (N < 1 || !eng_qfmt_ok(q, K))
        return cudaErrorInvalidValue;
    if (!mma_runs(q, GLU ? 2 * (int64_t)N : N, K))
        return launch_sq<2, 2, 8, GLU>(y, x, W, q, b, res, N, K, act, s);
    return launch_mf<KS, TILES, U, GLU, false, MINB, PER, INT>(y, x, W, q, b, res, N, K, act,
                                                               QNorm{nullptr, nullptr, 0.0f, 0}, s);
}

/* 1 if the fused-norm form of k_qgemv_mma runs q at [rows, K]: mma_runs, and x's flat copy fits too. */
inline bool mma_norm_runs(const eng_qfmt *q, int64_t rows, int K)
{
    const int optin = dev_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin);
    return mma_runs(q, rows, K) && mma_norm_smem(K, q->bits, q->family) + MMA_SMEM_SPARE <= (size_t)optin;
}

/* The fused-norm form of launch_mq: the same kernel (or the same fallback, s2u2w8) on rmsnorm(x); refused where
 * mma_runs but the copy does not fit (its plain form would run the tensor cores). */
template <int KS, int TILES, int U, bool GLU, int MINB = 0, bool PER = false, bool INT = false>
cudaError_t launch_mn(float *y, float *xn, const float *x, const float *nw, float eps, int kind, const void *W,
                      const eng_qfmt *q, const float *b, int N, int K, int act, cudaStream_t s)
{
    const int64_t rows = GLU ? 2 * (int64_t)N : N;
    if (N < 1 || !eng_qfmt_ok(q, K))
        return cudaErrorInvalidValue;
    if (!mma_runs(q, rows, K))
        return launch_sn<2, 2, 8, GLU>(y, xn, x, nw, eps, kind, W, q, b, N, K, act, s);
    if (kind < 0 || kind > 3 || (kind != 3 && !nw) || !mma_norm_runs(q, rows, K))
        return cudaErrorInvalidValue;
    return launch_mf<KS, TILES, U, GLU, true, MINB, PER, INT>(y, x, W, q, b, nullptr, N, K, act,
                                                              QNorm{xn, nw, eps, kind}, s);
}

typedef cudaError_t (*QFn)(float *, const float *, const void *, const eng_qfmt *, const float *, const float *, int,
                           int, int, cudaStream_t);
typedef cudaError_t (*QNFn)(float *, float *, const float *, const float *, float, int, const void *, const eng_qfmt *,
                            const float *, int, int, int, cudaStream_t);

} // namespace

/* Every k_qgemv / k_qgemv_s variant: the same per-row order, the same bits. glu: the fused gate|up variant (none
 * where a warp's rows cannot pair up). The k_qgemv_mma variants (mma): their own order (eng_qgemv.h), one per KS. */
struct QVariant {
    const char *name;
    QFn plain, glu;
    bool mma; /* k_qgemv_mma where mma_runs: the MMA's order, not eng_qdot_model's */
    QNFn norm, glu_norm; /* the fused-norm forms (k_qgemv_s only): rmsnorm(x) in the prologue, then the same bits */
};

/* The k_qgemv_s and k_qgemv_mma variants' tables (eng_qgemv_s.cu, eng_qgemv_m.cu), in the order engk_qgemv_variant
 * numbers them after eng_qgemv.cu's k_qgemv ones. */
extern const QVariant eng_qgemv_vs[], eng_qgemv_vm[], eng_qgemv_vi[];
extern const int eng_qgemv_nvs, eng_qgemv_nvm, eng_qgemv_nvi;

#endif
