/* GPU suite: every cuda/kernels.h kernel against its ref/ops.h op on seeded GSL-random inputs at several shapes
 * (block multiples and not), the error paths, and with --bench a timing of each kernel (meson test --benchmark). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_rng.h>

#include "dequant.h"
#include "fault.h"
#include "gpu_skip.h"
#include "kernels.h"
#include "ops.h"
#include "rope.h"
#include "softcap.h"

#define SEED 1234

static gsl_rng *rng;

/* ---- helpers: a failed CUDA call fails the test with its file:line message ---- */
#define CU(call) do { rc_err e_ = {0}; if (CUDA_CHECK(&e_, call)) fail_msg("%s", e_.msg); } while (0)

static void *hmalloc(int64_t n, size_t size)
{
    void *p = calloc((size_t)(n > 0 ? n : 1), size);
    assert_non_null(p);
    return p;
}

static float *rand_floats(int64_t n, double lo, double hi)
{
    float *x = hmalloc(n, sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * gsl_rng_uniform(rng));
    return x;
}

static void *dev_bytes(int64_t n, size_t size)
{
    void *d;
    rc_err e = {0};
    if (cuda_alloc(&d, n > 0 ? n : 1, (int64_t)size, &e, "test buffer"))
        fail_msg("%s", e.msg);
    return d;
}

static float *to_dev(const float *h, int64_t n)
{
    float *d = dev_bytes(n, sizeof *d);
    if (n > 0)
        CU(cudaMemcpy(d, h, (size_t)n * sizeof *h, cudaMemcpyHostToDevice));
    return d;
}

/* An output buffer filled with NaN, so an element the kernel never writes fails the check. */
static float *dev_nan(int64_t n)
{
    float *h = hmalloc(n, sizeof *h);
    for (int64_t i = 0; i < n; i++)
        h[i] = NAN;
    float *d = to_dev(h, n);
    free(h);
    return d;
}

static float *from_dev(const float *d, int64_t n)
{
    float *h = hmalloc(n, sizeof *h);
    CU(cudaDeviceSynchronize());
    if (n > 0)
        CU(cudaMemcpy(h, d, (size_t)n * sizeof *h, cudaMemcpyDeviceToHost));
    return h;
}

/* Elements outside |got - want| <= atol + rtol |want| (a NaN/Inf in got counts); prints the first five. */
static int64_t mismatches(const char *what, const float *got, const float *want, int64_t n, double atol, double rtol)
{
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double g = got[i], w = want[i], d = fabs(g - w);
        const int ok = isfinite(g) && d <= atol + rtol * fabs(w);
        if (isfinite(g) && d > worst)
            worst = d;
        if (!ok && bad++ < 5)
            printf("    %s: [%lld] got %.9g want %.9g (|diff| %.3e > %.3e)\n", what, (long long)i, g, w, d,
                   atol + rtol * fabs(w));
    }
    printf("  %-52s max-abs %.3e  %s\n", what, worst, bad ? "FAIL" : "ok");
    if (bad)
        printf("    %lld of %lld elements out of bounds (atol %.1e + rtol %.1e |ref|)\n", (long long)bad,
               (long long)n, atol, rtol);
    return bad;
}

static void dfree(void *d)
{
    CU(cudaFree(d));
}

/* ---- the checker itself must be able to fail ---- */
static void test_checker_fails(void **state)
{
    (void)state;
    float a[300], b[300];
    for (int i = 0; i < 300; i++)
        a[i] = b[i] = (float)i;
    assert_int_equal(mismatches("checker: equal", a, b, 300, 0, 0), 0);
    b[257] += 1e-3f;
    assert_int_equal(mismatches("checker: one element off by 1e-3 (must FAIL)", a, b, 300, 1e-4, 0), 1);
    b[257] = a[257];
    a[3] = NAN;
    assert_int_equal(mismatches("checker: one NaN (must FAIL)", a, b, 300, 1.0, 1.0), 1);
}

/* ---- dequant: the family rules on the device, bit for bit rc_qtensor_dequant (model/quant.h) ---- */
static void *qalloc_test(void *owner, int64_t n, int64_t size, rc_err *e, const char *what)
{
    void *d = NULL;
    (void)owner;
    return cuda_alloc(&d, n, size, e, what) ? NULL : d;
}

typedef struct dq_case {
    const char *what;
    rc_qfamily fam;
    int bits, with_zero;
    int64_t n, k, group;
} dq_case;

static const dq_case dq_cases[] = {
    {"int8 per row (W8A16)", RC_QF_SCALE, 8, 0, 7, 96, 96},
    {"int8 blocks of 32 (GGUF Q8_0)", RC_QF_SCALE, 8, 0, 5, 96, 32},
    {"signed nibbles, blocks of 32 (GGUF Q4_0)", RC_QF_SCALE, 4, 0, 6, 64, 32},
    {"int4 g32 with integer zeros (GPTQ asym)", RC_QF_AFFINE, 4, 1, 9, 128, 32},
    {"int4 g128 with integer zeros (GPTQ asym)", RC_QF_AFFINE, 4, 1, 4, 256, 128},
    {"int4 blocks of 32 with float offsets (GGUF Q4_1)", RC_QF_AFFINE, 4, 0, 3, 64, 32},
};

