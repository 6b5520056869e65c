/* model/gptq: RTN within half a scale, GPTQ's output error below RTN's on correlated inputs, exact RTN under an
 * identity Hessian, dead columns, refusals (group, block, non-positive-definite H), determinism. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gptq.h"
#include "safetensors.h"

enum { N = 48, K = 256, T = 512 };

static uint64_t rng_state;
static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void)
{
    return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
}

/* X [T, K]: an AR(1) chain along the features plus two shared factors and a few loud channels, the kind of
 * correlation that makes GPTQ's error feedback pay; W [N, K] Gaussian. */
static void layer(uint64_t seed, float *X, float *W)
{
    rng_state = seed;
    for (int t = 0; t < T; t++) {
        const double f1 = gauss(), f2 = gauss();
        double prev = 0;
        for (int k = 0; k < K; k++) {
            prev = 0.8 * prev + gauss();
            const double loud = k % 37 == 0 ? 6.0 : 1.0;
            X[t * K + k] = (float)(loud * (prev + 0.7 * f1 + (k % 2 ? 0.5 : -0.5) * f2));
        }
    }
    for (int i = 0; i < N * K; i++)
        W[i] = (float)(0.05 * gauss());
}

/* ||X W^T - X Wq^T||_F */
static double out_err(const float *X, const float *W, const float *Wq)
{
    double s = 0;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double d = 0;
            for (int k = 0; k < K; k++)
                d += (double)X[t * K + k] * ((double)W[n * K + k] - (double)Wq[n * K + k]);
            s += d * d;
        }
    return sqrt(s);
}

static double *hessian(const float *X)
{
    double *H = calloc((size_t)K * K, sizeof *H);
    assert_non_null(H);
    rc_gq_hessian_add(H, X, T, K);
    return H;
}

static const rc_gq_scheme schemes[] = {
    {8, 0, 1}, {4, 128, 0}, {4, 128, 1}, {4, 64, 0}, {4, 64, 1}, {4, 32, 0}, {4, 32, 1},
};
#define N_SCHEMES (sizeof schemes / sizeof schemes[0])

static void test_rtn_half_scale(void **state)
{
    (void)state;
    float *X = malloc(sizeof(float) * T * K), *W = malloc(sizeof(float) * N * K), *D = malloc(sizeof(float) * N * K);
    layer(7, X, W);
    W[5] = 0.4f; /* an outlier, and an all-zero group */
    for (int k = 64; k < 96; k++)
        W[K + k] = 0;
    rc_err e = {0};
    for (size_t s = 0; s < N_SCHEMES; s++) {
        rc_gq_tensor q;
        assert_int_equal(rc_gq_rtn(W, N, K, &schemes[s], "w", &q, &e), RC_OK);
        assert_int_equal(q.group, schemes[s].group ? schemes[s].group : K);
        rc_gq_dequant(&q, D);
        for (int r = 0; r < N; r++)
            for (int c = 0; c < K; c++) {
                const int64_t gi = r * q.n_groups + c / q.group;
                const double sc = q.scale[gi], d = fabs((double)W[r * K + c] - (double)D[r * K + c]);
                assert_true(q.q[r * K + c] < (1 << schemes[s].bits));
                assert_true(sc > 0 && rc_f16_to_f32(rc_f32_to_f16(q.scale[gi])) == q.scale[gi]); /* an fp16 value */
                if (schemes[s].sym)
                    assert_int_equal(q.zero[gi], 1 << (schemes[s].bits - 1));
                if (d > 0.5 * sc * (1 + 1e-6))
                    fail_msg("scheme %zu [%d, %d]: |w - dequant| %.9g > scale/2 %.9g", s, r, c, d, 0.5 * sc);
            }
        rc_gq_free(&q);
    }
    free(X);
    free(W);
    free(D);
}

