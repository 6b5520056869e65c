/* GPU checker and micro-benchmark of the engine kernels engk_embed(_next), engk_rmsnorm(_bf16), engk_qkv_post,
 * engk_glu(_bf16) and the CUDA-core engk_matmul: each against its ref/ops.h op (the matmul also against
 * eng_dot_model, the warp's exact order: bit equality) on seeded inputs at tile edges and odd sizes, outputs NaN-poisoned before every launch.
 *   test_engk              every case, one line per output; exit 0 all pass, 1 a failure, 77 without a GPU
 *   test_engk --selftest   injected faults (an expected value nudged past its bound, a launch one row or column
 *                          short); exit 1 iff every one is detected, 0 if one slips through (meson: should_fail)
 *   test_engk --bench      us per call and GB/s at the llama3-8b shapes against the read ceiling of the run */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gemm.h"
#include "eng_hgemv.h"
#include "eng_kernels.h"
#include "eng_weights.h"
#include "engk_check.h"
#include "ops.h"

#define EPS 1e-6f

typedef enum { FAULT_NONE, FAULT_SHORT, FAULT_PERTURB } fault;

static const char *norm_name(int kind)
{
    static const char *names[] = {"W", "1PW", "POW_W", "POW"};
    return kind >= 0 && kind <= 3 ? names[kind] : "none";
}

static const char *act_name(int act) { return act == RC_ACT_GELU_TANH ? "gelu_tanh" : "silu"; }

/* Matrix / KV storage: bf16 (raw uint16) or fp32. */
static void *to_storage(const float *x, int64_t n, int f32)
{
    void *s = ekc_hmalloc(n, f32 ? 4 : 2);
    for (int64_t i = 0; i < n; i++) {
        if (f32)
            ((float *)s)[i] = x[i];
        else
            ((uint16_t *)s)[i] = eng_f32_to_bf16(x[i]);
    }
    return s;
}

static void from_storage(float *x, const void *s, int64_t n, int f32)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = f32 ? ((const float *)s)[i] : eng_bf16_to_f32(((const uint16_t *)s)[i]);
}

static void round_storage(float *x, int64_t n, int f32)
{
    for (int64_t i = 0; i < n && !f32; i++)
        x[i] = eng_bf16_to_f32(eng_f32_to_bf16(x[i]));
}

/* FAULT_PERTURB: move want[i] just past what the check accepts (one ulp when it wants bit equality). */
static void perturb(float *want, const float *bound, int64_t i)
{
    want[i] = bound ? (float)(want[i] + 2.0 * bound[i] + ekc_ulp(want[i])) : nextafterf(want[i], INFINITY);
}

/* ---- embedding gather: x[T, Hd] = E[ids[t]] (* scale), as ref/forward.c gathers it (ops.h has no gather) ---- */
typedef struct { int f32, Hd; float scale; } embed_case;

static int check_embed(const embed_case *c, unsigned long seed, fault f)
{
    const int V = 300, T = 7, Hd = c->Hd;
    float *E = ekc_hmalloc((int64_t)V * Hd, sizeof *E), *u = ekc_hmalloc(T, sizeof *u);
    ekc_fill(E, (int64_t)V * Hd, -1, 1, seed);
    ekc_fill(u, T, 0, 1, seed + 1);
    void *Es = to_storage(E, (int64_t)V * Hd, c->f32);
    round_storage(E, (int64_t)V * Hd, c->f32);
    int32_t ids[7];
    for (int t = 0; t < T; t++)
        ids[t] = (int32_t)(u[t] * V);
    ids[0] = 0, ids[1] = V - 1, ids[T - 1] = V - 1; /* both ends of the table, and a repeat */
    float *want = ekc_hmalloc((int64_t)T * Hd, sizeof *want), *got = ekc_hmalloc((int64_t)T * Hd, sizeof *got);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < Hd; i++) {
            const float v = E[(int64_t)ids[t] * Hd + i];
            want[(int64_t)t * Hd + i] = c->scale != 0.0f ? v * c->scale : v;
        }
    void *dE = ekc_to_dev(Es, (int64_t)V * Hd, c->f32 ? 4 : 2), *dids = ekc_to_dev(ids, T, sizeof ids[0]);
    float *dx = ekc_dev_alloc((int64_t)T * Hd, sizeof *dx);
    ekc_poison(dx, (int64_t)T * Hd, sizeof *dx);
    EKC_CU(engk_embed(dx, dE, c->f32, dids, f == FAULT_SHORT ? T - 1 : T, Hd, c->scale, 0));
    ekc_from_dev(got, dx, (int64_t)T * Hd, sizeof *got);
    if (f == FAULT_PERTURB)
        perturb(want, NULL, (int64_t)T * Hd - 1);
    char what[128];
    snprintf(what, sizeof what, "embed %s V=%d T=%d Hd=%d scale=%g (ids 0, V-1)", c->f32 ? "f32" : "bf16", V, T, Hd,
             (double)c->scale);
    const int fails = ekc_check(what, got, want, NULL, "the table row (x scale in fp32)", (int64_t)T * Hd);
    free(E); free(u); free(Es); free(want); free(got);
    ekc_dev_free(dE); ekc_dev_free(dids); ekc_dev_free(dx);
    return fails;
}

/* ---- a decode step's fed token and its row in one launch: x[Hd] = E[t] (* scale) for t = *next where it is a token
 * id (0 <= t < V), else row 0 (engk_feed_token's rule): both ends of the table, past it, negative (an all-NaN
 * step's -1), INT32_MAX ---- */
static int check_embed_next(const embed_case *c, unsigned long seed, fault f)
{
    const int V = 300, Hd = c->Hd;
    static const int32_t toks[] = {0, 5, 299, 300, -1, -7, 0x7fffffff};
    float *E = ekc_hmalloc((int64_t)V * Hd, sizeof *E);
    ekc_fill(E, (int64_t)V * Hd, -1, 1, seed);
    void *Es = to_storage(E, (int64_t)V * Hd, c->f32);
    round_storage(E, (int64_t)V * Hd, c->f32);
    float *want = ekc_hmalloc(Hd, sizeof *want), *got = ekc_hmalloc(Hd, sizeof *got);
    void *dE = ekc_to_dev(Es, (int64_t)V * Hd, c->f32 ? 4 : 2);
    float *dx = ekc_dev_alloc(Hd, sizeof *dx);
    int fails = 0;
    for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++) {
        const int32_t t = toks[k], row = t >= 0 && t < V ? t : 0;
        for (int i = 0; i < Hd; i++) {
            const float v = E[(int64_t)row * Hd + i];
            want[i] = c->scale != 0.0f ? v * c->scale : v;
        }
        int32_t *dnext = ekc_to_dev(&t, 1, sizeof t);
        ekc_poison(dx, Hd, sizeof *dx);
        EKC_CU(engk_embed_next(dx, dE, c->f32, dnext, V, f == FAULT_SHORT ? Hd - 1 : Hd, c->scale, 0));
        ekc_from_dev(got, dx, Hd, sizeof *got);
        if (f == FAULT_PERTURB)
            perturb(want, NULL, Hd - 1);
        char what[128];
        snprintf(what, sizeof what, "embed_next %s V=%d Hd=%d scale=%g next=%d (row %d)", c->f32 ? "f32" : "bf16", V,
                 Hd, (double)c->scale, (int)t, (int)row);
        fails += ekc_check(what, got, want, NULL, "the table row (x scale in fp32)", Hd);
        ekc_dev_free(dnext);
    }
    free(E); free(Es); free(want); free(got);
    ekc_dev_free(dE); ekc_dev_free(dx);
    return fails;
}

