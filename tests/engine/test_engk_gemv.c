/* GPU suite: the engine's decode kernels (eng_gemv.h) bit for bit against their host model (eng_dot_model, the
 * per-row order) and against the prefill kernels they replace (engk_rmsnorm, engk_matmul, engk_glu), the
 * device argmax against eng_argmax, the decode step's token feed, and the device-position qkv_post / attention
 * against the host-position launch; with --bench, GB/s of every llama3-8b decode GEMV shape against a read
 * ceiling measured in the same run (and cuBLAS's GEMV when built with it). Seeded inputs, odd N, K at chunk and
 * lane-stride edges, NaN-poisoned outputs. Exit 77 without a GPU. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>
#ifdef ENG_TEST_CUBLAS
#include <cublas_v2.h>
#endif

#include "eng_bw.h"
#include "eng_gemv.h"
#include "eng_hgemv.h"
#include "eng_kernels.h"
#include "eng_sample.h"
#include "eng_weights.h"
#include "engk_check.h"

#define CU(call)                                                                                                   \
    do {                                                                                                           \
        cudaError_t err_ = (call);                                                                                 \
        if (err_ != cudaSuccess)                                                                                   \
            fail_msg("%s failed at %s:%d: %s", #call, __FILE__, __LINE__, cudaGetErrorString(err_));              \
    } while (0)

/* ---- seeded inputs (splitmix64) ---- */
static uint64_t rng_state = 0x5eed;

static float *rand_floats(int64_t n, double lo, double hi)
{
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * ekc_splitmix_unif(&rng_state));
    return x;
}

/* A matrix [n] in storage type (bf16 raw when !f32) with random values; *vals gets the stored values as float. */
static void *rand_matrix(int64_t n, int f32)
{
    float *v = rand_floats(n, -1, 1);
    if (f32)
        return v;
    uint16_t *h = malloc((size_t)n * 2);
    assert_non_null(h);
    for (int64_t i = 0; i < n; i++)
        h[i] = eng_f32_to_bf16(v[i]);
    free(v);
    return h;
}

