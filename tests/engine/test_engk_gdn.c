/* GPU check of the engine's gated delta net kernels (engine/eng_gdn.h) against ref/ops: causal conv + silu with a
 * carried state, q/k L2 norm and the gates, the delta rule (ref_delta_rule_step), the gated norm, the output gate.
 * Seeded inputs, odd sizes, NaN-poisoned outputs; and a launch split in two (carried state) equals one launch bit
 * for bit. Exit 77 without a CUDA device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gdn.h"
#include "engk_check.h"
#include "gpu_skip.h"
#include "ops.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static int failures;

static float urand(float lo, float hi)
{
    return lo + (hi - lo) * (float)(ekc_xorshift64(&rng) >> 40) * (1.0f / 16777216.0f);
}

static float *hbuf(int64_t n)
{
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(2);
    }
    return p;
}

static float *hrand(int64_t n, float lo, float hi)
{
    float *p = hbuf(n);
    for (int64_t i = 0; i < n; i++)
        p[i] = urand(lo, hi);
    return p;
}

#define CU(call)                                                                                                   \
    do {                                                                                                           \
        cudaError_t err_ = (call);                                                                                 \
        if (err_ != cudaSuccess) {                                                                                 \
            fprintf(stderr, "%s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, cudaGetErrorString(err_));      \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

static float *dev(const float *h, int64_t n)
{
    float *d;
    CU(cudaMalloc((void **)&d, (size_t)(n > 0 ? n : 1) * sizeof *d));
    if (h && n > 0)
        CU(cudaMemcpy(d, h, (size_t)n * sizeof *d, cudaMemcpyHostToDevice));
    return d;
}

static float *back(const float *d, int64_t n)
{
    float *h = hbuf(n);
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(h, d, (size_t)n * sizeof *h, cudaMemcpyDeviceToHost));
    return h;
}

/* |got - want| <= atol + rtol |want| everywhere (NaN fails); prints the first few misses. */
static void check(const char *what, const float *got, const float *want, int64_t n, double atol, double rtol)
{
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        if (!(d <= atol + rtol * fabs(want[i]))) {
            if (bad++ < 3)
                printf("  %s[%lld]: got %.9g want %.9g\n", what, (long long)i, got[i], want[i]);
        } else if (d > worst)
            worst = d;
    }
    printf("%-44s %s (max |diff| %.3g over %lld)\n", what, bad ? "FAIL" : "ok", worst, (long long)n);
    failures += bad != 0;
}

static void check_bits(const char *what, const float *a, const float *b, int64_t n)
{
    const int same = memcmp(a, b, (size_t)n * sizeof *a) == 0;
    printf("%-44s %s\n", what, same ? "ok (bit-identical)" : "FAIL (bits differ)");
    failures += !same;
}

/* ---- conv: one launch of T rows vs ref; the same rows as T1 + (T - T1) with the carried state ---- */
static void test_conv(int T, int C, int K, int fresh, int T1)
{
    char name[96];
    const int64_t xs = C + 3; /* gin rows are wider than the conv channels */
    float *x = hrand((int64_t)T * xs, -2, 2), *w = hrand((int64_t)C * K, -0.6f, 0.6f);
    float *st0 = hrand((int64_t)(K - 1) * C, -2, 2);
    float *xc = hbuf((int64_t)T * C), *want = hbuf((int64_t)T * C), *wst = hbuf((int64_t)(K - 1) * C);
    for (int t = 0; t < T; t++)
        memcpy(xc + (int64_t)t * C, x + t * xs, (size_t)C * sizeof *xc);
    ref_conv1d_causal(want, xc, w, fresh ? NULL : st0, T, C, K);
    for (int64_t i = 0; i < (int64_t)T * C; i++)
        want[i] = ref_act(want[i], RC_ACT_SILU);
    for (int j = 0; j < K - 1; j++) /* last K-1 rows of (state, x) */
        for (int c = 0; c < C; c++) {
            const int src = T - (K - 1) + j;
            wst[(int64_t)j * C + c] = src >= 0 ? xc[(int64_t)src * C + c] : fresh ? 0.0f : st0[(int64_t)(T + j) * C + c];
        }
    float *dx = dev(x, (int64_t)T * xs), *dw = dev(w, (int64_t)C * K), *du = ekc_dev_nan((int64_t)T * C, 4);
    float *dst = dev(st0, (int64_t)(K - 1) * C);
    CU(engk_gdn_conv(du, dst, dx, xs, dw, T, C, K, fresh, 0));
    float *u1 = back(du, (int64_t)T * C), *s1 = back(dst, (int64_t)(K - 1) * C);
    snprintf(name, sizeof name, "conv T=%d C=%d K=%d%s", T, C, K, fresh ? " fresh" : "");
    check(name, u1, want, (int64_t)T * C, 4e-6, 1e-5);
    snprintf(name, sizeof name, "conv state T=%d C=%d K=%d%s", T, C, K, fresh ? " fresh" : "");
    check_bits(name, s1, wst, (int64_t)(K - 1) * C);
    /* split: T1 rows, then the rest from the carried state */
    float *du2 = ekc_dev_nan((int64_t)T * C, 4);
    CU(cudaMemcpy(dst, st0, (size_t)(K - 1) * C * sizeof(float), cudaMemcpyHostToDevice));
    CU(engk_gdn_conv(du2, dst, dx, xs, dw, T1, C, K, fresh, 0));
    CU(engk_gdn_conv(du2 + (int64_t)T1 * C, dst, dx + T1 * xs, xs, dw, T - T1, C, K, 0, 0));
    float *u2 = back(du2, (int64_t)T * C), *s2 = back(dst, (int64_t)(K - 1) * C);
    snprintf(name, sizeof name, "conv split %d+%d = one launch", T1, T - T1);
    check_bits(name, u2, u1, (int64_t)T * C);
    check_bits("  and its carried state", s2, s1, (int64_t)(K - 1) * C);
    cudaFree(dx); cudaFree(dw); cudaFree(du); cudaFree(du2); cudaFree(dst);
    free(x); free(w); free(st0); free(xc); free(want); free(wst); free(u1); free(s1); free(u2); free(s2);
}