/* ---- RMSNorm, every rc_norm_kind, vs ref_rmsnorm ----
 * Bound: the engine sums squares in fp32 (n / threads fmaf per thread, the 5-step butterfly, then `partials`
 * warp partials in order: a chain of L roundings, relative error <= L u since every term is positive) where ref
 * sums in double; mean, +eps and the fp32-rounded 1/sqrt add 2u on each side, the square root halves the
 * difference, and x*inv, *w round the same ops on different inputs: |engine - ref| <= (L/2 + 9) u |ref|. */
static double norm_bound_k(int n, int threads, int partials)
{
    const int L = (n + threads - 1) / threads + 5 + partials;
    return ceil(L / 2.0) + 9.0;
}

typedef struct { int kind, rows, n, inplace; double xmag; } norm_case;

/* x [rows, n] in (-xmag, xmag); w [n] around 1 (around 0 for (1 + w)), NULL for RC_NORM_POW. */
static void norm_inputs(const norm_case *c, unsigned long seed, float **x, float **w)
{
    const int64_t len = (int64_t)c->rows * c->n;
    *x = ekc_hmalloc(len, sizeof **x);
    *w = c->kind == RC_NORM_POW ? NULL : ekc_hmalloc(c->n, sizeof **w);
    ekc_fill(*x, len, -c->xmag, c->xmag, seed);
    if (*w)
        ekc_fill(*w, c->n, c->kind == RC_NORM_1PW ? -0.5 : 0.5, c->kind == RC_NORM_1PW ? 0.5 : 1.5, seed + 1);
}

static int check_rmsnorm(const norm_case *c, unsigned long seed, fault f)
{
    const int64_t rows = c->rows, n = c->n, len = rows * n;
    float *x, *w;
    norm_inputs(c, seed, &x, &w);
    float *want = ekc_hmalloc(len, sizeof *want), *got = ekc_hmalloc(len, sizeof *got);
    float *bound = ekc_hmalloc(len, sizeof *bound);
    ref_rmsnorm(want, x, w, rows, n, EPS, (rc_norm_kind)c->kind);
    const double k = norm_bound_k(c->n, 256, 8); /* a block of 256 threads, 8 warps */
    for (int64_t i = 0; i < len; i++)
        bound[i] = (float)(k * EKC_U * fabs(want[i]));
    float *dx = ekc_to_dev(x, len, sizeof *x), *dw = w ? ekc_to_dev(w, n, sizeof *w) : NULL;
    float *dy = dx;
    if (!c->inplace) {
        dy = ekc_dev_alloc(len, sizeof *dy);
        ekc_poison(dy, len, sizeof *dy);
    }
    EKC_CU(engk_rmsnorm(dy, dx, dw, f == FAULT_SHORT ? c->rows - 1 : c->rows, c->n, EPS, c->kind, 0));
    ekc_from_dev(got, dy, len, sizeof *got);
    if (f == FAULT_PERTURB)
        perturb(want, bound, len / 2);
    char what[128], rule[64];
    snprintf(what, sizeof what, "rmsnorm %-5s rows=%-2d n=%-4d |x|<%g%s", norm_name(c->kind), c->rows, c->n, c->xmag,
             c->inplace ? " in place" : "");
    snprintf(rule, sizeof rule, "%.0f u |ref|", k);
    const int fails = ekc_check(what, got, want, bound, rule, len);
    free(x); free(w); free(want); free(got); free(bound);
    ekc_dev_free(dx);
    if (dw)
        ekc_dev_free(dw);
    if (!c->inplace)
        ekc_dev_free(dy);
    return fails;
}

/* ---- the bf16-writing variants (the prefill GEMM's input): fp32 output bit-equal to the fp32 kernel's, bf16 output
 * bit-equal to the host's round-to-nearest-even of it, with and without the fp32 copy ---- */
/* got: bf16 [n] on the device (decoded); want: the fp32 kernel's output, rounded here. */
static int check_bf16_of(const char *what, const void *dgot, const float *ref32, int64_t n, fault f)
{
    uint16_t *raw = ekc_hmalloc(n, 2);
    float *got = ekc_hmalloc(n, 4), *want = ekc_hmalloc(n, 4);
    ekc_from_dev(raw, dgot, n, 2);
    from_storage(got, raw, n, 0);
    for (int64_t i = 0; i < n; i++)
        want[i] = eng_bf16_to_f32(eng_f32_to_bf16(ref32[i]));
    if (f == FAULT_PERTURB)
        perturb(want, NULL, n / 2);
    const int fails = ekc_check(what, got, want, NULL, "bf16(the fp32 kernel's output)", n);
    free(raw); free(got); free(want);
    return fails;
}

static int check_rmsnorm_bf16(const norm_case *c, unsigned long seed, fault f)
{
    const int64_t rows = c->rows, n = c->n, len = rows * n;
    float *x, *w;
    norm_inputs(c, seed, &x, &w);
    float *dx = ekc_to_dev(x, len, 4), *dw = w ? ekc_to_dev(w, n, 4) : NULL;
    float *dref = ekc_dev_alloc(len, 4), *dy = ekc_dev_alloc(len, 4);
    void *dyb = ekc_dev_alloc(len, 2);
    float *ref = ekc_hmalloc(len, 4), *got = ekc_hmalloc(len, 4);
    ekc_poison(dref, len, 4);
    EKC_CU(engk_rmsnorm(dref, dx, dw, c->rows, c->n, EPS, c->kind, 0));
    ekc_from_dev(ref, dref, len, 4);
    const int r = f == FAULT_SHORT ? c->rows - 1 : c->rows;
    char what[128];
    int fails = 0;
    for (int keep = 1; keep >= 0; keep--) {
        ekc_poison(dy, len, 4);
        ekc_poison(dyb, len, 2);
        EKC_CU(engk_rmsnorm_bf16(dyb, keep ? dy : NULL, dx, dw, r, c->n, EPS, c->kind, 0));
        snprintf(what, sizeof what, "rmsnorm_bf16 %-5s rows=%-2d n=%-4d%s: bf16", norm_name(c->kind), c->rows, c->n,
                 keep ? " +fp32" : "");
        fails += check_bf16_of(what, dyb, ref, len, f);
        if (keep) {
            ekc_from_dev(got, dy, len, 4);
            snprintf(what, sizeof what, "rmsnorm_bf16 %-5s rows=%-2d n=%-4d +fp32: fp32", norm_name(c->kind), c->rows,
                     c->n);
            fails += ekc_check(what, got, ref, NULL, "engk_rmsnorm", len);
        }
    }
    if (engk_rmsnorm_bf16(NULL, dy, dx, dw, c->rows, c->n, EPS, c->kind, 0) != cudaErrorInvalidValue) {
        printf("  rmsnorm_bf16 without a bf16 output was not refused  FAIL\n");
        fails++;
    }
    free(x); free(w); free(ref); free(got);
    ekc_dev_free(dx); ekc_dev_free(dref); ekc_dev_free(dy); ekc_dev_free(dyb);
    if (dw)
        ekc_dev_free(dw);
    return fails;
}

