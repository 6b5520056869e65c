/* GPU check of the engine's gemma4 kernels (engine/eng_gemma.h) against ref/ops: the final logit softcap (bit for
 * bit against rc_softcap), the per-head V norm (strided rows, the rest of each row untouched), the sandwich norm +
 * residual add, the layer scalar, the PLE inputs and gate, and the ring KV's gather / scatter (position p in row
 * p % W) bit for bit against the host's index map, wrapping. Seeded inputs, NaN-poisoned outputs. --bench: the
 * softcap's time over a gemma4 vocabulary. Exit 77 without a CUDA device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gemma.h"
#include "engk_check.h"
#include "ops.h"
#include "softcap.h"

static int failures;

/* |got - want| <= 1e-6 + 16 u |want| (a few fp32 roundings of the same math in another order) */
static void check_close(const char *what, const float *got, const float *want, int64_t n)
{
    float *bound = ekc_hmalloc(n, sizeof *bound);
    for (int64_t i = 0; i < n; i++)
        bound[i] = (float)(1e-6 + 16.0 * EKC_U * fabs(want[i]));
    failures += ekc_check(what, got, want, bound, "1e-6 + 16 u |want|", n);
    free(bound);
}

static float *rnd(int64_t n, double lo, double hi, unsigned long seed)
{
    float *x = ekc_hmalloc(n, sizeof *x);
    ekc_fill(x, n, lo, hi, seed);
    return x;
}

static void test_head_norm(int T, int nh, int D, int64_t off, int64_t stride)
{
    const int64_t n = (int64_t)T * stride;
    float *x = rnd(n, -3, 3, 11), *want = ekc_hmalloc(n, sizeof *want), *got = ekc_hmalloc(n, sizeof *got);
    memcpy(want, x, (size_t)n * sizeof *x);
    for (int t = 0; t < T; t++)
        ref_rmsnorm(want + t * stride + off, x + t * stride + off, NULL, nh, D, 1e-6f, RC_NORM_POW);
    float *d = ekc_to_dev(x, n, sizeof *x);
    EKC_CU(engk_head_norm(d + off, stride, T, nh, D, NULL, 1e-6f, RC_NORM_POW, 0));
    ekc_from_dev(got, d, n, sizeof *got);
    char what[96];
    snprintf(what, sizeof what, "head_norm T=%d heads=%d D=%d (whole rows)", T, nh, D);
    check_close(what, got, want, n);
    ekc_dev_free(d);
    free(x); free(want); free(got);
}

/* k_norm_add's arithmetic on the host, bit for bit (eng_gemma.cu, eng_kdev.cuh): thread t of 256 sums fmaf(o_i, o_i)
 * over i = t, t + 256, ...; each warp's 32 partials by the xor butterfly (16, 8, 4, 2, 1; lane 0's value), the 8 warp
 * sums in order from 0; inv = (float)(1 / sqrt((double)(ss / n + eps))); x_i + (o_i inv) w_i as the kind applies w. */
static void norm_add_model(float *x, const float *o, const float *w, int n, float eps, int kind)
{
    enum { NT = 256 };
    float part[NT / 32];
    for (int wp = 0; wp < NT / 32; wp++) {
        float v[32];
        for (int l = 0; l < 32; l++) {
            v[l] = 0.0f;
            for (int i = 32 * wp + l; i < n; i += NT)
                v[l] = fmaf(o[i], o[i], v[l]);
        }
        for (int off = 16; off; off >>= 1) {
            float nv[32];
            for (int l = 0; l < 32; l++)
                nv[l] = v[l] + v[l ^ off];
            memcpy(v, nv, sizeof v);
        }
        part[wp] = v[0];
    }
    float ss = 0.0f;
    for (int wp = 0; wp < NT / 32; wp++)
        ss += part[wp];
    const float inv = (float)(1.0 / sqrt((double)(ss / (float)n + eps)));
    for (int i = 0; i < n; i++) {
        const float h = o[i] * inv;
        x[i] = x[i] + (kind == 1 ? h * (1.0f + w[i]) : kind == 3 ? h : h * w[i]);
    }
}

