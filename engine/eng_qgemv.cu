/* Quantized decode GEMV and prefill dequant (see eng_qgemv.h). Built with -fmad=false: the dequant is __fmul_rn /
 * __fadd_rn and the only fused multiply-adds are the explicit fmaf() of the dot product. */
#include "eng_qgemv_k.cuh"

#include <stdio.h>
#include <stdlib.h>

namespace {

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

/* k_qgemv_mma's int4 decode (nib8) of every 16-bit half-word pattern p, as both halves (w = p | p << 16) and beside
 * its complement (p | ~p << 16), both families: each fp16 half against the code's integer (affine u, symmetric the
 * signed nibble (u ^ 8) - 8) and against the per-pair form it replaced (shift, mask | 0x6400, one sub); mismatching
 * words into *bad. */
__global__ void k_nib8_check(unsigned *bad)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= 65536u)
        return;
    unsigned nbad = 0;
    for (int v = 0; v < 2; v++) {
        const unsigned w = p | (v ? ~p & 0xFFFFu : p) << 16;
        unsigned qa[4], qs[4];
        nib8<0u, 0x64006400u>(qa, w);
        nib8<0x88888888u, 0x64086408u>(qs, w);
        for (int n = 0; n < 4; n++) {
            const unsigned pa = hsub2u(((w >> 4 * n) & 0x000F000Fu) | 0x64006400u, 0x64006400u);
            const unsigned ps = hsub2u((((w ^ 0x88888888u) >> 4 * n) & 0x000F000Fu) | 0x64006400u, 0x64086408u);
            bool ok = qa[n] == pa && qs[n] == ps;
            for (int h = 0; h < 2; h++) { /* half h holds nibble n of half-word h */
                const int u = (int)(w >> (16 * h + 4 * n)) & 15;
                const __half ha = __ushort_as_half((unsigned short)(qa[n] >> 16 * h));
                const __half hs = __ushort_as_half((unsigned short)(qs[n] >> 16 * h));
                ok = ok && __half2float(ha) == (float)u && __half2float(hs) == (float)((u ^ 8) - 8); /* signed nibble */
            }
            nbad += !ok;
        }
    }
    if (nbad)
        atomicAdd(bad, nbad);
#else
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *bad = 0xFFFFFFFFu; /* never launched below sm_80 (engk_qgemv_nib8_check) */
#endif
}

const QVariant variants_r[] = {
    /* k_qgemv: x through L1, scales loaded when a block is consumed (R rows incl. a GLU's up rows) */
    {"r1u4", launch_q<1, 4, false>, nullptr, false, nullptr, nullptr},
    {"r2u2", launch_q<2, 2, false>, launch_q<2, 2, true>, false, nullptr, nullptr},
    {"r2u4", launch_q<2, 4, false>, launch_q<2, 4, true>, false, nullptr, nullptr},
    {"r4u2", launch_q<4, 2, false>, launch_q<4, 2, true>, false, nullptr, nullptr},
    {"r1u8", launch_q<1, 8, false>, nullptr, false, nullptr, nullptr},
    {"r2u2r", launch_q<2, 2, false, true>, launch_q<2, 2, true, true>, false, nullptr, nullptr},
    {"r1u4r", launch_q<1, 4, false, true>, nullptr, false, nullptr, nullptr},
    {"r2u4r", launch_q<2, 4, false, true>, launch_q<2, 4, true, true>, false, nullptr, nullptr},
};
constexpr int NVR = (int)(sizeof variants_r / sizeof variants_r[0]);
constexpr int OLD_DEFAULT = 5; /* r2u2r, plain and GLU: k_qgemv as it ran before k_qgemv_s */

int nvariants() { return NVR + eng_qgemv_nvs + eng_qgemv_nvm + eng_qgemv_nvi; }

/* Variant v of engk_qgemv_variant's numbering: the k_qgemv ones, then k_qgemv_s's, then k_qgemv_mma's (its fp16 m*,
 * then its integer i*) (0 <= v < nvariants()). */