/* Codes over the family's whole range, scales of both signs, zeros 0..2^bits; the kernel's bad elements. */
static int64_t dequant_case(const dq_case *c)
{
    rc_qtensor t;
    rc_err e = {0};
    assert_int_equal(rc_qtensor_alloc(&t, c->what, c->fam, c->bits, c->n, c->k, c->group, c->with_zero, &e), RC_OK);
    const int lo = c->fam == RC_QF_SCALE ? -(1 << (c->bits - 1)) : 0, span = 1 << c->bits;
    for (int64_t i = 0; i < c->n * c->k; i++)
        t.q[i] = (int8_t)(lo + (int)gsl_rng_uniform_int(rng, (unsigned long)span));
    for (int64_t i = 0; i < c->n * (c->k / c->group); i++) {
        t.scale[i] = (float)((gsl_rng_uniform(rng) - 0.3) * 0.1);
        if (t.zero)
            t.zero[i] = (int16_t)gsl_rng_uniform_int(rng, (unsigned long)span + 1);
        else if (t.offset)
            t.offset[i] = (float)(gsl_rng_uniform(rng) - 0.5);
    }
    if (t.zero)
        rc_qtensor_set_offsets(&t);
    cuda_qmat d;
    if (cuda_qmat_upload(&d, &t, qalloc_test, NULL, &e))
        fail_msg("%s", e.msg);
    float *want = hmalloc(c->n * c->k, sizeof *want), *dw = dev_nan(c->n * c->k);
    rc_qtensor_dequant(&t, want);
    CU(cuda_k_dequant(dw, &d));
    float *got = from_dev(dw, c->n * c->k);
    int64_t bad = mismatches(c->what, got, want, c->n * c->k, 0, 0);
    for (int64_t i = 0; i < c->n * c->k && !bad; i++)
        bad += memcmp(&got[i], &want[i], sizeof *got) != 0; /* the bits: -0 and +0 too */
    free(got);
    free(want);
    dfree(dw);
    dfree(d.words);
    dfree(d.scale);
    if (d.zero)
        dfree(d.zero);
    if (d.offset)
        dfree(d.offset);
    rc_qtensor_free(&t);
    return bad;
}

static void test_dequant(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof dq_cases / sizeof dq_cases[0]; i++)
        assert_int_equal(dequant_case(&dq_cases[i]), 0);
    cuda_qmat bad = {.family = RC_QF_AFFINE, .bits = 4, .n = 2, .k = 64, .group = 32};
    assert_int_equal(cuda_k_dequant(NULL, &bad), cudaErrorInvalidValue); /* affine without zeros or offsets */
    bad.family = RC_QF_SCALE;
    bad.group = 4; /* not a multiple of the 8 codes of a word */
    assert_int_equal(cuda_k_dequant(NULL, &bad), cudaErrorInvalidValue);
    /* each catalogued quantization fault makes this checker fail on the case it is about */
    static const struct { const char *fault; int c; } sel[] = {
        {"cuda_q4_nibble_swap", 3}, {"cuda_qzero_off_by_one", 4}, {"cuda_qscale_wrong_group", 4},
        {"cuda_q_no_sign_extend", 0}, {"cuda_q_no_sign_extend", 2},
    };
    for (size_t i = 0; RC_FAULTS_BUILT && i < sizeof sel / sizeof sel[0]; i++) {
        printf("  fault %s (must FAIL):\n", sel[i].fault);
        rc_fault_select(sel[i].fault);
        const int64_t n = dequant_case(&dq_cases[sel[i].c]);
        rc_fault_select(NULL);
        assert_true(n > 0);
    }
}

/* ---- embedding ---- */
static void test_embed(void **state)
{
    (void)state;
    const int64_t V = 300, T = 37, hds[] = {1, 64, 257};
    int64_t fails = 0;
    for (size_t c = 0; c < sizeof hds / sizeof hds[0]; c++)
        for (int s = 0; s < 2; s++) {
            const int64_t hd = hds[c];
            const float scale = s ? 8.0f : 0.0f;
            float *E = rand_floats(V * hd, -1, 1), *want = hmalloc(T * hd, sizeof *want);
            int32_t *ids = hmalloc(T, sizeof *ids);
            for (int64_t t = 0; t < T; t++)
                ids[t] = (int32_t)gsl_rng_uniform_int(rng, (unsigned long)V);
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < hd; i++) {
                    float v = E[ids[t] * hd + i];
                    want[t * hd + i] = scale != 0.0f ? v * scale : v;
                }
            float *dE = to_dev(E, V * hd), *dx = dev_nan(T * hd);
            int32_t *dids = dev_bytes(T, sizeof *dids);
            CU(cudaMemcpy(dids, ids, (size_t)T * sizeof *ids, cudaMemcpyHostToDevice));
            CU(cuda_k_embed(dx, dE, dids, T, hd, scale));
            float *got = from_dev(dx, T * hd);
            char what[96];
            snprintf(what, sizeof what, "embed T=%lld hd=%lld scale=%g", (long long)T, (long long)hd, scale);
            fails += mismatches(what, got, want, T * hd, 0, 0);
            free(E); free(want); free(ids); free(got);
            dfree(dE); dfree(dx); dfree(dids);
        }
    assert_int_equal(fails, 0);
}

/* ---- matmul ---- */
static void test_matmul(void **state)
{
    (void)state;
    static const struct { int64_t T, N, K; } cs[] = {
        {1, 1, 1}, {3, 5, 7}, {16, 16, 16}, {17, 33, 65}, {24, 256, 64}, {5, 1000, 300}, {40, 128, 257}, {33, 1, 16},
    };
    int64_t fails = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int bias = 0; bias < 2; bias++) {
            const int64_t T = cs[c].T, N = cs[c].N, K = cs[c].K;
            float *x = rand_floats(T * K, -1, 1), *W = rand_floats(N * K, -1, 1);
            float *b = bias ? rand_floats(N, -1, 1) : NULL, *want = hmalloc(T * N, sizeof *want);
            ref_matmul(want, x, W, b, T, N, K);
            float *dx = to_dev(x, T * K), *dW = to_dev(W, N * K), *db = b ? to_dev(b, N) : NULL, *dy = dev_nan(T * N);
            CU(cuda_k_matmul(dy, dx, dW, db, T, N, K));
            float *got = from_dev(dy, T * N);
            char what[96];
            snprintf(what, sizeof what, "matmul T=%lld N=%lld K=%lld%s", (long long)T, (long long)N, (long long)K,
                     bias ? " +bias" : "");
            fails += mismatches(what, got, want, T * N, 1e-5 + 1e-7 * (double)K, 1e-5);
            free(x); free(W); free(b); free(want); free(got);
            dfree(dx); dfree(dW); dfree(dy);
            if (db)
                dfree(db);
        }
    assert_int_equal(fails, 0);
}

