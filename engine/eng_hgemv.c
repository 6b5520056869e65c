/* Host GEMV in the GPU's summation order (see eng_hgemv.h). Compiled with -ffp-contract=off: every
 * fused multiply-add below is an explicit fmaf / vfmadd, every other operation rounds on its own. */
#include "eng_hgemv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ENG_X86 1
#endif

#include "eng_weights.h"

static float elem(const void *w, int f32, int64_t i)
{
    return f32 ? ((const float *)w)[i] : eng_bf16_to_f32(((const uint16_t *)w)[i]);
}

static float butterfly(float *a)
{
    for (int off = ENG_LANES / 2; off; off >>= 1)
        for (int l = 0; l < off; l++)
            a[l] = a[l] + a[l + off]; /* lane l: v_l + v_{l^off}; lanes >= off hold the same sums */
    return a[0];
}

float eng_dot_model(const void *w_row, int f32, const float *x, int64_t K)
{
    const int64_t nc = K / ENG_CHUNK;
    float acc[ENG_LANES];
    for (int l = 0; l < ENG_LANES; l++) {
        float a = 0.0f;
        for (int64_t c = l; c < nc; c += ENG_LANES)
            for (int e = 0; e < ENG_CHUNK; e++)
                a = fmaf(elem(w_row, f32, c * ENG_CHUNK + e), x[c * ENG_CHUNK + e], a);
        acc[l] = a;
    }
    return butterfly(acc);
}

/* ---- lane-major copy: row n holds Q = NJ * 8 steps of 32 lanes; step q = j*8 + e, lane l is
 * element 8 (l + 32 j) + e (zero past K: fmaf(0, 0, acc) == acc since acc is never -0). ---- */
enum { ISA_SCALAR, ISA_AVX2, ISA_AVX512 };

struct eng_hgemv {
    int f32, isa, best; /* path in use, best this CPU has */
    int64_t N, K, Q;  /* Q = steps per row */
    void *P;          /* [N, Q, 32] elements */
    float *xp;        /* [Q, 32] */
    float *y;
    const void *W;
    eng_pool *pool;
};

static void permute_rows(void *ctx, int64_t b, int64_t end, int w)
{
    (void)w;
    eng_hgemv *g = ctx;
    const int64_t nc = g->K / ENG_CHUNK, row = g->Q * ENG_LANES;
    for (int64_t n = b; n < end; n++) {
        const char *src = (const char *)g->W + n * g->K * (g->f32 ? 4 : 2);
        for (int64_t q = 0; q < g->Q; q++) {
            const int64_t j = q / ENG_CHUNK, e = q % ENG_CHUNK;
            for (int l = 0; l < ENG_LANES; l++) {
                const int64_t c = l + ENG_LANES * j, dst = n * row + q * ENG_LANES + l;
                if (g->f32)
                    ((float *)g->P)[dst] = c < nc ? ((const float *)src)[c * ENG_CHUNK + e] : 0.0f;
                else
                    ((uint16_t *)g->P)[dst] = c < nc ? ((const uint16_t *)src)[c * ENG_CHUNK + e] : 0;
            }
        }
    }
}

static float row_scalar(const eng_hgemv *g, int64_t n)
{
    float acc[ENG_LANES] = {0};
    const int64_t row = g->Q * ENG_LANES;
    for (int64_t q = 0; q < g->Q; q++) {
        const float *x = g->xp + q * ENG_LANES;
        for (int l = 0; l < ENG_LANES; l++)
            acc[l] = fmaf(elem(g->P, g->f32, n * row + q * ENG_LANES + l), x[l], acc[l]);
    }
    return butterfly(acc);
}

#ifdef ENG_X86
__attribute__((target("avx2,fma"))) static float row_avx2(const eng_hgemv *g, int64_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int64_t row = g->Q * ENG_LANES;
    for (int64_t q = 0; q < g->Q; q++) {
        const float *x = g->xp + q * ENG_LANES;
        __m256 w0, w1, w2, w3;
        if (g->f32) {
            const float *p = (const float *)g->P + n * row + q * ENG_LANES;
            w0 = _mm256_loadu_ps(p); w1 = _mm256_loadu_ps(p + 8);
            w2 = _mm256_loadu_ps(p + 16); w3 = _mm256_loadu_ps(p + 24);
        } else {
            const uint16_t *p = (const uint16_t *)g->P + n * row + q * ENG_LANES;
#define BF8(o) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + (o)))), 16))
            w0 = BF8(0); w1 = BF8(8); w2 = BF8(16); w3 = BF8(24);
#undef BF8
        }
        a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), a0);
        a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + 8), a1);
        a2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + 16), a2);
        a3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + 24), a3);
    }
    float acc[ENG_LANES];
    _mm256_storeu_ps(acc, a0); _mm256_storeu_ps(acc + 8, a1);
    _mm256_storeu_ps(acc + 16, a2); _mm256_storeu_ps(acc + 24, a3);
    return butterfly(acc);
}