static void test_norm_add(int T, int n, int kind)
{
    const int64_t m = (int64_t)T * n;
    float *x = rnd(m, -2, 2, 21), *o = rnd(m, -5, 5, 22), *w = rnd(n, 0.5, 1.5, 23);
    float *want = ekc_hmalloc(m, sizeof *want), *got = ekc_hmalloc(m, sizeof *got);
    ref_rmsnorm(want, o, w, T, n, 1e-6f, (rc_norm_kind)kind);
    for (int64_t i = 0; i < m; i++)
        want[i] = x[i] + want[i];
    float *dx = ekc_to_dev(x, m, 4), *dox = ekc_to_dev(o, m, 4), *dw = ekc_to_dev(w, n, 4);
    EKC_CU(engk_norm_add(dx, dox, dw, T, n, 1e-6f, kind, 0));
    ekc_from_dev(got, dx, m, 4);
    char what[96];
    snprintf(what, sizeof what, "norm_add T=%d n=%d kind=%d", T, n, kind);
    check_close(what, got, want, m);
    float *model = ekc_hmalloc(m, sizeof *model);
    memcpy(model, x, (size_t)m * sizeof *x);
    for (int t = 0; t < T; t++)
        norm_add_model(model + (int64_t)t * n, o + (int64_t)t * n, w, n, 1e-6f, kind);
    snprintf(what, sizeof what, "norm_add T=%d n=%d kind=%d (its arithmetic on the host)", T, n, kind);
    failures += ekc_bits(what, got, model, m) != 0;
    free(model);
    /* the layer scalar: x * a, one rounding, bit for bit */
    const float a = 0.734375f;
    float *da = ekc_to_dev(&a, 1, 4);
    EKC_CU(engk_scale_dev(dx, da, m, 0));
    float *want2 = ekc_hmalloc(m, sizeof *want2), *gotp = ekc_hmalloc(m, sizeof *gotp);
    for (int64_t i = 0; i < m; i++)
        want2[i] = got[i] * a; /* got: norm_add's output, before the scaling */
    ekc_from_dev(gotp, dx, m, 4);
    failures += ekc_check("scale_dev (x * a)", gotp, want2, NULL, "bit-equal", m);
    ekc_dev_free(dx); ekc_dev_free(dox); ekc_dev_free(dw); ekc_dev_free(da);
    free(x); free(o); free(w); free(want); free(got); free(want2); free(gotp);
}

/* as ref/forward.c ple_inputs and ple_block's gate, from the same host rows */
static void test_ple(int T, int L, int P, int Hd)
{
    const int64_t LP = (int64_t)L * P, m = (int64_t)T * LP;
    float *mp = rnd(m, -3, 3, 31), *tok = rnd(m, -1, 1, 32), *w = rnd(P, 0.5, 1.5, 33);
    const float ps = (float)pow((double)Hd, -0.5), is = (float)pow(2.0, -0.5);
    float *want = ekc_hmalloc(m, 4), *got = ekc_hmalloc(m, 4);
    for (int64_t i = 0; i < m; i++)
        want[i] = mp[i] * ps;
    ref_rmsnorm(want, want, w, (int64_t)T * L, P, 1e-6f, RC_NORM_POW_W);
    for (int64_t i = 0; i < m; i++)
        want[i] = (want[i] + tok[i]) * is;
    float *din = ekc_dev_alloc(m, 4), *dmp = ekc_to_dev(mp, m, 4), *dtok = ekc_to_dev(tok, m, 4), *dw = ekc_to_dev(w, P, 4);
    ekc_poison(din, m, 4);
    EKC_CU(engk_ple_inputs(din, dmp, dtok, dw, T, L, P, 1e-6f, RC_NORM_POW_W, ps, is, 0));
    ekc_from_dev(got, din, m, 4);
    char what[96];
    snprintf(what, sizeof what, "ple_inputs T=%d L=%d P=%d", T, L, P);
    check_close(what, got, want, m);
    for (int l = 0; l < L; l += L - 1 > 0 ? L - 1 : 1) {
        const int64_t n = (int64_t)T * P;
        float *g = rnd(n, -4, 4, 40 + l), *gw = ekc_hmalloc(n, 4), *gg = ekc_hmalloc(n, 4);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < P; i++)
                gw[t * P + i] = ref_act(g[t * P + i], RC_ACT_GELU_TANH) * got[(int64_t)t * LP + (int64_t)l * P + i];
        float *dg = ekc_to_dev(g, n, 4);
        EKC_CU(engk_ple_gate(dg, din, T, L, P, l, RC_ACT_GELU_TANH, 0));
        ekc_from_dev(gg, dg, n, 4);
        snprintf(what, sizeof what, "ple_gate layer %d (gelu_tanh)", l);
        check_close(what, gg, gw, n);
        ekc_dev_free(dg);
        free(g); free(gw); free(gg);
        if (L == 1)
            break;
    }
    ekc_dev_free(din); ekc_dev_free(dmp); ekc_dev_free(dtok); ekc_dev_free(dw);
    free(mp); free(tok); free(w); free(want); free(got);
}