const QVariant &variant(int v)
{
    const int vm = NVR + eng_qgemv_nvs, vi = vm + eng_qgemv_nvm;
    return v < NVR ? variants_r[v] : v < vm ? eng_qgemv_vs[v - NVR] : v < vi ? eng_qgemv_vm[v - vm] : eng_qgemv_vi[v - vi];
}

int vindex(const char *name)
{
    for (int v = 0; v < nvariants(); v++)
        if (!strcmp(variant(v).name, name))
            return v;
    return OLD_DEFAULT;
}

} // namespace

/* 1: the engine launches k_qgemv_mma where it measured best and mma_runs (sm_80+; int8 per row or groups of 64 k
 * and up, int4 groups of 128 k and up): int8 q|k|v-like shapes (N > 4096, K <= 8192) and int4 down-like ones
 * (K > 8192); 0: k_qgemv_s / k_qgemv everywhere (eng_qdot_model's bits). Flip after measuring
 * `test_engk_qgemv --bench`. The fused-norm forms follow it for int8 q|k|v (NORM_MMA below); int4's wide shapes take
 * k_qgemv_mma in both forms (MMA4_WIDE), and int4's o-like shapes the plain one (MMA4_O). */
static const int USE_MMA = 1;

/* 1: int4 takes s1u2w16n where k_qgemv_s runs (the same bits: high nibbles under 2^19, no rescaled scale, addresses
 * advanced by the loop; fewer instructions a weight); 0: s1u2w16. Measured on the H200 (session 7, one
 * `test_engk_qgemv --bench` run, graph-timed, int4 g128, q|k|v + o + fused gate|up + down): 59.5 us a layer with
 * the s1u2w16 picks, 58.7 with their n forms (int8 unchanged: 61.2 / 61.5, it keeps its picks). */
static const int Q4_NQ = 1;

/* 1: int4's fused gate|up walks several row sets a warp (s1u4w16nr: a ring of 4, the grid in one wave); 0: one row
 * set a warp (s1u2w16n). Where MMA4_WIDE below takes the shape (groups of 128 k and up, N > 4096), k_qgemv_mma
 * runs instead; the walk stays for the rest (int4 in groups of 32 or 64). The same bits. Measured on the H200
 * (session 8, one `test_engk_qgemv --bench` run, graph times, llama3-8b gate|up with the fused norm, int4 g128):
 * s1u2w16n 40.2 us, s1u2w16nr 39.4, s1u4w16nr 36.8, s2u2w8nr 37.8. The walk lost on every other shape (int4 q|k|v
 * 8.0 -> 10.3 us, o 5.6 -> 5.9, down 15.8 -> 17.5; int8 likewise), so nothing else takes it. */
static const int Q_WALK = 1;

/* 1: int8's fused gate|up takes s1u2w16n instead of s1u4w16 (the same bits). Same run: with the fused norm 37.6 us
 * against 42.7 (s1u2w16nr 37.5, s1u4w16nr 42.4). */
static const int Q8_GLU_N = 1;

/* The int8 q|k|v-like shapes where m8u4 measured best (plain and fused-norm picks); with GLU (N the intermediate
 * width) the wide fused gate|up. */
static bool int8_qkv_shape(const eng_qfmt *q, int N, int K) { return q->bits == 8 && N > 4096 && K <= 8192; }

/* 1: int8 takes the integer tensor-core form (eng_qgemv_k.cuh's INT) on its q|k|v-like shapes (i8u4 for m8u4, plain
 * and fused-norm), its wide fused gate|up (i8u4p for k_qgemv_s's s1u2w16n, plain and fused-norm) and its o-like
 * shapes (plain, 2048 <= N <= 4096, K <= 8192: i8t2u4 for s1u2w16); down keeps s1u4w16 (the integer forms measured
 * 18.9 us and up against its 16.5 alone). Measured on the H200 (session 31): `test_engk_qgemv --bench`, graph, us:
 * q|k|v with the norm 7.7 against 8.6, gate|up with the norm 36.8 against 37.6, o 4.5 against 4.9; `engine bench
 * --shape llama3-8b --weights int8 --prompt-len 16 --steps 32 --rounds 2 --no-stream` in one binary, two passes,
 * ms/token: the picks before 2.762 / 2.761, q|k|v alone 2.728 / 2.728, gate|up alone 2.732 / 2.731, o alone 2.755 /
 * 2.758, the three 2.696 / 2.697 (371 tok/s against 362). */
