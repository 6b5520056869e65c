/* Quantized decode GEMV and prefill dequant (see eng_qgemv.h). Built with -fmad=false: the dequant is __fmul_rn /
 * __fadd_rn and the only fused multiply-adds are the explicit fmaf() of the dot product. */
#include "eng_qgemv.h"

#include <string.h>

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

/* 16 bytes of codes through the read-only path. */
__device__ __forceinline__ uint4 ld_stream16(const void *p) { return __ldg(reinterpret_cast<const uint4 *>(p)); }

struct QMat {
    const unsigned char *codes;
    const float *scale, *offset;
    int64_t row_bytes;
    int ng, group;
    unsigned magic; /* 0x4B000000 (2^23) as a launch argument: ptxas keeps it in one register and byte_f's
                     * selectors immediate, instead of the reverse and re-materialized selectors */
};

__host__ QMat qmat(const void *W, const eng_qfmt *q, int N, int K)
{
    QMat m;
    m.codes = (const unsigned char *)W;
    m.scale = (const float *)((const char *)W + eng_qscale_off(N, K, q));
    m.offset = q->family == 2 ? (const float *)((const char *)W + eng_qoffset_off(N, K, q)) : nullptr;
    m.row_bytes = (int64_t)K * q->bits / 8;
    m.ng = K / q->group;
    m.group = q->group;
    m.magic = 0x4B000000u;
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

/* code() and dq() as they stand, for the blocks whose scale is too large for dqb's affine form (never in practice);
 * out of line so that it takes no registers from the common path. */
template <int FAM, int BITS>
__device__ __noinline__ float dot_block_slow(float sum, uint4 u, const float *xb, float s, float off)
{
#pragma unroll
    for (int i = 0; i < 128 / BITS; i++)
        sum = __fmaf_rn(dq<FAM>(s, code<FAM, BITS>(u, i), off), __ldg(xb + i), sum);
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

/* The same sums as code()/dq() in k order for one 16-byte block of each of R rows (acc[r] += row r's block . x): a
 * word's codes, biased to unsigned (signed codes: the sign bit of each flipped), split into bytes; int4 words into
 * their low nibbles (byte j: k = 2j) and high nibbles (byte j: k = 2j + 1), taken alternately so that each row's
 * fma order stays k = 0, 1, 2, ... The activations are read once for all R rows; xb (global) serves the slow path. */
template <int FAM, int BITS, int R, typename X>
__device__ __forceinline__ void dot_block(float *acc, const uint4 *u, const bool *ok, const X &xl, const float *xb,
                                          const float *s, const float *off, unsigned mg)
{
    constexpr unsigned FLIP = FAM == 2 ? 0u : BITS == 8 ? 0x80808080u : 0x88888888u;
    float sb[R], s16[R], sb16[R];
    bool fast = true;
#pragma unroll
    for (int r = 0; r < R; r++) {
        sb[r] = -s[r] * 8388608.0f;
        s16[r] = s[r] * 0.0625f;
        sb16[r] = sb[r] * 0.0625f;
        const float a = fabsf(s[r]);
        fast = fast && (FAM != 2 || a < 0x1p100f) && (BITS != 4 || a == 0.0f || a >= 0x1p-100f);
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
                        a = __fmaf_rn(dqb<FAM, 8>(hi, j, s16[r], sb16[r], off[r], mg), x8[2 * j + 1], a);
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
                s[r] = ok[r] ? __ldg(sp[r] + j) : 0.0f;
                off[r] = FAM == 2 && ok[r] ? __ldg(op[r] + j) : 0.0f;
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

/* The streamed kernel: one warp per RO outputs (R = RO rows, GLU: RO gate rows n and the up rows I + n), WARPS warps
 * a block. Each lane first requests its U first blocks of every row with their scales (and offsets): a ring, each
 * slot refilled with the block 32 U ahead as soon as it is consumed, so U 16-byte loads a row stay in flight to the
 * row's end; meanwhile (a programmatic launch in the decode graph: these loads are weights, so they may start before
 * the kernel before ends) the block waits for that kernel and copies x once into shared memory (padded: xpad), which every warp then reads
 * without bank conflicts instead of through L1 once per row block. PERROW (group == K): one scale per row, loaded
 * once, no scale in the ring. Lane l owns the blocks c = l, l + 32, ... and sums each in k order from 0, then the
 * butterfly: k_qgemv's order, so the same bits whatever the shape. Held to 64 registers (32 warps an SM) where the
 * ring takes at most 32 of them. */
template <int FAM, int PERROW> constexpr int slot_regs() { return 4 + (PERROW ? 0 : FAM == 2 ? 2 : 1); }

template <int FAM, int BITS, int R, int U, int WARPS, bool GLU, bool PERROW>
__global__ void __launch_bounds__(WARPS * 32, (R * U * slot_regs<FAM, PERROW>() <= 32 ? 1024 : 512) / (WARPS * 32))
    k_qgemv_s(float *y, const float *x, QMat m, const float *b, const float *res, int N, int K, int act, int gshift)
{
    constexpr int P = 128 / BITS, RP = GLU ? R / 2 : R;
    extern __shared__ float4 xs[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t o0 = ((int64_t)blockIdx.x * WARPS + warp) * RP;
    const int nb = K / P, nj = lane < nb ? (nb - lane + 31) >> 5 : 0; /* this lane's blocks */
    const uint4 *w16 = reinterpret_cast<const uint4 *>(m.codes);
    /* a row past N computes row 0's sums (never stored): no predicate in the loop. Offsets in 16-byte units (codes)
     * and in groups (scales, offsets): 32 bits each, a matrix below 64 GB */
    unsigned wo[R], so[R];
    bool ok[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int64_t o = o0 + (GLU ? r % RP : r);
        const int64_t row = o < N ? (GLU && r >= RP ? N + o : o) : 0;
        wo[r] = (unsigned)(row * (m.row_bytes / 16)) + lane;
        so[r] = (unsigned)(row * m.ng);
        ok[r] = true;
    }
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
                    cs[u][r] = __ldg(m.scale + g);
                    cm[u][r] = FAM == 2 ? __ldg(m.offset + g) : 0.0f;
                }
            }
    float srow[R], mrow[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        srow[r] = PERROW ? __ldg(m.scale + so[r]) : 0.0f;
        mrow[r] = PERROW && FAM == 2 ? __ldg(m.offset + so[r]) : 0.0f;
    }
    dep_launch(); /* the codes and scales above are weights; x, b, res and y belong to the kernels before */
    dep_wait();
    for (int L = threadIdx.x; L < K / 4; L += WARPS * 32)
        xs[xpad(L)] = reinterpret_cast<const float4 *>(x)[L];
    __syncthreads();
    if (o0 >= N)
        return;
    const float4 *xl = xs + xpad(lane * (P / 4));
    float acc[R] = {};
    for (int j0 = 0; j0 < nj; j0 += U)
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int j = j0 + u, c = lane + 32 * j; /* slot u holds the lane's block j */
            if (j >= nj)
                break;
            float s[R], off[R];
#pragma unroll
            for (int r = 0; r < R; r++) {
                s[r] = PERROW ? srow[r] : cs[u][r];
                off[r] = FAM != 2 ? 0.0f : PERROW ? mrow[r] : cm[u][r];
            }
            /* block c = lane + 32 j starts at unit xpad(c P / 4) = xpad(lane P / 4) + 36 (P / 4) j */
            dot_block<FAM, BITS, R>(acc, ch[u], ok, XShared{xl + 9 * P * j}, x + (int64_t)c * P, s, off, m.magic);
            if (j + U < nj)
#pragma unroll
                for (int r = 0; r < R; r++) {
                    ch[u][r] = ld_stream16(w16 + wo[r] + 32 * (j + U));
                    if (!PERROW) {
                        const unsigned g = so[r] + ((unsigned)(c + 32 * U) >> gshift);
                        cs[u][r] = __ldg(m.scale + g);
                        cm[u][r] = FAM == 2 ? __ldg(m.offset + g) : 0.0f;
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
int slot_shift(int group, int K, int P)
{
    if (group == K)
        return 31;
    int sh = 0;
    while ((P << sh) < group)
        sh++;
    return (P << sh) == group ? sh : -1;
}

/* k_qgemv_s indexes the matrix: group by shift, 16-byte blocks and groups by 32-bit offsets. */
bool slot_fits(const eng_qfmt *q, int64_t rows, int64_t K)
{
    const int P = 128 / q->bits;
    return slot_shift(q->group, (int)K, P) >= 0 && rows * (K / P) < ((int64_t)1 << 32);
}

/* Shared bytes for x: K floats and their padding (xpad). */
size_t xs_bytes(int K) { return ((size_t)K / 4 + (size_t)K / 32 + 1) * 16; }

template <int FAM, int BITS, int RO, int U, int WARPS, bool GLU, bool PERROW>
cudaError_t launch_s(float *y, const float *x, const QMat &m, const float *b, const float *res, int N, int K, int act,
                     cudaStream_t s)
{
    constexpr int R = GLU ? 2 * RO : RO;
    const auto kern = k_qgemv_s<FAM, BITS, R, U, WARPS, GLU, PERROW>;
    const size_t smem = xs_bytes(K);
    if (smem > 48 * 1024) {
        const cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess)
            return err;
    }
    const int gshift = slot_shift(m.group, K, 128 / BITS);
    const unsigned grid = (unsigned)(((int64_t)N + WARPS * RO - 1) / (WARPS * RO));
    return launch_dep(kern, dim3(grid), dim3(WARPS * 32), smem, s, y, x, m, b, res, N, K, act, gshift);
}

template <int RO, int U, int WARPS, bool GLU>
cudaError_t launch_sq(float *y, const float *x, const void *W, const eng_qfmt *q, const float *b, const float *res,
                      int N, int K, int act, cudaStream_t s)
{
    if (N < 1 || !eng_qfmt_ok(q, K))
        return cudaErrorInvalidValue;
    if (!slot_fits(q, GLU ? 2 * (int64_t)N : N, K)) /* k_qgemv's r2u2r */
        return launch_q<2, 2, GLU, true>(y, x, W, q, b, res, N, K, act, s);
    const QMat m = qmat(W, q, GLU ? 2 * N : N, K);
    if (q->family == 2)
        return launch_s<2, 4, RO, U, WARPS, GLU, false>(y, x, m, b, res, N, K, act, s);
    if (q->bits == 4)
        return launch_s<1, 4, RO, U, WARPS, GLU, false>(y, x, m, b, res, N, K, act, s);
    if (q->group == K)
        return launch_s<1, 8, RO, U, WARPS, GLU, true>(y, x, m, b, res, N, K, act, s);
    return launch_s<1, 8, RO, U, WARPS, GLU, false>(y, x, m, b, res, N, K, act, s);
}

/* One thread per 16-byte block: the family's rule into f32 or bf16 (k_qgemv's dq, so the same weight values). */
template <int FAM, int BITS, typename T>
__global__ void k_qdequant(T *dst, QMat m, int64_t nblocks, int K)
{
    constexpr int P = 128 / BITS;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nblocks)
        return;
    const int64_t bpr = K / P, r = i / bpr, c = i % bpr;
    const uint4 u = ld_stream16(m.codes + r * m.row_bytes + c * 16);
    const int64_t g = r * m.ng + c * P / m.group;
    const float s = m.scale[g], off = FAM == 2 ? m.offset[g] : 0.0f;
    T *d = dst + r * K + c * P;
#pragma unroll
    for (int k = 0; k < P; k++)
        st1(d + k, dq<FAM>(s, code<FAM, BITS>(u, k), off));
}

template <int FAM, int BITS>
cudaError_t dequant_t(void *dst, int f32, const QMat &m, int N, int K, cudaStream_t s)
{
    const int64_t nb = (int64_t)N * (K / (128 / BITS));
    const unsigned grid = (unsigned)((nb + 255) / 256);
    if (f32)
        k_qdequant<FAM, BITS, float><<<grid, 256, 0, s>>>((float *)dst, m, nb, K);
    else
        k_qdequant<FAM, BITS, uint16_t><<<grid, 256, 0, s>>>((uint16_t *)dst, m, nb, K);
    return cudaGetLastError();
}

typedef cudaError_t (*QFn)(float *, const float *, const void *, const eng_qfmt *, const float *, const float *, int,
                           int, int, cudaStream_t);

/* Every variant: the same per-row order, the same bits. glu: the fused gate|up variant (none where a warp's rows
 * cannot pair up). */
struct Variant {
    const char *name;
    QFn plain, glu;
};

const Variant variants[] = {
    /* k_qgemv: x through L1, scales loaded when a block is consumed (R rows incl. a GLU's up rows) */
    {"r1u4", launch_q<1, 4, false>, nullptr},
    {"r2u2", launch_q<2, 2, false>, launch_q<2, 2, true>},
    {"r2u4", launch_q<2, 4, false>, launch_q<2, 4, true>},
    {"r4u2", launch_q<4, 2, false>, launch_q<4, 2, true>},
    {"r1u8", launch_q<1, 8, false>, nullptr},
    {"r2u2r", launch_q<2, 2, false, true>, launch_q<2, 2, true, true>},
    {"r1u4r", launch_q<1, 4, false, true>, nullptr},
    {"r2u4r", launch_q<2, 4, false, true>, launch_q<2, 4, true, true>},
    /* k_qgemv_s: s<outputs a warp>u<ring>w<warps a block>; x in shared memory, scales in the ring */
    {"s1u8w8", launch_sq<1, 8, 8, false>, launch_sq<1, 8, 8, true>},
    {"s1u8w16", launch_sq<1, 8, 16, false>, launch_sq<1, 8, 16, true>},
    {"s2u4w8", launch_sq<2, 4, 8, false>, launch_sq<2, 4, 8, true>},
    {"s2u4w16", launch_sq<2, 4, 16, false>, launch_sq<2, 4, 16, true>},
    {"s1u4w8", launch_sq<1, 4, 8, false>, launch_sq<1, 4, 8, true>},
    {"s1u4w16", launch_sq<1, 4, 16, false>, launch_sq<1, 4, 16, true>},
    {"s2u2w8", launch_sq<2, 2, 8, false>, launch_sq<2, 2, 8, true>},
    {"s1u2w16", launch_sq<1, 2, 16, false>, launch_sq<1, 2, 16, true>},
};
constexpr int NVARIANTS = (int)(sizeof variants / sizeof variants[0]);
constexpr int OLD_DEFAULT = 5; /* r2u2r, plain and GLU: k_qgemv as it ran before k_qgemv_s */

int vindex(const char *name)
{
    for (int v = 0; v < NVARIANTS; v++)
        if (!strcmp(variants[v].name, name))
            return v;
    return OLD_DEFAULT;
}

} // namespace

/* The variant each entry point launches for a llama-sized matrix (to be confirmed by `test_engk_qgemv --bench`).
 * int8: a ring that holds a whole K = 4096 row (8 blocks a lane), one output a warp where N fills the GPU in about one
 * wave (o; down's long rows in 16-warp blocks, x taking 58 KB of shared memory), two for q|k|v. int4: two rows a warp
 * at least (an int4 block needs 128 bytes of x: with one row the shared-memory reads alone would match the DRAM
 * stream), a ring of 4 where N leaves at most 16 warps an SM anyway (o, down), of 2 at 64 registers elsewhere.
 * Rows too long for x in shared memory, and groups k_qgemv_s cannot index by a shift, take k_qgemv. */
extern "C" int engk_qgemv_pick(int glu, const eng_qfmt *q, int N, int K)
{
    int dev = 0, optin = 0;
    if (!eng_qfmt_ok(q, K) || !slot_fits(q, glu ? 2 * (int64_t)N : N, K))
        return OLD_DEFAULT;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        cudaGetLastError(); /* the failed query's error, not a kernel's */
        return OLD_DEFAULT;
    }
    if (xs_bytes(K) > (size_t)optin)
        return OLD_DEFAULT;
    /* measured on the H200 (test_engk_qgemv --bench, llama3-8b shapes), us int8 / int4 g128: fused gate|up 38.6 /
     * 36.4, down 19.7 / 17.3, q|k|v 8.4 / 9.0, o 6.3 / 6.8; the shape never changes a bit */
    const int int8 = q->bits == 8;
    if (glu)
        return vindex(int8 ? "s1u4w8" : "s1u2w16");
    if (K > 8192)
        return vindex(int8 ? "s1u4w16" : "s2u2w8");
    if (N > 4096)
        return vindex("s2u2w8");
    return vindex(int8 ? "s1u2w16" : "s2u2w8");
}

extern "C" cudaError_t engk_qgemv(float *y, const float *x, const void *W, const eng_qfmt *q, const float *b,
                                  const float *res, int N, int K, cudaStream_t s)
{
    return variants[engk_qgemv_pick(0, q, N, K)].plain(y, x, W, q, b, res, N, K, 0, s);
}

extern "C" cudaError_t engk_qgemv_glu(float *out, const float *x, const void *W, const eng_qfmt *q, const float *bgu,
                                      int I, int K, int act, cudaStream_t s)
{
    return variants[engk_qgemv_pick(1, q, I, K)].glu(out, x, W, q, bgu, nullptr, I, K, act, s);
}

extern "C" cudaError_t engk_qdequant(void *dst, int f32, const void *W, const eng_qfmt *q, int N, int K,
                                     cudaStream_t s)
{
    if (N < 1 || !eng_qfmt_ok(q, K))
        return cudaErrorInvalidValue;
    const QMat m = qmat(W, q, N, K);
    if (q->family == 2)
        return dequant_t<2, 4>(dst, f32, m, N, K, s);
    if (q->bits == 4)
        return dequant_t<1, 4>(dst, f32, m, N, K, s);
    return dequant_t<1, 8>(dst, f32, m, N, K, s);
}

extern "C" int engk_qgemv_variants(void) { return NVARIANTS; }

extern "C" const char *engk_qgemv_variant_name(int v) { return v >= 0 && v < NVARIANTS ? variants[v].name : "?"; }

extern "C" int engk_qgemv_variant_has_glu(int v) { return v >= 0 && v < NVARIANTS && variants[v].glu; }

extern "C" cudaError_t engk_qgemv_variant(int v, int glu, float *y, const float *x, const void *W, const eng_qfmt *q,
                                          const float *b, const float *res, int N, int K, int act, cudaStream_t s)
{
    if (v < 0 || v >= NVARIANTS || (glu && !variants[v].glu))
        return cudaErrorInvalidValue;
    return glu ? variants[v].glu(y, x, W, q, b, nullptr, N, K, act, s) : variants[v].plain(y, x, W, q, b, res, N, K, 0, s);
}