/* rows of 'row' floats (a multiple of 4: 16 bytes); a ring of W rows written for positions 0 .. npos - 1 in chunks
 * of C (scatter of each chunk's last W positions), then gathered for [base, pos) at every chunk: the gathered rows
 * must be the positions' own rows wherever p >= pos - W. */
static void test_ring(int W, int C, int npos, int row)
{
    const int64_t rb = (int64_t)row * 4, lin_rows = (int64_t)W + C + 64;
    float *ring = ekc_dev_alloc((int64_t)W * row, 4), *lin = ekc_dev_alloc(lin_rows * row, 4);
    float *h = ekc_hmalloc(lin_rows * row, 4);
    int bad = 0;
    EKC_CU(cudaMemset(ring, 0, (size_t)(W * rb)));
    for (int pos = 0; pos < npos && !bad; pos += C) {
        const int T = pos + C <= npos ? C : npos - pos;
        const int64_t lo = pos - W + 1 > 0 ? pos - W + 1 : 0, base = lo / 16 * 16;
        ekc_poison(lin, lin_rows * row, 4);
        EKC_CU(engk_ring_move(ring, lin, rb, base, pos - base, base, W, 0, 0));
        if (pos > base)
            ekc_from_dev(h, lin, (pos - base) * row, 4);
        for (int64_t p = lo; p < pos && !bad; p++)
            for (int i = 0; i < row; i++)
                if (h[(p - base) * row + i] != (float)(p * 1000 + i)) {
                    printf("  ring gather W=%d C=%d: position %lld element %d = %g\n", W, C, (long long)p, i,
                           h[(p - base) * row + i]);
                    bad = 1;
                    break;
                }
        for (int64_t p = pos; p < pos + T; p++) /* the chunk's own rows, then its last W into the ring */
            for (int i = 0; i < row; i++)
                h[(p - base) * row + i] = (float)(p * 1000 + i);
        EKC_CU(cudaMemcpy(lin + (pos - base) * row, h + (pos - base) * row, (size_t)(T * rb), cudaMemcpyHostToDevice));
        const int64_t last = pos + T - 1, from = last - W + 1 > pos ? last - W + 1 : pos;
        EKC_CU(engk_ring_move(ring, lin, rb, from, last - from + 1, base, W, 1, 0));
    }
    printf("%-60s %s\n", "ring gather/scatter", bad ? "FAIL" : "ok (bit-identical)");
    printf("  (W=%d, chunks of %d, %d positions, rows of %d floats)\n", W, C, npos, row);
    failures += bad;
    ekc_dev_free(ring); ekc_dev_free(lin);
    free(h);
}

/* The decode step's moves (engk_ring_move_dev: position and pos - base from device memory) against the host-argument
 * ones, one position at a time (tiles of P): the gathered window and the ring bit for bit after every step. */