static const int INT8_I = 1;
static bool int8_o_shape(const eng_qfmt *q, int N, int K)
{
    return q->bits == 8 && N >= 2048 && N <= 4096 && K <= 8192;
}

/* 1: int4's wide shapes of short rows (N > 4096 outputs, K <= 8192: q|k|v, the fused gate|up) take m8t2u2o, k_qgemv_mma
 * at 64 registers (two blocks of 16 warps an SM), plain, GLU and fused-norm; 0: k_qgemv_s's picks there. Measured on
 * the H200 (session 10, one `test_engk_qgemv --bench` run, graph times, llama3-8b shapes, int4 g128 affine, plain
 * forms, us): q|k|v m8t2u2o 7.0 against s1u2w16n 8.0; fused gate|up m8t2u2o 30.0 (m8u2o 30.6) against s1u4w16nr
 * 33.8. Shapes of N <= 4096 keep their picks (o: m8t2u4 5.2 against 5.6, left), so the committed goldens' small
 * int4 layers run the same kernels as before. */
static const int MMA4_WIDE = 1;
static bool int4_wide_shape(const eng_qfmt *q, int N, int K) { return q->bits == 4 && N > 4096 && K <= 8192; }

/* 1: where MMA4_WIDE takes the fused gate|up (plain and fused-norm), a persistent k_qgemv_mma form, m8u4p (the grid
 * the device holds at once, x's prologue once a block instead of once in each wave of blocks; m8u4's bits, the order
 * of every KS = 8 form); 0: m8t2u2o. Measured on the H200 (session 21, llama3-8b, int4 g128 affine, `engine bench
 * --shape llama3-8b --weights int4-g128 --prompt-len 16 --steps 32 --rounds 2 --no-stream`, binaries alternating in
 * one call): m8t2u2o 2.654 / 2.653 ms/token against the persistent m8t2u2op 2.325 / 2.326; in a later call
 * m8t2u2op 2.321 / 2.329 against m8u4p 2.292 / 2.302 (436 tok/s). `test_engk_qgemv --bench`, graph times, fused
 * gate|up with the norm: m8t2u2o 37.1 us, m8t2u2op 27.9, m8u4p 27.2. q|k|v (N 6144: one wave of blocks) keeps
 * m8t2u2o (9.1 against m8t2u2op's 10.4 us with the norm). */
static const int MMA4_GLU_PER = 1;

/* 1: where int4 takes k_qgemv_mma for the fused gate|up (MMA4_GLU_PER), down (K > 8192) and o (MMA4_O), it runs the
 * integer form (the i* variants: x as 31-bit fixed point in four int8 digits, the codes as int8, exact int32 sums a
 * step by mma.sync.m16n8k32; about 60% of the fp16 form's instructions in the loop, and a tighter bound): i8u4p,
 * i8t2u4, i8t2u4 for m8u4p, m8t2u4, m8t2u4; 0: the fp16 form there. q|k|v (fused norm) keeps m8t2u2o: its integer
 * forms lost in the graph. Measured on the H200 (session 31, `engine bench --shape llama3-8b --weights int4-g128
 * --prompt-len 16 --steps 32 --rounds 2 --no-stream`, $REFCHAIN_QGEMV_PICKS in one binary, two passes, ms/token):
 * the fp16 picks 2.206 / 2.208; gate|up i8u4p 2.116 / 2.117; down i8t2u4 2.204 / 2.205; o i8t2u4 2.197 / 2.197; the
 * three together 2.067 / 2.067 (484 tok/s against 453); q|k|v on i8t2u2o 2.245 / 2.249, i8u4p 2.274 / 2.271, all
 * four 2.123 / 2.124. */