/* ---- RMSNorm, every kind, in place and not ---- */
static void test_rmsnorm(void **state)
{
    (void)state;
    static const struct { int64_t rows, n; } cs[] = {
        {1, 1}, {3, 7}, {5, 64}, {7, 255}, {2, 256}, {3, 257}, {4, 1000}, {96, 16},
    };
    static const char *kind_name[] = {"W", "1PW", "POW_W", "POW"};
    int64_t fails = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int kind = RC_NORM_W; kind <= RC_NORM_POW; kind++) {
            const int64_t rows = cs[c].rows, n = cs[c].n;
            const int inplace = (int)((c + (size_t)kind) % 2);
            float *x = rand_floats(rows * n, -2, 2), *w = kind == RC_NORM_POW ? NULL : rand_floats(n, 0.5, 1.5);
            float *want = hmalloc(rows * n, sizeof *want);
            ref_rmsnorm(want, x, w, rows, n, 1e-6f, (rc_norm_kind)kind);
            float *dx = to_dev(x, rows * n), *dw = w ? to_dev(w, n) : NULL, *dy = inplace ? dx : dev_nan(rows * n);
            CU(cuda_k_rmsnorm(dy, dx, dw, rows, n, 1e-6f, (rc_norm_kind)kind));
            float *got = from_dev(dy, rows * n);
            char what[96];
            snprintf(what, sizeof what, "rmsnorm %s rows=%lld n=%lld%s", kind_name[kind], (long long)rows,
                     (long long)n, inplace ? " in place" : "");
            fails += mismatches(what, got, want, rows * n, 1e-5, 1e-5);
            free(x); free(w); free(want); free(got);
            dfree(dx);
            if (dw)
                dfree(dw);
            if (!inplace)
                dfree(dy);
        }
    assert_int_equal(fails, 0);
}

/* ---- RoPE: tables from model/rope's inv_freq, rotation (full, partial, zero-frequency tails, factor, yarn's
 * attention factor) ---- */
static void test_rope(void **state)
{
    (void)state;
    static const rc_rope_desc ds[] = {
        {.kind = "all", .type = RC_ROPE_DEFAULT, .theta = 10000, .factor = 1, .head_dim = 16, .rot_dim = 16,
         .n_freq = 8, .exp_den = 16},
        {.kind = "full", .type = RC_ROPE_PROPORTIONAL, .theta = 1e6, .factor = 8, .head_dim = 64, .rot_dim = 64,
         .n_freq = 16, .exp_den = 64},
        {.kind = "sliding", .type = RC_ROPE_DEFAULT, .theta = 10000, .factor = 1, .head_dim = 256, .rot_dim = 128,
         .n_freq = 64, .exp_den = 256},
        {.kind = "tiny", .type = RC_ROPE_DEFAULT, .theta = 500000, .factor = 1, .head_dim = 6, .rot_dim = 2,
         .n_freq = 1, .exp_den = 2},
        {.kind = "yarn", .type = RC_ROPE_YARN, .theta = 10000, .factor = 4, .head_dim = 32, .rot_dim = 32,
         .n_freq = 16, .exp_den = 32, .beta_fast = 32, .beta_slow = 1, .truncate = 1, .original_max_pos = 32,
         .attn_factor = 1.1386294361119891},
    };
    static const struct { int64_t T, pos0; int H; } ts[] = {{1, 0, 1}, {37, 0, 3}, {300, 1000, 2}};
    int64_t fails = 0;
    char what[128];
    for (size_t d = 0; d < sizeof ds / sizeof ds[0]; d++) {
        const rc_rope_desc *r = &ds[d];
        const int R = r->rot_dim, D = r->head_dim;
        float *inv = hmalloc(R / 2, sizeof *inv), *dinv = dev_nan(R / 2);
        rc_rope_inv_freq(inv, r);
        CU(cudaMemcpy(dinv, inv, (size_t)(R / 2) * sizeof *inv, cudaMemcpyHostToDevice));
        for (size_t t = 0; t < sizeof ts / sizeof ts[0]; t++) {
            const int64_t T = ts[t].T, pos0 = ts[t].pos0, n = T * ts[t].H * D;
            const int H = ts[t].H;
            float *cs = hmalloc(T * R, sizeof *cs), *sn = hmalloc(T * R, sizeof *sn);
            rc_rope_table(cs, sn, inv, r, pos0, T);
            float *dcs = dev_nan(T * R), *dsn = dev_nan(T * R);
            CU(cuda_k_rope_table(dcs, dsn, dinv, rc_rope_attn_factor(r), pos0, T, R));
            float *gc = from_dev(dcs, T * R), *gs = from_dev(dsn, T * R);
            snprintf(what, sizeof what, "rope cos %.15s T=%lld pos0=%lld", r->kind, (long long)T, (long long)pos0);
            fails += mismatches(what, gc, cs, T * R, 1e-6, 0);
            snprintf(what, sizeof what, "rope sin %.15s T=%lld pos0=%lld", r->kind, (long long)T, (long long)pos0);
            fails += mismatches(what, gs, sn, T * R, 1e-6, 0);
            /* rotate with ref's tables so this isolates the apply kernel */
            CU(cudaMemcpy(dcs, cs, (size_t)(T * R) * sizeof *cs, cudaMemcpyHostToDevice));
            CU(cudaMemcpy(dsn, sn, (size_t)(T * R) * sizeof *sn, cudaMemcpyHostToDevice));
            float *x = rand_floats(n, -2, 2), *dx = to_dev(x, n);
            ref_rope_apply(x, cs, sn, T, H, D, R);
            CU(cuda_k_rope_apply(dx, dcs, dsn, T, H, D, R));
            float *gx = from_dev(dx, n);
            snprintf(what, sizeof what, "rope apply %.15s T=%lld H=%d D=%d R=%d", r->kind, (long long)T, H, D, R);
            fails += mismatches(what, gx, x, n, 1e-6, 1e-6);
            free(cs); free(sn); free(gc); free(gs); free(x); free(gx);
            dfree(dcs); dfree(dsn); dfree(dx);
        }
        free(inv);
        dfree(dinv);
    }
    assert_int_equal(fails, 0);
}