/* ---- prep: q/k L2 norm (q scaled), beta, g ---- */
static void test_prep(int T, int Hk, int Hv, int dk, int dv)
{
    char name[96];
    const int64_t C = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv, xs = C + (int64_t)Hv * dv + 2 * Hv + 5, boff = C + (int64_t)Hv * dv;
    float *u = hrand((int64_t)T * C, -1.5f, 1.5f), *gin = hrand((int64_t)T * xs, -3, 3);
    float *alog = hrand(Hv, -1.5f, 1.0f), *dt = hrand(Hv, -1, 1);
    gin[boff + Hv] = 25.0f; /* softplus above its threshold 20 */
    const float qmul = (float)pow((double)dk, -0.5);
    float *wq = hbuf((int64_t)T * Hk * dk), *wk = hbuf((int64_t)T * Hk * dk), *wb = hbuf((int64_t)T * Hv),
          *wg = hbuf((int64_t)T * Hv);
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < Hk; h++) {
            float *q = wq + ((int64_t)t * Hk + h) * dk, *k = wk + ((int64_t)t * Hk + h) * dk;
            ref_l2norm(q, u + t * C + (int64_t)h * dk, 1, dk, 1e-6f);
            ref_l2norm(k, u + t * C + (int64_t)Hk * dk + (int64_t)h * dk, 1, dk, 1e-6f);
            for (int d = 0; d < dk; d++)
                q[d] = q[d] * qmul;
        }
        for (int h = 0; h < Hv; h++) {
            wb[(int64_t)t * Hv + h] = ref_sigmoid(gin[t * xs + boff + h]);
            wg[(int64_t)t * Hv + h] =
                -(float)exp((double)alog[h]) * ref_softplus(gin[t * xs + boff + Hv + h] + dt[h]);
        }
    }
    float *du = dev(u, (int64_t)T * C), *dgin = dev(gin, (int64_t)T * xs), *dal = dev(alog, Hv), *ddt = dev(dt, Hv);
    float *dq = ekc_dev_nan((int64_t)T * Hk * dk, 4), *dkk = ekc_dev_nan((int64_t)T * Hk * dk, 4),
          *db = ekc_dev_nan((int64_t)T * Hv, 4), *dg = ekc_dev_nan((int64_t)T * Hv, 4);
    CU(engk_gdn_prep(dq, dkk, db, dg, du, dgin, xs, boff, dal, ddt, T, Hk, Hv, dk, dv, qmul, 0));
    float *q = back(dq, (int64_t)T * Hk * dk), *k = back(dkk, (int64_t)T * Hk * dk), *b = back(db, (int64_t)T * Hv),
          *g = back(dg, (int64_t)T * Hv);
    snprintf(name, sizeof name, "prep q T=%d Hk=%d Hv=%d dk=%d", T, Hk, Hv, dk);
    check(name, q, wq, (int64_t)T * Hk * dk, 1e-7, 2e-6);
    check("  k", k, wk, (int64_t)T * Hk * dk, 1e-7, 2e-6);
    check("  beta", b, wb, (int64_t)T * Hv, 0, 2.5e-7); /* double exp: 1 ulp apart at most */
    check("  g", g, wg, (int64_t)T * Hv, 0, 2.5e-7);
    cudaFree(du); cudaFree(dgin); cudaFree(dal); cudaFree(ddt); cudaFree(dq); cudaFree(dkk); cudaFree(db); cudaFree(dg);
    free(u); free(gin); free(alog); free(dt); free(wq); free(wk); free(wb); free(wg); free(q); free(k); free(b); free(g);
}