static const int INT4_I = 1;
/* 1: int4's q|k|v (plain and fused-norm) takes the integer form i8t2u2o (m8t2u2o's shape, INT's order and bound);
 * 0: m8t2u2o. Session 31's graph (above) had it lose (2.245 against 2.206); once the fused norm's weight was staged
 * (NORM_W_STAGE, NW_LATE_WAIT) it wins. Measured on the H200 (session 35, `engine bench --shape llama3-8b --weights
 * int4-g128+lm_head --prompt-len 16 --steps 32 --rounds 2 --no-stream`, $REFCHAIN_QGEMV_PICKS in one binary,
 * alternating, two passes, ms/token): m8t2u2o 1.884 / 1.886, i8t2u2o 1.848 / 1.846, i8u4p 1.847 / 1.847, m8t2u2op
 * 1.850 / 1.851. */
static const int INT4_QKV_I = 1;
static const char *int4_wide_pick(int glu)
{
    if (glu)
        return MMA4_GLU_PER ? (INT4_I ? "i8u4p" : "m8u4p") : "m8t2u2o";
    return INT4_I && INT4_QKV_I ? "i8t2u2o" : "m8t2u2o";
}

/* 1: int4's o-like shapes (plain, 2048 <= N <= 4096 outputs, K <= 8192: the attention's output projection of the 8B
 * shapes) take k_qgemv_mma's m8t2u4 instead of k_qgemv_s's s1u2w16n (another order: the mma form's, held to its
 * derived bound). Measured in the engine's graph on the H200 (session 30, `engine bench --shape llama3-8b --weights
 * int4-g128 --prompt-len 16 --steps 32 --rounds 2 --no-stream`, $REFCHAIN_QGEMV_PICKS): a sweep, 2.215 ms/token
 * against 2.258-2.262 with s1u2w16n (m16u2o 2.228, s1u2w16 2.247, m8u2o 2.259, s1u4w16n 2.268, m4t4u4 2.270); then
 * alternating in one call, 2.205 / 2.202 / 2.201 against 2.246 / 2.248 / 2.246 (454 against 445 tok/s). Smaller
 * shapes (the committed goldens' layers) keep their picks and bits. */
static const int MMA4_O = 1;
static bool int4_o_shape(const eng_qfmt *q, int N, int K)
{
    return q->bits == 4 && N >= 2048 && N <= 4096 && K <= 8192;
}

/* 1: vocabulary-sized shapes (a packed lm_head: N > 32768 outputs, K <= 8192), int8 and int4 alike, take the
 * persistent integer form i8u4p (plain and fused-norm) where k_qgemv_mma runs; 0: the q|k|v-like picks there (int8
 * i8u4, int4 m8t2u2o). Measured on the H200 (session 32, llama3-8b's lm_head 128256 x 4096): `test_engk_qgemv
 * --bench`, graph, plain, us: int4 g128 i8u4p 74.6 (86.5% of the 4576 GB/s ceiling), m8u4p 85.0, m8t2u2op 87.5,
 * m8t2u2o 115.8; int8 i8u4 124.8, i8u4p 126.6, m4u8 127.0; `engine bench --shape llama3-8b --weights
 * SCHEME+lm_head --prompt-len 16 --steps 32 --rounds 2 --no-stream`, fused-norm lm_head by $REFCHAIN_QGEMV_PICKS,
 * ms/token: int4 i8u4p 1.898 / 1.903, m8u4p 1.910, m8t2u2op 1.912, i8t2u2o 1.983, m8t2u2o (the q|k|v-like pick)
 * 1.969, i8u4 2.008, i8t2u4 2.021; int8 i8u4p 2.580 / 2.576, i8u4 (the q|k|v-like pick) 2.610, s1u4w16 2.634. */
static const int VOCAB_PER = 1;
static bool vocab_shape(const eng_qfmt *q, int N, int K)
{
    return (q->bits == 4 || q->bits == 8) && N > 32768 && K <= 8192;
}