/* GPTQ's output error is below RTN's (by a margin) at the same bits and group, for every scheme. */
static void test_gptq_beats_rtn(void **state)
{
    (void)state;
    float *X = malloc(sizeof(float) * T * K), *W = malloc(sizeof(float) * N * K);
    float *Dr = malloc(sizeof(float) * N * K), *Dg = malloc(sizeof(float) * N * K);
    layer(11, X, W);
    double *H = hessian(X);
    const rc_gq_opts o = {.damp = 0.01, .block = 128};
    rc_err e = {0};
    for (size_t s = 0; s < N_SCHEMES; s++) {
        rc_gq_tensor qr, qg;
        assert_int_equal(rc_gq_rtn(W, N, K, &schemes[s], "w", &qr, &e), RC_OK);
        assert_int_equal(rc_gq_gptq(W, N, K, H, &schemes[s], &o, "w", &qg, &e), RC_OK);
        rc_gq_dequant(&qr, Dr);
        rc_gq_dequant(&qg, Dg);
        const double er = out_err(X, W, Dr), eg = out_err(X, W, Dg);
        print_message("scheme %d-bit g%d %s: ||X(W-Wq)^T||_F RTN %.4f GPTQ %.4f (%.2fx)\n", schemes[s].bits,
                      schemes[s].group, schemes[s].sym ? "sym" : "asym", er, eg, er / eg);
        if (!(eg < 0.8 * er))
            fail_msg("scheme %zu: GPTQ error %.6g is not below 0.8 x RTN's %.6g", s, eg, er);
        rc_gq_free(&qr);
        rc_gq_free(&qg);
    }
    free(H);
    free(X);
    free(W);
    free(Dr);
    free(Dg);
}

/* With a diagonal Hessian there is nothing to feed the error into: GPTQ is RTN, code for code. */
static void test_identity_hessian_is_rtn(void **state)
{
    (void)state;
    float *X = malloc(sizeof(float) * T * K), *W = malloc(sizeof(float) * N * K);
    layer(3, X, W);
    double *H = calloc((size_t)K * K, sizeof *H);
    for (int i = 0; i < K; i++)
        H[i * K + i] = 2.0;
    const rc_gq_opts o = {.damp = 0.01, .block = 64};
    rc_err e = {0};
    for (size_t s = 0; s < N_SCHEMES; s++) {
        rc_gq_tensor qr, qg;
        assert_int_equal(rc_gq_rtn(W, N, K, &schemes[s], "w", &qr, &e), RC_OK);
        assert_int_equal(rc_gq_gptq(W, N, K, H, &schemes[s], &o, "w", &qg, &e), RC_OK);
        assert_memory_equal(qr.q, qg.q, (size_t)N * K);
        assert_memory_equal(qr.scale, qg.scale, sizeof(float) * (size_t)(N * qr.n_groups));
        assert_memory_equal(qr.zero, qg.zero, (size_t)(N * qr.n_groups));
        rc_gq_free(&qr);
        rc_gq_free(&qg);
    }
    free(H);
    free(X);
    free(W);
}

/* A feature that never fires (diag H = 0) has its column quantized as zero. */
static void test_dead_column(void **state)
{
    (void)state;
    float *X = malloc(sizeof(float) * T * K), *W = malloc(sizeof(float) * N * K), *D = malloc(sizeof(float) * N * K);
    layer(5, X, W);
    for (int t = 0; t < T; t++)
        X[t * K + 9] = 0;
    double *H = hessian(X);
    const rc_gq_opts o = {.damp = 0.01, .block = 128};
    rc_err e = {0};
    rc_gq_tensor q;
    assert_int_equal(rc_gq_gptq(W, N, K, H, &schemes[1], &o, "w", &q, &e), RC_OK);
    rc_gq_dequant(&q, D);
    for (int r = 0; r < N; r++)
        assert_true(D[r * K + 9] == 0.0f);
    rc_gq_free(&q);
    free(H);
    free(X);
    free(W);
    free(D);
}

