/* ref/ops.c against double-precision implementations written here, on seeded random inputs.
 *
 * Metric (every check): element i passes iff |got_i - want_i| <= atol + rtol * mag_i, where want is the
 * double result and mag_i the magnitude each fp32 rounding of the op acts on (|want_i| for a single
 * rounding, sum_k |x_k W_k| for a dot product, ...). One fp32 rounding errs by <= 2^-24 = FLT_EPSILON / 2 of
 * that magnitude, so rtol = k * FLT_EPSILON for k roundings is twice the first-order bound. atol is 0
 * except where fp32 underflow or a documented cancellation needs it. NaN or Inf where want is finite fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "rope.h"
#include "softcap.h"
#include "oputil.h"

static int group_setup(void **state)
{
    (void)state;
    return rng_setup(0); /* the tests reseed with seed() */
}

static void seed(unsigned long s) { gsl_rng_set(rng, 20240 + s); }

/* ---- double-precision implementations ---- */

/* y = x W^T + b; mag = sum_k |x_k W_nk| + |b_n| */
static void d_matmul(double *y, double *mag, const float *x, const float *W, const float *b, int64_t T, int64_t N,
                     int64_t K)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0, m = 0;
            for (int64_t k = 0; k < K; k++) {
                acc += (double)x[t * K + k] * W[n * K + k];
                m += fabs((double)x[t * K + k] * W[n * K + k]);
            }
            y[t * N + n] = acc + (b ? b[n] : 0.0);
            mag[t * N + n] = m + (b ? fabs(b[n]) : 0.0);
        }
}

static void d_rmsnorm(double *y, const float *x, const float *w, int64_t rows, int64_t n, float eps,
                      rc_norm_kind kind)
{
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < n; i++)
            ss += (double)x[r * n + i] * x[r * n + i];
        double inv = 1.0 / sqrt(ss / n + eps);
        for (int64_t i = 0; i < n; i++) {
            double h = x[r * n + i] * inv;
            y[r * n + i] = kind == RC_NORM_W || kind == RC_NORM_POW_W ? h * w[i]
                           : kind == RC_NORM_1PW                   ? h * (1.0 + w[i])
                                                                   : h;
        }
    }
}

/* Softmax in double; mag_i = p_i (4 + |x_i - m| + sum_j p_j |x_j - m|): the fp32 subtraction x_i - max
 * perturbs exponent i by <= 2^-24 |x_i - m| (and the sum by the p-weighted mean of those), exp, the sum of
 * rounded terms, the sum itself and the division round once each. */
static void d_softmax(double *p, double *mag, const double *x, int64_t n)
{
    double m = -INFINITY, s = 0, spread = 0;
    for (int64_t i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    for (int64_t i = 0; i < n; i++)
        s += p[i] = exp(x[i] - m);
    for (int64_t i = 0; i < n; i++) {
        p[i] /= s;
        if (p[i] > 0)
            spread += p[i] * fabs(x[i] - m);
    }
    for (int64_t i = 0; mag && i < n; i++)
        mag[i] = p[i] > 0 ? p[i] * (4 + fabs(x[i] - m) + spread) : 0;
}

/* ctx [T,H,D] with keys j in (pos - window, pos] (window 0: [0, pos]), j < S. mag (in roundings, as
 * d_softmax): sum_j p_j |v_j| (4 + 2|s_j| + |s_j - m| + A) + |out|, A = sum_k p_k (2|s_k| + |s_k - m|):
 * each fp32 score rounds twice (dot product, * scale), softmax as in d_softmax, the output once. */
static void d_attention(double *out, double *mag, const float *q, const float *k, const float *v, int64_t T,
                        int64_t S, int64_t q_pos0, int H, int Hkv, int D, float scale, int window)
{
    double *s = DALLOC(S), *p = DALLOC(S);
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const int64_t pos = q_pos0 + t;
            const int kvh = h / (H / Hkv);
            int64_t lo = 0, hi = pos < S - 1 ? pos : S - 1, n = 0;
            if (window > 0 && pos - window + 1 > 0)
                lo = pos - window + 1;
            double m = -INFINITY, A = 0;
            for (int64_t j = lo; j <= hi; j++, n++) {
                double acc = 0;
                for (int d = 0; d < D; d++)
                    acc += (double)q[(t * H + h) * D + d] * k[(j * Hkv + kvh) * D + d];
                s[n] = acc * scale;
                m = s[n] > m ? s[n] : m;
            }
            d_softmax(p, NULL, s, n);
            for (int64_t i = 0; i < n; i++)
                A += p[i] * (2 * fabs(s[i]) + fabs(s[i] - m));
            for (int d = 0; d < D; d++) {
                double o = 0, mg = 0;
                for (int64_t j = lo, i = 0; j <= hi; j++, i++) {
                    double vj = v[(j * Hkv + kvh) * D + d];
                    o += p[i] * vj;
                    mg += p[i] * fabs(vj) * (4 + 2 * fabs(s[i]) + fabs(s[i] - m) + A);
                }
                out[(t * H + h) * D + d] = o;
                mag[(t * H + h) * D + d] = mg + fabs(o);
            }
        }
    free(s);
    free(p);
}