/* The k_qgemv_s variant for a shape (plain, GLU or fused norm: k_qgemv_s's best was the same for both forms).
 * Measured on the H200 (test_engk_qgemv --bench, graph times, llama3-8b shapes), us, int8 per row: q|k|v s1u2w16
 * 6.8 (m8u4 6.2), o s1u2w16 4.9, fused gate|up s1u4w16 33.7 (s1u2w16 33.8, m8u4 34.0), down s1u4w16 16.6 (m8u8
 * 19.4); int4 g128 affine: q|k|v s1u2w16 ~8.1 (m4u8, m4t2u4 the same), o s1u2w16 5.4, fused gate|up s1u2w16 32.3,
 * down s1u2w16 15.8 (m8t2u4 13.8). Those are the plain forms; the engine runs gate|up with the fused norm, where
 * session 8 measured int8 s1u2w16n and int4 s1u4w16nr best (Q8_GLU_N, Q_WALK above). The shape never changes a bit
 * among k_qgemv_s variants. */
static const char *s_pick(int glu, const eng_qfmt *q, int K)
{
    if (q->bits == 4 && Q4_NQ)
        return glu && Q_WALK ? "s1u4w16nr" : "s1u2w16n";
    if (q->bits == 8 && glu && Q8_GLU_N)
        return "s1u2w16n";
    return q->bits == 8 && (glu || K > 8192) ? "s1u4w16" : "s1u2w16";
}

/* $REFCHAIN_QGEMV_PICKS, for benchmarking picks inside the engine's graph (`engine bench --weights ...`): a comma
 * list of FNxK=variant, F the form (p plain, g GLU, n plain with the fused norm, m GLU with the fused norm), N the
 * outputs (GLU: the intermediate width), K the inputs; e.g. p4096x14336=m8u4p names int4 down's kernel for llama3-8b.
 * A variant of another split-k (another KS, or k_qgemv_s against k_qgemv_mma) sums in another order, so it changes
 * bits: every memory mode of one process takes the same override, but the bounds and goldens hold only for the
 * picks below. The variant must run the shape (its launcher's error otherwise); engk_qgemv_env_check refuses an
 * entry it cannot parse or a variant without that form. */

/* Entry [p, p + len) as form, N, K and variant index (-1 where no variant of that name has the form); false where
 * it does not parse. */
static bool env_entry(const char *p, size_t len, char *form, int *N, int *K, int *v)
{
    char buf[96], name[32];
    int used = 0;
    if (len >= sizeof buf)
        return false;
    memcpy(buf, p, len);
    buf[len] = '\0';
    if (sscanf(buf, "%c%dx%d=%31[a-z0-9]%n", form, N, K, name, &used) != 4 || used != (int)len || *N < 1 || *K < 1 ||
        !strchr("pgnm", *form))
        return false;
    *v = -1;
    for (int i = 0; i < nvariants(); i++) {
        const QVariant &w = variant(i);
        const bool has = *form == 'p'   ? true
                         : *form == 'g' ? w.glu != nullptr
                         : *form == 'n' ? w.norm != nullptr
                                        : w.glu_norm != nullptr;
        if (!strcmp(w.name, name) && has)
            *v = i;
    }
    return true;
}

/* The variant $REFCHAIN_QGEMV_PICKS names for (form, N, K), or -1; with bad (a check: form 0 matches nothing), -2 and
 * the first entry that does not parse or names no variant of its form in bad[n]. */
static int env_walk(char form, int N, int K, char *bad, size_t n)
{
    const char *p = getenv("REFCHAIN_QGEMV_PICKS");
    while (p && *p) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        char f;
        int en, ek, v;
        const bool ok = env_entry(p, len, &f, &en, &ek, &v);
        if (bad && (!ok || v < 0)) {
            snprintf(bad, n, "%.*s", (int)(len < 64 ? len : 64), p);
            return -2;
        }
        if (ok && f == form && en == N && ek == K)
            return v;
        p = end ? end + 1 : nullptr;
    }
    return -1;
}

static int env_pick(char form, int N, int K) { return env_walk(form, N, K, nullptr, 0); }

extern "C" int engk_qgemv_env_check(char *bad, size_t n) { return env_walk(0, 0, 0, bad, n) == -2 ? -1 : 0; }