static void *to_dev(const void *h, size_t bytes)
{
    void *d = NULL;
    CU(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes)
        CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

static void *from_dev(const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    assert_non_null(h);
    CU(cudaDeviceSynchronize());
    if (bytes)
        CU(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

/* ---- the checker must be able to fail ---- */
static void test_checker_fails(void **state)
{
    (void)state;
    float a[5] = {1, 2, 3, 4, 5}, b[5] = {1, 2, 3, 4, 5};
    assert_int_equal(ekc_bits("checker: equal", a, b, 5), 0);
    b[2] = nextafterf(b[2], 10.0f);
    assert_int_equal(ekc_bits("checker: one ulp apart (must DIFFER)", a, b, 5), 1);
    b[2] = 3;
    a[4] = NAN;
    assert_int_equal(ekc_bits("checker: a NaN (must DIFFER)", a, b, 5), 1);
    a[4] = -0.0f;
    b[4] = 0.0f;
    assert_int_equal(ekc_bits("checker: -0 vs +0 (must DIFFER)", a, b, 5), 1);
}

/* ---- plain GEMV: every variant and engk_gemv (bias, residual) against eng_dot_model and engk_matmul ---- */
static const struct { int N, K; } gemv_shapes[] = {
    {1, 8}, {3, 16}, {33, 248}, {37, 256}, {65, 264}, {17, 512}, {100, 1000}, {257, 4096}, {31, 14336}, {129, 2056},
    /* more rows than a persistent grid's warps (several per warp): the ring running into the next rows (4096: every
     * lane 16 chunks), restarting per row (264: lane 0 two chunks, the rest one), and both in one warp (1064) */
    {9001, 4096}, {20011, 264}, {10007, 1064}, {20011, 16}, /* 16: lanes without chunks (nj 0) */
    {9001, 3840}, /* every lane 15 chunks: rings of 5 and 15 run into the next rows, 8 restarts */
};

/* A device position for engk_warm's gate. */
static int64_t *dev_pos(int64_t pos)
{
    int64_t *d = NULL;
    CU(cudaMalloc((void **)&d, sizeof *d));
    CU(cudaMemcpy(d, &pos, sizeof pos, cudaMemcpyHostToDevice));
    return d;
}

static void test_gemv(void **state)
{
    (void)state;
    int64_t fails = 0;
    int64_t *dpos = dev_pos(5);
    for (size_t c = 0; c < sizeof gemv_shapes / sizeof gemv_shapes[0]; c++)
        for (int f32 = 0; f32 < 2; f32++) {
            const int N = gemv_shapes[c].N, K = gemv_shapes[c].K;
            const size_t es = f32 ? 4 : 2;
            void *W = rand_matrix((int64_t)N * K, f32);
            float *x = rand_floats(K, -1, 1), *b = rand_floats(N, -1, 1), *res = rand_floats(N, -4, 4);
            float *want = malloc((size_t)N * 4), *want_br = malloc((size_t)N * 4);
            for (int n = 0; n < N; n++) {
                want[n] = eng_dot_model((const char *)W + (size_t)n * K * es, f32, x, K);
                want_br[n] = res[n] + (want[n] + b[n]);
            }
            void *dW = to_dev(W, (size_t)N * K * es);
            float *dx = to_dev(x, (size_t)K * 4), *db = to_dev(b, (size_t)N * 4), *dy = ekc_dev_nan(N, 4);
            char what[128];
            for (int v = 0; v < engk_gemv_variants(); v++) {
                ekc_poison(dy, N, 4); /* NaN */
                CU(engk_gemv_variant(v, ENGK_FUSE_NONE, dy, NULL, dx, NULL, 0.0f, 0, dW, f32, NULL, NULL, N, K, 0, NULL,
                                     0));
                float *got = from_dev(dy, (size_t)N * 4);
                snprintf(what, sizeof what, "gemv %s N=%d K=%d vs eng_dot_model [%s]", f32 ? "f32" : "bf16", N, K,
                         engk_gemv_variant_name(v));
                fails += ekc_bits(what, got, want, N);
                free(got);
            }
            /* bias, then the residual in place (y aliases res), as the engine's o / down projections */
            float *dres = to_dev(res, (size_t)N * 4);
            CU(engk_gemv(dres, dx, dW, f32, db, dres, N, K, 0));
            float *got = from_dev(dres, (size_t)N * 4);
            snprintf(what, sizeof what, "gemv %s N=%d K=%d +bias +residual in place", f32 ? "f32" : "bf16", N, K);
            fails += ekc_bits(what, got, want_br, N);
            free(got);
            /* warming a next matrix (any readable range: W itself) changes no bit, warmed or gated off by *pos */
            for (int g = 0; g < 2; g++) {
                const engk_warm wm = {dW, (int64_t)N * K * (int64_t)es, dpos, g ? 4 : 5};
                CU(cudaMemcpy(dres, res, (size_t)N * 4, cudaMemcpyHostToDevice));
                CU(engk_gemv_w(dres, dx, dW, f32, db, dres, N, K, &wm, 0));
                got = from_dev(dres, (size_t)N * 4);
                snprintf(what, sizeof what, "gemv %s N=%d K=%d +bias +residual, %s", f32 ? "f32" : "bf16", N, K,
                         g ? "warm gated off (*pos 5 > 4)" : "warming W (*pos 5 <= 5)");
                fails += ekc_bits(what, got, want_br, N);
                free(got);
            }
            /* the prefill kernel, one row */
            float *dm = ekc_dev_nan(N, 4);
            CU(engk_matmul(dm, dx, dW, f32, NULL, NULL, 1, N, K, 0));
            got = from_dev(dm, (size_t)N * 4);
            snprintf(what, sizeof what, "gemv %s N=%d K=%d vs engk_matmul T=1", f32 ? "f32" : "bf16", N, K);
            fails += ekc_bits(what, got, want, N);
            free(got);
            free(W); free(x); free(b); free(res); free(want); free(want_br);
            CU(cudaFree(dW)); CU(cudaFree(dx)); CU(cudaFree(db)); CU(cudaFree(dy)); CU(cudaFree(dres)); CU(cudaFree(dm));
        }
    CU(cudaFree(dpos));
    assert_int_equal(fails, 0);
}

/* ---- RMSNorm fused into the GEMV: normed row = engk_rmsnorm's bits, output = GEMV of it (N >= 16384
 * weight rows takes the 16-warp block) ---- */
static void test_gemv_norm(void **state)
{
    (void)state;
    static const struct { int N, K; } cs[] = {{1, 8}, {35, 256}, {77, 264}, {300, 1000}, {513, 4096}, {9, 12272}, {16411, 264}, {12007, 4096}, {8192, 3840}};
    int64_t fails = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int kind = 0; kind <= 3; kind++) {
            const int N = cs[c].N, K = cs[c].K, f32 = (int)((c + (size_t)kind) % 2), bias = kind % 2;
            const size_t es = f32 ? 4 : 2;
            void *W = rand_matrix((int64_t)N * K, f32);
            float *x = rand_floats(K, -3, 3), *w = rand_floats(K, 0.5, 1.5), *b = rand_floats(N, -1, 1);
            void *dW = to_dev(W, (size_t)N * K * es);
            float *dx = to_dev(x, (size_t)K * 4), *dw = kind == 3 ? NULL : to_dev(w, (size_t)K * 4);
            float *db = bias ? to_dev(b, (size_t)N * 4) : NULL;
            float *dn_ref = ekc_dev_nan(K, 4), *dy_ref = ekc_dev_nan(N, 4), *dn = ekc_dev_nan(K, 4),
                  *dy = ekc_dev_nan(N, 4);
            CU(engk_rmsnorm(dn_ref, dx, dw, 1, K, 1e-5f, kind, 0));
            CU(engk_matmul(dy_ref, dn_ref, dW, f32, db, NULL, 1, N, K, 0));
            CU(engk_gemv_norm(dy, dn, dx, dw, 1e-5f, kind, dW, f32, db, N, K, 0));
            float *n_ref = from_dev(dn_ref, (size_t)K * 4), *y_ref = from_dev(dy_ref, (size_t)N * 4);
            float *n_got = from_dev(dn, (size_t)K * 4), *y_got = from_dev(dy, (size_t)N * 4);
            char what[128];
            snprintf(what, sizeof what, "norm(kind %d)+gemv %s N=%d K=%d%s: normed row", kind, f32 ? "f32" : "bf16", N,
                     K, bias ? " +bias" : "");
            fails += ekc_bits(what, n_got, n_ref, K);
            snprintf(what, sizeof what, "norm(kind %d)+gemv %s N=%d K=%d%s: output", kind, f32 ? "f32" : "bf16", N, K,
                     bias ? " +bias" : "");
            fails += ekc_bits(what, y_got, y_ref, N);
            {
                const engk_warm wm = {dW, (int64_t)N * K * (int64_t)es, NULL, 0};
                ekc_poison(dy, N, 4); /* NaN */
                CU(engk_gemv_norm_w(dy, NULL, dx, dw, 1e-5f, kind, dW, f32, db, N, K, &wm, 0));
                float *yw = from_dev(dy, (size_t)N * 4);
                fails += ekc_bits("  warming W", yw, y_ref, N);
                free(yw);
            }
            for (int v = 0; v < engk_gemv_variants(); v++) {
                ekc_poison(dy, N, 4); /* NaN */
                CU(engk_gemv_variant(v, ENGK_FUSE_NORM, dy, NULL, dx, dw, 1e-5f, kind, dW, f32, db, NULL, N, K, 0, NULL,
                                     0));
                float *yv = from_dev(dy, (size_t)N * 4);
                snprintf(what, sizeof what, "  [%s]", engk_gemv_variant_name(v));
                fails += ekc_bits(what, yv, y_ref, N);
                free(yv);
            }
            /* and the host model of each row */
            for (int n = 0; n < N; n++) {
                float m = eng_dot_model((const char *)W + (size_t)n * K * es, f32, n_ref, K);
                y_ref[n] = bias ? m + b[n] : m;
            }
            snprintf(what, sizeof what, "norm(kind %d)+gemv %s N=%d K=%d: vs eng_dot_model", kind, f32 ? "f32" : "bf16",
                     N, K);
            fails += ekc_bits(what, y_got, y_ref, N);
            free(W); free(x); free(w); free(b); free(n_ref); free(y_ref); free(n_got); free(y_got);
            CU(cudaFree(dW)); CU(cudaFree(dx)); CU(cudaFree(dn_ref)); CU(cudaFree(dy_ref)); CU(cudaFree(dn));
            CU(cudaFree(dy));
            if (dw) CU(cudaFree(dw));
            if (db) CU(cudaFree(db));
        }
    assert_int_equal(fails, 0);
}

/* ---- GLU fused into gate|up (with and without the norm) = rmsnorm, engk_matmul, engk_glu ---- */
static void test_gemv_glu(void **state)
{
    (void)state;
    static const struct { int I, K; } cs[] = {{1, 8}, {3, 256}, {45, 264}, {129, 1000}, {1000, 4096}, {8195, 256}, {9001, 4096}, {9001, 3840}};
    int64_t fails = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int act = 0; act < 2; act++)
            for (int f32 = 0; f32 < 2; f32++) {
                const int I = cs[c].I, K = cs[c].K, bias = (int)(c % 2);
                const size_t es = f32 ? 4 : 2;
                void *W = rand_matrix((int64_t)2 * I * K, f32);
                float *x = rand_floats(K, -3, 3), *w = rand_floats(K, 0.5, 1.5), *b = rand_floats(2 * I, -1, 1);
                void *dW = to_dev(W, (size_t)2 * I * K * es);
                float *dx = to_dev(x, (size_t)K * 4), *dw = to_dev(w, (size_t)K * 4);
                float *db = bias ? to_dev(b, (size_t)2 * I * 4) : NULL;
                float *dn = ekc_dev_nan(K, 4), *dgu = ekc_dev_nan(2 * I, 4), *dref = ekc_dev_nan(I, 4),
                      *d1 = ekc_dev_nan(I, 4), *d2 = ekc_dev_nan(I, 4);
                CU(engk_rmsnorm(dn, dx, dw, 1, K, 1e-6f, 0, 0));
                CU(engk_matmul(dgu, dn, dW, f32, db, NULL, 1, 2 * I, K, 0));
                CU(engk_glu(dref, dgu, 1, I, act, 0));
                CU(engk_gemv_glu(d1, NULL, dx, dw, 1e-6f, 0, dW, f32, db, I, K, act, 0));
                CU(engk_gemv_glu(d2, NULL, dn, NULL, 0.0f, -1, dW, f32, db, I, K, act, 0));
                float *ref = from_dev(dref, (size_t)I * 4), *g1 = from_dev(d1, (size_t)I * 4),
                      *g2 = from_dev(d2, (size_t)I * 4);
                char what[128];
                snprintf(what, sizeof what, "norm+gate|up+%s %s I=%d K=%d%s", act ? "gelu_tanh" : "silu",
                         f32 ? "f32" : "bf16", I, K, bias ? " +bias" : "");
                fails += ekc_bits(what, g1, ref, I);
                snprintf(what, sizeof what, "gate|up+%s (no norm) %s I=%d K=%d%s", act ? "gelu_tanh" : "silu",
                         f32 ? "f32" : "bf16", I, K, bias ? " +bias" : "");
                fails += ekc_bits(what, g2, ref, I);
                for (int v = 0; v < engk_gemv_variants(); v++)
                    for (int nk = 0; nk < 2; nk++) {
                        ekc_poison(d1, I, 4); /* NaN */
                        CU(engk_gemv_variant(v, ENGK_FUSE_GLU, d1, NULL, nk ? dn : dx, nk ? NULL : dw, nk ? 0.0f : 1e-6f,
                                             nk ? -1 : 0, dW, f32, db, NULL, I, K, act, NULL, 0));
                        float *gv = from_dev(d1, (size_t)I * 4);
                        snprintf(what, sizeof what, "  %s [%s]", nk ? "no norm" : "norm", engk_gemv_variant_name(v));
                        fails += ekc_bits(what, gv, ref, I);
                        free(gv);
                    }
                free(W); free(x); free(w); free(b); free(ref); free(g1); free(g2);
                CU(cudaFree(dW)); CU(cudaFree(dx)); CU(cudaFree(dw)); CU(cudaFree(dn)); CU(cudaFree(dgu));
                CU(cudaFree(dref)); CU(cudaFree(d1)); CU(cudaFree(d2));
                if (db) CU(cudaFree(db));
            }
    assert_int_equal(fails, 0);
}

/* ---- device argmax = eng_argmax: ties (smaller id), NaN never wins, -0 == +0, all NaN -> -1; in two launches
 * (engk_argmax) and in one (engk_argmax_one, twice on the same scratch, its counter back at zero after each, the
 * second also writing into pinned host memory) ---- */
typedef struct argmax_dev {
    void *scratch;   /* ENGK_ARGMAX_SCRATCH bytes, zeroed */
    int32_t *dout;   /* 1 device word */
    int32_t *hout;   /* 1 pinned host word */
} argmax_dev;

/* The token of each form into got[3]: engk_argmax, engk_argmax_one, engk_argmax_one into host memory as well (its
 * device and host words must agree: else got[2] = INT32_MIN); *cnt: the counter after the launches. */
static void dev_argmax(const float *x, int64_t V, const argmax_dev *a, int32_t got[3], unsigned *cnt)
{
    float *dx = to_dev(x, (size_t)V * 4);
    for (int f = 0; f < 3; f++) {
        CU(cudaMemset(a->dout, 0x7f, 4));
        *a->hout = 0x7f7f7f7f;
        if (f == 0)
            CU(engk_argmax(a->dout, dx, V, a->scratch, 0));
        else
            CU(engk_argmax_one(a->dout, f == 2 ? a->hout : NULL, dx, V, a->scratch, 0));
        CU(cudaDeviceSynchronize());
        int32_t *h = from_dev(a->dout, 4);
        got[f] = *h;
        if (f == 2 && *a->hout != *h)
            got[f] = INT32_MIN;
        if (f == 1 && *a->hout != 0x7f7f7f7f) /* NULL: host memory untouched */
            got[f] = INT32_MIN;
        free(h);
    }
    CU(cudaMemcpy(cnt, (const char *)a->scratch + ENGK_ARGMAX_BLOCKS * 8, 4, cudaMemcpyDeviceToHost));
    CU(cudaFree(dx));
}

static void test_argmax(void **state)
{
    (void)state;
    argmax_dev a = {0};
    CU(cudaMalloc(&a.scratch, ENGK_ARGMAX_SCRATCH));
    CU(cudaMemset(a.scratch, 0, ENGK_ARGMAX_SCRATCH));
    CU(cudaMalloc((void **)&a.dout, 4));
    CU(cudaHostAlloc((void **)&a.hout, 4, cudaHostAllocPortable));
    int fails = 0;
    const int64_t Vs[] = {1, 2, 255, 256, 257, 65537, 128256, 262144 + 3};
    for (size_t c = 0; c < sizeof Vs / sizeof Vs[0]; c++)
        for (int pat = 0; pat < 7; pat++) {
            const int64_t V = Vs[c];
            float *x = rand_floats(V, -5, 5);
            const char *name = "random";
            if (pat == 1) { /* ties at the maximum: the smallest id wins */
                name = "ties at the max";
                for (int64_t i = V / 3; i < V; i += 1 + V / 7)
                    x[i] = 9.0f;
            } else if (pat == 2) { /* NaN everywhere but a few numbers, including at the end */
                name = "mostly NaN";
                for (int64_t i = 0; i < V; i++)
                    x[i] = i % 97 == 5 || i == V - 1 ? x[i] : NAN;
            } else if (pat == 3) {
                name = "all NaN";
                for (int64_t i = 0; i < V; i++)
                    x[i] = NAN;
            } else if (pat == 4) { /* -0 before +0 at the maximum: equal, the first wins */
                name = "-0 and +0";
                for (int64_t i = 0; i < V; i++)
                    x[i] = -1.0f - x[i] * x[i];
                x[V / 2] = -0.0f;
                if (V / 2 + 1 < V)
                    x[V / 2 + 1] = 0.0f;
            } else if (pat == 5) {
                name = "all -inf";
                for (int64_t i = 0; i < V; i++)
                    x[i] = -INFINITY;
            } else if (pat == 6) {
                name = "+inf and NaN";
                x[V - 1] = INFINITY;
                x[0] = NAN;
                x[V / 2] = INFINITY;
            }
            const int32_t want = eng_argmax(x, V);
            int32_t got[3];
            unsigned cnt = 1;
            dev_argmax(x, V, &a, got, &cnt);
            const int ok = got[0] == want && got[1] == want && got[2] == want && cnt == 0;
            printf("  argmax V=%-7lld %-16s got %d / one %d / one+host %d (counter %u) want %-7d %s\n", (long long)V,
                   name, got[0], got[1], got[2], cnt, want, ok ? "ok" : "FAIL");
            fails += !ok;
            free(x);
        }
    CU(cudaFree(a.scratch));
    CU(cudaFree(a.dout));
    CU(cudaFreeHost(a.hout));
    assert_int_equal(fails, 0);
}

/* ---- the device-position K/V store equals the host-position one (a decode graph replays the former; the
 * device-position attention is checked by engine.kernels.attn): the reference is k_qkv_post at the host position,
 * the device-position form runs in both kernels (k_qkv_post_rows is the engine's), D = 16 and 136 (two float4 a
 * lane), full and half RoPE ---- */
static void test_pos_dev(void **state)
{
    (void)state;
    const int H = 4, Hkv = 2, Ds[] = {16, 136};
    const int64_t S = 23;
    int fails = 0;
    for (size_t di = 0; di < sizeof Ds / sizeof Ds[0]; di++)
        for (int f32 = 0; f32 < 2; f32++)
            for (int64_t pos = 0; pos < S; pos += 7) {
                const int D = Ds[di], rot = di ? D / 2 : D;
                const int64_t kvs = (int64_t)Hkv * D;
                const size_t es = f32 ? 4 : 2, cache = (size_t)S * kvs * es;
                float *qkv = rand_floats((H + 2 * Hkv) * D, -1, 1), *cs = rand_floats(rot, -1, 1);
                float *qn = rand_floats(D, 0.5, 1.5), *kn = rand_floats(D, 0.5, 1.5);
                void *kc = rand_matrix(S * kvs, f32), *vc = rand_matrix(S * kvs, f32);
                float *dqkv = to_dev(qkv, (size_t)(H + 2 * Hkv) * D * 4), *dcs = to_dev(cs, (size_t)rot * 4);
                float *dqn = to_dev(qn, (size_t)D * 4), *dkn = to_dev(kn, (size_t)D * 4);
                char *k1 = to_dev(kc, cache), *v1 = to_dev(vc, cache);
                int64_t *dpos = to_dev(&pos, 8);
                float *q1 = ekc_dev_nan(H * D, 4);
                const int64_t at = pos * kvs * (int64_t)es;
                engk_qkv_post_kernel(0);
                CU(engk_qkv_post(dqkv, q1, k1 + at, v1 + at, f32, dqn, dkn, 0, 1e-6f, dcs, dcs + rot / 2, 1, H, Hkv, D,
                                 rot, 0));
                float *hq1 = from_dev(q1, (size_t)H * D * 4);
                char *hk1 = from_dev(k1, cache), *hv1 = from_dev(v1, cache);
                for (int rows = 0; rows < 2; rows++) {
                    char *k2 = to_dev(kc, cache), *v2 = to_dev(vc, cache);
                    float *q2 = ekc_dev_nan(H * D, 4);
                    engk_qkv_post_kernel(rows);
                    CU(engk_qkv_post_dev(dqkv, q2, k2, v2, dpos, 0, f32, dqn, dkn, 0, 1e-6f, dcs, dcs + rot / 2, H, Hkv,
                                         D, rot, 0));
                    CU(cudaDeviceSynchronize());
                    float *hq2 = from_dev(q2, (size_t)H * D * 4);
                    char *hk2 = from_dev(k2, cache), *hv2 = from_dev(v2, cache);
                    char what[128];
                    snprintf(what, sizeof what, "qkv_post_dev %s D %d pos %lld %s: q", f32 ? "f32" : "bf16", D,
                             (long long)pos, rows ? "rows" : "warp");
                    fails += ekc_bits(what, hq2, hq1, H * D) != 0;
                    const int kv_same = !memcmp(hk1, hk2, cache) && !memcmp(hv1, hv2, cache);
                    printf("  %-64s %s\n", "  K/V caches after the store (row at *pos_dev)", kv_same ? "bit-identical" : "FAIL");
                    fails += !kv_same;
                    free(hq2); free(hk2); free(hv2);
                    CU(cudaFree(k2)); CU(cudaFree(v2)); CU(cudaFree(q2));
                }
                engk_qkv_post_kernel(-1);
                free(qkv); free(cs); free(qn); free(kn); free(kc); free(vc);
                free(hq1); free(hk1); free(hv1);
                void *dev[] = {dqkv, dcs, dqn, dkn, k1, v1, dpos, q1};
                for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
                    CU(cudaFree(dev[i]));
            }
    assert_int_equal(fails, 0);
}

/* ---- the q|k|v GEMV with qkv_post in its epilogue (engk_gemv_norm_qkv_rope) = the fused-norm GEMV on its shape,
 * then engk_qkv_post_dev: q bit for bit, the K/V caches byte for byte (only the row *pos_dev - back written);
 * heads of 8 .. 136 dims, K at the norm's and the lanes' edges, with and without a bias, every norm kind; the q
 * buffer NaN-poisoned. Launched directly and captured as a graph behind a GEMV that writes x (the epilogue's early
 * reads are of cos/sin and *pos_dev only). ---- */
static void test_qkv_rope(void **state)
{
    (void)state;
    static const struct { int H, Hkv, D, K; } cs[] = {{4, 2, 64, 256}, {32, 8, 128, 4096}, {3, 1, 8, 8},
                                                      {6, 2, 136, 264}, {5, 5, 16, 1000}};
    const int64_t S = 19;
    int fails = 0;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int kind = 0; kind <= 3; kind++)
            for (int back = 0; back < 2; back++) {
                const int H = cs[c].H, Hkv = cs[c].Hkv, D = cs[c].D, K = cs[c].K, bias = kind % 2;
                const int N = (H + 2 * Hkv) * D;
                const int64_t kvs = (int64_t)Hkv * D, pos = (int64_t)(3 + 5 * c) % S;
                const size_t cache = (size_t)S * kvs * 2;
                void *W = rand_matrix((int64_t)N * K, 0);
                float *x = rand_floats(K, -3, 3), *w = rand_floats(K, 0.5, 1.5), *b = rand_floats(N, -1, 1);
                float *cst = rand_floats(D, -1, 1);
                void *kc = rand_matrix(S * kvs, 0), *vc = rand_matrix(S * kvs, 0);
                void *dW = to_dev(W, (size_t)N * K * 2);
                float *dx = to_dev(x, (size_t)K * 4), *dw = kind == 3 ? NULL : to_dev(w, (size_t)K * 4);
                float *db = bias ? to_dev(b, (size_t)N * 4) : NULL, *dcs = to_dev(cst, (size_t)D * 4);
                int64_t *dpos = to_dev(&pos, 8);
                float *dy = ekc_dev_nan(N, 4), *q1 = ekc_dev_nan(H * D, 4), *q2 = ekc_dev_nan(H * D, 4);
                char *k1 = to_dev(kc, cache), *v1 = to_dev(vc, cache), *k2 = to_dev(kc, cache), *v2 = to_dev(vc, cache);
                CU(engk_gemv_variant(ENGK_QKV_ROPE_SHAPE, ENGK_FUSE_NORM, dy, NULL, dx, dw, 1e-5f, kind, dW, 0, db, NULL,
                                     N, K, 0, NULL, 0));
                CU(engk_qkv_post_dev(dy, q1, k1, v1, dpos, back, 0, NULL, NULL, 0, 1e-6f, dcs, dcs + D / 2, H, Hkv, D, D,
                                     0));
                float *hq1 = from_dev(q1, (size_t)H * D * 4);
                char *hk1 = from_dev(k1, cache), *hv1 = from_dev(v1, cache);
                for (int graph = 0; graph < 2; graph++) {
                    ekc_poison(q2, H * D, 4);
                    CU(cudaMemcpy(k2, kc, cache, cudaMemcpyHostToDevice));
                    CU(cudaMemcpy(v2, vc, cache, cudaMemcpyHostToDevice));
                    if (!graph)
                        CU(engk_gemv_norm_qkv_rope(NULL, dx, dw, 1e-5f, kind, dW, db, K, H, Hkv, D, dcs, dcs + D / 2, q2,
                                                   k2, v2, dpos, back, 0));
                    else { /* behind a GEMV that rewrites x (the same values), programmatic inside the graph */
                        cudaStream_t st;
                        cudaGraph_t g;
                        cudaGraphExec_t ge;
                        float *dx2 = to_dev(x, (size_t)K * 4);
                        float *dI = ekc_dev_nan((int64_t)K * K, 4);
                        float *eye = calloc((size_t)K * K, 4);
                        assert_non_null(eye);
                        for (int i = 0; i < K; i++)
                            eye[(size_t)i * K + i] = 1.0f;
                        CU(cudaMemcpy(dI, eye, (size_t)K * K * 4, cudaMemcpyHostToDevice));
                        CU(cudaMemset(dx2, 0xff, (size_t)K * 4)); /* NaN until the GEMV below writes x back */
                        CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
                        /* the memsets above (q2's poison, x2's NaN) run on the legacy stream, which st does not
                         * wait for: without this one could land after the graph's writes (seen once on the H200:
                         * every q NaN, the K/V rows unwritten) */
                        CU(cudaDeviceSynchronize());
                        CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
                        CU(engk_gemv(dx2, dx, dI, 1, NULL, NULL, K, K, st)); /* x2 = I x = x */
                        CU(engk_gemv_norm_qkv_rope(NULL, dx2, dw, 1e-5f, kind, dW, db, K, H, Hkv, D, dcs, dcs + D / 2,
                                                   q2, k2, v2, dpos, back, st));
                        CU(cudaStreamEndCapture(st, &g));
                        CU(cudaGraphInstantiate(&ge, g, 0));
                        CU(cudaGraphLaunch(ge, st));
                        CU(cudaStreamSynchronize(st));
                        CU(cudaGraphExecDestroy(ge));
                        CU(cudaGraphDestroy(g));
                        CU(cudaStreamDestroy(st));
                        CU(cudaFree(dx2));
                        CU(cudaFree(dI));
                        free(eye);
                    }
                    float *hq2 = from_dev(q2, (size_t)H * D * 4);
                    char *hk2 = from_dev(k2, cache), *hv2 = from_dev(v2, cache);
                    char what[160];
                    snprintf(what, sizeof what, "norm(kind %d)+q|k|v+rope H %d/%d D %d K %d%s back %d%s: q", kind, H, Hkv,
                             D, K, bias ? " +bias" : "", back, graph ? " (graph)" : "");
                    fails += ekc_bits(what, hq2, hq1, H * D) != 0;
                    const int kv_same = !memcmp(hk1, hk2, cache) && !memcmp(hv1, hv2, cache);
                    printf("  %-64s %s\n", "  K/V caches (row *pos_dev - back)", kv_same ? "bit-identical" : "FAIL");
                    fails += !kv_same;
                    free(hq2); free(hk2); free(hv2);
                }
                /* the check can fail: a cache row changed by hand differs */
                if (c == 0 && kind == 0 && back == 0) {
                    char *hk2 = from_dev(k2, cache);
                    hk2[pos * kvs * 2] ^= 1;
                    fails += !memcmp(hk1, hk2, cache) ? 1 : 0;
                    free(hk2);
                }
                free(W); free(x); free(w); free(b); free(cst); free(kc); free(vc); free(hq1); free(hk1); free(hv1);
                void *dev[] = {dW, dx, dcs, dpos, dy, q1, q2, k1, v1, k2, v2};
                for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
                    CU(cudaFree(dev[i]));
                if (dw) CU(cudaFree(dw));
                if (db) CU(cudaFree(db));
            }
    assert_int_equal(fails, 0);
}