/* ---- delta rule: T steps vs ref_delta_rule_step per head; split launches = one launch ---- */
static void test_delta(int T, int Hk, int Hv, int dk, int dv, int fresh, int T1)
{
    char name[96];
    const int r = Hv / Hk;
    const int64_t C = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv, nq = (int64_t)T * Hk * dk, ns = (int64_t)Hv * dv * dk;
    float *qn = hbuf(nq), *kn = hbuf(nq), *u = hrand((int64_t)T * C, -1, 1), *beta = hrand((int64_t)T * Hv, 0.05f, 0.95f),
          *g = hrand((int64_t)T * Hv, -2.0f, -0.01f), *S0 = hrand(ns, -0.5f, 0.5f);
    for (int64_t i = 0; i < nq; i += dk) { /* unit rows, as the prep kernel gives them */
        float *a = hrand(dk, -1, 1), *b = hrand(dk, -1, 1);
        ref_l2norm(qn + i, a, 1, dk, 1e-6f);
        ref_l2norm(kn + i, b, 1, dk, 1e-6f);
        free(a);
        free(b);
    }
    float *want = hbuf((int64_t)T * Hv * dv), *wS = hbuf(ns), *S = hbuf((int64_t)dk * dv), *o = hbuf(dv);
    for (int h = 0; h < Hv; h++) { /* ref's state is [dk, dv]; the engine's [dv, dk] */
        for (int d = 0; d < dk; d++)
            for (int e = 0; e < dv; e++)
                S[(int64_t)d * dv + e] = fresh ? 0.0f : S0[((int64_t)h * dv + e) * dk + d];
        for (int t = 0; t < T; t++) {
            const int64_t qo = ((int64_t)t * Hk + h / r) * dk;
            ref_delta_rule_step(S, o, qn + qo, kn + qo, u + t * C + 2 * (int64_t)Hk * dk + (int64_t)h * dv,
                                g[(int64_t)t * Hv + h], beta[(int64_t)t * Hv + h], dk, dv);
            memcpy(want + ((int64_t)t * Hv + h) * dv, o, (size_t)dv * sizeof *o);
        }
        for (int d = 0; d < dk; d++)
            for (int e = 0; e < dv; e++)
                wS[((int64_t)h * dv + e) * dk + d] = S[(int64_t)d * dv + e];
    }
    float *dq = dev(qn, nq), *dk_ = dev(kn, nq), *du = dev(u, (int64_t)T * C), *db = dev(beta, (int64_t)T * Hv),
          *dg = dev(g, (int64_t)T * Hv), *dS = dev(S0, ns), *dout = ekc_dev_nan((int64_t)T * Hv * dv, 4);
    CU(engk_gdn_delta(dout, dS, dq, dk_, du, db, dg, T, (int)C, Hk, Hv, dk, dv, fresh, 0));
    float *o1 = back(dout, (int64_t)T * Hv * dv), *S1 = back(dS, ns);
    snprintf(name, sizeof name, "delta T=%d Hk=%d Hv=%d dk=%d dv=%d%s", T, Hk, Hv, dk, dv, fresh ? " fresh" : "");
    check(name, o1, want, (int64_t)T * Hv * dv, 2e-5, 1e-4);
    check("  final state", S1, wS, ns, 2e-5, 1e-4);
    float *dout2 = ekc_dev_nan((int64_t)T * Hv * dv, 4);
    CU(cudaMemcpy(dS, S0, (size_t)ns * sizeof(float), cudaMemcpyHostToDevice));
    CU(engk_gdn_delta(dout2, dS, dq, dk_, du, db, dg, T1, (int)C, Hk, Hv, dk, dv, fresh, 0));
    CU(engk_gdn_delta(dout2 + (int64_t)T1 * Hv * dv, dS, dq + (int64_t)T1 * Hk * dk, dk_ + (int64_t)T1 * Hk * dk,
                      du + T1 * C, db + (int64_t)T1 * Hv, dg + (int64_t)T1 * Hv, T - T1, (int)C, Hk, Hv, dk, dv, 0,
                      0));
    float *o2 = back(dout2, (int64_t)T * Hv * dv), *S2 = back(dS, ns);
    snprintf(name, sizeof name, "delta split %d+%d = one launch", T1, T - T1);
    check_bits(name, o2, o1, (int64_t)T * Hv * dv);
    check_bits("  and its carried state", S2, S1, ns);
    cudaFree(dq); cudaFree(dk_); cudaFree(du); cudaFree(db); cudaFree(dg); cudaFree(dS); cudaFree(dout); cudaFree(dout2);
    free(qn); free(kn); free(u); free(beta); free(g); free(S0); free(want); free(wS); free(S); free(o);
    free(o1); free(S1); free(o2); free(S2);
}

/* ---- chunked delta rule: one call vs ref_delta_rule_step; split calls (pending rows carried) = one call, bit for
 * bit, outputs and the settled state. first < 64: the base after decode steps, off the 64-row grid. ---- */
typedef struct gdn_in {
    int T, Hk, Hv, dk, dv;
    int64_t C, nq, ns;
    float *qn, *kn, *u, *beta, *g, *S0;
    float *dq, *dk_, *du, *db, *dg;
} gdn_in;

static void gdn_in_make(gdn_in *I, int T, int Hk, int Hv, int dk, int dv)
{
    I->T = T, I->Hk = Hk, I->Hv = Hv, I->dk = dk, I->dv = dv;
    I->C = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv, I->nq = (int64_t)T * Hk * dk, I->ns = (int64_t)Hv * dv * dk;
    I->qn = hbuf(I->nq), I->kn = hbuf(I->nq), I->u = hrand((int64_t)T * I->C, -1, 1);
    I->beta = hrand((int64_t)T * Hv, 0.05f, 0.95f), I->g = hrand((int64_t)T * Hv, -2.0f, -0.01f);
    I->S0 = hrand(I->ns, -0.5f, 0.5f);
    const float qmul = (float)pow((double)dk, -0.5);
    for (int64_t i = 0; i < I->nq; i += dk) {
        float *a = hrand(dk, -1, 1), *b = hrand(dk, -1, 1);
        ref_l2norm(I->qn + i, a, 1, dk, 1e-6f);
        ref_l2norm(I->kn + i, b, 1, dk, 1e-6f);
        for (int d = 0; d < dk; d++)
            I->qn[i + d] *= qmul;
        free(a);
        free(b);
    }
    I->dq = dev(I->qn, I->nq), I->dk_ = dev(I->kn, I->nq), I->du = dev(I->u, (int64_t)T * I->C);
    I->db = dev(I->beta, (int64_t)T * Hv), I->dg = dev(I->g, (int64_t)T * Hv);
}