/* Rows too long for x in shared memory, and groups k_qgemv_s cannot index by a shift, take k_qgemv (r2u2r). */
extern "C" int engk_qgemv_pick(int glu, const eng_qfmt *q, int N, int K)
{
    const int ev = env_pick(glu ? 'g' : 'p', N, K);
    if (ev >= 0)
        return ev;
    const int64_t rows = glu ? 2 * (int64_t)N : N;
    if (USE_MMA && N >= 1 && !glu && mma_runs(q, rows, K)) {
        if (VOCAB_PER && vocab_shape(q, N, K))
            return vindex("i8u4p"); /* a packed lm_head */
        if (int8_qkv_shape(q, N, K))
            return vindex(INT8_I ? "i8u4" : "m8u4");
        if (INT8_I && int8_o_shape(q, N, K))
            return vindex("i8t2u4"); /* int8 o */
        if (q->bits == 4 && K > 8192)
            return vindex(INT4_I ? "i8t2u4" : "m8t2u4"); /* int4 down */
        if (MMA4_O && int4_o_shape(q, N, K))
            return vindex(INT4_I ? "i8t2u4" : "m8t2u4"); /* int4 o */
    }
    if (USE_MMA && MMA4_WIDE && N >= 1 && int4_wide_shape(q, N, K) && mma_runs(q, rows, K))
        return vindex(int4_wide_pick(glu)); /* int4 q|k|v, gate|up */
    if (USE_MMA && INT8_I && N >= 1 && glu && int8_qkv_shape(q, N, K) && mma_runs(q, rows, K))
        return vindex("i8u4p"); /* int8 gate|up */
    return s_runs(q, rows, K, false) ? vindex(s_pick(glu, q, K)) : OLD_DEFAULT;
}

extern "C" int engk_qgemv_norm_fits(int glu, const eng_qfmt *q, int N, int K)
{
    return N >= 1 && K >= 1 && s_runs(q, glu ? 2 * (int64_t)N : N, K, true);
}

/* 1: the engine fuses the norm into the plain GEMV (q|k|v) / the GLU (gate|up) where it fits; 0: engk_rmsnorm + the
 * plain form there. Flip after comparing `test_engk_qgemv --bench`'s norm rows (fused against engk_rmsnorm + plain). */
static const int FUSE_NORM[2] = {1, 1};

extern "C" int engk_qgemv_norm_use(int glu, const eng_qfmt *q, int N, int K)
{
    return FUSE_NORM[glu != 0] && engk_qgemv_norm_fits(glu, q, N, K);
}

/* The fused-norm forms: the plain pick's shape (each block also normalizes x, so fewer, fuller blocks may win
 * instead; flip after measuring the norm rows of `test_engk_qgemv --bench`). NORM_MMA 1: m8u4 (INT8_I: i8u4) for
 * int8 q|k|v as the plain pick (where its copy of x fits), 0: k_qgemv_s's best there too. */
static const int NORM_MMA = 1;

extern "C" int engk_qgemv_pick_norm(int glu, const eng_qfmt *q, int N, int K)
{
    const int ev = env_pick(glu ? 'm' : 'n', N, K);
    if (ev >= 0)
        return ev;
    if (USE_MMA && VOCAB_PER && N >= 1 && !glu && vocab_shape(q, N, K) && mma_norm_runs(q, N, K))
        return vindex("i8u4p"); /* a packed lm_head */
    if (USE_MMA && NORM_MMA && N >= 1 && !glu && int8_qkv_shape(q, N, K) && mma_norm_runs(q, N, K))
        return vindex(INT8_I ? "i8u4" : "m8u4");
    if (USE_MMA && INT8_I && N >= 1 && glu && int8_qkv_shape(q, N, K) && mma_norm_runs(q, 2 * (int64_t)N, K))
        return vindex("i8u4p"); /* int8 gate|up */
    if (USE_MMA && MMA4_WIDE && N >= 1 && int4_wide_shape(q, N, K) && mma_norm_runs(q, glu ? 2 * (int64_t)N : N, K))
        return vindex(int4_wide_pick(glu));
    return engk_qgemv_norm_fits(glu, q, N, K) ? vindex(s_pick(glu, q, K)) : -1;
}