__attribute__((target("avx512f"))) static float row_avx512(const eng_hgemv *g, int64_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    const int64_t row = g->Q * ENG_LANES;
    for (int64_t q = 0; q < g->Q; q++) {
        const float *x = g->xp + q * ENG_LANES;
        __m512 w0, w1;
        if (g->f32) {
            const float *p = (const float *)g->P + n * row + q * ENG_LANES;
            w0 = _mm512_loadu_ps(p); w1 = _mm512_loadu_ps(p + 16);
        } else {
            const uint16_t *p = (const uint16_t *)g->P + n * row + q * ENG_LANES;
            w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
            w1 = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + 16))), 16));
        }
        a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), a0);
        a1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), a1);
    }
    float acc[ENG_LANES];
    _mm512_storeu_ps(acc, a0); _mm512_storeu_ps(acc + 16, a1);
    return butterfly(acc);
}
#endif

static void run_rows(void *ctx, int64_t b, int64_t end, int w)
{
    (void)w;
    eng_hgemv *g = ctx;
    const int isa = g->isa;
    for (int64_t n = b; n < end; n++) {
#ifdef ENG_X86
        if (isa == ISA_AVX512) {
            g->y[n] = row_avx512(g, n);
            continue;
        }
        if (isa == ISA_AVX2) {
            g->y[n] = row_avx2(g, n);
            continue;
        }
#endif
        g->y[n] = row_scalar(g, n);
    }
}

int eng_hgemv_create(eng_hgemv **out, const void *W, int f32, int64_t N, int64_t K, eng_pool *pool, rc_err *e)
{
    *out = NULL;
    if (N < 1 || K < ENG_CHUNK || K % ENG_CHUNK)
        return rc_fail(e, RC_E_USAGE, "host gemv: K = %lld must be a positive multiple of 8", (long long)K);
    eng_hgemv *g = rc_calloc(1, sizeof *g, e, "host gemv");
    if (!g)
        return e->code;
    const int64_t nc = K / ENG_CHUNK, nj = (nc + ENG_LANES - 1) / ENG_LANES;
    g->f32 = f32;
    g->N = N;
    g->K = K;
    g->Q = nj * ENG_CHUNK;
    g->W = W;
    g->pool = pool;
    g->P = rc_calloc(N * g->Q * ENG_LANES, f32 ? 4 : 2, e, "host lm_head copy");
    g->xp = rc_calloc(g->Q * ENG_LANES, sizeof(float), e, "host gemv input");
    if (!g->P || !g->xp) {
        eng_hgemv_free(g);
        return e->code;
    }
    g->isa = ISA_SCALAR;
#ifdef ENG_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        g->isa = ISA_AVX512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        g->isa = ISA_AVX2;
#endif
    g->best = g->isa;
    eng_pool_run(pool, N, permute_rows, g);
    *out = g;
    return RC_OK;
}

void eng_hgemv_run(eng_hgemv *g, const float *x, float *y)
{
    const int64_t nc = g->K / ENG_CHUNK;
    for (int64_t q = 0; q < g->Q; q++) {
        const int64_t j = q / ENG_CHUNK, e = q % ENG_CHUNK;
        for (int l = 0; l < ENG_LANES; l++) {
            const int64_t c = l + ENG_LANES * j;
            g->xp[q * ENG_LANES + l] = c < nc ? x[c * ENG_CHUNK + e] : 0.0f;
        }
    }
    g->y = y;
    eng_pool_run(g->pool, g->N, run_rows, g);
}

void eng_hgemv_free(eng_hgemv *g)
{
    if (!g)
        return;
    free(g->P);
    free(g->xp);
    free(g);
}

static const char *const isa_names[] = {"scalar", "avx2", "avx512"};

const char *eng_hgemv_isa(const eng_hgemv *g) { return isa_names[g->isa]; }

int eng_hgemv_set_isa(eng_hgemv *g, const char *isa)
{
    for (int i = ISA_SCALAR; i <= ISA_AVX512; i++)
        if (!strcmp(isa, isa_names[i])) {
            /* avx512 implies avx2 + fma on every CPU that has it */
            if (i > g->best)
                return 0;
            g->isa = i;
            return 1;
        }
    return 0;
}

int64_t eng_hgemv_bytes(const eng_hgemv *g) { return g->N * g->Q * ENG_LANES * (g->f32 ? 4 : 2); }