static void test_ring_dev(int W, int P, int npos, int row)
{
    const int64_t rb = (int64_t)row * 4, lin_rows = (int64_t)W + P;
    float *ring[3], *lin[3]; /* 0: host positions; 1 and 2: the pair one device-position launch moves (K's, V's) */
    int64_t *dscal = ekc_dev_alloc(2, 8);
    float *h[2] = {ekc_hmalloc(lin_rows * row, 4), ekc_hmalloc(lin_rows * row, 4)};
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        ring[k] = ekc_dev_alloc((int64_t)W * row, 4);
        lin[k] = ekc_dev_alloc(lin_rows * row, 4);
        EKC_CU(cudaMemset(ring[k], 0, (size_t)(W * rb)));
        EKC_CU(cudaMemset(lin[k], 0, (size_t)(lin_rows * rb)));
    }
    for (int64_t pos = 0; pos < npos && !bad; pos++) {
        const int64_t lo = pos - W + 1 > 0 ? pos - W + 1 : 0, base = lo / P * P, scal[2] = {pos, pos - base};
        EKC_CU(cudaMemcpy(dscal, scal, sizeof scal, cudaMemcpyHostToDevice));
        EKC_CU(engk_ring_move(ring[0], lin[0], rb, base, pos - base, base, W, 0, 0));
        EKC_CU(engk_ring_move_dev(ring[1], lin[1], ring[2], lin[2], rb, dscal, dscal + 1, W, W + P, 0, 0));
        for (int i = 0; i < row; i++) { /* the new row (never 0; the V pair's negated), then back into the ring */
            h[0][i] = (float)(pos * 1000 + i + 1);
            h[1][i] = -h[0][i];
        }
        for (int k = 0; k < 3; k++)
            EKC_CU(cudaMemcpy(lin[k] + (pos - base) * row, k == 2 ? h[1] : h[0], (size_t)rb, cudaMemcpyHostToDevice));
        EKC_CU(engk_ring_move(ring[0], lin[0], rb, pos, 1, base, W, 1, 0));
        EKC_CU(engk_ring_move_dev(ring[1], lin[1], ring[2], lin[2], rb, dscal, dscal + 1, W, W + P, 1, 0));
        /* pair 1 equals the host-position moves bit for bit; pair 2 their negation (0 where nothing was written):
         * the linear window, then the ring, each read back once per pair */
        const int64_t n[2] = {(pos - base + 1) * row, (int64_t)W * row};
        for (int m = 0; m < 2 && !bad; m++) {
            ekc_from_dev(h[0], m ? ring[0] : lin[0], n[m], 4);
            for (int k = 1; k < 3 && !bad; k++) {
                ekc_from_dev(h[1], m ? ring[k] : lin[k], n[m], 4);
                for (int64_t i = 0; i < n[m] && !bad; i++) {
                    const float want = k == 2 && h[0][i] != 0.0f ? -h[0][i] : h[0][i];
                    bad = memcmp(&want, &h[1][i], 4) != 0;
                }
            }
        }
        if (bad)
            printf("  ring decode moves W=%d P=%d: differ at position %lld\n", W, P, (long long)pos);
    }
    printf("%-60s %s\n", "ring moves (K and V pairs) with device positions = host positions",
           bad ? "FAIL" : "ok (bit-identical)");
    printf("  (W=%d, P=%d, %d positions one at a time, rows of %d floats)\n", W, P, npos, row);
    failures += bad;
    for (int k = 0; k < 3; k++) {
        ekc_dev_free(ring[k]); ekc_dev_free(lin[k]);
    }
    for (int k = 0; k < 2; k++)
        free(h[k]);
    ekc_dev_free(dscal);
}

/* The final logit softcap on the device (in place) against rc_softcap on the host: bit for bit (a NaN input only has
 * to stay NaN: the CPU keeps its payload, the GPU's arithmetic returns its canonical NaN). Inputs: signed zeros,
 * infinities, NaN, subnormals, values about the cap and far past it (saturation, where neighbours round alike),
 * then seeded values over ~[-16 c, 16 c] and a narrow band near c. */