/* ---- a chain of dependent GEMVs captured as a graph (programmatic launches on sm_90+) = the same chain launched
 * directly: a = norm+gemv(x), g = norm+GLU(x), x += down(g) in place (x was read by both before), a2 =
 * norm+gemv(x), logits-sized plain gemv(a2). Every intermediate is NaN-poisoned first, so a kernel that read its
 * input before the previous one finished would show. ---- */
static void test_graph_chain(void **state)
{
    (void)state;
    const int Hd = 4096, I = 2048, V = 20000;
    void *Wq = rand_matrix((int64_t)Hd * Hd, 0), *Wgu = rand_matrix((int64_t)2 * I * Hd, 0);
    void *Wd = rand_matrix((int64_t)Hd * I, 0), *Wl = rand_matrix((int64_t)V * Hd, 0);
    float *x0 = rand_floats(Hd, -2, 2), *nw = rand_floats(Hd, 0.5, 1.5);
    void *dWq = to_dev(Wq, (size_t)Hd * Hd * 2), *dWgu = to_dev(Wgu, (size_t)2 * I * Hd * 2);
    void *dWd = to_dev(Wd, (size_t)Hd * I * 2), *dWl = to_dev(Wl, (size_t)V * Hd * 2);
    float *dnw = to_dev(nw, (size_t)Hd * 4), *dx = ekc_dev_nan(Hd, 4), *da = ekc_dev_nan(Hd, 4),
          *dg = ekc_dev_nan(I, 4);
    float *da2 = ekc_dev_nan(Hd, 4), *dl = ekc_dev_nan(V, 4);
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    float *out[2][4];
    for (int graphed = 0; graphed < 2; graphed++) {
        CU(cudaMemcpy(dx, x0, (size_t)Hd * 4, cudaMemcpyHostToDevice));
        float *bufs[] = {da, dg, da2, dl};
        const int lens[] = {Hd, I, Hd, V};
        for (int i = 0; i < 4; i++)
            ekc_poison(bufs[i], lens[i], 4);
        CU(cudaDeviceSynchronize());
        cudaGraph_t g = NULL;
        cudaGraphExec_t ge = NULL;
        if (graphed)
            CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        /* the warms of the engine's decode step: the GEMV before a matrix asks L2 for it */
        const engk_warm wgu = {dWgu, (int64_t)2 * I * Hd * 2, NULL, 0}, wq = {dWq, (int64_t)Hd * Hd * 2, NULL, 0};
        const engk_warm wl = {dWl, (int64_t)V * Hd * 2, NULL, 0};
        CU(engk_gemv_norm_w(da, NULL, dx, dnw, 1e-5f, 0, dWq, 0, NULL, Hd, Hd, &wgu, st));
        CU(engk_gemv_glu(dg, NULL, dx, dnw, 1e-5f, 0, dWgu, 0, NULL, I, Hd, 0, st));
        CU(engk_gemv_w(dx, dg, dWd, 0, NULL, dx, Hd, I, &wq, st));
        CU(engk_gemv_norm_w(da2, NULL, dx, dnw, 1e-5f, 0, dWq, 0, NULL, Hd, Hd, &wl, st));
        CU(engk_gemv(dl, da2, dWl, 0, NULL, NULL, V, Hd, st));
        if (graphed) {
            CU(cudaStreamEndCapture(st, &g));
            CU(cudaGraphInstantiateWithFlags(&ge, g, 0));
            CU(cudaGraphLaunch(ge, st));
        }
        CU(cudaStreamSynchronize(st));
        if (graphed) {
            CU(cudaGraphExecDestroy(ge));
            CU(cudaGraphDestroy(g));
        }
        out[graphed][0] = from_dev(da, (size_t)Hd * 4);
        out[graphed][1] = from_dev(dx, (size_t)Hd * 4);
        out[graphed][2] = from_dev(da2, (size_t)Hd * 4);
        out[graphed][3] = from_dev(dl, (size_t)V * 4);
    }
    static const char *const names[] = {"graph chain: norm+gemv(x)", "graph chain: x + down(GLU(norm x)) in place",
                                        "graph chain: norm+gemv(x after)", "graph chain: gemv V=20000"};
    const int lens[] = {Hd, Hd, Hd, V};
    int64_t fails = 0;
    for (int i = 0; i < 4; i++) {
        int nan = 0;
        for (int k = 0; k < lens[i]; k++)
            nan += isnan(out[0][i][k]);
        if (nan) /* the direct chain must be complete, else the comparison proves nothing */
            printf("    %s: %d NaN in the direct launches\n", names[i], nan);
        fails += nan + ekc_bits(names[i], out[1][i], out[0][i], lens[i]);
        free(out[0][i]);
        free(out[1][i]);
    }
    CU(cudaStreamDestroy(st));
    void *dev[] = {dWq, dWgu, dWd, dWl, dnw, dx, da, dg, da2, dl};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        CU(cudaFree(dev[i]));
    free(Wq); free(Wgu); free(Wd); free(Wl); free(x0); free(nw);
    assert_int_equal(fails, 0);
}