static void test_refusals(void **state)
{
    (void)state;
    float W[4 * 100] = {0};
    double *H = calloc(100 * 100, sizeof *H);
    for (int i = 0; i < 100; i++)
        H[i * 100 + i] = 1;
    rc_gq_tensor q;
    rc_err e = {0};
    const rc_gq_scheme g32 = {4, 32, 0};
    const rc_gq_opts o = {.damp = 0.01, .block = 128};
    assert_int_equal(rc_gq_rtn(W, 4, 100, &g32, "L0.wq", &q, &e), RC_E_SHAPE);
    assert_non_null(strstr(e.msg, "L0.wq"));
    assert_int_equal(rc_gq_gptq(W, 4, 100, H, &g32, &o, "L0.wq", &q, &e), RC_E_SHAPE);
    const rc_gq_scheme g64 = {4, 64, 0}, b3 = {3, 0, 1};
    const rc_gq_opts o48 = {.damp = 0.01, .block = 48}, bad_damp = {.damp = -1, .block = 128};
    float W2[4 * 128] = {0};
    double *H2 = calloc(128 * 128, sizeof *H2);
    for (int i = 0; i < 128; i++)
        H2[i * 128 + i] = 1;
    assert_int_equal(rc_gq_gptq(W2, 4, 128, H2, &g64, &o48, "w", &q, &e), RC_E_USAGE);
    assert_non_null(strstr(e.msg, "block 48"));
    assert_int_equal(rc_gq_gptq(W2, 4, 128, H2, &g64, &bad_damp, "w", &q, &e), RC_E_USAGE);
    assert_int_equal(rc_gq_rtn(W2, 4, 128, &b3, "w", &q, &e), RC_E_UNSUPPORTED);
    /* not positive definite: a negative eigenvalue the 1% damping cannot lift */
    H2[3 * 128 + 3] = -50;
    assert_int_equal(rc_gq_gptq(W2, 4, 128, H2, &g64, &o, "L2.down", &q, &e), RC_E_RANGE);
    assert_non_null(strstr(e.msg, "L2.down"));
    assert_non_null(strstr(e.msg, "not positive definite"));
    assert_non_null(strstr(e.msg, "gsl_linalg_cholesky_decomp1"));
    H2[3 * 128 + 3] = NAN;
    assert_int_equal(rc_gq_gptq(W2, 4, 128, H2, &g64, &o, "w", &q, &e), RC_E_RANGE);
    W2[7] = INFINITY;
    assert_int_equal(rc_gq_rtn(W2, 4, 128, &g64, "w", &q, &e), RC_E_RANGE);
    W2[7] = 1e9f; /* a scale beyond fp16 */
    assert_int_equal(rc_gq_rtn(W2, 4, 128, &g64, "w", &q, &e), RC_E_RANGE);
    assert_non_null(strstr(e.msg, "fp16"));
    rc_gq_scheme s;
    assert_int_equal(rc_gq_scheme_parse("int4-g128", 0, &s, &e), RC_OK);
    assert_true(s.bits == 4 && s.group == 128 && !s.sym);
    assert_int_equal(rc_gq_scheme_parse("int8", 0, &s, &e), RC_OK);
    assert_true(s.bits == 8 && s.group == 0 && s.sym);
    assert_int_equal(rc_gq_scheme_parse("int4-g100", 0, &s, &e), RC_E_USAGE);
    assert_int_equal(rc_gq_scheme_parse("int3", 1, &s, &e), RC_E_USAGE);
    free(H);
    free(H2);
}

static void test_deterministic(void **state)
{
    (void)state;
    float *X = malloc(sizeof(float) * T * K), *W = malloc(sizeof(float) * N * K);
    layer(13, X, W);
    double *H = hessian(X);
    const rc_gq_opts o = {.damp = 0.01, .block = 128};
    rc_err e = {0};
    rc_gq_tensor a, b;
    assert_int_equal(rc_gq_gptq(W, N, K, H, &schemes[1], &o, "w", &a, &e), RC_OK);
    assert_int_equal(rc_gq_gptq(W, N, K, H, &schemes[1], &o, "w", &b, &e), RC_OK);
    assert_memory_equal(a.q, b.q, (size_t)N * K);
    assert_memory_equal(a.scale, b.scale, sizeof(float) * (size_t)(N * a.n_groups));
    assert_memory_equal(a.zero, b.zero, (size_t)(N * a.n_groups));
    rc_gq_free(&a);
    rc_gq_free(&b);
    free(H);
    free(X);
    free(W);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rtn_half_scale),
        cmocka_unit_test(test_gptq_beats_rtn),
        cmocka_unit_test(test_identity_hessian_is_rtn),
        cmocka_unit_test(test_dead_column),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