static double d_sigmoid(double z) { return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)); }

/* silu(x) = x sigmoid(x); gelu_tanh(x) = 0.5 x (1 + tanh(z)) = x sigmoid(2z), z = sqrt(2/pi)(x + 0.044715 x^3) */
static double d_act(double x, rc_act act)
{
    if (act == RC_ACT_SILU)
        return x * d_sigmoid(x);
    return x * d_sigmoid(2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x));
}

/* ---- matmul ---- */

/* Bound: |a - r| <= 2 FLT_EPSILON (sum_k |x_k W_nk| + |b_n|): the double accumulation rounds once to fp32,
 * the bias add once more (k = 2). */
static void test_matmul(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 1, 1}, {1, 7, 5}, {5, 16, 64}, {24, 128, 64}, {3, 33, 1000}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int64_t T = shapes[c][0], N = shapes[c][1], K = shapes[c][2];
        seed(c);
        float *x = FALLOC(T * K), *W = FALLOC(N * K), *b = FALLOC(N), *y = FALLOC(T * N);
        double *want = DALLOC(T * N), *mag = DALLOC(T * N);
        fill(x, T * K, 1.0);
        fill(W, N * K, 0.1);
        fill(b, N, 0.1);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *bb = with_bias ? b : NULL;
            ref_matmul(y, x, W, bb, T, N, K);
            d_matmul(want, mag, x, W, bb, T, N, K);
            char what[64];
            snprintf(what, sizeof what, "matmul %lldx%lldx%lld%s", (long long)T, (long long)N, (long long)K,
                     with_bias ? "+b" : "");
            EXPECT_CLOSE(what, y, want, mag, T * N, 0, 2 * EPS);
        }
        free(x); free(W); free(b); free(y); free(want); free(mag);
    }
}

/* ---- RMSNorm ---- */

/* Bound: |a - r| <= 5 FLT_EPSILON |r|: fp32 rounds ms and ms + eps (each counts half: under a square root),
 * rsqrt, x * inv, (1 + w) and the weight product (k = 5). */
static void test_rmsnorm(void **state)
{
    (void)state;
    static const int64_t shapes[][2] = {{1, 1}, {1, 64}, {24, 64}, {7, 128}, {3, 1000}};
    static const rc_norm_kind kinds[] = {RC_NORM_W, RC_NORM_1PW, RC_NORM_POW_W, RC_NORM_POW};
    static const float epss[] = {1e-6f, 1e-5f};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            const int64_t R = shapes[c][0], n = shapes[c][1];
            seed(100 + 10 * c + k);
            float *x = FALLOC(R * n), *w = FALLOC(n), *y = FALLOC(R * n);
            double *want = DALLOC(R * n);
            fill(x, R * n, c == 3 ? 30.0 : 1.0); /* one shape at a large magnitude */
            for (int64_t i = 0; i < n; i++)
                w[i] = (kinds[k] == RC_NORM_1PW ? 0.0f : 1.0f) + (float)gsl_ran_gaussian(rng, 0.1);
            const float eps = epss[c % 2];
            ref_rmsnorm(y, x, kinds[k] == RC_NORM_POW ? NULL : w, R, n, eps, kinds[k]);
            d_rmsnorm(want, x, w, R, n, eps, kinds[k]);
            char what[64];
            snprintf(what, sizeof what, "rmsnorm kind %d %lldx%lld", (int)kinds[k], (long long)R, (long long)n);
            EXPECT_CLOSE(what, y, want, NULL, R * n, 0, 5 * EPS);
            free(x); free(w); free(y); free(want);
        }
}