/* ---- attention: causal, GQA, sliding window, queries after a prefix, long key rows ---- */
static void test_attention(void **state)
{
    (void)state;
    static const struct { int64_t T, S, q_pos0; int H, Hkv, D, window; } cs[] = {
        {1, 1, 0, 1, 1, 2, 0},        {24, 24, 0, 4, 2, 16, 0},     {37, 37, 0, 6, 2, 64, 0},
        {33, 33, 0, 4, 4, 32, 8},     {5, 40, 35, 8, 2, 128, 0},    {130, 130, 0, 2, 1, 24, 0},
        {300, 300, 0, 3, 3, 16, 100}, {17, 17, 0, 2, 1, 256, 5},    {4, 9, 2, 2, 2, 8, 3},
        {3, 20000, 19997, 2, 1, 16, 0}, /* 80 KB of scores: needs the opt-in shared memory */
    };
    int optin = 0, dev = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    int64_t fails = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int64_t T = cs[c].T, S = cs[c].S, p0 = cs[c].q_pos0;
        const int H = cs[c].H, Hkv = cs[c].Hkv, D = cs[c].D, W = cs[c].window;
        char what[128];
        snprintf(what, sizeof what, "attention T=%lld S=%lld pos0=%lld H=%d Hkv=%d D=%d window=%d", (long long)T,
                 (long long)S, (long long)p0, H, Hkv, D, W);
        if (cuda_k_attention_smem(S, W, D) > (size_t)optin) {
            printf("  %-52s skipped: needs %zu bytes of shared memory, device allows %d\n", what,
                   cuda_k_attention_smem(S, W, D), optin);
            continue;
        }
        const float scale = (float)(1.0 / sqrt((double)D));
        float *q = rand_floats(T * H * D, -2, 2), *k = rand_floats(S * Hkv * D, -2, 2);
        float *v = rand_floats(S * Hkv * D, -1, 1), *want = hmalloc(T * H * D, sizeof *want);
        float *scratch = hmalloc(S, sizeof *scratch);
        ref_attention(want, q, k, v, T, S, p0, H, Hkv, D, scale, W, scratch);
        float *dq = to_dev(q, T * H * D), *dk = to_dev(k, S * Hkv * D), *dv = to_dev(v, S * Hkv * D);
        float *dctx = dev_nan(T * H * D);
        CU(cuda_k_attention(dctx, dq, dk, dv, T, S, p0, H, Hkv, D, scale, W));
        float *got = from_dev(dctx, T * H * D);
        fails += mismatches(what, got, want, T * H * D, 2e-5, 1e-5);
        free(q); free(k); free(v); free(want); free(scratch); free(got);
        dfree(dq); dfree(dk); dfree(dv); dfree(dctx);
    }
    assert_int_equal(fails, 0);
}

/* ---- GLU, softcap, residual add ---- */
static void test_elementwise(void **state)
{
    (void)state;
    static const int64_t ns[] = {1, 255, 256, 257, 10000};
    int64_t fails = 0;
    char what[96];
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        const int64_t n = ns[c];
        for (int a = RC_ACT_SILU; a <= RC_ACT_GELU_TANH; a++) {
            const int inplace = (int)((c + (size_t)a) % 2);
            float *g = rand_floats(n, -8, 8), *u = rand_floats(n, -2, 2), *want = hmalloc(n, sizeof *want);
            ref_glu(want, g, u, n, (rc_act)a);
            float *dg = to_dev(g, n), *du = to_dev(u, n), *dout = inplace ? dg : dev_nan(n);
            CU(cuda_k_glu(dout, dg, du, n, (rc_act)a));
            float *got = from_dev(dout, n);
            snprintf(what, sizeof what, "glu %s n=%lld%s", a == RC_ACT_SILU ? "silu" : "gelu_tanh", (long long)n,
                     inplace ? " in place" : "");
            fails += mismatches(what, got, want, n, 5e-6, 5e-6);
            free(g); free(u); free(want); free(got);
            dfree(dg); dfree(du);
            if (!inplace)
                dfree(dout);
        }
        for (int k = 0; k < 2; k++) {
            const float cap = k ? 0.5f : 30.0f;
            float *x = rand_floats(n, -100, 100), *dx = to_dev(x, n);
            rc_softcap(x, n, cap);
            CU(cuda_k_softcap(dx, n, cap));
            float *got = from_dev(dx, n);
            snprintf(what, sizeof what, "softcap c=%g n=%lld", cap, (long long)n);
            fails += mismatches(what, got, x, n, 1e-6, 1e-6);
            free(x); free(got);
            dfree(dx);
        }
        float *x = rand_floats(n, -1, 1), *y = rand_floats(n, -1, 1), *dx = to_dev(x, n), *dy = to_dev(y, n);
        for (int64_t i = 0; i < n; i++)
            x[i] += y[i];
        CU(cuda_k_add(dx, dy, n));
        float *got = from_dev(dx, n);
        snprintf(what, sizeof what, "add n=%lld", (long long)n);
        fails += mismatches(what, got, x, n, 0, 0);
        free(x); free(y); free(got);
        dfree(dx); dfree(dy);
    }
    assert_int_equal(fails, 0);
}