/* ---- q/k norm + RoPE + KV store vs ref_rmsnorm per head, ref_rope_apply and the host bf16 rounding ----
 * kind < 0: no q/k norm; then q is bit-equal to ref_rope_apply and K/V to its bf16 (or fp32) storage. With a
 * norm, the per-head norm's relative error k u (norm_bound_k over D with 32 lanes) goes through one rotation
 * (two products and a sum, rounded on different inputs): (k + 5) u (|x1 c| + |x2 s|); bf16 K adds one bf16 ulp. */
typedef struct { int T, H, Hkv, D, rot, f32, kind; } post_case;

static void rope_tables(float *rc, float *rs, float *ec, float *es, int T, int rot)
{
    const int half = rot / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            const double ang = (double)(3 + 37 * t) * pow(10000.0, -2.0 * i / rot);
            const float c = (float)cos(ang), s = (float)sin(ang);
            rc[t * rot + i] = rc[t * rot + i + half] = ec[t * half + i] = c;
            rs[t * rot + i] = rs[t * rot + i + half] = es[t * half + i] = s;
        }
}

static void rope_bound(float *bound, const float *nx, const float *rc, const float *rs, int T, int heads, int D,
                       int rot, double k)
{
    const int half = rot / 2;
    for (int64_t r = 0; r < (int64_t)T * heads; r++) {
        const int t = (int)(r / heads);
        const float *v = nx + r * D;
        for (int d = 0; d < D; d++) {
            double mag;
            if (d < rot) {
                const int i = d % half;
                const double c = rc[t * rot + i], s = rs[t * rot + i];
                mag = d < half ? fabs(v[i] * c) + fabs(v[i + half] * s) : fabs(v[i + half] * c) + fabs(v[i] * s);
                mag *= k + 5.0;
            } else {
                mag = (k + 1.0) * fabs(v[d]);
            }
            bound[r * D + d] = (float)(EKC_U * mag);
        }
    }
}

/* Splits qkv [T, (H + 2 Hkv) D] into q [T, H, D], k, v [T, Hkv, D]. */
static void split_qkv(float *q, float *k, float *v, const float *qkv, int T, int H, int Hkv, int D)
{
    const int64_t row = (int64_t)(H + 2 * Hkv) * D, qd = (int64_t)H * D, kd = (int64_t)Hkv * D;
    for (int t = 0; t < T; t++) {
        memcpy(q + t * qd, qkv + t * row, (size_t)qd * sizeof *q);
        memcpy(k + t * kd, qkv + t * row + qd, (size_t)kd * sizeof *k);
        memcpy(v + t * kd, qkv + t * row + qd + kd, (size_t)kd * sizeof *v);
    }
}

static int check_qkv_post(const post_case *c, unsigned long seed, fault f)
{
    const int T = c->T, H = c->H, Hkv = c->Hkv, D = c->D, rot = c->rot, norm = c->kind >= 0;
    const int64_t qn_ = (int64_t)T * H * D, kn_ = (int64_t)T * Hkv * D, all = qn_ + 2 * kn_;
    const size_t elt = c->f32 ? 4 : 2;
    float *qkv = ekc_hmalloc(all, sizeof *qkv), *wq = ekc_hmalloc(D, sizeof *wq), *wk = ekc_hmalloc(D, sizeof *wk);
    ekc_fill(qkv, all, -2, 2, seed);
    ekc_fill(wq, D, c->kind == RC_NORM_1PW ? -0.5 : 0.5, c->kind == RC_NORM_1PW ? 0.5 : 1.5, seed + 1);
    ekc_fill(wk, D, c->kind == RC_NORM_1PW ? -0.5 : 0.5, c->kind == RC_NORM_1PW ? 0.5 : 1.5, seed + 2);
    float *rc = ekc_hmalloc((int64_t)T * rot, 4), *rs = ekc_hmalloc((int64_t)T * rot, 4);
    float *ec = ekc_hmalloc((int64_t)T * rot / 2, 4), *es = ekc_hmalloc((int64_t)T * rot / 2, 4);
    rope_tables(rc, rs, ec, es, T, rot);

    float *q = ekc_hmalloc(qn_, 4), *k = ekc_hmalloc(kn_, 4), *v = ekc_hmalloc(kn_, 4);
    split_qkv(q, k, v, qkv, T, H, Hkv, D);
    float *bq = NULL, *bk = NULL;
    if (norm) { /* normalized, not yet rotated: what the bounds are measured on */
        const double kk = norm_bound_k(D, 32, 0); /* one warp per head */
        ref_rmsnorm(q, q, wq, (int64_t)T * H, D, EPS, (rc_norm_kind)c->kind);
        ref_rmsnorm(k, k, wk, (int64_t)T * Hkv, D, EPS, (rc_norm_kind)c->kind);
        bq = ekc_hmalloc(qn_, 4), bk = ekc_hmalloc(kn_, 4);
        rope_bound(bq, q, rc, rs, T, H, D, rot, kk);
        rope_bound(bk, k, rc, rs, T, Hkv, D, rot, kk);
    }
    ref_rope_apply(q, rc, rs, T, H, D, rot);
    ref_rope_apply(k, rc, rs, T, Hkv, D, rot);
    for (int64_t i = 0; bk && !c->f32 && i < kn_; i++)
        bk[i] = (float)(bk[i] + ekc_ulp_bf16(fabs(k[i]) + bk[i]));
    round_storage(k, kn_, c->f32);
    round_storage(v, kn_, c->f32);

    float *dqkv = ekc_to_dev(qkv, all, 4), *dwq = ekc_to_dev(wq, D, 4), *dwk = ekc_to_dev(wk, D, 4);
    float *dec = ekc_to_dev(ec, (int64_t)T * rot / 2, 4), *des = ekc_to_dev(es, (int64_t)T * rot / 2, 4);
    float *dq = ekc_dev_alloc(qn_, 4);
    void *dk = ekc_dev_alloc(kn_, elt), *dv = ekc_dev_alloc(kn_, elt);
    ekc_poison(dq, qn_, 4);
    ekc_poison(dk, kn_, elt);
    ekc_poison(dv, kn_, elt);
    EKC_CU(engk_qkv_post(dqkv, dq, dk, dv, c->f32, norm ? dwq : NULL, norm ? dwk : NULL, norm ? c->kind : 0, EPS, dec,
                         des, f == FAULT_SHORT ? T - 1 : T, H, Hkv, D, rot, 0));
    float *gq = ekc_hmalloc(qn_, 4), *gk = ekc_hmalloc(kn_, 4), *gv = ekc_hmalloc(kn_, 4);
    void *raw = ekc_hmalloc(kn_, elt);
    ekc_from_dev(gq, dq, qn_, 4);
    ekc_from_dev(raw, dk, kn_, elt);
    from_storage(gk, raw, kn_, c->f32);
    ekc_from_dev(raw, dv, kn_, elt);
    from_storage(gv, raw, kn_, c->f32);
    if (f == FAULT_PERTURB)
        perturb(q, bq, qn_ - 1);

    char what[128], rule[64];
    const char *kv = c->f32 ? "f32" : "bf16";
    int fails = 0;
    snprintf(rule, sizeof rule, "%.0f u (|x1 c|+|x2 s|)", norm_bound_k(D, 32, 0) + 5.0);
    snprintf(what, sizeof what, "qkv_post T=%-2d H=%d/%d D=%d rot=%d %s norm=%s: q", T, H, Hkv, D, rot, kv,
             norm_name(c->kind));
    fails += ekc_check(what, gq, q, bq, norm ? rule : "ref_rope_apply", qn_);
    what[strlen(what) - 1] = 'k';
    if (!c->f32 && norm)
        snprintf(rule, sizeof rule, "%.0f u (|x1 c|+|x2 s|) + 1 bf16 ulp", norm_bound_k(D, 32, 0) + 5.0);
    fails += ekc_check(what, gk, k, bk, norm ? rule : c->f32 ? "ref_rope_apply" : "bf16(ref_rope_apply)", kn_);
    what[strlen(what) - 1] = 'v';
    fails += ekc_check(what, gv, v, NULL, c->f32 ? "the v columns" : "bf16(the v columns)", kn_);

    free(qkv); free(wq); free(wk); free(rc); free(rs); free(ec); free(es); free(q); free(k); free(v);
    free(bq); free(bk); free(gq); free(gk); free(gv); free(raw);
    ekc_dev_free(dqkv); ekc_dev_free(dwq); ekc_dev_free(dwk); ekc_dev_free(dec); ekc_dev_free(des);
    ekc_dev_free(dq); ekc_dev_free(dk); ekc_dev_free(dv);
    return fails;
}