/* QK-norm: ref_rmsnorm over rows of head_dim of q [T, H, D] with one weight [D], in place as the forward
 * calls it; same bound as test_rmsnorm, and in place must equal out of place bit for bit. */
static void test_qk_norm(void **state)
{
    (void)state;
    static const int shapes[][3] = {{1, 1, 2}, {24, 4, 16}, {5, 2, 32}, {3, 8, 128}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int T = shapes[c][0], H = shapes[c][1], D = shapes[c][2];
        const int64_t n = (int64_t)T * H * D;
        seed(200 + c);
        float *q = FALLOC(n), *w = FALLOC(D), *y = FALLOC(n);
        double *want = DALLOC(n);
        fill(q, n, 2.0);
        for (int i = 0; i < D; i++)
            w[i] = 1.0f + (float)gsl_ran_gaussian(rng, 0.1);
        ref_rmsnorm(y, q, w, (int64_t)T * H, D, 1e-6f, RC_NORM_W);
        d_rmsnorm(want, q, w, (int64_t)T * H, D, 1e-6f, RC_NORM_W);
        EXPECT_CLOSE("qk_norm", y, want, NULL, n, 0, 5 * EPS);
        ref_rmsnorm(q, q, w, (int64_t)T * H, D, 1e-6f, RC_NORM_W);
        assert_memory_equal(q, y, (size_t)n * sizeof *q);
        free(q); free(w); free(y); free(want);
    }
}

/* ---- RoPE ---- */

static rc_rope_desc rope(double theta, double factor, int head_dim, int rot_dim, int n_freq, int exp_den)
{
    rc_rope_desc r = {.type = RC_ROPE_DEFAULT, .theta = theta, .factor = factor, .head_dim = head_dim,
                      .rot_dim = rot_dim, .n_freq = n_freq, .exp_den = exp_den};
    snprintf(r.kind, sizeof r.kind, "all");
    return r;
}

/* inv_freq[i] = theta^-(2i/E) / factor with HF's fp32 exponent fl32(fl32(2i) / fl32(E)) reproduced (it is part
 * of the definition) and the rest exact. Bound: 3 FLT_EPSILON |r| (pow, 1/p and /factor, k = 3). Against the
 * exact exponent, FLT_EPSILON |r| (3 + ln(theta) * exponent): the exponent's rounding moves the power by
 * ln(theta) * exponent * 2^-24 relative. Past n_freq: exactly 0. */
static void test_rope_inv_freq(void **state)
{
    (void)state;
    const rc_rope_desc cases[] = {
        rope(10000.0, 1.0, 16, 16, 8, 16),      /* llama golden */
        rope(1000000.0, 1.0, 32, 32, 16, 32),   /* qwen3 golden */
        rope(500000.0, 1.0, 128, 128, 64, 128),
        rope(10000.0, 1.0, 64, 16, 8, 16),      /* partial rotary: exponent over R */
        rope(1000000.0, 8.0, 64, 64, 8, 64),    /* proportional: exponent over D, zero tail, factor */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const rc_rope_desc *r = &cases[c];
        const int half = r->rot_dim / 2;
        float *inv = FALLOC(half);
        double *want = DALLOC(half), *exact = DALLOC(half), *mag = DALLOC(half);
        rc_rope_inv_freq(inv, r);
        const double th = (float)r->theta;
        for (int i = 0; i < half; i++) {
            const double ex32 = (float)(2 * i) / (float)r->exp_den, ex = 2.0 * i / r->exp_den;
            want[i] = i < r->n_freq ? pow(th, -ex32) / r->factor : 0.0;
            exact[i] = i < r->n_freq ? pow(r->theta, -ex) / r->factor : 0.0;
            mag[i] = fabs(exact[i]) * (3 + log(r->theta) * ex);
        }
        EXPECT_CLOSE("rope_inv_freq", inv, want, NULL, half, 0, 3 * EPS);
        EXPECT_CLOSE("rope_inv_freq vs exact exponent", inv, exact, mag, half, 0, EPS);
        for (int i = r->n_freq; i < half; i++)
            assert_true(inv[i] == 0.0f);
        free(inv); free(want); free(exact); free(mag);
    }
}

/* cos/sin [T, R] of the fp32 angle fl32(fl32(p) * inv_freq[i]) (HF's rounding, reproduced), duplicated in
 * both halves. Bound: FLT_EPSILON |r| (one rounding of the double cos/sin). A table started at pos0 must
 * equal rows pos0.. of a table started at 0, bit for bit (decode builds its rows that way). */