/* ---- gated attention and per-layer-embedding pieces: split, sigmoid gate, act, strided GLU, scalings ---- */
static void test_gate_pieces(void **state)
{
    (void)state;
    static const int64_t ns[] = {1, 255, 256, 257, 10000};
    int64_t fails = 0;
    char what[96];
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        const int64_t n = ns[c];
        const int D = (int)(c % 2 ? 37 : 16), rows = (int)(n / D + 1);
        float *src = rand_floats(2 * (int64_t)rows * D, -3, 3), *wa = hmalloc((int64_t)rows * D, sizeof *wa),
              *wb = hmalloc((int64_t)rows * D, sizeof *wb);
        for (int64_t r = 0; r < rows; r++)
            for (int i = 0; i < D; i++) {
                wa[r * D + i] = src[r * 2 * D + i];
                wb[r * D + i] = src[r * 2 * D + D + i];
            }
        float *dsrc = to_dev(src, 2 * (int64_t)rows * D), *da = dev_nan((int64_t)rows * D),
              *db = dev_nan((int64_t)rows * D);
        CU(cuda_k_split_halves(da, db, dsrc, rows, D));
        float *ga = from_dev(da, (int64_t)rows * D), *gb = from_dev(db, (int64_t)rows * D);
        snprintf(what, sizeof what, "split_halves rows=%d D=%d (query)", rows, D);
        fails += mismatches(what, ga, wa, (int64_t)rows * D, 0, 0);
        snprintf(what, sizeof what, "split_halves rows=%d D=%d (gate)", rows, D);
        fails += mismatches(what, gb, wb, (int64_t)rows * D, 0, 0);
        free(src); free(wa); free(wb); free(ga); free(gb);
        dfree(dsrc); dfree(da); dfree(db);

        float *x = rand_floats(n, -4, 4), *g = rand_floats(n, -30, 30), *dx = to_dev(x, n), *dg = to_dev(g, n);
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] * ref_sigmoid(g[i]);
        CU(cuda_k_sigmoid_mul(dx, dg, n));
        float *got = from_dev(dx, n);
        snprintf(what, sizeof what, "sigmoid_mul n=%lld", (long long)n);
        fails += mismatches(what, got, x, n, 1e-6, 1e-6);
        free(got);
        for (int a = RC_ACT_SILU; a <= RC_ACT_GELU_TANH; a++) {
            CU(cudaMemcpy(dx, g, (size_t)n * sizeof *g, cudaMemcpyHostToDevice));
            for (int64_t i = 0; i < n; i++)
                x[i] = ref_act(g[i], (rc_act)a);
            CU(cuda_k_act(dx, n, (rc_act)a));
            got = from_dev(dx, n);
            snprintf(what, sizeof what, "act %s n=%lld", a == RC_ACT_SILU ? "silu" : "gelu_tanh", (long long)n);
            fails += mismatches(what, got, x, n, 5e-6, 5e-6);
            free(got);
        }
        const float s = 0.125f * (float)(c + 1);
        CU(cuda_k_scale(dx, dg, n, s));
        for (int64_t i = 0; i < n; i++)
            x[i] = g[i] * s;
        got = from_dev(dx, n);
        snprintf(what, sizeof what, "scale n=%lld", (long long)n);
        fails += mismatches(what, got, x, n, 0, 0);
        free(got);
        CU(cuda_k_add_scale(dx, dg, n, 0.70710678f));
        for (int64_t i = 0; i < n; i++)
            x[i] = (x[i] + g[i]) * 0.70710678f;
        got = from_dev(dx, n);
        snprintf(what, sizeof what, "add_scale n=%lld", (long long)n);
        fails += mismatches(what, got, x, n, 0, 0);
        free(x); free(g); free(got);
        dfree(dx); dfree(dg);

        /* glu over a column slice: g [T, P] against up [T, L*P] at layer l */
        const int P = (int)(c % 2 ? 33 : 16), L = 3, l = (int)(c % 3);
        const int64_t T = n / P + 1, LP = (int64_t)L * P;
        float *gg = rand_floats(T * P, -6, 6), *up = rand_floats(T * LP, -2, 2), *want = hmalloc(T * P, sizeof *want);
        for (int64_t t = 0; t < T; t++)
            ref_glu(want + t * P, gg + t * P, up + t * LP + (int64_t)l * P, P, RC_ACT_GELU_TANH);
        float *dgg = to_dev(gg, T * P), *dup = to_dev(up, T * LP);
        CU(cuda_k_glu_rows(dgg, dup + (int64_t)l * P, T, P, LP, RC_ACT_GELU_TANH));
        got = from_dev(dgg, T * P);
        snprintf(what, sizeof what, "glu_rows gelu_tanh T=%lld P=%d ld=%lld l=%d", (long long)T, P, (long long)LP, l);
        fails += mismatches(what, got, want, T * P, 5e-6, 5e-6);
        free(gg); free(up); free(want); free(got);
        dfree(dgg); dfree(dup);
    }
    assert_int_equal(fails, 0);
}

/* ---- gated delta net: conv, q/k l2norm and grouping, gates, the chunked delta rule, the gated norm ---- */
static void test_gdn_conv(void **state)
{
    (void)state;
    static const struct { int64_t T, C; int K; } cs[] = {{1, 1, 1}, {2, 160, 4}, {37, 257, 4}, {5, 300, 3}, {70, 64, 4}};
    int64_t fails = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int st = 0; st < 2; st++) {
            const int64_t T = cs[c].T, C = cs[c].C;
            const int K = cs[c].K;
            float *x = rand_floats(T * C, -2, 2), *w = rand_floats(C * K, -1, 1);
            float *s = st && K > 1 ? rand_floats((K - 1) * C, -2, 2) : NULL, *want = hmalloc(T * C, sizeof *want);
            ref_conv1d_causal(want, x, w, s, T, C, K);
            float *dx = to_dev(x, T * C), *dw = to_dev(w, C * K), *ds = s ? to_dev(s, (K - 1) * C) : NULL;
            float *dy = dev_nan(T * C);
            CU(cuda_k_conv1d_causal(dy, dx, dw, ds, T, C, K));
            float *got = from_dev(dy, T * C);
            char what[96];
            snprintf(what, sizeof what, "conv1d_causal T=%lld C=%lld K=%d%s", (long long)T, (long long)C, K,
                     s ? " +state" : "");
            fails += mismatches(what, got, want, T * C, 2e-6, 1e-5);
            free(x); free(w); free(s); free(want); free(got);
            dfree(dx); dfree(dw); dfree(dy);
            if (ds)
                dfree(ds);
        }
    assert_int_equal(fails, 0);
}