static void gdn_in_free(gdn_in *I)
{
    cudaFree(I->dq); cudaFree(I->dk_); cudaFree(I->du); cudaFree(I->db); cudaFree(I->dg);
    free(I->qn); free(I->kn); free(I->u); free(I->beta); free(I->g); free(I->S0);
}

/* Runs rows [0, T) as calls of sizes split[] (cycled; 0 = all at once) from base position b0 (S0, or zeros when
 * fresh), then settles; core [T, Hv, dv] and the settled state come back in host buffers. */
static void run_chunked(const gdn_in *I, int64_t b0, int fresh, const int *split, int nsplit, float **core_out,
                        float **state_out)
{
    const int T = I->T, Hk = I->Hk, Hv = I->Hv, dk = I->dk, dv = I->dv;
    float *dcore = ekc_dev_nan((int64_t)T * Hv * dv, 4),
          *dS = ekc_dev_nan(I->ns + engk_gdn_pend_floats(Hk, Hv, dk, dv), 4);
    float *dws = ekc_dev_nan(engk_gdn_chunk_ws_floats(T, Hv), 4);
    if (!fresh)
        CU(cudaMemcpy(dS, I->S0, (size_t)I->ns * sizeof(float), cudaMemcpyHostToDevice));
    int64_t base = b0, pos = b0;
    for (int t0 = 0, k = 0; t0 < T; k++) {
        int n = nsplit ? split[k % nsplit] : T;
        n = n < T - t0 ? n : T - t0;
        const int first = (int)((base / ENG_GDN_CHUNK + 1) * ENG_GDN_CHUNK - base);
        CU(engk_gdn_chunked(dcore + (int64_t)t0 * Hv * dv, dS, dS + I->ns, dws, I->dq + (int64_t)t0 * Hk * dk,
                            I->dk_ + (int64_t)t0 * Hk * dk, I->du + t0 * I->C, I->db + (int64_t)t0 * Hv,
                            I->dg + (int64_t)t0 * Hv, n, (int)I->C, Hk, Hv, dk, dv, (int)(pos - base), first,
                            fresh && base == b0, 0, 0));
        t0 += n;
        pos += n;
        base = engk_gdn_next_base(base, pos);
    }
    const int first = (int)((base / ENG_GDN_CHUNK + 1) * ENG_GDN_CHUNK - base);
    CU(engk_gdn_chunked(NULL, dS, dS + I->ns, dws, NULL, NULL, NULL, NULL, NULL, 0, (int)I->C, Hk, Hv, dk, dv,
                        (int)(pos - base), first, fresh && base == b0, 1, 0));
    *core_out = back(dcore, (int64_t)T * Hv * dv);
    *state_out = back(dS, I->ns);
    cudaFree(dcore); cudaFree(dS); cudaFree(dws);
}

static void test_chunked(int T, int Hk, int Hv, int dk, int dv, int64_t b0, int fresh)
{
    char name[112];
    gdn_in I;
    gdn_in_make(&I, T, Hk, Hv, dk, dv);
    const int r = Hv / Hk;
    float *want = hbuf((int64_t)T * Hv * dv), *wS = hbuf(I.ns), *S = hbuf((int64_t)dk * dv), *o = hbuf(dv);
    for (int h = 0; h < Hv; h++) {
        for (int d = 0; d < dk; d++)
            for (int e = 0; e < dv; e++)
                S[(int64_t)d * dv + e] = fresh ? 0.0f : I.S0[((int64_t)h * dv + e) * dk + d];
        for (int t = 0; t < T; t++) {
            const int64_t qo = ((int64_t)t * Hk + h / r) * dk;
            ref_delta_rule_step(S, o, I.qn + qo, I.kn + qo, I.u + t * I.C + 2 * (int64_t)Hk * dk + (int64_t)h * dv,
                                I.g[(int64_t)t * Hv + h], I.beta[(int64_t)t * Hv + h], dk, dv);
            memcpy(want + ((int64_t)t * Hv + h) * dv, o, (size_t)dv * sizeof *o);
        }
        for (int d = 0; d < dk; d++)
            for (int e = 0; e < dv; e++)
                wS[((int64_t)h * dv + e) * dk + d] = S[(int64_t)d * dv + e];
    }
    float *o1, *S1;
    run_chunked(&I, b0, fresh, NULL, 0, &o1, &S1);
    snprintf(name, sizeof name, "chunked T=%d Hk=%d Hv=%d dk=%d dv=%d base=%lld%s", T, Hk, Hv, dk, dv, (long long)b0,
             fresh ? " fresh" : "");
    check(name, o1, want, (int64_t)T * Hv * dv, 2e-5, 1e-4);
    check("  settled state", S1, wS, I.ns, 2e-5, 1e-4);
    static const int splits[][3] = {{1, 0, 0}, {3, 0, 0}, {5, 0, 0}, {63, 0, 0}, {64, 0, 0}, {65, 0, 0}, {100, 0, 0},
                                    {7, 64, 2}};
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        const int ns = splits[i][1] ? 3 : 1;
        float *o2, *S2;
        run_chunked(&I, b0, fresh, splits[i], ns, &o2, &S2);
        if (ns == 1)
            snprintf(name, sizeof name, "  split in calls of %d = one call", splits[i][0]);
        else
            snprintf(name, sizeof name, "  split in calls of %d, %d, %d, ... = one call", splits[i][0], splits[i][1],
                     splits[i][2]);
        check_bits(name, o2, o1, (int64_t)T * Hv * dv);
        check_bits("    and the settled state", S2, S1, I.ns);
        free(o2);
        free(S2);
    }
    free(want); free(wS); free(S); free(o); free(o1); free(S1);
    gdn_in_free(&I);
}