static void test_rope_table(void **state)
{
    (void)state;
    static const struct { double theta; int R; int64_t pos0, T; } cases[] = {
        {10000.0, 16, 0, 24}, {1000000.0, 32, 0, 7}, {10000.0, 128, 1000, 5}, {500000.0, 64, 40000, 3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int R = cases[c].R, half = R / 2;
        const int64_t pos0 = cases[c].pos0, T = cases[c].T;
        rc_rope_desc r = rope(cases[c].theta, 1.0, R, R, half, R);
        float *inv = FALLOC(half), *cs = FALLOC(T * R), *sn = FALLOC(T * R);
        float *cs0 = FALLOC((pos0 + T) * R), *sn0 = FALLOC((pos0 + T) * R);
        double *wc = DALLOC(T * R), *ws = DALLOC(T * R);
        rc_rope_inv_freq(inv, &r);
        rc_rope_table(cs, sn, inv, &r, pos0, T);
        for (int64_t t = 0; t < T; t++)
            for (int i = 0; i < R; i++) {
                const double a = (float)(pos0 + t) * inv[i % half]; /* fp32 product */
                wc[t * R + i] = cos(a);
                ws[t * R + i] = sin(a);
            }
        EXPECT_CLOSE("rope_table cos", cs, wc, NULL, T * R, 0, EPS);
        EXPECT_CLOSE("rope_table sin", sn, ws, NULL, T * R, 0, EPS);
        rc_rope_table(cs0, sn0, inv, &r, 0, pos0 + T);
        assert_memory_equal(cs, cs0 + pos0 * R, (size_t)(T * R) * sizeof *cs);
        assert_memory_equal(sn, sn0 + pos0 * R, (size_t)(T * R) * sizeof *sn);
        free(inv); free(cs); free(sn); free(cs0); free(sn0); free(wc); free(ws);
    }
}

/* The rotation in double on the same tables: out_i = x_i c_i - x_{i+R/2} s_i, out_{i+R/2} = x_{i+R/2} c + x_i s,
 * for i < R/2; dims >= R untouched. mag = |x_i c| + |x_{i+R/2} s| (two products and a sum, one rounding each).
 * interleaved != 0 rotates pairs (2i, 2i+1) instead (the classic wrong convention). */
static void d_rope(double *out, double *mag, const float *x, const float *c, const float *s, int64_t T, int H,
                   int D, int R, int interleaved)
{
    const int half = R / 2;
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const float *v = x + (t * H + h) * D;
            double *o = out + (t * H + h) * D, *m = mag + (t * H + h) * D;
            for (int i = 0; i < D; i++) {
                o[i] = v[i];
                m[i] = fabs(v[i]);
            }
            for (int i = 0; i < half; i++) {
                const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
                const double ca = c[t * R + i], sa = s[t * R + i];
                o[a] = v[a] * ca - (double)v[b] * sa;
                o[b] = v[b] * ca + (double)v[a] * sa;
                m[a] = fabs(v[a] * ca) + fabs(v[b] * sa);
                m[b] = fabs(v[b] * ca) + fabs(v[a] * sa);
            }
        }
}