static void test_errors(void **state)
{
    (void)state;
    float *d = ekc_dev_nan(64, 4);
    assert_int_equal(engk_gemv(d, d, d, 1, NULL, NULL, 4, 12, 0), cudaErrorInvalidValue); /* K % 8 */
    assert_int_equal(engk_gemv(d, d, d, 1, NULL, NULL, 0, 8, 0), cudaErrorInvalidValue);
    assert_int_equal(engk_gemv_norm(d, NULL, d, d, 1e-6f, 0, d, 1, NULL, 4, 16384, 0), cudaErrorInvalidValue);
    const engk_warm odd = {(const char *)d + 4, 64, NULL, 0}, neg = {d, -16, NULL, 0};
    assert_int_equal(engk_gemv_w(d, d, d, 1, NULL, NULL, 4, 8, &odd, 0), cudaErrorInvalidValue); /* not 16-aligned */
    assert_int_equal(engk_gemv_w(d, d, d, 1, NULL, NULL, 4, 8, &neg, 0), cudaErrorInvalidValue);
    assert_int_equal(engk_gemv_norm_fits(12272), 1);
    assert_int_equal(engk_gemv_norm_fits(12280), 0);
    assert_int_equal(engk_argmax((int32_t *)d, d, 0, d, 0), cudaErrorInvalidValue);
    assert_int_equal(engk_argmax_one((int32_t *)d, NULL, d, 0, d, 0), cudaErrorInvalidValue);
    assert_int_equal(engk_argmax_one((int32_t *)d, NULL, d, (int64_t)1 << 31, d, 0), cudaErrorInvalidValue);
    assert_int_equal(engk_argmax_one(NULL, NULL, d, 8, d, 0), cudaErrorInvalidValue);
    assert_int_equal(engk_argmax_one((int32_t *)d, NULL, d, 8, NULL, 0), cudaErrorInvalidValue);
    CU(cudaFree(d));
}

