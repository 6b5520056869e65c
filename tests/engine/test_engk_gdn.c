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
#include "gpu_skip.h"
#include "ops.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static int failures;

static float urand(float lo, float hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)(rng >> 40) * (1.0f / 16777216.0f);
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

/* A device buffer of NaN: an element a kernel never writes fails the comparison. */
static float *dev_nan(int64_t n)
{
    float *h = hbuf(n);
    for (int64_t i = 0; i < n; i++)
        h[i] = NAN;
    float *d = dev(h, n);
    free(h);
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
    float *dx = dev(x, (int64_t)T * xs), *dw = dev(w, (int64_t)C * K), *du = dev_nan((int64_t)T * C);
    float *dst = dev(st0, (int64_t)(K - 1) * C);
    CU(engk_gdn_conv(du, dst, dx, xs, dw, T, C, K, fresh, 0));
    float *u1 = back(du, (int64_t)T * C), *s1 = back(dst, (int64_t)(K - 1) * C);
    snprintf(name, sizeof name, "conv T=%d C=%d K=%d%s", T, C, K, fresh ? " fresh" : "");
    check(name, u1, want, (int64_t)T * C, 4e-6, 1e-5);
    snprintf(name, sizeof name, "conv state T=%d C=%d K=%d%s", T, C, K, fresh ? " fresh" : "");
    check_bits(name, s1, wst, (int64_t)(K - 1) * C);
    /* split: T1 rows, then the rest from the carried state */
    float *du2 = dev_nan((int64_t)T * C);
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
    float *dq = dev_nan((int64_t)T * Hk * dk), *dkk = dev_nan((int64_t)T * Hk * dk), *db = dev_nan((int64_t)T * Hv),
          *dg = dev_nan((int64_t)T * Hv);
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
          *dg = dev(g, (int64_t)T * Hv), *dS = dev(S0, ns), *dout = dev_nan((int64_t)T * Hv * dv);
    CU(engk_gdn_delta(dout, dS, dq, dk_, du, db, dg, T, (int)C, Hk, Hv, dk, dv, fresh, 0));
    float *o1 = back(dout, (int64_t)T * Hv * dv), *S1 = back(dS, ns);
    snprintf(name, sizeof name, "delta T=%d Hk=%d Hv=%d dk=%d dv=%d%s", T, Hk, Hv, dk, dv, fresh ? " fresh" : "");
    check(name, o1, want, (int64_t)T * Hv * dv, 2e-5, 1e-4);
    check("  final state", S1, wS, ns, 2e-5, 1e-4);
    float *dout2 = dev_nan((int64_t)T * Hv * dv);
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
    float *dx = dev(x, n), *dz = dev(z, (int64_t)T * zs), *dw = dev(w, dv), *dy = dev_nan(n);
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

int main(void)
{
    gpu_skip_unless_present("engine.kernels.gdn");
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
    test_norm_gate(3, 5, 37);
    test_norm_gate(1, 4, 24);
    test_sigmoid_gate(3, 1007);
    if (failures) {
        printf("FAIL: %d check(s)\n", failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