static void test_gdn_qk_gates(void **state)
{
    (void)state;
    static const struct { int64_t T; int Hk, Hv, dk, dv; } cs[] = {
        {1, 1, 1, 1, 1}, {37, 2, 4, 16, 24}, {5, 3, 6, 257, 8}, {3, 16, 32, 128, 128},
    };
    int64_t fails = 0;
    char what[128];
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int64_t T = cs[c].T;
        const int Hk = cs[c].Hk, Hv = cs[c].Hv, dk = cs[c].dk, rep = Hv / Hk;
        const int64_t Kd = (int64_t)Hk * dk, C = 2 * Kd + (int64_t)Hv * cs[c].dv, n = T * Hv * dk;
        const float qmul = (float)pow((double)dk, -0.5);
        float *conv = rand_floats(T * C, -2, 2), *wq = hmalloc(n, sizeof *wq), *wk = hmalloc(n, sizeof *wk);
        for (int64_t t = 0; t < T; t++)
            for (int h = 0; h < Hv; h++) {
                float *qo = wq + (t * Hv + h) * dk, *ko = wk + (t * Hv + h) * dk;
                ref_l2norm(qo, conv + t * C + (int64_t)(h / rep) * dk, 1, dk, 1e-6f);
                ref_l2norm(ko, conv + t * C + Kd + (int64_t)(h / rep) * dk, 1, dk, 1e-6f);
                for (int i = 0; i < dk; i++)
                    qo[i] *= qmul;
            }
        float *dconv = to_dev(conv, T * C), *dq = dev_nan(n), *dk_ = dev_nan(n);
        CU(cuda_k_gdn_qk(dq, dk_, dconv, T, C, Hk, Hv, dk, qmul, 1e-6f));
        float *gq = from_dev(dq, n), *gk = from_dev(dk_, n);
        snprintf(what, sizeof what, "gdn_qk q T=%lld Hk=%d Hv=%d dk=%d", (long long)T, Hk, Hv, dk);
        fails += mismatches(what, gq, wq, n, 1e-6, 1e-5);
        snprintf(what, sizeof what, "gdn_qk k T=%lld Hk=%d Hv=%d dk=%d", (long long)T, Hk, Hv, dk);
        fails += mismatches(what, gk, wk, n, 1e-6, 1e-5);
        free(conv); free(wq); free(wk); free(gq); free(gk);
        dfree(dconv); dfree(dq); dfree(dk_);

        const int64_t m = T * Hv;
        float *b = rand_floats(m, -8, 8), *a = rand_floats(m, -25, 25), *Al = rand_floats(Hv, -3, 1.5);
        float *dt = rand_floats(Hv, -2, 2), *wb = hmalloc(m, sizeof *wb), *wg = hmalloc(m, sizeof *wg);
        for (int64_t i = 0; i < m; i++) {
            const int h = (int)(i % Hv);
            wb[i] = ref_sigmoid(b[i]);
            wg[i] = -(float)exp((double)Al[h]) * ref_softplus(a[i] + dt[h]);
        }
        float *db_ = to_dev(b, m), *da = to_dev(a, m), *dAl = to_dev(Al, Hv), *ddt = to_dev(dt, Hv);
        float *dbeta = dev_nan(m), *dg = dev_nan(m);
        CU(cuda_k_gdn_gates(dbeta, dg, db_, da, dAl, ddt, T, Hv));
        float *gb = from_dev(dbeta, m), *gg = from_dev(dg, m);
        snprintf(what, sizeof what, "gdn_gates beta T=%lld Hv=%d", (long long)T, Hv);
        fails += mismatches(what, gb, wb, m, 1e-7, 1e-6);
        snprintf(what, sizeof what, "gdn_gates g T=%lld Hv=%d", (long long)T, Hv);
        fails += mismatches(what, gg, wg, m, 1e-7, 1e-6);
        free(b); free(a); free(Al); free(dt); free(wb); free(wg); free(gb); free(gg);
        dfree(db_); dfree(da); dfree(dAl); dfree(ddt); dfree(dbeta); dfree(dg);
    }
    assert_int_equal(fails, 0);
}

static void test_delta_rule(void **state)
{
    (void)state;
    static const struct { int64_t T; int Hv, dk, dv, chunk; } cs[] = {
        {1, 1, 1, 1, 64},  {5, 4, 16, 24, 64}, {64, 2, 16, 24, 64}, {65, 4, 16, 24, 64},
        {130, 3, 33, 17, 64}, {70, 1, 128, 128, 64}, {29, 2, 8, 300, 8},
    };
    int64_t fails = 0;
    char what[128];
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int64_t T = cs[c].T;
        const int Hv = cs[c].Hv, dk = cs[c].dk, dv = cs[c].dv, L = cs[c].chunk;
        const int64_t nq = T * Hv * dk, nv = T * Hv * dv, nS = (int64_t)Hv * dk * dv;
        float *q = hmalloc(nq, sizeof *q), *k = hmalloc(nq, sizeof *k), *v = rand_floats(nv, -2, 2);
        float *raw = rand_floats(2 * nq, -2, 2), *gr = rand_floats(T * Hv, -8, 3), *braw = rand_floats(T * Hv, -4, 4);
        float *g = hmalloc(T * Hv, sizeof *g), *beta = hmalloc(T * Hv, sizeof *beta);
        const float qmul = (float)pow((double)dk, -0.5);
        /* inputs as the block makes them: unit q/k rows (q times dk^-1/2), g < 0, beta in (0, 1) */
        for (int64_t r = 0; r < T * Hv; r++) {
            ref_l2norm(q + r * dk, raw + r * dk, 1, dk, 1e-6f);
            ref_l2norm(k + r * dk, raw + nq + r * dk, 1, dk, 1e-6f);
            for (int i = 0; i < dk; i++)
                q[r * dk + i] *= qmul;
            g[r] = -ref_softplus(gr[r]);
            beta[r] = ref_sigmoid(braw[r]);
        }
        float *wout = hmalloc(nv, sizeof *wout), *wS = hmalloc(nS, sizeof *wS);
        const int64_t sn = ref_delta_rule_chunked_scratch(dk, dv, L);
        float *hq = hmalloc(T * dk, sizeof *hq), *hk = hmalloc(T * dk, sizeof *hk), *hv = hmalloc(T * dv, sizeof *hv);
        float *hg = hmalloc(T, sizeof *hg), *hb = hmalloc(T, sizeof *hb), *ho = hmalloc(T * dv, sizeof *ho);
        float *scr = hmalloc(sn, sizeof *scr);
        for (int h = 0; h < Hv; h++) {
            for (int64_t t = 0; t < T; t++) {
                memcpy(hq + t * dk, q + (t * Hv + h) * dk, (size_t)dk * sizeof *q);
                memcpy(hk + t * dk, k + (t * Hv + h) * dk, (size_t)dk * sizeof *k);
                memcpy(hv + t * dv, v + (t * Hv + h) * dv, (size_t)dv * sizeof *v);
                hg[t] = g[t * Hv + h];
                hb[t] = beta[t * Hv + h];
            }
            float *S = wS + (int64_t)h * dk * dv;
            memset(S, 0, (size_t)dk * dv * sizeof *S);
            ref_delta_rule_chunked(ho, S, hq, hk, hv, hg, hb, T, dk, dv, L, scr);
            for (int64_t t = 0; t < T; t++)
                memcpy(wout + (t * Hv + h) * dv, ho + t * dv, (size_t)dv * sizeof *ho);
        }
        float *dq = to_dev(q, nq), *dk_ = to_dev(k, nq), *dv_ = to_dev(v, nv), *dg = to_dev(g, T * Hv);
        float *dbeta = to_dev(beta, T * Hv), *dout = dev_nan(nv), *dS = dev_nan(nS);
        float *dscr = dev_nan(Hv * cuda_k_delta_rule_scratch(dk, dv, L));
        assert_int_equal(cuda_k_delta_rule_scratch(dk, dv, L), sn);
        CU(cuda_k_delta_rule_chunked(dout, dS, dq, dk_, dv_, dg, dbeta, T, Hv, dk, dv, L, dscr));
        float *gout = from_dev(dout, nv), *gS = from_dev(dS, nS);
        snprintf(what, sizeof what, "delta_rule out T=%lld Hv=%d dk=%d dv=%d chunk=%d", (long long)T, Hv, dk, dv, L);
        fails += mismatches(what, gout, wout, nv, 2e-5, 1e-4);
        snprintf(what, sizeof what, "delta_rule state T=%lld Hv=%d dk=%d dv=%d chunk=%d", (long long)T, Hv, dk, dv, L);
        fails += mismatches(what, gS, wS, nS, 2e-5, 1e-4);
        free(q); free(k); free(v); free(raw); free(gr); free(braw); free(g); free(beta); free(wout); free(wS);
        free(hq); free(hk); free(hv); free(hg); free(hb); free(ho); free(scr); free(gout); free(gS);
        dfree(dq); dfree(dk_); dfree(dv_); dfree(dg); dfree(dbeta); dfree(dout); dfree(dS); dfree(dscr);
    }
    assert_int_equal(fails, 0);
}