/* ---- GLU vs ref_glu ----
 * Both evaluate the activation in double (the device's exp/tanh within 2 ulp of double) and round it to fp32:
 * the fp32 activations differ by at most one ulp, so out = act * up by 4 u |ref| (5 with second-order terms); GELU's 1 + tanh cancels for
 * very negative gates, which the absolute term 2^-50 |gate up| covers (2^-52 |gate| per ulp of tanh). */
typedef struct { int T, I, act; } glu_case;

static int check_glu(const glu_case *c, unsigned long seed, fault f)
{
    const int T = c->T, I = c->I;
    const int64_t n = (int64_t)T * I;
    float *g = ekc_hmalloc(n, 4), *u = ekc_hmalloc(n, 4), *gu = ekc_hmalloc(2 * n, 4);
    ekc_fill(g, n, -12, 12, seed);
    ekc_fill(u, n, -2, 2, seed + 1);
    for (int t = 0; t < T; t++) {
        memcpy(gu + (int64_t)t * 2 * I, g + (int64_t)t * I, (size_t)I * 4);
        memcpy(gu + (int64_t)t * 2 * I + I, u + (int64_t)t * I, (size_t)I * 4);
    }
    float *want = ekc_hmalloc(n, 4), *got = ekc_hmalloc(n, 4), *bound = ekc_hmalloc(n, 4);
    ref_glu(want, g, u, n, (rc_act)c->act);
    for (int64_t i = 0; i < n; i++)
        bound[i] = (float)(5.0 * EKC_U * fabs(want[i]) + 0x1p-50 * fabs((double)g[i] * u[i]));
    float *dgu = ekc_to_dev(gu, 2 * n, 4), *dout = ekc_dev_alloc(n, 4);
    ekc_poison(dout, n, 4);
    EKC_CU(engk_glu(dout, dgu, f == FAULT_SHORT ? T - 1 : T, I, c->act, 0));
    ekc_from_dev(got, dout, n, 4);
    if (f == FAULT_PERTURB)
        perturb(want, bound, n / 3);
    char what[128];
    snprintf(what, sizeof what, "glu %-9s T=%-2d I=%d (|gate|<12)", act_name(c->act), T, I);
    const int fails = ekc_check(what, got, want, bound, "5 u |ref| + 2^-50 |gate up|", n);
    free(g); free(u); free(gu); free(want); free(got); free(bound);
    ekc_dev_free(dgu); ekc_dev_free(dout);
    return fails;
}

/* engk_glu_bf16in (gate|up in bf16, from the bf16-output GEMM): both outputs bit-equal to engk_glu_bf16's on the
 * same values widened to fp32; refused without a bf16 output or on a gu not 16-byte aligned. */
static int check_glu_bf16in(const glu_case *c, const float *gu32, fault f)
{
    const int T = c->T, I = c->I;
    const int64_t n = (int64_t)T * I;
    uint16_t *g16 = ekc_hmalloc(2 * n + 8, 2);
    float *wide = ekc_hmalloc(2 * n, 4), *ref = ekc_hmalloc(n, 4), *got = ekc_hmalloc(n, 4);
    for (int64_t i = 0; i < 2 * n; i++) {
        g16[i] = eng_f32_to_bf16(gu32[i]);
        wide[i] = eng_bf16_to_f32(g16[i]);
    }
    float *dwide = ekc_to_dev(wide, 2 * n, 4), *dref = ekc_dev_nan(n, 4), *dout = ekc_dev_nan(n, 4);
    uint16_t *dg16 = ekc_to_dev(g16, 2 * n + 8, 2), *drefb = ekc_dev_nan(n, 2), *doutb = ekc_dev_nan(n, 2);
    EKC_CU(engk_glu_bf16(drefb, dref, dwide, T, I, c->act, 0));
    EKC_CU(engk_glu_bf16in(doutb, dout, dg16, f == FAULT_SHORT ? T - 1 : T, I, c->act, 0));
    char what[128];
    ekc_from_dev(ref, dref, n, 4);
    ekc_from_dev(got, dout, n, 4);
    if (f == FAULT_PERTURB)
        perturb(ref, NULL, n / 2);
    snprintf(what, sizeof what, "glu_bf16in %-9s T=%-2d I=%d: fp32", act_name(c->act), T, I);
    int fails = ekc_check(what, got, ref, NULL, "engk_glu_bf16 on the widened values", n);
    uint16_t *rb = ekc_hmalloc(n, 2), *gb = ekc_hmalloc(n, 2);
    ekc_from_dev(rb, drefb, n, 2);
    ekc_from_dev(gb, doutb, n, 2);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += rb[i] != gb[i];
    if (bad) {
        printf("  glu_bf16in %s T=%d I=%d: %lld of %lld bf16 outputs differ from engk_glu_bf16's  FAIL\n",
               act_name(c->act), T, I, (long long)bad, (long long)n);
        fails++;
    }
    if (engk_glu_bf16in(NULL, dout, dg16, T, I, c->act, 0) != cudaErrorInvalidValue ||
        engk_glu_bf16in(doutb, dout, dg16 + 1, T, I, c->act, 0) != cudaErrorInvalidValue) {
        printf("  glu_bf16in without a bf16 output or on a misaligned gu was not refused  FAIL\n");
        fails++;
    }
    free(g16); free(wide); free(ref); free(got); free(rb); free(gb);
    ekc_dev_free(dwide); ekc_dev_free(dref); ekc_dev_free(dout); ekc_dev_free(dg16); ekc_dev_free(drefb);
    ekc_dev_free(doutb);
    return fails;
}