extern "C" cudaError_t engk_qgemv_norm(float *y, float *xn, const float *x, const float *nw, float eps, int kind,
                                       const void *W, const eng_qfmt *q, const float *b, int N, int K, cudaStream_t s)
{
    const int v = engk_qgemv_pick_norm(0, q, N, K);
    return v < 0 ? cudaErrorInvalidValue : variant(v).norm(y, xn, x, nw, eps, kind, W, q, b, N, K, 0, s);
}

extern "C" cudaError_t engk_qgemv_glu_norm(float *out, float *xn, const float *x, const float *nw, float eps, int kind,
                                           const void *W, const eng_qfmt *q, const float *bgu, int I, int K, int act,
                                           cudaStream_t s)
{
    const int v = engk_qgemv_pick_norm(1, q, I, K);
    return v < 0 ? cudaErrorInvalidValue : variant(v).glu_norm(out, xn, x, nw, eps, kind, W, q, bgu, I, K, act, s);
}

extern "C" cudaError_t engk_qgemv(float *y, const float *x, const void *W, const eng_qfmt *q, const float *b,
                                  const float *res, int N, int K, cudaStream_t s)
{
    return variant(engk_qgemv_pick(0, q, N, K)).plain(y, x, W, q, b, res, N, K, 0, s);
}

extern "C" cudaError_t engk_qgemv_glu(float *out, const float *x, const void *W, const eng_qfmt *q, const float *bgu,
                                      int I, int K, int act, cudaStream_t s)
{
    return variant(engk_qgemv_pick(1, q, I, K)).glu(out, x, W, q, bgu, nullptr, I, K, act, s);
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

extern "C" int engk_qgemv_variants(void) { return nvariants(); }

extern "C" const char *engk_qgemv_variant_name(int v) { return v >= 0 && v < nvariants() ? variant(v).name : "?"; }

extern "C" int engk_qgemv_variant_has_glu(int v) { return v >= 0 && v < nvariants() && variant(v).glu; }

extern "C" int engk_qgemv_variant_mma(int v, int glu, const eng_qfmt *q, int N, int K)
{
    return v >= 0 && v < nvariants() && variant(v).mma && N >= 1 && mma_runs(q, glu ? 2 * (int64_t)N : N, K);
}

extern "C" cudaError_t engk_qgemv_variant(int v, int glu, float *y, const float *x, const void *W, const eng_qfmt *q,
                                          const float *b, const float *res, int N, int K, int act, cudaStream_t s)
{
    if (v < 0 || v >= nvariants() || (glu && !variant(v).glu))
        return cudaErrorInvalidValue;
    return glu ? variant(v).glu(y, x, W, q, b, nullptr, N, K, act, s) : variant(v).plain(y, x, W, q, b, res, N, K, 0, s);
}

extern "C" int engk_qgemv_variant_has_norm(int v) { return v >= 0 && v < nvariants() && variant(v).norm; }

extern "C" cudaError_t engk_qgemv_variant_norm(int v, int glu, float *y, float *xn, const float *x, const float *nw,
                                               float eps, int kind, const void *W, const eng_qfmt *q, const float *b,
                                               int N, int K, int act, cudaStream_t s)
{
    if (v < 0 || v >= nvariants() || !variant(v).norm)
        return cudaErrorInvalidValue;
    return (glu ? variant(v).glu_norm : variant(v).norm)(y, xn, x, nw, eps, kind, W, q, b, N, K, act, s);
}

extern "C" cudaError_t engk_qgemv_nib8_check(long *bad)
{
    const int major = dev_attr(cudaDevAttrComputeCapabilityMajor); /* mma_runs' query: -1 when it fails */
    if (major < 0)
        return cudaErrorInvalidDevice;
    if (major < 8)
        return cudaErrorNotSupported;
    unsigned *d = nullptr, h = 0;
    cudaError_t err = cudaMalloc(&d, sizeof *d);
    if (err != cudaSuccess)
        return err;
    if ((err = cudaMemset(d, 0, sizeof *d)) == cudaSuccess) {
        k_nib8_check<<<256, 256>>>(d);
        if ((err = cudaGetLastError()) == cudaSuccess)
            err = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    }
    const cudaError_t ferr = cudaFree(d);
    if (err == cudaSuccess)
        err = ferr;
    *bad = (long)h;
    return err;
}