/* Bound: 2 FLT_EPSILON (|x_i c| + |x_j s|) (two products, one sum); dims >= R must come back bit-identical. */
static void test_rope_apply(void **state)
{
    (void)state;
    static const int cases[][4] = {/* T, H, D, R */
                                   {24, 4, 16, 16}, {5, 2, 32, 32}, {3, 2, 64, 16}, {7, 1, 128, 64}, {2, 3, 8, 4},
                                   {1, 1, 2, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int T = cases[c][0], H = cases[c][1], D = cases[c][2], R = cases[c][3];
        const int64_t n = (int64_t)T * H * D;
        rc_rope_desc r = rope(10000.0, 1.0, D, R, R / 2, R);
        seed(300 + c);
        float *inv = FALLOC(R / 2), *cs = FALLOC(T * R), *sn = FALLOC(T * R), *x = FALLOC(n), *x0 = FALLOC(n);
        double *want = DALLOC(n), *mag = DALLOC(n);
        rc_rope_inv_freq(inv, &r);
        rc_rope_table(cs, sn, inv, &r, 3, T);
        fill(x0, n, 1.0);
        memcpy(x, x0, (size_t)n * sizeof *x);
        ref_rope_apply(x, cs, sn, T, H, D, R);
        d_rope(want, mag, x0, cs, sn, T, H, D, R, 0);
        char what[64];
        snprintf(what, sizeof what, "rope_apply T%d H%d D%d R%d", T, H, D, R);
        EXPECT_CLOSE(what, x, want, mag, n, 0, 2 * EPS);
        for (int64_t th = 0; th < (int64_t)T * H; th++)
            assert_memory_equal(x + th * D + R, x0 + th * D + R, (size_t)(D - R) * sizeof *x);
        free(inv); free(cs); free(sn); free(x); free(x0); free(want); free(mag);
    }
}

/* Zero frequencies (proportional RoPE's tail) give cos 1, sin 0: those dims pass through bit for bit. */
static void test_rope_zero_freq_passthrough(void **state)
{
    (void)state;
    const int T = 4, H = 2, D = 64, R = 64;
    rc_rope_desc r = rope(1000000.0, 1.0, D, R, 8, D);
    seed(350);
    float *inv = FALLOC(R / 2), *cs = FALLOC(T * R), *sn = FALLOC(T * R), *x = FALLOC(T * H * D),
          *x0 = FALLOC(T * H * D);
    rc_rope_inv_freq(inv, &r);
    rc_rope_table(cs, sn, inv, &r, 5, T);
    fill(x0, T * H * D, 1.0);
    memcpy(x, x0, (size_t)(T * H * D) * sizeof *x);
    ref_rope_apply(x, cs, sn, T, H, D, R);
    for (int th = 0; th < T * H; th++)
        for (int i = 8; i < R / 2; i++) {
            assert_true(x[th * D + i] == x0[th * D + i]);
            assert_true(x[th * D + i + R / 2] == x0[th * D + i + R / 2]);
        }
    free(inv); free(cs); free(sn); free(x); free(x0);
}

/* ---- softmax ---- */

/* Bound: FLT_EPSILON * p_i (3 + |x_i - m| + sum_j p_j |x_j - m|) + FLT_MIN (fp32 underflow); see d_softmax. */
static void check_softmax(const char *what, const float *x0, int64_t n)
{
    float *x = FALLOC(n);
    double *xd = DALLOC(n), *want = DALLOC(n), *mag = DALLOC(n);
    memcpy(x, x0, (size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        xd[i] = x0[i];
    ref_softmax(x, n);
    d_softmax(want, mag, xd, n);
    EXPECT_CLOSE(what, x, want, mag, n, FLT_MIN, EPS);
    free(x); free(xd); free(want); free(mag);
}

static void test_softmax(void **state)
{
    (void)state;
    static const int64_t sizes[] = {1, 2, 7, 64, 1000};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        const int64_t n = sizes[c];
        float *x = FALLOC(n);
        seed(400 + c);
        fill(x, n, 1.0);
        check_softmax("softmax N(0,1)", x, n);
        fill(x, n, 30.0);
        check_softmax("softmax N(0,30)", x, n);
        for (int64_t i = 0; i < n; i++) /* exp(x) overflows fp32 without the max shift */
            x[i] = 10000.0f + (float)gsl_ran_gaussian(rng, 3.0);
        check_softmax("softmax 1e4 + N(0,3)", x, n);
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)gsl_ran_flat(rng, -1e4, 1e4);
        check_softmax("softmax U(-1e4,1e4)", x, n);
        for (int64_t i = 0; i < n; i++)
            x[i] = -3e4f;
        check_softmax("softmax all equal -3e4", x, n);
        for (int64_t i = 0; i < n; i++)
            x[i] = i % 3 == 1 ? -INFINITY : i % 3 == 2 ? -FLT_MAX : (float)gsl_ran_gaussian(rng, 1.0);
        check_softmax("softmax -inf / -FLT_MAX", x, n);
        x[0] = FLT_MAX;
        check_softmax("softmax FLT_MAX", x, n);
        free(x);
    }
}

/* ---- attention ---- */

typedef struct attn_case {
    int64_t T, S, q_pos0;
    int H, Hkv, D, window;
    double sigma; /* of q and k */
} attn_case;

/* Runs ref_attention and d_attention(window_ref) on one case; returns the count of bad elements. */
static int64_t run_attention(const attn_case *a, int window_ref, const char *what)
{
    const int64_t nq = a->T * a->H * a->D, nk = a->S * a->Hkv * a->D;
    const float scale = (float)(1.0 / sqrt((double)a->D));
    float *q = FALLOC(nq), *k = FALLOC(nk), *v = FALLOC(nk), *ctx = FALLOC(nq), *scratch = FALLOC(a->S);
    double *want = DALLOC(nq), *mag = DALLOC(nq);
    fill(q, nq, a->sigma);
    fill(k, nk, a->sigma);
    fill(v, nk, 1.0);
    ref_attention(ctx, q, k, v, a->T, a->S, a->q_pos0, a->H, a->Hkv, a->D, scale, a->window, scratch);
    d_attention(want, mag, q, k, v, a->T, a->S, a->q_pos0, a->H, a->Hkv, a->D, scale, window_ref);
    int64_t bad = count_bad(what, ctx, want, mag, nq, 0, EPS);
    free(q); free(k); free(v); free(ctx); free(scratch); free(want); free(mag);
    return bad;
}

/* Bound: FLT_EPSILON * mag of d_attention. GQA: H = 4 with Hkv = 2, 4, 1, and H = 8 with Hkv = 2. */
static void test_attention_gqa(void **state)
{
    (void)state;
    static const attn_case cases[] = {
        {1, 1, 0, 4, 2, 16, 0, 1.0},  {24, 24, 0, 4, 2, 16, 0, 1.0}, {24, 24, 0, 4, 4, 16, 0, 1.0},
        {24, 24, 0, 4, 1, 16, 0, 1.0}, {7, 7, 0, 8, 2, 64, 0, 1.0},  {9, 9, 0, 4, 2, 32, 0, 4.0},
        {5, 5, 0, 2, 1, 128, 0, 2.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char what[64];
        snprintf(what, sizeof what, "attention T%lld H%d Hkv%d D%d", (long long)cases[c].T, cases[c].H,
                 cases[c].Hkv, cases[c].D);
        seed(500 + c);
        assert_int_equal(run_attention(&cases[c], cases[c].window, what), 0);
    }
}

/* Sliding window W: keys j in (pos - W, pos]. The result must match the double reference with W and differ
 * from it with W - 1 and W + 1 (the edge key matters). W = 1 attends to itself only: ctx = v exactly. */
static void test_attention_window(void **state)
{
    (void)state;
    static const attn_case cases[] = {
        {10, 10, 0, 4, 2, 16, 3, 1.0}, {12, 12, 0, 4, 1, 16, 11, 1.0}, {16, 16, 0, 4, 4, 32, 5, 2.0},
        {4, 12, 8, 4, 2, 16, 4, 1.0},  /* chunk at the end of a cache */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const attn_case *a = &cases[c];
        seed(600 + c);
        assert_int_equal(run_attention(a, a->window, "attention window"), 0);
        quiet = 1;
        seed(600 + c);
        int64_t below = run_attention(a, a->window - 1, "attention window - 1");
        seed(600 + c);
        int64_t above = run_attention(a, a->window + 1, "attention window + 1");
        quiet = 0;
        assert_true(below > 0);
        assert_true(above > 0);
    }
    /* W = 1 */
    const int64_t T = 6;
    const int H = 4, Hkv = 2, D = 8;
    float *q = FALLOC(T * H * D), *k = FALLOC(T * Hkv * D), *v = FALLOC(T * Hkv * D), *ctx = FALLOC(T * H * D),
          *scratch = FALLOC(T);
    seed(650);
    fill(q, T * H * D, 1.0);
    fill(k, T * Hkv * D, 1.0);
    fill(v, T * Hkv * D, 1.0);
    ref_attention(ctx, q, k, v, T, T, 0, H, Hkv, D, 0.25f, 1, scratch);
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            assert_memory_equal(ctx + (t * H + h) * D, v + (t * Hkv + h / 2) * D, D * sizeof(float));
    free(q); free(k); free(v); free(ctx); free(scratch);
}

/* Decode: T < S queries at positions q_pos0.. over S cached keys, with and without a window; each row must
 * also equal the same row of one full causal call bit for bit (same operations in the same order). */
static void test_attention_decode(void **state)
{
    (void)state;
    static const attn_case cases[] = {
        {1, 12, 11, 4, 2, 16, 0, 1.0}, {3, 12, 9, 4, 2, 16, 0, 1.0}, {1, 30, 29, 4, 1, 32, 0, 2.0},
        {1, 12, 11, 4, 2, 16, 4, 1.0}, {2, 12, 5, 4, 4, 16, 0, 1.0}, /* keys past pos exist but are masked */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const attn_case *a = &cases[c];
        seed(700 + c);
        assert_int_equal(run_attention(a, a->window, "attention decode"), 0);

        const int64_t S = a->S, nq = S * a->H * a->D, nk = S * a->Hkv * a->D, row = (int64_t)a->H * a->D;
        float *q = FALLOC(nq), *k = FALLOC(nk), *v = FALLOC(nk), *full = FALLOC(nq), *dec = FALLOC(a->T * row),
              *scratch = FALLOC(S);
        fill(q, nq, a->sigma);
        fill(k, nk, a->sigma);
        fill(v, nk, 1.0);
        ref_attention(full, q, k, v, S, S, 0, a->H, a->Hkv, a->D, 0.25f, a->window, scratch);
        ref_attention(dec, q + a->q_pos0 * row, k, v, a->T, S, a->q_pos0, a->H, a->Hkv, a->D, 0.25f, a->window,
                      scratch);
        assert_memory_equal(dec, full + a->q_pos0 * row, (size_t)(a->T * row) * sizeof *dec);
        free(q); free(k); free(v); free(full); free(dec); free(scratch);
    }
}

/* ---- GLU, softcap ---- */

/* Bound: 2 FLT_EPSILON |r| (act, product) + atol, atol = FLT_MIN for silu (fp32 underflow) and 1e-14 for
 * gelu_tanh: HF's formula 0.5 x (1 + tanh z), which the ref follows, cancels for x < -5 (|err| <= |x| 2^-53). */
static void test_glu(void **state)
{
    (void)state;
    static const float extremes[] = {-100, -30, -20, -10, -6.5f, -5, -1e-3f, -0.0f, 0, 1e-30f, 1e-3f, 5, 20, 100};
    static const int64_t sizes[] = {1, 14, 128, 3000};
    static const rc_act acts[] = {RC_ACT_SILU, RC_ACT_GELU_TANH};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++)
        for (int a = 0; a < 2; a++) {
            const int64_t n = sizes[c];
            seed(800 + 2 * c + a);
            float *g = FALLOC(n), *u = FALLOC(n), *out = FALLOC(n);
            double *want = DALLOC(n);
            fill(g, n, 3.0);
            fill(u, n, 1.0);
            for (int64_t i = 0; n == 14 && i < n; i++)
                g[i] = extremes[i];
            ref_glu(out, g, u, n, acts[a]);
            for (int64_t i = 0; i < n; i++)
                want[i] = d_act(g[i], acts[a]) * u[i];
            EXPECT_CLOSE(acts[a] == RC_ACT_SILU ? "glu silu" : "glu gelu_tanh", out, want, NULL, n,
                         acts[a] == RC_ACT_SILU ? FLT_MIN : 1e-14, 2 * EPS);
            ref_glu(g, g, u, n, acts[a]); /* in place, as the forward calls it */
            assert_memory_equal(g, out, (size_t)n * sizeof *g);
            free(g); free(u); free(out); free(want);
        }
}

/* c tanh(x / c). Bound: FLT_EPSILON (2|r| + |x| sech^2(x/c)): tanh and the product round once each; the
 * rounding of x / c moves the result by <= |x| sech^2(x/c) 2^-24. */
static void test_softcap(void **state)
{
    (void)state;
    static const float caps[] = {30.0f, 50.0f, 1.0f};
    static const float extremes[] = {-1e30f, -1e4f, -100, -1, -1e-20f, 0, 1e-20f, 1, 100, 1e4f, 1e30f};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        const int64_t n = 2000;
        seed(900 + c);
        float *x = FALLOC(n), *x0 = FALLOC(n);
        double *want = DALLOC(n), *mag = DALLOC(n);
        fill(x0, n, 2.0 * caps[c]);
        memcpy(x0, extremes, sizeof extremes);
        memcpy(x, x0, (size_t)n * sizeof *x);
        rc_softcap(x, n, caps[c]);
        for (int64_t i = 0; i < n; i++) {
            const double u = (double)x0[i] / caps[c], sech = 1 / cosh(u);
            want[i] = caps[c] * tanh(u);
            mag[i] = 2 * fabs(want[i]) + (isfinite(sech) ? fabs((double)x0[i]) * sech * sech : 0);
        }
        EXPECT_CLOSE("softcap", x, want, mag, n, 0, EPS);
        for (int64_t i = 0; i < n; i++)
            assert_true(fabsf(x[i]) <= caps[c]);
        free(x); free(x0); free(want); free(mag);
    }
}