static int check_glu_bf16(const glu_case *c, unsigned long seed, fault f)
{
    const int T = c->T, I = c->I;
    const int64_t n = (int64_t)T * I;
    float *gu = ekc_hmalloc(2 * n, 4), *ref = ekc_hmalloc(n, 4), *got = ekc_hmalloc(n, 4);
    for (int t = 0; t < T; t++) {
        ekc_fill(gu + (int64_t)t * 2 * I, I, -12, 12, seed + (unsigned long)t);
        ekc_fill(gu + (int64_t)t * 2 * I + I, I, -2, 2, seed + 100000 + (unsigned long)t);
    }
    float *dgu = ekc_to_dev(gu, 2 * n, 4), *dref = ekc_dev_alloc(n, 4), *dout = ekc_dev_alloc(n, 4);
    void *doutb = ekc_dev_alloc(n, 2);
    ekc_poison(dref, n, 4);
    EKC_CU(engk_glu(dref, dgu, T, I, c->act, 0));
    ekc_from_dev(ref, dref, n, 4);
    char what[128];
    int fails = 0;
    for (int keep = 1; keep >= 0; keep--) {
        ekc_poison(dout, n, 4);
        ekc_poison(doutb, n, 2);
        EKC_CU(engk_glu_bf16(doutb, keep ? dout : NULL, dgu, f == FAULT_SHORT ? T - 1 : T, I, c->act, 0));
        snprintf(what, sizeof what, "glu_bf16 %-9s T=%-2d I=%d%s: bf16", act_name(c->act), T, I, keep ? " +fp32" : "");
        fails += check_bf16_of(what, doutb, ref, n, f);
        if (keep) {
            ekc_from_dev(got, dout, n, 4);
            snprintf(what, sizeof what, "glu_bf16 %-9s T=%-2d I=%d +fp32: fp32", act_name(c->act), T, I);
            fails += ekc_check(what, got, ref, NULL, "engk_glu", n);
        }
    }
    if (I % 8 == 0 && f == FAULT_NONE) { /* k_glu8 vs the one-element kernel on the same pairs, padded to I + 1 */
        const int J = I + 1;
        float *gp = ekc_hmalloc((int64_t)T * 2 * J, 4), *sc = ekc_hmalloc((int64_t)T * J, 4);
        for (int t = 0; t < T; t++) {
            memcpy(gp + (int64_t)t * 2 * J, gu + (int64_t)t * 2 * I, (size_t)I * 4);
            memcpy(gp + (int64_t)t * 2 * J + J, gu + (int64_t)t * 2 * I + I, (size_t)I * 4);
        }
        float *dgp = ekc_to_dev(gp, (int64_t)T * 2 * J, 4), *dsc = ekc_dev_alloc((int64_t)T * J, 4);
        ekc_poison(dsc, (int64_t)T * J, 4);
        EKC_CU(engk_glu(dsc, dgp, T, J, c->act, 0));
        ekc_from_dev(sc, dsc, (int64_t)T * J, 4);
        for (int t = 0; t < T; t++)
            memmove(sc + (int64_t)t * I, sc + (int64_t)t * J, (size_t)I * 4);
        snprintf(what, sizeof what, "glu %-9s T=%-2d I=%d: 8-wide kernel", act_name(c->act), T, I);
        fails += ekc_check(what, ref, sc, NULL, "the one-element kernel (I + 1 columns)", n);
        free(gp); free(sc);
        ekc_dev_free(dgp); ekc_dev_free(dsc);
    }
    if (engk_glu_bf16(NULL, dout, dgu, T, I, c->act, 0) != cudaErrorInvalidValue) {
        printf("  glu_bf16 without a bf16 output was not refused  FAIL\n");
        fails++;
    }
    fails += check_glu_bf16in(c, gu, f);
    free(gu); free(ref); free(got);
    ekc_dev_free(dgu); ekc_dev_free(dref); ekc_dev_free(dout); ekc_dev_free(doutb);
    return fails;
}

/* ---- CUDA-core matmul: bit-equal to eng_dot_model (+ b, then res + y, in fp32, as the kernel), and within
 * (L + 6) u (sum |w x| + |b| + |res|) of ref_matmul: L = 8 ceil(K / 256) + 5 roundings on a lane's path, the
 * bias and residual adds on each side and ref's one rounding ---- */
typedef struct { int T, N, K, f32, bias, res; } mm_case; /* res: 0 none, 1 separate buffer, 2 aliases y */

static int check_matmul(const mm_case *c, unsigned long seed, fault f)
{
    const int T = c->T, N = c->N, K = c->K;
    const int64_t nx = (int64_t)T * K, nw = (int64_t)N * K, ny = (int64_t)T * N;
    const size_t elt = c->f32 ? 4 : 2;
    float *x = ekc_hmalloc(nx, 4), *W = ekc_hmalloc(nw, 4), *b = ekc_hmalloc(N, 4), *r = ekc_hmalloc(ny, 4);
    ekc_fill(x, nx, -1, 1, seed);
    ekc_fill(W, nw, -1, 1, seed + 1);
    ekc_fill(b, N, -1, 1, seed + 2);
    ekc_fill(r, ny, -4, 4, seed + 3);
    void *Ws = to_storage(W, nw, c->f32);
    round_storage(W, nw, c->f32);
    const float *bp = c->bias ? b : NULL;
    float *model = ekc_hmalloc(ny, 4), *ref = ekc_hmalloc(ny, 4), *bound = ekc_hmalloc(ny, 4);
    ref_matmul(ref, x, W, bp, T, N, K);
    const int L = 8 * ((K + 255) / 256) + 5;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < N; j++) {
            const int64_t o = (int64_t)t * N + j;
            float v = eng_dot_model((const char *)Ws + (int64_t)j * K * elt, c->f32, x + (int64_t)t * K, K);
            if (bp)
                v = v + bp[j];
            double mag = bp ? fabs(bp[j]) : 0.0;
            for (int kk = 0; kk < K; kk++)
                mag += fabs((double)W[(int64_t)j * K + kk] * x[(int64_t)t * K + kk]);
            if (c->res) {
                v = r[o] + v;
                ref[o] = r[o] + ref[o];
                mag += fabs(r[o]);
            }
            model[o] = v;
            bound[o] = (float)((L + 6) * EKC_U * mag);
        }
    float *dx = ekc_to_dev(x, nx, 4), *db = ekc_to_dev(b, N, 4), *dr = ekc_to_dev(r, ny, 4);
    void *dW = ekc_to_dev(Ws, nw, elt);
    float *dy = dr;
    if (c->res != 2) {
        dy = ekc_dev_alloc(ny, 4);
        ekc_poison(dy, ny, 4);
    }
    /* short launch: one row fewer, or at T = 1 one column fewer (the last output stays NaN) */
    const int Tl = f == FAULT_SHORT && T > 1 ? T - 1 : T, Nl = f == FAULT_SHORT && T == 1 ? N - 1 : N;
    EKC_CU(engk_matmul(dy, dx, dW, c->f32, c->bias ? db : NULL, c->res ? dr : NULL, Tl, Nl, K, 0));
    float *got = ekc_hmalloc(ny, 4);
    ekc_from_dev(got, dy, ny, 4);
    if (f == FAULT_PERTURB)
        perturb(model, NULL, ny - 1);
    static const char *res_name[] = {"", " +res", " +res(=y)"};
    char what[128];
    snprintf(what, sizeof what, "matmul %s T=%d N=%d K=%d%s%s", c->f32 ? "f32" : "bf16", T, N, K,
             c->bias ? " +bias" : "", res_name[c->res]);
    const size_t len = strlen(what);
    snprintf(what + len, sizeof what - len, ": model");
    int fails = ekc_check(what, got, model, NULL, "eng_dot_model", ny);
    snprintf(what + len, sizeof what - len, ": ref");
    char rule[64];
    snprintf(rule, sizeof rule, "%d u (sum|wx| + |b| + |res|)", L + 6);
    fails += ekc_check(what, got, ref, bound, rule, ny);
    free(x); free(W); free(b); free(r); free(Ws); free(model); free(ref); free(bound); free(got);
    ekc_dev_free(dx); ekc_dev_free(db); ekc_dev_free(dr); ekc_dev_free(dW);
    if (c->res != 2)
        ekc_dev_free(dy);
    return fails;
}