/* ---- the fused decode step: `steps` steps of every form (ENG_GDN_STEP_V1 .. V4), launched one by one and captured
 * as one graph (where V3 and V4 launch programmatically: each step overlaps the one before it), vs the four kernels
 * run in a row at T = 1, bit for bit (outputs of every step, delta-rule state, conv state); the four kernels' outputs
 * all finite (so no form can pass by leaving a NaN-poisoned output alone), and the engine's form vs ref's gated norm
 * of the unfused core (tolerance) ---- */
typedef struct step_in {
    int Hk, Hv, dk, dv, K, fresh, steps;
    int64_t nin, Vd, ns, ncs;
    float qmul, *dgin, *dcw, *dal, *ddt, *dnw;
} step_in;

/* The steps of `form` (0: the four kernels) from S0 / cs0 on a stream of its own (captured as one graph when
 * graph), outputs into a NaN-poisoned y; returns y, S and the conv state on the host, and for form 0 the last
 * step's core (before the gated norm). A form's launch refused: that error, nothing returned. */
static cudaError_t step_run(const step_in *I, int form, int graph, const float *S0, const float *cs0, float **hy, float **hS,
                     float **hc, float **hcore)
{
    const int Hk = I->Hk, Hv = I->Hv, dk = I->dk, dv = I->dv, K = I->K, C = (int)(I->nin - I->Vd - 2 * Hv);
    const int64_t Vd = I->Vd, nin = I->nin;
    float *S = dev(S0, I->ns), *cs = dev(cs0, I->ncs), *y = ekc_dev_nan(I->steps * Vd, 4);
    float *u = ekc_dev_nan(C, 4), *qn = ekc_dev_nan((int64_t)Hk * dk, 4), *kn = ekc_dev_nan((int64_t)Hk * dk, 4),
          *b = ekc_dev_nan(Hv, 4), *g = ekc_dev_nan(Hv, 4), *core = ekc_dev_nan(Vd, 4);
    cudaStream_t st;
    cudaGraph_t gr = NULL;
    cudaGraphExec_t ge = NULL;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CU(cudaDeviceSynchronize()); /* the poisoning above ran on the legacy stream, which st does not wait for */
    if (graph)
        CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    cudaError_t err = cudaSuccess;
    for (int t = 0; t < I->steps && err == cudaSuccess; t++) {
        const float *x = I->dgin + t * nin;
        const int fr = I->fresh && t == 0;
        if (form) {
            err = engk_gdn_step_form(form, y + t * Vd, S, cs, x, I->dcw, I->dal, I->ddt, I->dnw, Hk, Hv, dk, dv, K,
                                     I->qmul, 1e-6f, fr, st);
            continue;
        }
        CU(engk_gdn_conv(u, cs, x, nin, I->dcw, 1, C, K, fr, st));
        CU(engk_gdn_prep(qn, kn, b, g, u, x, nin, C + Vd, I->dal, I->ddt, 1, Hk, Hv, dk, dv, I->qmul, st));
        CU(engk_gdn_delta(core, S, qn, kn, u, b, g, 1, C, Hk, Hv, dk, dv, fr, st));
        CU(engk_gdn_norm_gate(y + t * Vd, core, x + C, nin, I->dnw, 1, Hv, dv, 1e-6f, st));
    }
    if (graph) {
        const cudaError_t end = cudaStreamEndCapture(st, &gr);
        err = err != cudaSuccess ? err : end;
        if (err == cudaSuccess)
            err = cudaGraphInstantiate(&ge, gr, 0);
        if (err == cudaSuccess)
            err = cudaGraphLaunch(ge, st);
    }
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(st); /* a fault in the kernel shows here */
    if (err == cudaSuccess) {
        *hy = back(y, I->steps * Vd);
        *hS = back(S, I->ns);
        *hc = back(cs, I->ncs);
        if (!form)
            *hcore = back(core, Vd);
    } else
        (void)cudaGetLastError();
    if (ge)
        cudaGraphExecDestroy(ge);
    if (gr)
        cudaGraphDestroy(gr);
    cudaStreamDestroy(st);
    cudaFree(S); cudaFree(cs); cudaFree(y); cudaFree(u); cudaFree(qn); cudaFree(kn); cudaFree(b); cudaFree(g);
    cudaFree(core);
    return err;
}

