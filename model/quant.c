/* Quantized tensors: the scale and affine families, their one dequant rule each, schemes and the per-tensor
 * policy table. */
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rc_qtensor_alloc(rc_qtensor *t, const char *name, rc_qfamily family, int bits, int64_t n, int64_t k,
                     int64_t group, int with_zero, rc_err *e)
{
    memset(t, 0, sizeof *t);
    if (family != RC_QF_SCALE && family != RC_QF_AFFINE)
        return rc_fail(e, RC_E_USAGE, "quantized tensor '%s': unknown family %d", name, (int)family);
    if (bits != 4 && bits != 8)
        return rc_fail(e, RC_E_UNSUPPORTED, "quantized tensor '%s': %d bits (supported: 4, 8)", name, bits);
    if (n < 1 || k < 1 || group < 1 || k % group)
        return rc_fail(e, RC_E_SHAPE, "quantized tensor '%s': group size %lld does not divide its %lld columns", name,
                       (long long)group, (long long)k);
    if (with_zero && family != RC_QF_AFFINE)
        return rc_fail(e, RC_E_USAGE, "quantized tensor '%s': integer zeros belong to the affine family", name);
    int64_t nk, ng;
    if (!rc_mul_i64(n, k, &nk) || !rc_mul_i64(n, k / group, &ng))
        return rc_fail(e, RC_E_RANGE, "quantized tensor '%s' is too large", name);
    t->family = family;
    t->bits = bits;
    t->n = n;
    t->k = k;
    t->group = group;
    t->name = strdup(name);
    t->q = rc_calloc(nk, 1, e, name);
    t->scale = rc_calloc(ng, sizeof *t->scale, e, name);
    if (family == RC_QF_AFFINE)
        t->offset = rc_calloc(ng, sizeof *t->offset, e, name);
    if (with_zero)
        t->zero = rc_calloc(ng, sizeof *t->zero, e, name);
    if (!t->name || !t->q || !t->scale || (family == RC_QF_AFFINE && !t->offset) || (with_zero && !t->zero)) {
        rc_qtensor_free(t);
        return rc_fail(e, RC_E_NOMEM, "out of host memory (quantized tensor '%s')", name);
    }
    return RC_OK;
}

void rc_qtensor_free(rc_qtensor *t)
{
    free(t->name);
    free(t->q);
    free(t->scale);
    free(t->offset);
    free(t->zero);
    memset(t, 0, sizeof *t);
}

void rc_qtensor_set_offsets(rc_qtensor *t)
{
    const int64_t ng = t->n * (t->k / t->group);
    for (int64_t i = 0; t->zero && i < ng; i++)
        t->offset[i] = rc_qf_offset(t->scale[i], t->zero[i]);
}

int rc_qtensor_check(const rc_qtensor *t, rc_err *e)
{
    const int lo = t->family == RC_QF_SCALE ? -(1 << (t->bits - 1)) : 0;
    const int hi = t->family == RC_QF_SCALE ? (1 << (t->bits - 1)) - 1 : (1 << t->bits) - 1;
    const int64_t G = t->k / t->group;
    for (int64_t i = 0; i < t->n * t->k; i++)
        if (t->q[i] < lo || t->q[i] > hi)
            return rc_fail(e, RC_E_FORMAT, "quantized tensor '%s': code %d at [%lld, %lld] is outside [%d, %d]",
                           t->name, t->q[i], (long long)(i / t->k), (long long)(i % t->k), lo, hi);
    for (int64_t i = 0; i < t->n * G; i++) {
        if (!isfinite(t->scale[i]) || (t->offset && !isfinite(t->offset[i])))
            return rc_fail(e, RC_E_FORMAT, "quantized tensor '%s': row %lld group %lld has a non-finite scale or "
                           "offset", t->name, (long long)(i / G), (long long)(i % G));
        if (t->zero && (t->zero[i] < 0 || t->zero[i] > (1 << t->bits)))
            return rc_fail(e, RC_E_FORMAT, "quantized tensor '%s': zero %d of row %lld group %lld is outside [0, %d]",
                           t->name, t->zero[i], (long long)(i / G), (long long)(i % G), 1 << t->bits);
    }
    return RC_OK;
}

void rc_qf_dequant_group(rc_qfamily family, float s, float m, const int8_t *q, int64_t n, float *out)
{
    if (family == RC_QF_SCALE)
        for (int64_t i = 0; i < n; i++)
            out[i] = rc_qf_scale(s, q[i]);
    else
        for (int64_t i = 0; i < n; i++)
            out[i] = rc_qf_affine(s, q[i], m);
}

void rc_qtensor_dequant(const rc_qtensor *t, float *out)
{
    const int64_t G = t->k / t->group;
    for (int64_t r = 0; r < t->n; r++)
        for (int64_t j = 0; j < G; j++) {
            const int64_t at = r * t->k + j * t->group;
            rc_qf_dequant_group(t->family, t->scale[r * G + j], t->offset ? t->offset[r * G + j] : 0.0f, t->q + at,
                                t->group, out + at);
        }
}

/* ---- schemes ---- */

/* The scheme named base (no suffix) into *s; 0 if base names none. */
static int scheme_base(const char *base, rc_quant_scheme *s)
{
    int g = 0, n = 0;
    if (!strcmp(base, "int8")) {
        *s = (rc_quant_scheme){.family = RC_QF_SCALE, .bits = 8, .group = 0};
        return 1;
    }
    if (sscanf(base, "int4-g%d%n", &g, &n) == 1 && (g == 32 || g == 64 || g == 128) &&
        (!base[n] || !strcmp(base + n, "-sym"))) {
        *s = (rc_quant_scheme){.family = base[n] ? RC_QF_SCALE : RC_QF_AFFINE, .bits = 4, .group = g};
        return 1;
    }
    return 0;
}