/* ---- the cases ---- */
static const embed_case embed_cases[] = {
    {0, 8, 0.0f}, {0, 264, 0.0f}, {0, 4104, 0.0f}, {1, 8, 0.0f}, {1, 264, 0.0f}, {1, 4104, 0.0f},
    {0, 8, 2.828427f}, {0, 264, 16.248077f}, {0, 4104, 64.062469f}, {1, 8, 2.828427f}, {1, 264, 16.248077f},
    {1, 4104, 64.062469f}, {0, 2048, 0.0f}, {1, 1025, 0.0f}, /* two whole blocks of 1024 values; one and a value */
};

static const post_case post_cases[] = { /* T, H, Hkv, D, rot, f32, q/k norm kind (-1 none); D % 8 == 0 */
    {1, 32, 8, 128, 128, 0, -1},        {7, 32, 8, 128, 128, 1, -1},       {33, 32, 8, 128, 96, 0, -1},
    {9, 4, 1, 256, 128, 0, -1},         {7, 6, 6, 64, 64, 1, -1},          {9, 8, 2, 128, 128, 0, RC_NORM_W},
    {33, 4, 4, 64, 32, 0, RC_NORM_W},   {1, 12, 3, 64, 64, 1, RC_NORM_W},  {7, 5, 1, 256, 64, 1, RC_NORM_1PW},
    {7, 16, 16, 128, 128, 1, RC_NORM_1PW}, {9, 10, 2, 256, 256, 0, RC_NORM_POW_W},
    {1, 40, 8, 64, 64, 0, RC_NORM_POW_W}, {3, 2, 2, 8, 8, 0, -1},         {7, 3, 1, 24, 24, 1, -1},
    {5, 5, 3, 72, 40, 0, RC_NORM_W},     {2, 3, 1, 512, 128, 0, -1},
};

static const mm_case mm_cases[] = { /* T, N, K, f32, bias, res */
    {1, 13, 8, 0, 0, 0},     {1, 37, 248, 1, 1, 1},   {1, 1000, 1032, 0, 1, 2}, {1, 4101, 4096, 0, 0, 0},
    {1, 9, 1024, 1, 0, 2},   {7, 13, 256, 0, 1, 0},   {7, 37, 264, 1, 0, 2},    {8, 64, 1024, 0, 0, 1},
    {9, 37, 1016, 0, 1, 2},  {9, 9, 2056, 1, 1, 1},   {9, 3, 8, 1, 0, 1},       {17, 100, 264, 0, 0, 0},
    {33, 259, 1032, 1, 1, 2}, {7, 1, 4104, 0, 1, 1},
};

static int run_all(void)
{
    int fails = 0, checks = 0;
    unsigned long seed = 1000;
    printf("engk_embed vs the table rows (bf16 decoded, fp32 scale)\n");
    for (size_t i = 0; i < sizeof embed_cases / sizeof embed_cases[0]; i++, checks++)
        fails += check_embed(&embed_cases[i], seed += 10, FAULT_NONE);
    printf("engk_embed_next vs the table row of the fed token (row 0 for a token outside the table)\n");
    for (size_t i = 0; i < sizeof embed_cases / sizeof embed_cases[0]; i++, checks++)
        fails += check_embed_next(&embed_cases[i], seed += 10, FAULT_NONE);

    printf("engk_rmsnorm vs ref_rmsnorm (n odd multiples of 8, never of 256; rows 1/7/33)\n");
    static const int ns[] = {8, 24, 264, 4104}, rows[] = {1, 7, 33};
    for (int kind = RC_NORM_W; kind <= RC_NORM_POW; kind++)
        for (int a = 0; a < 4; a++)
            for (int r = 0; r < 3; r++, checks++) {
                const norm_case c = {kind, rows[r], ns[a], rows[r] == 7 && ns[a] == 24, 2.0};
                fails += check_rmsnorm(&c, seed += 10, FAULT_NONE);
            }
    static const norm_case extra[] = {{RC_NORM_W, 33, 4096, 0, 2.0}, {RC_NORM_W, 7, 264, 0, 1e-4},
                                      {RC_NORM_POW, 7, 4104, 1, 1e-4}, {RC_NORM_1PW, 1, 4104, 0, 300.0}};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++, checks++)
        fails += check_rmsnorm(&extra[i], seed += 10, FAULT_NONE);

    printf("engk_rmsnorm_bf16: fp32 bit-equal to engk_rmsnorm, bf16 to its rounding (n <= 4096: row in registers)\n");
    static const int nb[] = {8, 264, 4096, 4104, 8200};
    for (int kind = RC_NORM_W; kind <= RC_NORM_POW; kind++)
        for (int a = 0; a < 5; a++, checks++) {
            const norm_case c = {kind, a % 2 ? 33 : 7, nb[a], 0, 2.0};
            fails += check_rmsnorm_bf16(&c, seed += 10, FAULT_NONE);
        }

    for (int k = 0; k < 2; k++) { /* both prefill kernels: loads up front (k_qkv_post_rows), the previous one */
        engk_qkv_post_kernel(1 - k);
        printf("engk_qkv_post (%s) vs ref_rmsnorm per head + ref_rope_apply (+ bf16 rounding of K/V)\n",
               k ? "k_qkv_post" : "k_qkv_post_rows");
        for (size_t i = 0; i < sizeof post_cases / sizeof post_cases[0]; i++, checks += 3)
            fails += check_qkv_post(&post_cases[i], seed += 10, FAULT_NONE);
    }
    engk_qkv_post_kernel(-1);
    checks++;
    if (engk_qkv_post(NULL, NULL, NULL, NULL, 0, NULL, NULL, 0, EPS, NULL, NULL, 1, 1, 1, 12, 12, 0) !=
        cudaErrorInvalidValue) {
        printf("  qkv_post with D = 12 (not a multiple of 8) was not refused  FAIL\n");
        fails++;
    }

    printf("engk_glu vs ref_glu\n");
    static const int Is[] = {7, 255, 1001, 14337, 8, 264, 14336}, Ts[] = {1, 33};
    for (int act = RC_ACT_SILU; act <= RC_ACT_GELU_TANH; act++)
        for (int a = 0; a < 7; a++)
            for (int t = 0; t < 2; t++, checks++) {
                const glu_case c = {Ts[t], Is[a], act};
                fails += check_glu(&c, seed += 10, FAULT_NONE);
            }

    printf("engk_glu_bf16: fp32 bit-equal to engk_glu, bf16 to its rounding; the 8-wide kernel (I %% 8 == 0) vs "
           "the one-element one\n");
    static const int Ib[] = {8, 264, 1000, 14336, 7, 1001};
    for (int act = RC_ACT_SILU; act <= RC_ACT_GELU_TANH; act++)
        for (int a = 0; a < 6; a++)
            for (int t = 0; t < 2; t++, checks++) {
                const glu_case c = {Ts[t], Ib[a], act};
                fails += check_glu_bf16(&c, seed += 10, FAULT_NONE);
            }

    printf("engk_matmul vs eng_dot_model (bit-equal) and ref_matmul\n");
    for (size_t i = 0; i < sizeof mm_cases / sizeof mm_cases[0]; i++, checks += 2)
        fails += check_matmul(&mm_cases[i], seed += 10, FAULT_NONE);

    printf("test_engk: %d of %d checks failed\n", fails, checks);
    return fails ? 1 : 0;
}