static void test_softcap(int64_t n, float c)
{
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, 1e-38f, c, -c, 2 * c,
                             22 * c, 23 * c, 1e30f, -1e30f, 3.0e38f, 1e-8f, 0.5f * c};
    const int64_t ns = (int64_t)(sizeof special / sizeof special[0]);
    float *x = rnd(n, -16.0 * c, 16.0 * c, 31), *want = ekc_hmalloc(n, sizeof *want), *got = ekc_hmalloc(n, sizeof *got);
    for (int64_t i = 0; i < n && i < ns; i++)
        x[i] = special[i];
    for (int64_t i = n / 2; i < n && i < n / 2 + 4096; i++) /* consecutive floats from c up */
        x[i] = i == n / 2 ? c : nextafterf(x[i - 1], INFINITY);
    memcpy(want, x, (size_t)n * sizeof *x);
    rc_softcap(want, n, c);
    float *d = ekc_to_dev(x, n, sizeof *x);
    EKC_CU(engk_softcap(d, n, c, 0));
    ekc_from_dev(got, d, n, sizeof *got);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const int same = isnan(want[i]) ? isnan(got[i]) : memcmp(&got[i], &want[i], sizeof got[i]) == 0;
        if (!same && bad++ < 3)
            printf("  softcap x=%.9g: device %.9g, host %.9g\n", (double)x[i], (double)got[i], (double)want[i]);
    }
    char what[96];
    snprintf(what, sizeof what, "softcap n=%lld c=%g (device vs rc_softcap)", (long long)n, (double)c);
    printf("%-60s %s\n", what, bad ? "FAIL" : "ok (bit-identical)");
    failures += bad > 0;
    ekc_dev_free(d);
    free(x); free(want); free(got);
}

typedef struct {
    float *d;
    int64_t n;
} softcap_ctx;

static cudaError_t softcap_call(void *p)
{
    const softcap_ctx *c = p;
    return engk_softcap(c->d, c->n, 30.0f, 0);
}

/* --bench: the softcap over a gemma4 vocabulary (262144 logits, read and written in place) */
static void bench_softcap(void)
{
    const int64_t n = 262144;
    float *x = rnd(n, -60.0, 60.0, 41);
    softcap_ctx c = {ekc_to_dev(x, n, sizeof *x), n};
    const double us = ekc_time_us(softcap_call, &c), gbs = ekc_read_ceiling_gbs();
    printf("softcap of %lld logits: %.2f us (%.0f GB/s of 8 bytes a logit; read ceiling %.0f GB/s)\n", (long long)n,
           us, 8.0 * (double)n / us * 1e-3, gbs);
    ekc_dev_free(c.d);
    free(x);
}

int main(int argc, char **argv)
{
    ekc_skip_unless_gpu("engine.kernels.gemma");
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
        bench_softcap();
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: test_engk_gemma [--bench]\n");
        return 2;
    }
    test_softcap(1000, 30.0f);
    test_softcap(262147, 30.0f);
    test_softcap(777, 0.75f);
    test_head_norm(5, 2, 16, 24, 72);
    test_head_norm(3, 4, 256, 8, 1100);
    test_norm_add(7, 64, RC_NORM_POW_W);
    test_norm_add(2, 3840, RC_NORM_W);
    test_norm_add(3, 200, RC_NORM_1PW);
    test_norm_add(2, 4096, RC_NORM_POW); /* the longest row of the registers' path */
    test_norm_add(2, 4097, RC_NORM_POW_W); /* the loop */
    test_norm_add(1, 15360, RC_NORM_W);
    test_ple(5, 6, 8, 64);
    test_ple(3, 35, 256, 1536);
    test_ple(1, 1, 16, 256);
    test_ring(8, 1, 40, 8);
    test_ring(8, 5, 41, 16);
    test_ring(12, 13, 70, 64);
    test_ring(1024, 256, 3000, 4);
    test_ring_dev(12, 4, 70, 8);
    test_ring_dev(8, 64, 150, 16);
    test_ring_dev(1024, 64, 1300, 4);
    if (failures) {
        printf("FAIL: %d check(s)\n", failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