static void test_step(int Hk, int Hv, int dk, int dv, int K, int fresh, int steps)
{
    char name[112];
    if (!engk_gdn_step_fits(Hk, Hv, dk, dv, K)) {
        printf("step Hk=%d Hv=%d dk=%d dv=%d K=%d: the fused step does not apply here (no cluster launch or shape)\n",
               Hk, Hv, dk, dv, K);
        return;
    }
    step_in I = {.Hk = Hk, .Hv = Hv, .dk = dk, .dv = dv, .K = K, .fresh = fresh, .steps = steps};
    const int64_t C = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv, Vd = (int64_t)Hv * dv;
    I.Vd = Vd;
    I.nin = C + Vd + 2 * Hv;
    I.ns = Vd * dk;
    I.ncs = (int64_t)(K - 1) * C;
    float *gin = hrand(steps * I.nin, -2, 2), *cw = hrand(C * K, -0.6f, 0.6f), *S0 = hrand(I.ns, -0.5f, 0.5f);
    float *cs0 = hrand(I.ncs, -2, 2), *alog = hrand(Hv, -1.5f, 1.0f), *dt = hrand(Hv, -1, 1), *nw = hrand(dv, 0.5f, 1.5f);
    I.qmul = (float)pow((double)dk, -0.5);
    I.dgin = dev(gin, steps * I.nin);
    I.dcw = dev(cw, C * K);
    I.dal = dev(alog, Hv);
    I.ddt = dev(dt, Hv);
    I.dnw = dev(nw, dv);
    float *y1, *S1, *c1, *hcore;
    CU(step_run(&I, 0, 0, S0, cs0, &y1, &S1, &c1, &hcore));
    snprintf(name, sizeof name, "step Hk=%d Hv=%d dk=%d dv=%d K=%d x%d%s", Hk, Hv, dk, dv, K, steps,
             fresh ? " fresh" : "");
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < steps * Vd; i++)
        nonfinite += !isfinite(y1[i]);
    printf("%-44s %s (%lld of %lld outputs not finite)\n", name, nonfinite ? "FAIL" : "ok", (long long)nonfinite,
           (long long)(steps * Vd));
    failures += nonfinite != 0;
    float *want = hbuf(Vd), *zc = hbuf(Vd);
    memcpy(zc, gin + (steps - 1) * I.nin + C, (size_t)Vd * sizeof *zc);
    ref_rmsnorm_gated(want, hcore, zc, nw, Hv, dv, 1e-6f);
    for (int form = ENG_GDN_STEP_V1; form <= ENG_GDN_STEP_NFORMS; form++)
        for (int graph = 0; graph < 2; graph++) {
            float *y, *S, *c;
            char what[64];
            snprintf(what, sizeof what, "  V%d%s = the four kernels: outputs", form, graph ? " as a graph" : "");
            const cudaError_t err = step_run(&I, form, graph, S0, cs0, &y, &S, &c, NULL);
            if (err != cudaSuccess) {
                printf("%-44s FAIL (%s)\n", what, cudaGetErrorString(err));
                failures++;
                if (cudaDeviceSynchronize() != cudaSuccess) { /* a fault, not a refused launch: nothing more runs */
                    printf("FAIL: the device faulted in V%d%s; stopping\n", form, graph ? " as a graph" : "");
                    exit(1);
                }
                continue;
            }
            if (form == ENG_GDN_STEP_FORM && !graph) /* the engine's form: the last output vs ref's gated norm */
                check("  the engine's form vs ref gated norm", y + (steps - 1) * Vd, want, Vd, 1e-6, 2e-6);
            check_bits(what, y, y1, steps * Vd);
            check_bits("    delta-rule state", S, S1, I.ns);
            check_bits("    conv state", c, c1, I.ncs);
            free(y); free(S); free(c);
        }
    cudaFree(I.dgin); cudaFree(I.dcw); cudaFree(I.dal); cudaFree(I.ddt); cudaFree(I.dnw);
    free(gin); free(cw); free(S0); free(cs0); free(alog); free(dt); free(nw); free(y1); free(S1); free(c1);
    free(hcore); free(want); free(zc);
}

/* ---- gated norm and the attention output gate ---- */
static void test_norm_gate(int T, int Hv, int dv)
{
    char name[96];
    const int64_t n = (int64_t)T * Hv * dv, zs = (int64_t)Hv * dv + 11;
    float *x = hrand(n, -2, 2), *z = hrand((int64_t)T * zs, -4, 4), *w = hrand(dv, 0.5f, 1.5f);
    float *zc = hbuf(n), *want = hbuf(n);
    for (int t = 0; t < T; t++)
        memcpy(zc + (int64_t)t * Hv * dv, z + t * zs, (size_t)Hv * dv * sizeof *zc);
    ref_rmsnorm_gated(want, x, zc, w, (int64_t)T * Hv, dv, 1e-6f);
    float *dx = dev(x, n), *dz = dev(z, (int64_t)T * zs), *dw = dev(w, dv), *dy = ekc_dev_nan(n, 4);
    CU(engk_gdn_norm_gate(dy, dx, dz, zs, dw, T, Hv, dv, 1e-6f, 0));
    float *y = back(dy, n);
    snprintf(name, sizeof name, "norm_gate T=%d Hv=%d dv=%d", T, Hv, dv);
    check(name, y, want, n, 1e-6, 2e-6);
    CU(engk_gdn_norm_gate(dx, dx, dz, zs, dw, T, Hv, dv, 1e-6f, 0)); /* in place */
    float *y2 = back(dx, n);
    check_bits("  in place = out of place", y2, y, n);
    cudaFree(dx); cudaFree(dz); cudaFree(dw); cudaFree(dy);
    free(x); free(z); free(w); free(zc); free(want); free(y); free(y2);
}