/* ---- the checker can fail ---- */

/* A correct matmul passes; the same output with one element moved by 4x its bound, or set to NaN or Inf,
 * is rejected (exactly that element). */
static void test_checker_rejects_perturbation(void **state)
{
    (void)state;
    const int64_t T = 4, N = 32, K = 64;
    seed(1000);
    float *x = FALLOC(T * K), *W = FALLOC(N * K), *y = FALLOC(T * N);
    double *want = DALLOC(T * N), *mag = DALLOC(T * N);
    fill(x, T * K, 1.0);
    fill(W, N * K, 0.1);
    ref_matmul(y, x, W, NULL, T, N, K);
    d_matmul(want, mag, x, W, NULL, T, N, K);
    assert_int_equal(count_bad("matmul", y, want, mag, T * N, 0, 2 * EPS), 0);
    const int64_t i = 37;
    const float keep = y[i];
    quiet = 1;
    y[i] = (float)(want[i] + 4 * 2 * EPS * mag[i]);
    assert_int_equal(count_bad("perturbed", y, want, mag, T * N, 0, 2 * EPS), 1);
    y[i] = NAN;
    assert_int_equal(count_bad("NaN", y, want, mag, T * N, 0, 2 * EPS), 1);
    y[i] = INFINITY;
    assert_int_equal(count_bad("Inf", y, want, mag, T * N, 0, 2 * EPS), 1);
    quiet = 0;
    y[i] = keep;
    assert_int_equal(count_bad("restored", y, want, mag, T * N, 0, 2 * EPS), 0);
    free(x); free(W); free(y); free(want); free(mag);
}