/* ---- engk_feed_token: a decode step's token from the step before's argmax: ids[0] = next where next is a token
 * id, else 0 (an all-NaN step's -1, or anything past the vocabulary), ids[1] untouched; bad arguments refused ---- */
static void test_feed_token(void **state)
{
    (void)state;
    static const int32_t cases[][2] = {{0, 0}, {5, 5}, {999, 999}, {1000, 0}, {-1, 0}, {-7, 0}, {0x7fffffff, 0}};
    int32_t *d = NULL;
    CU(cudaMalloc((void **)&d, 3 * sizeof *d));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int32_t h[3] = {-99, -98, cases[c][0]}; /* ids[0], ids[1] (must stay), next */
        CU(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
        CU(engk_feed_token(d, d + 2, 1000, 0));
        int32_t got[3];
        CU(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost));
        assert_int_equal(got[0], cases[c][1]);
        assert_int_equal(got[1], -98);
        assert_int_equal(got[2], cases[c][0]);
    }
    assert_int_equal(engk_feed_token(d, d + 2, 0, 0), cudaErrorInvalidValue);
    assert_int_equal(engk_feed_token(NULL, d + 2, 1000, 0), cudaErrorInvalidValue);
    assert_int_equal(engk_feed_token(d, NULL, 1000, 0), cudaErrorInvalidValue);
    CU(cudaFree(d));
}