static void test_sigmoid_gate(int T, int n)
{
    const int64_t N = (int64_t)T * n;
    float *c = hrand(N, -3, 3), *g = hrand(N, -8, 8), *want = hbuf(N);
    for (int64_t i = 0; i < N; i++)
        want[i] = c[i] * ref_sigmoid(g[i]);
    float *dc = dev(c, N), *dg = dev(g, N);
    CU(engk_sigmoid_gate(dc, dg, T, n, 0));
    float *got = back(dc, N);
    check("sigmoid gate", got, want, N, 0, 2.5e-7);
    cudaFree(dc); cudaFree(dg);
    free(c); free(g); free(want); free(got);
}

/* ---- --bench: the qwen3.5-9b linear layer (Hk 16, Hv 32, dk = dv = 128, conv 4): prefill of 2048 rows chunked
 * vs recurrent, and the decode step's GDN kernels (conv, prep, delta, norm_gate) at T = 1 and its fused forms (V1-V4),
 * in us per layer, launched back to back and (last line) replayed as a graph ---- */
typedef struct bench_ctx {
    gdn_in *I;
    float *core, *S, *ws, *conv_u, *conv_st, *conv_w, *gin, *alog, *dt, *nw;
    int T, which;
} bench_ctx;

static cudaError_t bench_fn(void *p)
{
    bench_ctx *b = p;
    gdn_in *I = b->I;
    const int Hk = I->Hk, Hv = I->Hv, dk = I->dk, dv = I->dv, C = (int)I->C;
    switch (b->which) {
    case 0:
        return engk_gdn_chunked(b->core, b->S, b->S + I->ns, b->ws, I->dq, I->dk_, I->du, I->db, I->dg, b->T, C, Hk,
                                Hv, dk, dv, 0, ENG_GDN_CHUNK, 0, 0, 0);
    case 1:
        return engk_gdn_delta(b->core, b->S, I->dq, I->dk_, I->du, I->db, I->dg, b->T, C, Hk, Hv, dk, dv, 0, 0);
    case 2:
        return engk_gdn_conv(b->conv_u, b->conv_st, b->gin, C + (int64_t)Hv * dv + 2 * Hv, b->conv_w, 1, C, 4, 0, 0);
    case 3:
        return engk_gdn_prep(I->dq, I->dk_, I->db, I->dg, b->conv_u, b->gin, C + (int64_t)Hv * dv + 2 * Hv,
                             C + (int64_t)Hv * dv, b->alog, b->dt, 1, Hk, Hv, dk, dv, 0.088f, 0);
    case 10 + ENG_GDN_STEP_V1:
    case 10 + ENG_GDN_STEP_V2:
    case 10 + ENG_GDN_STEP_V3:
    case 10 + ENG_GDN_STEP_V4:
        return engk_gdn_step_form(b->which - 10, b->core, b->S, b->conv_st, b->gin, b->conv_w, b->alog, b->dt, b->nw,
                                  Hk, Hv, dk, dv, 4, 0.088f, 1e-6f, 0, 0);
    default:
        return engk_gdn_norm_gate(b->core, b->core, b->gin + C, C + (int64_t)Hv * dv + 2 * Hv, b->nw, 1, Hv, dv, 1e-6f,
                                  0);
    }
}