/* Every injected fault must make its case fail. Exit 1 iff all are detected (the same exit a real failure
 * takes), 0 if one is not: meson's should_fail turns that 0 into a failed test. */
static int run_selftest(void)
{
    static const char *fault_name[] = {"", "a launch one row (or column) short",
                                       "an expected value nudged past its bound"};
    static const char *kernel[] = {"embed", "rmsnorm", "qkv_post (exact)", "qkv_post (bounded)", "glu",
                                   "matmul T=1", "matmul T=9", "rmsnorm_bf16", "glu_bf16 (I % 8 == 0)",
                                   "embed_next"};
    const norm_case nc = {RC_NORM_W, 7, 264, 0, 2.0};
    const glu_case gc = {7, 255, RC_ACT_GELU_TANH};
    int detected = 0, total = 0;
    printf("selftest: each case below must show at least one FAIL\n");
    for (int f = FAULT_SHORT; f <= FAULT_PERTURB; f++)
        for (int k = 0; k < 10; k++, total++) {
            int fails = 0;
            switch (k) {
            case 0: fails = check_embed(&embed_cases[1], 11, (fault)f); break;
            case 1: fails = check_rmsnorm(&nc, 12, (fault)f); break;
            case 2: fails = check_qkv_post(&post_cases[2], 13, (fault)f); break;
            case 3: fails = check_qkv_post(&post_cases[5], 14, (fault)f); break;
            case 4: fails = check_glu(&gc, 15, (fault)f); break;
            case 5: fails = check_matmul(&mm_cases[2], 16, (fault)f); break;
            case 6: fails = check_matmul(&mm_cases[8], 17, (fault)f); break;
            case 7: fails = check_rmsnorm_bf16(&nc, 18, (fault)f); break;
            case 9: fails = check_embed_next(&embed_cases[13], 20, (fault)f); break;
            default: {
                const glu_case g8 = {7, 264, RC_ACT_SILU};
                fails = check_glu_bf16(&g8, 19, (fault)f);
                break;
            }
            }
            detected += fails > 0;
            if (!fails)
                printf("selftest: NOT detected: %s with %s\n", kernel[k], fault_name[f]);
        }
    printf("selftest: %d of %d injected faults detected\n", detected, total);
    return detected == total ? 1 : 0;
}

/* ---- --bench: llama3-8b shapes (hidden 4096, 32/8 heads x 128, intermediate 14336, vocab 128256), bf16 ---- */
enum { HD = 4096, NH = 32, NKV = 8, HDIM = 128, INTER = 14336, VOCAB = 128256, TMAX = 2048 };

typedef struct bench_ctx {
    float *in, *out, *aux, *cs, *w32;
    void *mat, *kd, *vd;
    uint16_t *xb;
    int32_t *ids;
    int T, N, K, res;
} bench_ctx;

static cudaError_t b_embed(void *p)
{
    const bench_ctx *c = p;
    return engk_embed(c->out, c->mat, 0, c->ids, c->T, HD, 0.0f, 0);
}
static cudaError_t b_rmsnorm(void *p)
{
    const bench_ctx *c = p;
    return engk_rmsnorm(c->out, c->in, c->w32, c->T, HD, EPS, RC_NORM_W, 0);
}
static cudaError_t b_qkv_post(void *p)
{
    const bench_ctx *c = p;
    return engk_qkv_post(c->in, c->out, c->kd, c->vd, 0, NULL, NULL, 0, EPS, c->cs, c->cs + c->T * HDIM / 2, c->T,
                         NH, NKV, HDIM, HDIM, 0);
}
static cudaError_t b_glu(void *p)
{
    const bench_ctx *c = p;
    return engk_glu(c->out, c->in, c->T, INTER, RC_ACT_SILU, 0);
}
static cudaError_t b_rmsnorm_bf16(void *p)
{
    const bench_ctx *c = p;
    return engk_rmsnorm_bf16(c->xb, NULL, c->in, c->w32, c->T, HD, EPS, RC_NORM_W, 0);
}
static cudaError_t b_rmsnorm_then_bf16(void *p) /* what the engine ran before engk_rmsnorm_bf16 */
{
    const bench_ctx *c = p;
    cudaError_t err = engk_rmsnorm(c->out, c->in, c->w32, c->T, HD, EPS, RC_NORM_W, 0);
    return err != cudaSuccess ? err : engk_to_bf16(c->xb, c->out, (int64_t)c->T * HD, 0);
}
static cudaError_t b_glu_bf16(void *p)
{
    const bench_ctx *c = p;
    return engk_glu_bf16(c->xb, NULL, c->in, c->T, INTER, RC_ACT_SILU, 0);
}
static cudaError_t b_glu_then_bf16(void *p) /* what the engine ran before engk_glu_bf16 */
{
    const bench_ctx *c = p;
    cudaError_t err = engk_glu(c->out, c->in, c->T, INTER, RC_ACT_SILU, 0);
    return err != cudaSuccess ? err : engk_to_bf16(c->xb, c->out, (int64_t)c->T * INTER, 0);
}
static cudaError_t b_to_bf16(void *p)
{
    const bench_ctx *c = p;
    return engk_to_bf16(c->xb, c->in, (int64_t)c->T * HD, 0);
}
static cudaError_t b_matmul(void *p)
{
    const bench_ctx *c = p;
    return engk_matmul(c->out, c->in, c->mat, 0, NULL, c->res ? c->out : NULL, c->T, c->N, c->K, 0);
}

