/* Packed quantized matrices on the host (see eng_qpack.h). */
#include "eng_qpack.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int eng_qfmt_of(const rc_qtensor *t, eng_qfmt *q, rc_err *e)
{
    q->family = (int)t->family;
    q->bits = t->bits;
    q->group = (int)t->group;
    if (t->group > INT32_MAX || !eng_qfmt_ok(q, t->k))
        return rc_fail(e, RC_E_UNSUPPORTED,
                       "engine: %s: %d-bit %s codes in groups of %lld over %lld columns are not run by the quantized "
                       "kernels (int8 or int4 scale, int4 affine; groups a multiple of %d)",
                       t->name, t->bits, t->family == RC_QF_AFFINE ? "affine" : "scale", (long long)t->group,
                       (long long)t->k, 128 / (t->bits > 0 ? t->bits : 8));
    return RC_OK;
}

/* *sq = code k of a packed row: int8 signed; int4 the nibble (low first), sign-extended for the scale family. */
static void code_at(const unsigned char *row, const eng_qfmt *q, int64_t k, int *sq)
{
    if (q->bits == 8) {
        *sq = (int)(signed char)row[k];
        return;
    }
    const unsigned nib = (row[k >> 1] >> (4 * (k & 1))) & 15u;
    *sq = q->family == RC_QF_AFFINE ? (int)nib : (int)(nib ^ 8u) - 8;
}

void eng_qpack_rows(void *mat, int64_t N, int64_t K, const eng_qfmt *q, int64_t row0, const rc_qtensor *t,
                    int64_t trow0, int64_t n)
{
    const int64_t ng = K / q->group, rb = K * q->bits / 8;
    unsigned char *codes = mat;
    float *sc = (float *)((char *)mat + eng_qscale_off(N, K, q));
    float *of = (float *)((char *)mat + eng_qoffset_off(N, K, q));
    for (int64_t r = 0; r < n; r++) {
        const int8_t *src = t->q + (trow0 + r) * K;
        unsigned char *dst = codes + (row0 + r) * rb;
        if (q->bits == 8)
            memcpy(dst, src, (size_t)K);
        else
            for (int64_t k = 0; k < K; k += 2)
                dst[k >> 1] = (unsigned char)(((unsigned)src[k] & 15u) | (((unsigned)src[k + 1] & 15u) << 4));
        memcpy(sc + (row0 + r) * ng, t->scale + (trow0 + r) * ng, (size_t)ng * sizeof(float));
        if (q->family == RC_QF_AFFINE)
            memcpy(of + (row0 + r) * ng, t->offset + (trow0 + r) * ng, (size_t)ng * sizeof(float));
    }
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void eng_qsynth_rows(void *mat, int64_t N, int64_t K, const eng_qfmt *q, uint64_t seed, int64_t r0, int64_t r1)
{
    const int64_t ng = K / q->group, rb = K * q->bits / 8;
    float *sc = (float *)((char *)mat + eng_qscale_off(N, K, q));
    float *of = (float *)((char *)mat + eng_qoffset_off(N, K, q));
    /* uniform codes: std (2^b) / sqrt(12) in code units */
    const float base = 0.02f / ((float)(1 << q->bits) * 0.28867513f);
    for (int64_t r = r0; r < r1; r++) {
        uint64_t s = mix64(seed ^ mix64((uint64_t)r + 1));
        unsigned char *dst = (unsigned char *)mat + r * rb;
        for (int64_t i = 0; i < rb; i += 8) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            const int64_t n = rb - i < 8 ? rb - i : 8;
            memcpy(dst + i, &s, (size_t)n);
        }
        for (int64_t j = 0; j < ng; j++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            const float v = base * (0.75f + 0.5f * (float)(s >> 40) * (1.0f / 16777216.0f));
            sc[r * ng + j] = v;
            if (q->family == RC_QF_AFFINE)
                of[r * ng + j] = rc_qf_offset(v, 1 << (q->bits - 1));
        }
    }
}

/* w[0, n) = weights k0 .. k0 + n - 1 of row r (within one group) by model/quant.h's rules. */
static void group_weights(const void *mat, int64_t N, int64_t K, const eng_qfmt *q, int64_t r, int64_t k0, int n,
                          float *w)
{
    const int64_t ng = K / q->group, j = r * ng + k0 / q->group;
    const unsigned char *row = (const unsigned char *)mat + r * (K * q->bits / 8);
    const float s = ((const float *)((const char *)mat + eng_qscale_off(N, K, q)))[j];
    const float m = q->family == RC_QF_AFFINE ? ((const float *)((const char *)mat + eng_qoffset_off(N, K, q)))[j] : 0.0f;
    for (int i = 0; i < n; i++) {
        int c;
        code_at(row, q, k0 + i, &c);
        w[i] = q->family == RC_QF_AFFINE ? rc_qf_affine(s, c, m) : rc_qf_scale(s, c);
    }
}

void eng_qdequant_row(const void *mat, int64_t N, int64_t K, const eng_qfmt *q, int64_t r, float *out)
{
    for (int64_t k0 = 0; k0 < K; k0 += q->group)
        group_weights(mat, N, K, q, r, k0, q->group, out + k0);
}

float eng_qdot_model(const void *mat, int64_t N, int64_t K, const eng_qfmt *q, int64_t r, const float *x)
{
    const int P = eng_qper16(q);
    float w[32], acc[32] = {0};
    for (int64_t c = 0; c < K / P; c++) { /* block c belongs to lane c % 32 */
        group_weights(mat, N, K, q, r, c * P, P, w);
        float a = acc[c % 32];
        for (int i = 0; i < P; i++)
            a = fmaf(w[i], x[c * P + i], a);
        acc[c % 32] = a;
    }
    for (int off = 16; off; off >>= 1) { /* the xor butterfly */
        float t[32];
        for (int l = 0; l < 32; l++)
            t[l] = acc[l] + acc[l ^ off];
        memcpy(acc, t, sizeof t);
    }
    return acc[0];
}

int eng_qfmt_parse(const char *name, eng_qfmt *q, int *on, int *lm_head, rc_err *e)
{
    *on = 0;
    if (lm_head)
        *lm_head = 0;
    *q = (eng_qfmt){0, 0, 0};
    if (!strcmp(name, "bf16"))
        return RC_OK;
    rc_quant_scheme s;
    if (rc_quant_scheme_parse(name, &s, e))
        return rc_fail(e, RC_E_USAGE, "--weights '%s': give bf16 or a scheme (int8, int4-g32, int4-g64, int4-g128, "
                       "int4-gN-sym; '+lm_head' after a scheme packs lm_head too)", name);
    if (s.group > INT32_MAX)
        return rc_fail(e, RC_E_USAGE, "--weights '%s': group too large", name);
    *q = (eng_qfmt){(int)s.family, s.bits, (int)s.group};
    *on = 1;
    if (lm_head)
        *lm_head = s.lm_head;
    return RC_OK;
}

const char *eng_qfmt_str(const eng_qfmt *q, int64_t K, char *buf, int cap)
{
    if (!q->family)
        snprintf(buf, (size_t)cap, "full precision");
    else if (q->group == K)
        snprintf(buf, (size_t)cap, "int%d per-row %s", q->bits, q->family == RC_QF_AFFINE ? "affine" : "scale");
    else
        snprintf(buf, (size_t)cap, "int%d g%d %s", q->bits, q->group, q->family == RC_QF_AFFINE ? "affine" : "scale");
    return buf;
}