/* ---- --bench: GB/s per llama3-8b decode shape against a read ceiling measured here ---- */
/* The median of reps timings of one launch (events around each), after three warm-up launches. */
typedef struct bench_op {
    int kind; /* 0 variant, 1 norm+gemv, 2 norm+glu, 3 read ceiling, 4 cublas, 5 argmax, 6 graph, 7 spin, 8 feed,
               * 9 argmax in one launch, 10 the fed token's embedding (W: the table) */
    int v, N, K;
    float *y, *x, *nw;
    void *W, *scratch;
    void *handle;
    int64_t mbytes, nslot, it; /* the matrix rotates over nslot copies mbytes apart: no launch finds it in L2 */
    cudaGraphExec_t graph;     /* kind 6: a captured chain, replayed on stream 0 */
    int64_t warm_max;          /* bench_chain: < 0 the previous picks and no warms, else the engine's, warms capped */
    long long gap;             /* bench_chain: a spin of gap cycles after q|k|v (qkv_post and attention's stand-in):
                                * engk_spin (plain launch) for the picks-NULL rows, engk_spin_dep (launched as the
                                * attention is) where picks is set */
    const int *picks;          /* bench_chain: NULL, or the shapes of norm+q|k|v, o, norm+gate|up+GLU, down; no warms */
} bench_op;