static int bench(void)
{
    gdn_in I;
    gdn_in_make(&I, 2048, 16, 32, 128, 128);
    const int64_t C = I.C, nin = C + 32 * 128 + 64;
    float *h = hrand(4 * C + nin, -1, 1);
    bench_ctx b = {.I = &I, .core = ekc_dev_nan(2048 * I.ns / 128, 4),
                   .S = dev(NULL, I.ns + engk_gdn_pend_floats(16, 32, 128, 128)),
                   .ws = dev(NULL, engk_gdn_chunk_ws_floats(2048, 32)), .conv_u = dev(NULL, C),
                   .conv_st = dev(h, 3 * C), .conv_w = dev(h, 4 * C), .gin = dev(h, nin), .alog = dev(h, 32),
                   .dt = dev(h, 32), .nw = dev(h, 128)};
    CU(cudaMemcpy(b.S, I.S0, (size_t)I.ns * sizeof(float), cudaMemcpyHostToDevice));
    b.T = 2048;
    b.which = 0;
    const double chunk = ekc_time_us(bench_fn, &b);
    b.which = 1;
    const double rec = ekc_time_us(bench_fn, &b);
    printf("prefill of 2048 rows, qwen3.5-9b linear layer: chunked %.1f us, recurrent %.1f us (%.2fx)\n", chunk, rec,
           rec / chunk);
    b.T = 1;
    double us[5], sum = 0.0;
    for (int w = 1; w < 5; w++)
        sum += us[w] = (b.which = w, ekc_time_us(bench_fn, &b));
    const double floor_us = 2.0 * I.ns * 4 / ekc_read_ceiling_gbs() / 1e3; /* S read + written once */
    printf("decode step, GDN kernels of one linear layer: %.2f us/layer (conv %.2f, prep %.2f, delta %.2f, norm_gate "
           "%.2f); state read+write floor %.2f us; target <= 4 us/layer\n",
           sum, us[2], us[3], us[1], us[4], floor_us);
    double v[ENG_GDN_STEP_NTIMES] = {0.0};
    if (engk_gdn_step_fits(16, 32, 128, 128, 4)) {
        for (int f = ENG_GDN_STEP_V1; f <= ENG_GDN_STEP_NFORMS; f++)
            v[f] = (b.which = 10 + f, ekc_time_us(bench_fn, &b));
        printf("decode step, fused, one launch each (no graph, so no programmatic launch): V1 %.2f, V2 %.2f, V3 %.2f, "
               "V4 %.2f us/layer\n",
               v[1], v[2], v[3], v[4]);
    }
    double g[ENG_GDN_STEP_NTIMES];
    int fused = 0;
    cudaError_t gerr = cudaSuccess;
    /* one layer's state, 200 steps in a graph (it stays in L2), then 24 layers' states (as Qwen3.5-9B), a step of
     * each per graph as in the engine's decode graph, replayed to 216 steps */
    static const int nlayers[] = {1, 24};
    for (int i = 0; i < 2; i++) {
        const int layers = nlayers[i];
        const cudaError_t err = engk_gdn_step_times(16, 32, 128, 128, 4, layers, g, &fused); /* a failed form: -1 */
        gerr = gerr != cudaSuccess ? gerr : err;
        const char *how = layers == 1 ? "a graph of 200 steps of one layer" : "24 layers, a step of each per graph";
        if (fused)
            printf("decode step, %s: the engine's form (V%d) %.2f us/layer; V1 %.2f, V2 %.2f, V3 %.2f, V4 %.2f; four "
                   "kernels %.2f; launch floor (its grid, one cluster barrier) %.2f, programmatic %.2f; state "
                   "read+write floor %.2f us; target <= 4 us/layer\n",
                   how, ENG_GDN_STEP_FORM, g[0], g[1], g[2], g[3], g[4], g[ENG_GDN_TIME_UNFUSED],
                   g[ENG_GDN_TIME_NOP], g[ENG_GDN_TIME_NOP_PDL], floor_us);
        else
            printf("decode step, %s: unfused %.2f us/layer; state read+write floor %.2f us; target <= 4 us/layer\n",
                   how, g[0], floor_us);
    }
    if (gerr != cudaSuccess) {
        printf("FAIL: engk_gdn_step_times: %s (a form that failed reads -1.00 above)\n", cudaGetErrorString(gerr));
        return 1;
    }
    cudaFree(b.core); cudaFree(b.S); cudaFree(b.ws); cudaFree(b.conv_u); cudaFree(b.conv_st); cudaFree(b.conv_w);
    cudaFree(b.gin); cudaFree(b.alog); cudaFree(b.dt); cudaFree(b.nw);
    free(h);
    gdn_in_free(&I);
    return 0;
}

int main(int argc, char **argv)
{
    gpu_skip_unless_present("engine.kernels.gdn");
    if (argc > 1 && !strcmp(argv[1], "--bench"))
        return bench();
    test_conv(7, 37, 4, 0, 3);
    test_conv(7, 37, 4, 1, 1);
    test_conv(1, 5, 4, 0, 0);
    test_conv(3, 130, 2, 0, 2);
    test_conv(10, 19, 5, 1, 2);
    test_conv(2, 33, 4, 0, 1); /* every chunk shorter than the kernel */
    test_prep(5, 2, 6, 19, 7);
    test_prep(3, 3, 3, 130, 9);
    test_delta(6, 2, 4, 19, 7, 0, 2);
    test_delta(6, 2, 4, 19, 7, 1, 1);
    test_delta(5, 1, 3, 64, 33, 0, 4);
    test_delta(4, 2, 2, 130, 5, 0, 1);
    test_delta(3, 1, 2, 256, 9, 1, 2);
    test_delta(70, 2, 4, 128, 24, 0, 64);
    test_chunked(200, 2, 4, 128, 24, 0, 1);
    test_chunked(130, 1, 3, 64, 33, 0, 0);
    test_chunked(150, 2, 2, 19, 17, 37, 0); /* base off the grid: 27 rows to its chunk's end */
    test_chunked(70, 1, 2, 256, 9, 64, 0);
    test_chunked(2, 2, 4, 32, 8, 0, 1);    /* shorter than a chunk */
    test_norm_gate(3, 5, 37);
    test_norm_gate(1, 4, 24);
    test_sigmoid_gate(3, 1007);
    test_step(16, 32, 128, 128, 4, 0, 3); /* qwen3.5-9b: clusters of 4 slices x 2 value heads */
    test_step(2, 4, 16, 24, 4, 1, 4);     /* the qwen3_5 golden's shape, from fresh states */
    test_step(2, 4, 32, 32, 4, 0, 2);     /* tiny-hybrid */
    test_step(3, 3, 19, 40, 3, 0, 3);     /* one value head per key head: 8 slices of 5 */
    test_step(1, 3, 130, 24, 2, 0, 2);    /* three value heads per key head, dk > 128 */
    test_step(2, 16, 256, 32, 4, 1, 2);   /* eight value heads per key head: one slice of 32 */
    test_step(4, 8, 64, 64, 4, 0, 3);     /* dk 64: 4 slices of 16 */
    test_step(2, 2, 100, 256, 4, 0, 2);   /* dk not a multiple of 32, 8 slices of 32 */
    if (failures) {
        printf("FAIL: %d check(s)\n", failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