static void test_rmsnorm_gated(void **state)
{
    (void)state;
    static const struct { int64_t rows, n; } cs[] = {{1, 1}, {3, 7}, {96, 24}, {7, 255}, {3, 257}, {4, 1000}};
    int64_t fails = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int64_t rows = cs[c].rows, n = cs[c].n;
        const int inplace = (int)(c % 2);
        float *x = rand_floats(rows * n, -2, 2), *z = rand_floats(rows * n, -6, 6), *w = rand_floats(n, 0.5, 1.5);
        float *want = hmalloc(rows * n, sizeof *want);
        ref_rmsnorm_gated(want, x, z, w, rows, n, 1e-6f);
        float *dx = to_dev(x, rows * n), *dz = to_dev(z, rows * n), *dw = to_dev(w, n);
        float *dy = inplace ? dx : dev_nan(rows * n);
        CU(cuda_k_rmsnorm_gated(dy, dx, dz, dw, rows, n, 1e-6f));
        float *got = from_dev(dy, rows * n);
        char what[96];
        snprintf(what, sizeof what, "rmsnorm_gated rows=%lld n=%lld%s", (long long)rows, (long long)n,
                 inplace ? " in place" : "");
        fails += mismatches(what, got, want, rows * n, 1e-5, 1e-5);
        free(x); free(z); free(w); free(want); free(got);
        dfree(dx); dfree(dz); dfree(dw);
        if (!inplace)
            dfree(dy);
    }
    assert_int_equal(fails, 0);
}

/* ---- error paths: each becomes an error code with a message, and the device stays usable ---- */
static void test_errors(void **state)
{
    (void)state;
    rc_err e = {0};
    void *p = (void *)1;
    assert_int_equal(cuda_alloc(&p, (int64_t)1 << 50, 1, &e, "a petabyte"), RC_E_NOMEM);
    assert_null(p);
    printf("  out of memory: %s\n", e.msg);
    assert_non_null(strstr(e.msg, "1125899906842624 bytes for a petabyte"));
    assert_int_equal(cuda_alloc(&p, INT64_MAX, 4, &e, "overflow"), RC_E_RANGE);

    float *d = dev_nan(8);
    e = (rc_err){0};
    assert_int_equal(CUDA_CHECK(&e, cuda_k_rope_apply(d, d, d, 1, 1, 4, 6)), RC_E_DEVICE);
    printf("  bad launch: %s\n", e.msg);
    assert_non_null(strstr(e.msg, "cuda_k_rope_apply(d, d, d, 1, 1, 4, 6) failed at "));
    assert_non_null(strstr(e.msg, "test_kernels.c:"));
    assert_int_equal(cuda_k_matmul(d, d, d, NULL, -1, 1, 1), cudaErrorInvalidValue);
    assert_int_equal(cuda_k_attention(d, d, d, d, 1, 1, 0, 3, 2, 2, 1.0f, 0), cudaErrorInvalidValue);
    assert_int_equal(cuda_k_rmsnorm(d, d, NULL, 1, 8, 1e-6f, RC_NORM_W), cudaErrorInvalidValue);
    assert_int_equal(cuda_k_gdn_qk(d, d, d, 1, 8, 2, 3, 2, 1.0f, 1e-6f), cudaErrorInvalidValue); /* Hv % Hk */
    assert_int_equal(cuda_k_conv1d_causal(d, d, d, NULL, 1, 8, 0), cudaErrorInvalidValue);
    assert_int_equal(cuda_k_delta_rule_chunked(d, d, d, d, d, d, d, 1, 1, 2, 2, 0, d), cudaErrorInvalidValue);
    assert_int_equal(cuda_k_glu_rows(d, d, 1, 4, 3, RC_ACT_SILU), cudaErrorInvalidValue);
    assert_int_equal(cuda_k_rmsnorm_gated(d, d, d, NULL, 1, 8, 1e-6f), cudaErrorInvalidValue);

    /* more keys than one block's shared memory can hold: refused, never computed */
    int optin = 0, dev = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const int64_t S = optin / 4 + 64;
    float *kv = dev_nan(S * 2);
    assert_true(cuda_k_attention_smem(S, 0, 2) > (size_t)optin);
    cudaError_t err = cuda_k_attention(d, d, kv, kv, 1, S, S - 1, 1, 1, 2, 1.0f, 0);
    printf("  %lld keys (%zu bytes, device allows %d): %s\n", (long long)S, cuda_k_attention_smem(S, 0, 2), optin,
           cudaGetErrorString(err));
    assert_int_not_equal(err, cudaSuccess);
    (void)cudaGetLastError();

    /* the device still works after all of the above */
    float one[8] = {1, 1, 1, 1, 1, 1, 1, 1}, two[8] = {2, 2, 2, 2, 2, 2, 2, 2};
    CU(cudaMemcpy(d, one, sizeof one, cudaMemcpyHostToDevice));
    float *d1 = to_dev(one, 8);
    CU(cuda_k_add(d, d1, 8));
    float *got = from_dev(d, 8);
    assert_int_equal(mismatches("add after the errors", got, two, 8, 0, 0), 0);
    free(got);
    dfree(d); dfree(d1); dfree(kv);
}