int rc_quant_scheme_parse(const char *name, rc_quant_scheme *s, rc_err *e)
{
    memset(s, 0, sizeof *s);
    static const char lm[] = "+lm_head";
    const size_t nl = strlen(name), ll = sizeof lm - 1;
    const int with_lm = nl > ll && !strcmp(name + nl - ll, lm);
    const size_t bl = nl - (with_lm ? ll : 0);
    char base[32];
    if (bl < sizeof base) {
        memcpy(base, name, bl);
        base[bl] = '\0';
        if (scheme_base(base, s)) {
            s->lm_head = with_lm;
            return RC_OK;
        }
    }
    memset(s, 0, sizeof *s);
    return rc_fail(e, RC_E_USAGE, "unknown quantization scheme '%s' (known: int8, int4-g32, int4-g64, int4-g128, "
                   "int4-gN-sym for symmetric int4; a '+lm_head' suffix quantizes lm_head too)", name);
}

const char *rc_quant_scheme_str(const rc_quant_scheme *s, char *buf, int cap)
{
    char g[24] = "";
    if (s->group)
        snprintf(g, sizeof g, "-g%lld", (long long)s->group);
    snprintf(buf, (size_t)cap, "int%d%s%s (%s, %s%s)", s->bits, g,
             s->bits == 4 && s->family == RC_QF_SCALE ? "-sym" : "", s->group ? "per group" : "per row",
             s->family == RC_QF_SCALE ? "symmetric" : s->gptq_v1 ? "asymmetric, gptq v1 zeros" : "asymmetric",
             s->lm_head ? ", lm_head quantized" : "");
    return buf;
}

/* ---- per-tensor policy ---- */

/* First match wins; a pattern matches the end of the HF name. */
static const struct {
    const char *suffix;
    rc_qpolicy cls;
    const char *why;
} policy[] = {
    {".bias", RC_QP_FULL, "biases: a vector added after the matmul"},
    {"norm.weight", RC_QP_FULL, "every norm (layer, q/k, gated, final): a vector scaling activations"},
    {"linear_attn.A_log", RC_QP_FULL, "feeds exp() of the decay: its error accumulates along time"},
    {"linear_attn.dt_bias", RC_QP_FULL, "feeds softplus of the decay: its error accumulates along time"},
    {"linear_attn.conv1d.weight", RC_QP_FULL, "depthwise conv taps: tiny, every token reads them"},
    {"layer_scalar", RC_QP_FULL, "a scalar"},
    {"linear_attn.in_proj_a.weight", RC_QP_KEEP, "feeds the decay gate exp(): small, error accumulates"},
    {"linear_attn.in_proj_b.weight", RC_QP_KEEP, "feeds the sigmoid write gate beta: small, error accumulates"},
    {"self_attn.q_proj.weight", RC_QP_QUANT, "attention projection"},
    {"self_attn.k_proj.weight", RC_QP_QUANT, "attention projection"},
    {"self_attn.v_proj.weight", RC_QP_QUANT, "attention projection"},
    {"self_attn.o_proj.weight", RC_QP_QUANT, "attention projection"},
    {"mlp.gate_proj.weight", RC_QP_QUANT, "MLP matrix"},
    {"mlp.up_proj.weight", RC_QP_QUANT, "MLP matrix"},
    {"mlp.down_proj.weight", RC_QP_QUANT, "MLP matrix"},
    {"linear_attn.in_proj_qkv.weight", RC_QP_QUANT, "gated delta net projection"},
    {"linear_attn.in_proj_z.weight", RC_QP_QUANT, "gated delta net projection"},
    {"linear_attn.out_proj.weight", RC_QP_QUANT, "gated delta net projection"},
    {"lm_head.weight", RC_QP_LM_HEAD, "the LM head: quantized only with the scheme's lm_head flag"},
    {"embed_tokens.weight", RC_QP_KEEP, "the embedding: a row gather, not a matmul (GPTQ leaves it)"},
    {"", RC_QP_KEEP, "anything else (per-layer embedding tables and projections): small, kept"},
};
#define N_POLICY ((int)(sizeof policy / sizeof policy[0]))

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

rc_qpolicy rc_quant_policy(const char *name, const char **why)
{
    int i = 0;
    while (i < N_POLICY - 1 && !ends_with(name, policy[i].suffix))
        i++;
    if (why)
        *why = policy[i].why;
    return policy[i].cls;
}

int rc_quant_policy_quantizes(const char *name, const rc_quant_scheme *s)
{
    const rc_qpolicy c = rc_quant_policy(name, NULL);
    return c == RC_QP_QUANT || (c == RC_QP_LM_HEAD && s->lm_head);
}

void rc_quant_policy_print(FILE *f)
{
    static const char *const cls[] = {"", "quantized", "kept", "lm_head flag", "full only"};
    for (int i = 0; i < N_POLICY; i++)
        fprintf(f, "  %-32s %-12s %s\n", policy[i].suffix[0] ? policy[i].suffix : "(other)", cls[policy[i].cls],
                policy[i].why);
}

/* ---- a model's quantized tensors ---- */

void rc_quant_free(rc_quant *q)
{
    for (int i = 0; i < q->n; i++)
        rc_qtensor_free(&q->t[i]);
    free(q->t);
    memset(q, 0, sizeof *q);
}

const rc_qtensor *rc_quant_find(const rc_quant *q, const char *name)
{
    for (int i = 0; i < q->n; i++)
        if (!strcmp(q->t[i].name, name))
            return &q->t[i];
    return NULL;
}
