/* Quantized decode GEMV and prefill dequant (see eng_qgemv.h). Built with -fmad=false: the dequant is __fmul_rn /
 * __fadd_rn and the only fused multiply-adds are the explicit fmaf() of the dot product. */
#include "eng_qgemv.h"

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
__device__ __forceinline__ float byte_f(unsigned w, int j)
{
    return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540u | (unsigned)j));
}

/* One row's dequant-and-dot over the 4 weights of word w that sit in bytes 0..3 of wb (code k of the word is
 * byte k), x4 their activations, in k order. The scale family: s * (f - 2^23 - BIAS), exactly code()'s q. The affine
 * family: fma(s, f, -s * 2^23) is s * f - s * 2^23 = s * q rounded once, i.e. __fmul_rn(s, q), because -s * 2^23 is
 * exact (sb; dot_block takes the out-of-line path where |s| >= 2^100, so it cannot overflow). */
template <int FAM, int BITS>
__device__ __forceinline__ float dot4(float sum, unsigned wb, const float *x4, float s, float sb, float off)
{
    constexpr float BIAS = FAM == 2 ? 0.0f : (float)(1u << (BITS - 1));
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float f = byte_f(wb, j);
        const float w = FAM == 2 ? __fadd_rn(__fmaf_rn(s, f, sb), off) : dq_scale(s, __fsub_rn(f, 8388608.0f + BIAS));
        sum = __fmaf_rn(w, x4[j], sum);
    }
    return sum;
}

/* code() and dq() as they stand, for the blocks whose scale is too large for dot4's affine form (never in practice);
 * out of line so that it takes no registers from the common path. */
template <int FAM, int BITS>
__device__ __noinline__ float dot_block_slow(float sum, uint4 u, const float *xb, float s, float off)
{
#pragma unroll
    for (int i = 0; i < 128 / BITS; i++)
        sum = __fmaf_rn(dq<FAM>(s, code<FAM, BITS>(u, i), off), __ldg(xb + i), sum);
    return sum;
}

/* The same sums as code()/dq() in k order for one 16-byte block of each of R rows (acc[r] += row r's block . xb): a
 * word's codes, biased to unsigned (signed codes: the sign bit of each flipped), split into bytes; int4 words into
 * their low nibbles (even k) and high nibbles (odd k), re-interleaved so each row's fma order stays k = 0, 1, 2, ...
 * The activations are read once for all R rows. */
template <int FAM, int BITS, int R>
__device__ __forceinline__ void dot_block(float *acc, const uint4 *u, const bool *ok, const float *xb, const float *s,
                                          const float *off)
{
    constexpr unsigned FLIP = FAM == 2 ? 0u : BITS == 8 ? 0x80808080u : 0x88888888u;
    float sb[R];
    bool fast = true;
#pragma unroll
    for (int r = 0; r < R; r++) {
        sb[r] = -s[r] * 8388608.0f;
        fast = fast && (FAM != 2 || fabsf(s[r]) < 0x1p100f);
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
            const float4 v = __ldg(reinterpret_cast<const float4 *>(xb + 4 * wi));
            const float x4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int r = 0; r < R; r++)
                if (ok[r]) {
                    const unsigned w = (&u[r].x)[wi] ^ FLIP;
                    acc[r] = dot4<FAM, BITS>(acc[r], w, x4, s[r], sb[r], off[r]);
                }
        } else {
            const float4 v0 = __ldg(reinterpret_cast<const float4 *>(xb + 8 * wi));
            const float4 v1 = __ldg(reinterpret_cast<const float4 *>(xb + 8 * wi + 4));
            const float xa[4] = {v0.x, v0.y, v0.z, v0.w}, xc[4] = {v1.x, v1.y, v1.z, v1.w};
#pragma unroll
            for (int r = 0; r < R; r++)
                if (ok[r]) {
                    const unsigned w = (&u[r].x)[wi] ^ FLIP;
                    const unsigned lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
                    /* k = 8wi + 2j is byte j of lo, k = 8wi + 2j + 1 byte j of hi */
                    acc[r] = dot4<FAM, BITS>(acc[r], __byte_perm(lo, hi, 0x5140u), xa, s[r], sb[r], off[r]);
                    acc[r] = dot4<FAM, BITS>(acc[r], __byte_perm(lo, hi, 0x7362u), xc, s[r], sb[r], off[r]);
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
            dot_block<FAM, BITS, R>(acc, ch[u], ok, xb, s, off);
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

struct Variant {
    const char *name;
    cudaError_t (*fn)(float *, const float *, const void *, const eng_qfmt *, const float *, const float *, int, int,
                      int, cudaStream_t);
};

const Variant variants[] = {
    {"r1u4", launch_q<1, 4, false>}, {"r2u2", launch_q<2, 2, false>}, {"r2u4", launch_q<2, 4, false>},
    {"r4u2", launch_q<4, 2, false>}, {"r1u8", launch_q<1, 8, false>},
    /* a ring: a lane's next block of a slot is requested as soon as the slot is consumed */
    {"r2u2r", launch_q<2, 2, false, true>}, {"r1u4r", launch_q<1, 4, false, true>},
    {"r2u4r", launch_q<2, 4, false, true>},
};
constexpr int DEFAULT_VARIANT = 5; /* r2u2r */

} // namespace

extern "C" cudaError_t engk_qgemv(float *y, const float *x, const void *W, const eng_qfmt *q, const float *b,
                                  const float *res, int N, int K, cudaStream_t s)
{
    return variants[DEFAULT_VARIANT].fn(y, x, W, q, b, res, N, K, 0, s);
}

extern "C" cudaError_t engk_qgemv_glu(float *out, const float *x, const void *W, const eng_qfmt *q, const float *bgu,
                                      int I, int K, int act, cudaStream_t s)
{
    return launch_q<2, 2, true, true>(out, x, W, q, bgu, nullptr, I, K, act, s);
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

extern "C" int engk_qgemv_variants(void) { return (int)(sizeof variants / sizeof variants[0]); }

extern "C" const char *engk_qgemv_variant_name(int v)
{
    return v >= 0 && v < engk_qgemv_variants() ? variants[v].name : "?";
}

extern "C" cudaError_t engk_qgemv_variant(int v, float *y, const float *x, const void *W, const eng_qfmt *q, int N,
                                          int K, cudaStream_t s)
{
    if (v < 0 || v >= engk_qgemv_variants())
        return cudaErrorInvalidValue;
    return variants[v].fn(y, x, W, q, nullptr, nullptr, N, K, 0, s);
}