/* RoPE with pairs (2i, 2i+1) (the GPT-J convention, wrong for HF llama/qwen) is rejected; the right pairing
 * passes the same check. Also a max-free softmax on 1e4-scale inputs (exp overflows) is rejected. */
static void test_checker_rejects_wrong_ops(void **state)
{
    (void)state;
    const int T = 3, H = 2, D = 16, R = 16;
    const int64_t n = (int64_t)T * H * D;
    rc_rope_desc r = rope(10000.0, 1.0, D, R, R / 2, R);
    seed(1100);
    float *inv = FALLOC(R / 2), *cs = FALLOC(T * R), *sn = FALLOC(T * R), *x = FALLOC(n), *x0 = FALLOC(n);
    double *want = DALLOC(n), *mag = DALLOC(n);
    rc_rope_inv_freq(inv, &r);
    rc_rope_table(cs, sn, inv, &r, 1, T);
    fill(x0, n, 1.0);
    memcpy(x, x0, (size_t)n * sizeof *x);
    ref_rope_apply(x, cs, sn, T, H, D, R);
    d_rope(want, mag, x0, cs, sn, T, H, D, R, 1);
    quiet = 1;
    assert_true(count_bad("rope interleaved", x, want, mag, n, 0, 2 * EPS) > n / 4);
    quiet = 0;
    d_rope(want, mag, x0, cs, sn, T, H, D, R, 0);
    assert_int_equal(count_bad("rope half-split", x, want, mag, n, 0, 2 * EPS), 0);

    float s[8];
    double sd[8], p[8], pm[8];
    for (int i = 0; i < 8; i++)
        sd[i] = s[i] = 10000.0f + (float)i;
    double sum = 0;
    for (int i = 0; i < 8; i++)
        sum += s[i] = expf(s[i]);
    for (int i = 0; i < 8; i++)
        s[i] = (float)(s[i] / sum);
    d_softmax(p, pm, sd, 8);
    quiet = 1;
    assert_int_equal(count_bad("softmax without max", s, p, pm, 8, FLT_MIN, EPS), 8);
    quiet = 0;
    free(inv); free(cs); free(sn); free(x); free(x0); free(want); free(mag);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_qk_norm),
        cmocka_unit_test(test_rope_inv_freq),
        cmocka_unit_test(test_rope_table),
        cmocka_unit_test(test_rope_apply),
        cmocka_unit_test(test_rope_zero_freq_passthrough),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_attention_gqa),
        cmocka_unit_test(test_attention_window),
        cmocka_unit_test(test_attention_decode),
        cmocka_unit_test(test_glu),
        cmocka_unit_test(test_softcap),
        cmocka_unit_test(test_checker_rejects_perturbation),
        cmocka_unit_test(test_checker_rejects_wrong_ops),
    };
    return cmocka_run_group_tests(tests, group_setup, rng_teardown);
}