static cudaError_t run_op(void *p)
{
    bench_op *o = p;
    void *W0 = o->W;
    if (o->nslot > 1)
        o->W = (char *)o->W + (o->it++ % o->nslot) * o->mbytes;
    cudaError_t err;
    switch (o->kind) {
    case 0: err = engk_gemv_variant(o->v, ENGK_FUSE_NONE, o->y, NULL, o->x, NULL, 0.0f, 0, o->W, 0, NULL, NULL, o->N,
                                     o->K, 0, NULL, 0);
        break;
    case 1: err = engk_gemv_variant(o->v, ENGK_FUSE_NORM, o->y, NULL, o->x, o->nw, 1e-5f, 0, o->W, 0, NULL, NULL,
                                     o->N, o->K, 0, NULL, 0);
        break;
    case 2: err = engk_gemv_variant(o->v, ENGK_FUSE_GLU, o->y, NULL, o->x, o->nw, 1e-5f, 0, o->W, 0, NULL, NULL,
                                     o->N / 2, o->K, 0, NULL, 0);
        break;
    case 3: err = engk_read_launch(o->W, (size_t)o->N * o->K * 2, o->y, 0); break;
    case 5: err = engk_argmax((int32_t *)o->scratch, o->y, o->N, (char *)o->scratch + 64, 0); break;
    case 6: err = cudaGraphLaunch(o->graph, 0); break;
    case 7: err = engk_spin(o->gap, 0); break;
    case 8: err = engk_feed_token((int32_t *)o->scratch + 1, (const int32_t *)o->scratch, o->N, 0); break;
    case 9: err = engk_argmax_one((int32_t *)o->scratch, NULL, o->y, o->N, (char *)o->scratch + 64, 0); break;
    case 10: err = engk_embed_next(o->y, o->W, 0, (const int32_t *)o->scratch, o->N, o->K, 0.0f, 0); break;
#ifdef ENG_TEST_CUBLAS
    case 4: {
        const float one = 1.0f, zero = 0.0f;
        cublasStatus_t st = cublasGemmEx((cublasHandle_t)o->handle, CUBLAS_OP_T, CUBLAS_OP_N, o->N, 1, o->K, &one,
                                         o->W, CUDA_R_16BF, o->K, o->scratch, CUDA_R_16BF, o->K, &zero, o->y,
                                         CUDA_R_32F, o->N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        err = st == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
        break;
    }
#endif
    default: err = cudaErrorInvalidValue;
    }
    o->W = W0;
    return err;
}

/* Two llama3-8b decode layers' GEMVs (norm+q|k|v, o + residual, norm+gate|up+GLU, down + residual), each
 * layer on its own weights, on stream s: the engine's picks and warms (q|k|v warms o, down the next q|k|v), or
 * with warm_max < 0 the previous picks without warms. */
static cudaError_t bench_chain(void *p)
{
    bench_op *o = p;
    const int Hd = 4096, I = 14336, Nq = 6144;
    const int64_t lq = (int64_t)Nq * Hd * 2, lo = (int64_t)Hd * Hd * 2, lgu = (int64_t)2 * I * Hd * 2;
    const int64_t layer = lq + lo + lgu + (int64_t)Hd * I * 2;
    cudaStream_t s = (cudaStream_t)o->handle;
    float *qkv = o->y, *act = o->y + Nq;
    const int prev = o->warm_max < 0, warm = !prev && !o->picks;
    int (*const pick)(int, int, int) = prev ? engk_gemv_pick_prev : engk_gemv_pick;
    const int pq = o->picks ? o->picks[0] : pick(ENGK_FUSE_NORM, Nq, Hd),
              po = o->picks ? o->picks[1] : prev ? pick(0, Hd, Hd) : engk_gemv_pick_o(Hd, Hd);
    const int pg = o->picks ? o->picks[2] : pick(ENGK_FUSE_GLU, I, Hd), pd = o->picks ? o->picks[3] : pick(0, Hd, I);
    cudaError_t err = cudaSuccess;
    for (int l = 0; l < 2 && err == cudaSuccess; l++) {
        const char *W = (const char *)o->W + l * layer, *Wnext = (const char *)o->W + (1 - l) * layer;
        const engk_warm wo = {W + lq, lo < o->warm_max ? lo : o->warm_max, NULL, 0};
        const engk_warm wq = {Wnext, lq < o->warm_max ? lq : o->warm_max, NULL, 0};
        err = engk_gemv_variant(pq, ENGK_FUSE_NORM, qkv, NULL, o->x, o->nw, 1e-5f, 0, W, 0, NULL, NULL, Nq, Hd, 0,
                                warm ? &wo : NULL, s);
        if (err == cudaSuccess && o->gap > 0)
            err = o->picks ? engk_spin_dep(o->gap, s) : engk_spin(o->gap, s);
        if (err == cudaSuccess)
            err = engk_gemv_variant(po, ENGK_FUSE_NONE, o->x, NULL, qkv, NULL, 0.0f, 0, W + lq, 0, NULL, o->x, Hd, Hd, 0,
                                    NULL, s);
        if (err == cudaSuccess)
            err = engk_gemv_variant(pg, ENGK_FUSE_GLU, act, NULL, o->x, o->nw, 1e-5f, 0, W + lq + lo, 0, NULL, NULL, I,
                                    Hd, 0, NULL, s);
        if (err == cudaSuccess)
            err = engk_gemv_variant(pd, ENGK_FUSE_NONE, o->x, NULL, act, NULL, 0.0f, 0, W + lq + lo + lgu, 0, NULL,
                                    o->x, Hd, I, 0, warm ? &wq : NULL, s);
    }
    return err;
}

static void bench(void)
{
    static const struct { const char *name; int N, K, kind; } shapes[] = {
        {"q|k|v (norm fused)", 6144, 4096, 1}, {"q|k|v", 6144, 4096, 0},  {"o", 4096, 4096, 0},
        {"gate|up (norm+GLU fused)", 28672, 4096, 2}, {"gate|up", 28672, 4096, 0}, {"down", 4096, 14336, 0},
        {"lm_head (norm fused)", 128256, 4096, 1}, {"lm_head", 128256, 4096, 0},
    };
    /* one buffer serves every matrix, each rotating over the copies that fit: the larger of lm_head's 128256 x 4096
     * bf16 (1.05e9 bytes) and the ceiling's 2^30 */
    const int64_t big = (int64_t)128256 * 4096 * 2, ceil_bytes = (int64_t)1 << 30;
    const size_t wbytes = (size_t)(big > ceil_bytes ? big : ceil_bytes);
    void *W = NULL, *xb = NULL;
    float *x = NULL, *y = NULL, *nw = NULL;
    CU(cudaMalloc(&W, wbytes));
    CU(cudaMemset(W, 0x3c, wbytes));
    CU(cudaMalloc((void **)&x, 14336 * 4));
    CU(cudaMalloc((void **)&nw, 14336 * 4));
    CU(cudaMalloc(&xb, 14336 * 2 + 64 + ENGK_ARGMAX_SCRATCH));
    CU(cudaMalloc((void **)&y, (size_t)128256 * 4));
    CU(cudaMemset(x, 0, 14336 * 4));
    CU(cudaMemset(nw, 0, 14336 * 4));
    CU(cudaMemset(xb, 0, 14336 * 2 + 64 + ENGK_ARGMAX_SCRATCH)); /* engk_argmax_one's counter zero too */
    CU(cudaMemset(y, 0, (size_t)128256 * 4));
    double ceil_best = 0.0, ceil_median = 0.0;
    const char *what = "";
    int dev = 0;
    CU(cudaGetDevice(&dev));
    const cudaError_t cerr = engk_read_bandwidth(dev, (size_t)ceil_bytes, 10, &ceil_best, &ceil_median, &what);
    if (cerr != cudaSuccess)
        fail_msg("%s failed in engk_read_bandwidth: %s", what, cudaGetErrorString(cerr));
    const double ceil_ms = (double)ceil_bytes / ceil_median * 1e3, ceil_gbs = ceil_median / 1e9;
    printf("bench read ceiling: 1 GiB read-only kernel (16-byte loads) %.3f ms = %.0f GB/s\n", ceil_ms, ceil_gbs);
    void *handle = NULL;
#ifdef ENG_TEST_CUBLAS
    cublasHandle_t h;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS)
        handle = h;
#endif
    printf("%-26s %7s %6s %-40s %9s %8s %7s\n", "shape (bf16)", "N", "K", "kernel", "us", "GB/s", "%ceil");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int N = shapes[s].N, K = shapes[s].K, kind = shapes[s].kind;
        const double bytes = (double)N * K * 2;
        const int fuse = kind == 1 ? ENGK_FUSE_NORM : kind == 2 ? ENGK_FUSE_GLU : ENGK_FUSE_NONE;
        const int pick = !strcmp(shapes[s].name, "o") ? engk_gemv_pick_o(N, K)
                                                       : engk_gemv_pick(fuse, kind == 2 ? N / 2 : N, K);
        const int prev = engk_gemv_pick_prev(fuse, kind == 2 ? N / 2 : N, K);
        const int nv = engk_gemv_variants() + (!kind && handle ? 1 : 0);
        { /* what a plain read of this many bytes reaches: the ramp and tail every kernel of this size pays */
            bench_op r = {.kind = 3, .N = N, .K = K, .W = W, .y = y, .mbytes = (int64_t)bytes,
                          .nslot = (int64_t)wbytes / (int64_t)bytes};
            const double ms = ekc_time_median_ms(run_op, &r, 20), gbs = bytes / ms / 1e6;
            printf("%-26s %7d %6d %-40s %9.1f %8.0f %6.1f%%\n", shapes[s].name, N, K, "read-only kernel, same bytes",
                   1e3 * ms, gbs, 100.0 * gbs / ceil_gbs);
        }
        for (int v = 0; v < nv; v++) {
            bench_op o = {.kind = kind, .v = v, .N = N, .K = K, .y = y, .x = x, .nw = nw, .W = W, .scratch = xb,
                          .handle = handle, .mbytes = (int64_t)bytes, .nslot = (int64_t)wbytes / (int64_t)bytes};
            const char *kname = engk_gemv_variant_name(v);
            if (v == engk_gemv_variants()) {
                o.kind = 4;
                kname = "cublasGemmEx (peer, bf16 x)";
            }
            const double ms = ekc_time_median_ms(run_op, &o, 20), gbs = bytes / ms / 1e6;
            printf("%-26s %7d %6d %-40s %9.1f %8.0f %6.1f%%%s\n", shapes[s].name, N, K, kname, 1e3 * ms, gbs,
                   100.0 * gbs / ceil_gbs, v == pick ? (v == prev ? "  <- engine (old and new)" : "  <- engine (new)")
                                             : v == prev ? "  <- old" : "");
        }
    }
    /* the per-layer chain, directly (stream order) and as a captured graph (programmatic launches on sm_90+):
     * the previous picks without warms (old), the picks with warms capped at 24 MiB (new) or whole; without and
     * with a 5 us gap after q|k|v where the engine runs qkv_post and attention (a spin of 10000 cycles; its own
     * time, measured alone, is printed to subtract); then other shapes for the four GEMVs without warms, as
     * engine.c launches its picks (which shapes sit well beside the kernels before and after them) */
    {
        const double lbytes = (double)(6144 + 4096 + 28672 + 14336) * 4096 * 2;
        static const struct { const char *name; int64_t warm_max; long long gap; int set, p[4]; } ch_cases[] = {
            {"old: previous picks, no warm", -1, 0, 0, {0}},
            {"new: picks + warms <= 24 MiB", (int64_t)24 << 20, 0, 0, {0}},
            {"new: picks + whole warms", (int64_t)1 << 40, 0, 0, {0}},
            {"old, 5 us gap after q|k|v", -1, 10000, 0, {0}},
            {"new <= 24 MiB, 5 us gap after q|k|v", (int64_t)24 << 20, 10000, 0, {0}},
            {"new whole, 5 us gap after q|k|v", (int64_t)1 << 40, 10000, 0, {0}},
            /* other shapes in the chain, no warms (shape numbers: engk_gemv_variant_name) for q|k|v, o, gate|up, down */
            {"shapes 1,4,14,4 (session 17's picks)", 0, 0, 1, {1, 4, 14, 4}},
            {"shapes 1,0,14,0 (o, down: ring 8, 8 warps)", 0, 0, 1, {1, 0, 14, 0}},
            {"shapes 1,5,14,5 (o, down: ring 16, 8 warps)", 0, 0, 1, {1, 5, 14, 5}},
            {"shapes 1,15,14,15 (o, down: persistent)", 0, 0, 1, {1, 15, 14, 15}},
            {"shapes 1,16,14,16 (o, down: pers., ring 8)", 0, 0, 1, {1, 16, 14, 16}},
            {"shapes 17,17,14,17 (all persistent)", 0, 0, 1, {17, 17, 14, 17}},
            {"shapes 0,4,14,4 (q|k|v: 1 out, ring 8)", 0, 0, 1, {0, 4, 14, 4}},
            {"shapes 7,4,14,4 (q|k|v: 16 warps)", 0, 0, 1, {7, 4, 14, 4}},
            {"shapes 1,4,16,4 (gate|up: 16 warps)", 0, 0, 1, {1, 4, 16, 4}},
            /* with the gap as the engine's attention runs (engk_spin_dep: the o GEMV may start during it): do the
             * shapes asking L2 for the rest of their rows before their wait fill it? */
            {"gap as attention; shapes 1,4,14,4", 0, 10000, 1, {1, 4, 14, 4}},
            {"gap as attention; 1,12,14,4 (o: L2 +4)", 0, 10000, 1, {1, 12, 14, 4}},
            {"gap as attention; 1,13,14,4 (o: L2 +12)", 0, 10000, 1, {1, 13, 14, 4}},
            {"gap as attention; 11,13,14,4 (q|k|v too)", 0, 10000, 1, {11, 13, 14, 4}},
            {"shapes 1,13,14,4 (o: L2 +12), no gap", 0, 0, 1, {1, 13, 14, 4}},
        };
        cudaStream_t cs;
        CU(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
        for (size_t c = 0; c < sizeof ch_cases / sizeof ch_cases[0]; c++) {
            bench_op ch = {.W = W, .x = x, .nw = nw, .y = y, .handle = (void *)0, .warm_max = ch_cases[c].warm_max,
                           .gap = ch_cases[c].gap, .picks = ch_cases[c].set ? ch_cases[c].p : NULL};
            const double direct = ekc_time_median_ms(bench_chain, &ch, 20) / 2;
            cudaGraph_t g;
            ch.handle = cs;
            CU(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
            CU(bench_chain(&ch));
            CU(cudaStreamEndCapture(cs, &g));
            bench_op gr = {.kind = 6};
            CU(cudaGraphInstantiateWithFlags(&gr.graph, g, 0));
            const double graphed = ekc_time_median_ms(run_op, &gr, 20) / 2;
            char kname[112];
            snprintf(kname, sizeof kname, "%s, direct", ch_cases[c].name);
            printf("%-26s %7s %6s %-40s %9.1f %8.0f %6.1f%%\n", "decode layer, 4 GEMVs", "", "", kname, 1e3 * direct,
                   lbytes / direct / 1e6, 100.0 * lbytes / direct / 1e6 / ceil_gbs);
            snprintf(kname, sizeof kname, "%s, graph", ch_cases[c].name);
            printf("%-26s %7s %6s %-40s %9.1f %8.0f %6.1f%%\n", "decode layer, 4 GEMVs", "", "", kname,
                   1e3 * graphed, lbytes / graphed / 1e6, 100.0 * lbytes / graphed / 1e6 / ceil_gbs);
            CU(cudaGraphExecDestroy(gr.graph));
            CU(cudaGraphDestroy(g));
        }
        CU(cudaStreamDestroy(cs));
        bench_op sp = {.kind = 7, .gap = 10000};
        printf("%-26s %7s %6s %-40s %9.1f\n", "the gap alone", "", "", "engk_spin 10000 cycles",
               1e3 * ekc_time_median_ms(run_op, &sp, 20));
    }
    bench_op am = {.kind = 5, .N = 128256, .y = y, .scratch = xb};
    printf("%-26s %7d %6s %-40s %9.1f\n", "argmax of the logits", 128256, "", "engk_argmax",
           1e3 * ekc_time_median_ms(run_op, &am, 20));
    bench_op fd = {.kind = 8, .N = 128256, .scratch = xb}; /* the token the argmax row above left in xb[0] */
    printf("%-26s %7d %6s %-40s %9.1f\n", "token fed to the next step", 128256, "", "engk_feed_token",
           1e3 * ekc_time_median_ms(run_op, &fd, 20));
    bench_op a1 = {.kind = 9, .N = 128256, .y = y, .scratch = xb};
    printf("%-26s %7d %6s %-40s %9.1f\n", "argmax of the logits", 128256, "", "engk_argmax_one (one launch)",
           1e3 * ekc_time_median_ms(run_op, &a1, 20));
    bench_op en = {.kind = 10, .N = 128256, .K = 4096, .y = y, .W = W, .scratch = xb}; /* the token in xb[0] */
    printf("%-26s %7d %6s %-40s %9.1f\n", "fed token's embedding", 4096, "", "engk_embed_next (bf16 row)",
           1e3 * ekc_time_median_ms(run_op, &en, 20));
#ifdef ENG_TEST_CUBLAS
    if (handle)
        cublasDestroy((cublasHandle_t)handle);
#endif
    CU(cudaFree(W)); CU(cudaFree(x)); CU(cudaFree(nw)); CU(cudaFree(xb)); CU(cudaFree(y));
}

int main(int argc, char **argv)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n < 1) {
        printf("engine.kernels.gemv: SKIP: no usable CUDA device (%s)\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return 77;
    }
    if (argc > 1 && !strcmp(argv[1], "--bench")) {
        bench();
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_fails), cmocka_unit_test(test_gemv),   cmocka_unit_test(test_gemv_norm),
        cmocka_unit_test(test_gemv_glu),      cmocka_unit_test(test_argmax), cmocka_unit_test(test_pos_dev),
        cmocka_unit_test(test_graph_chain),   cmocka_unit_test(test_errors),      cmocka_unit_test(test_qkv_rope),
        cmocka_unit_test(test_feed_token),
    };
    return cmocka_run_group_tests_name("engine.kernels.gemv", tests, NULL, NULL);
}