/* ---- --bench: one representative shape per kernel, cudaEvent timing ---- */
typedef struct bench_args {
    float *a, *b, *c, *d;
    int64_t T, N, K;
} bench_args;

static double bench_ms(cudaError_t (*fn)(const bench_args *), const bench_args *a)
{
    cudaEvent_t t0, t1;
    float ms = 0.0f;
    const int reps = 10;
    CU(cudaEventCreate(&t0));
    CU(cudaEventCreate(&t1));
    for (int i = 0; i < 2; i++)
        CU(fn(a));
    CU(cudaEventRecord(t0, 0));
    for (int i = 0; i < reps; i++)
        CU(fn(a));
    CU(cudaEventRecord(t1, 0));
    CU(cudaEventSynchronize(t1));
    CU(cudaEventElapsedTime(&ms, t0, t1));
    CU(cudaEventDestroy(t0));
    CU(cudaEventDestroy(t1));
    return ms / reps;
}

static cudaError_t b_matmul(const bench_args *a) { return cuda_k_matmul(a->c, a->a, a->b, NULL, a->T, a->N, a->K); }
static cudaError_t b_rmsnorm(const bench_args *a)
{
    return cuda_k_rmsnorm(a->c, a->a, a->b, a->T, a->K, 1e-6f, RC_NORM_W);
}
static cudaError_t b_rope(const bench_args *a) { return cuda_k_rope_apply(a->a, a->b, a->d, a->T, 32, 128, 128); }
static cudaError_t b_attention(const bench_args *a)
{
    return cuda_k_attention(a->c, a->a, a->b, a->d, a->T, a->T, 0, 32, 8, 128, 0.088f, 0);
}
static cudaError_t b_glu(const bench_args *a) { return cuda_k_glu(a->c, a->a, a->b, a->T * a->K, RC_ACT_SILU); }

static void bench(void)
{
    const int64_t T = 1024, Hd = 4096, I = 11008, big = T * I;
    float *a = dev_nan(big), *b = dev_nan(I * Hd), *c = dev_nan(big), *d = dev_nan(big);
    CU(cudaMemset(a, 0, (size_t)big * sizeof(float)));
    CU(cudaMemset(b, 0, (size_t)(I * Hd) * sizeof(float)));
    CU(cudaMemset(d, 0, (size_t)big * sizeof(float)));
    bench_args m = {a, b, c, d, T, I, Hd};
    double ms = bench_ms(b_matmul, &m);
    printf("bench matmul     T=%lld N=%lld K=%lld   %8.3f ms  %7.1f GFLOP/s\n", (long long)T, (long long)I,
           (long long)Hd, ms, 2.0 * T * I * Hd / ms / 1e6);
    bench_args n = {a, b, c, d, T, 0, Hd};
    ms = bench_ms(b_rmsnorm, &n);
    printf("bench rmsnorm    rows=%lld n=%lld         %8.3f ms  %7.1f GB/s\n", (long long)T, (long long)Hd, ms,
           3.0 * T * Hd * 4 / ms / 1e6);
    bench_args r = {a, b, c, d, T, 0, 0};
    ms = bench_ms(b_rope, &r);
    printf("bench rope_apply T=%lld H=32 D=128       %8.3f ms  %7.1f GB/s\n", (long long)T, ms,
           2.0 * T * 32 * 128 * 4 / ms / 1e6);
    ms = bench_ms(b_attention, &r);
    printf("bench attention  T=S=%lld H=32/8 D=128   %8.3f ms  %7.1f GFLOP/s\n", (long long)T, ms,
           4.0 * T * T / 2 * 32 * 128 / ms / 1e6);
    bench_args g = {a, b, c, d, T, 0, I};
    ms = bench_ms(b_glu, &g);
    printf("bench glu        n=%lld            %8.3f ms  %7.1f GB/s\n", (long long)big, ms, 3.0 * big * 4 / ms / 1e6);
    dfree(a); dfree(b); dfree(c); dfree(d);
}

static int setup(void **state)
{
    (void)state;
    gsl_set_error_handler_off();
    rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng)
        return -1;
    gsl_rng_set(rng, SEED);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gsl_rng_free(rng);
    return 0;
}

int main(int argc, char **argv)
{
    gpu_skip_unless_present("cuda.kernels");
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
        if (setup(NULL))
            return 1;
        bench();
        teardown(NULL);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_fails), cmocka_unit_test(test_embed),     cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_rmsnorm),       cmocka_unit_test(test_rope),      cmocka_unit_test(test_attention),
        cmocka_unit_test(test_elementwise),   cmocka_unit_test(test_gate_pieces), cmocka_unit_test(test_gdn_conv),
        cmocka_unit_test(test_gdn_qk_gates),  cmocka_unit_test(test_delta_rule), cmocka_unit_test(test_rmsnorm_gated),
        cmocka_unit_test(test_errors),        cmocka_unit_test(test_dequant),
    };
    return cmocka_run_group_tests_name("cuda.kernels", tests, setup, teardown);
}