static void bench_line(const char *kernel, const char *shape, int T, double us, double bytes, double flops,
                       double ceil_gbs)
{
    const double gbs = bytes / us * 1e-3;
    printf("bench %-8s %-36s T=%-4d %10.1f us %8.1f GB/s %5.1f%% of read ceiling", kernel, shape, T, us, gbs,
           100.0 * gbs / ceil_gbs);
    if (flops > 0)
        printf(" %9.1f GFLOP/s", flops / us * 1e-3);
    printf("\n");
    fflush(stdout);
}

static int run_bench(void)
{
    const double ceil_gbs = ekc_read_ceiling_gbs();
    printf("bench read ceiling: %.1f GB/s (read-only kernel over 1 GiB, 16-byte loads, best of 10)\n",
           ceil_gbs);
    const int64_t big = (int64_t)TMAX * 2 * INTER; /* the largest activation: gate|up of T = 2048 */
    bench_ctx c = {0};
    c.in = ekc_dev_alloc(big, 4);
    c.out = ekc_dev_alloc(big, 4);
    c.w32 = ekc_dev_alloc(HD, 4);
    c.cs = ekc_dev_alloc((int64_t)TMAX * HDIM, 4);
    c.mat = ekc_dev_alloc((int64_t)VOCAB * HD, 2); /* the embedding, and every weight matrix in turn */
    c.xb = ekc_dev_alloc((int64_t)TMAX * INTER, 2);
    EKC_CU(cudaMemset(c.xb, 0, (size_t)TMAX * INTER * 2));
    c.kd = ekc_dev_alloc((int64_t)TMAX * NKV * HDIM, 2);
    c.vd = ekc_dev_alloc((int64_t)TMAX * NKV * HDIM, 2);
    EKC_CU(cudaMemset(c.in, 0x3c, (size_t)big * 4)); /* 0.0115 as fp32 and as bf16: finite, no denormals */
    EKC_CU(cudaMemset(c.out, 0x3c, (size_t)big * 4));
    EKC_CU(cudaMemset(c.w32, 0x3c, HD * 4));
    EKC_CU(cudaMemset(c.cs, 0x3c, (size_t)TMAX * HDIM * 4));
    EKC_CU(cudaMemset(c.mat, 0x3c, (size_t)VOCAB * HD * 2));
    int32_t *ids = ekc_hmalloc(TMAX, sizeof *ids);
    for (int t = 0; t < TMAX; t++)
        ids[t] = (int32_t)(((int64_t)t * 7919 + 13) % VOCAB);
    c.ids = ekc_to_dev(ids, TMAX, sizeof *ids);
    static const struct { const char *name; int N, K, res, last_row_only; } mats[] = {
        {"qkv 6144x4096", (NH + 2 * NKV) * HDIM, HD, 0, 0}, {"o 4096x4096 +res", HD, NH * HDIM, 1, 0},
        {"gate|up 28672x4096", 2 * INTER, HD, 0, 0},         {"down 4096x14336 +res", HD, INTER, 1, 0},
        {"lm_head 128256x4096", VOCAB, HD, 0, 1},
    };
    static const int Ts[] = {1, TMAX};
    for (int ti = 0; ti < 2; ti++) {
        const int T = c.T = Ts[ti];
        bench_line("embed", "bf16 128256x4096", T, ekc_time_us(b_embed, &c), T * (HD * 6.0 + 4), 0, ceil_gbs);
        bench_line("rmsnorm", "n=4096 W", T, ekc_time_us(b_rmsnorm, &c), T * HD * 8.0 + HD * 4, 0, ceil_gbs);
        for (int k = 0; k < 2; k++) { /* loads up front (k_qkv_post_rows), the previous kernel */
            engk_qkv_post_kernel(1 - k);
            bench_line("qkv_post", k ? "32/8x128 rot 128 bf16 KV (previous)" : "32/8x128 rot 128 bf16 KV (rows)", T,
                       ekc_time_us(b_qkv_post, &c),
                       T * ((NH + 2 * NKV) * HDIM * 4.0 + NH * HDIM * 4 + 2 * NKV * HDIM * 2 + HDIM * 4), 0, ceil_gbs);
        }
        engk_qkv_post_kernel(-1);
        bench_line("rmsnormb", "n=4096 W -> bf16", T, ekc_time_us(b_rmsnorm_bf16, &c), T * HD * 6.0 + HD * 4, 0,
                   ceil_gbs);
        bench_line("rms+cvt", "n=4096 W, then to_bf16 (before)", T, ekc_time_us(b_rmsnorm_then_bf16, &c),
                   T * HD * 6.0 + HD * 4, 0, ceil_gbs);
        bench_line("to_bf16", "4096 (o GEMM input)", T, ekc_time_us(b_to_bf16, &c), T * HD * 6.0, 0, ceil_gbs);
        bench_line("glu", "silu I=14336", T, ekc_time_us(b_glu, &c), T * INTER * 12.0, 0, ceil_gbs);
        bench_line("glub", "silu I=14336 -> bf16", T, ekc_time_us(b_glu_bf16, &c), T * INTER * 10.0, 0, ceil_gbs);
        bench_line("glu+cvt", "silu I=14336, then to_bf16 (before)", T, ekc_time_us(b_glu_then_bf16, &c),
                   T * INTER * 10.0, 0, ceil_gbs);
        for (size_t m = 0; m < sizeof mats / sizeof mats[0]; m++) {
            if (mats[m].last_row_only && T > 1)
                continue; /* the engine runs lm_head for the last row only */
            c.N = mats[m].N, c.K = mats[m].K, c.res = mats[m].res;
            const double bytes = (double)c.N * c.K * 2 + (double)T * c.K * 4 + (double)T * c.N * 4 * (1 + c.res);
            bench_line("matmul", mats[m].name, T, ekc_time_us(b_matmul, &c), bytes, 2.0 * T * c.N * c.K, ceil_gbs);
        }
    }
    printf("bench: the fused rows (rmsnormb, glub) and their 'before' pairs (rms+cvt, glu+cvt) count the same bytes "
           "(fp32 in, bf16 out): their GB/s compare directly\n");
    printf("bench: GB/s counts each tensor once (weights, inputs, outputs); a T=2048 matmul re-reads its weights "
           "per 8-row block, so its GB/s is a floor, its GFLOP/s the figure\n");
    free(ids);
    ekc_dev_free(c.in); ekc_dev_free(c.out); ekc_dev_free(c.w32); ekc_dev_free(c.cs); ekc_dev_free(c.mat);
    ekc_dev_free(c.kd); ekc_dev_free(c.vd); ekc_dev_free(c.ids); ekc_dev_free(c.xb);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (argc > 2 || (argc == 2 && strcmp(mode, "--selftest") && strcmp(mode, "--bench"))) {
        printf("usage: test_engk [--selftest | --bench]\n");
        return 2;
    }
    ekc_skip_unless_gpu("engine.kernels.core");
    if (!strcmp(mode, "--selftest"))
        return run_selftest();
    if (!strcmp(mode, "--bench"))
        return run_bench();
    return run_all();
}
