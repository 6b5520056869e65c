/* GPU suite: the quantized decode GEMV and prefill dequant (engine/eng_qgemv.h) on packed matrices built from
 * model/quant.h rc_qtensors (seeded codes over each family's full range, fp16-valued scales, integer zeros and float
 * offsets): the GEMV bit for bit against its host model (eng_qdot_model) and within a stated fp32 bound of a double
 * dot product over model/quant.h's rc_qtensor_dequant; the fused GLU against the GEMV + engk_glu; the dequant bit for
 * bit against rc_qtensor_dequant (f32) and its bf16 rounding; refused formats. Odd N, K of 1 and many groups and
 * lane-stride edges, NaN-poisoned outputs. The tensor-core variants (k_qgemv_mma, another order): against the double
 * dot product within a derived bound (mma_ref) and a tripwire, run twice and with fewer rows for the same bits, the
 * fused GLU bit-equal to their own plain rows; a host emulation of their fragment layouts runs even without a GPU.
 * The fused-norm forms (k_qgemv_s, k_qgemv_mma) bit-equal to engk_rmsnorm + the same variant, every norm kind, xn.
 * --bench: llama3-8b decode shapes at int8 per row and int4 g128, GB/s of the bytes read against a read ceiling
 * measured in the same run; the fused-norm forms next to engk_rmsnorm + the plain form. --sanitize: the engine's
 * wide fused gate|up and q|k|v picks once a format, small enough for compute-sanitizer. Exit 77 without a GPU
 * (after the emulation); 1 on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_qgemv.h"
#include "eng_qpack.h"
#include "eng_weights.h"
#include "engk_check.h"
#include "safetensors.h"

typedef struct qcase {
    const char *name;
    int family, bits, group; /* group 0: one per row */
    int zero;                /* affine: offsets from integer zeros (GPTQ); 0: float offsets (GGUF Q4_1) */
    int huge;                /* odd groups' scales times 2^huge (110, -110: the kernels' out-of-line paths) */
} qcase;

static const qcase cases[] = {
    {"int8 per-row scale (W8A16)", RC_QF_SCALE, 8, 0, 0, 0},
    {"int8 g32 scale (GGUF Q8_0)", RC_QF_SCALE, 8, 32, 0, 0},
    {"int4 g32 affine, zeros (GPTQ)", RC_QF_AFFINE, 4, 32, 1, 0},
    {"int4 g64 affine, zeros (GPTQ)", RC_QF_AFFINE, 4, 64, 1, 0},
    {"int4 g128 affine, zeros (W4A16)", RC_QF_AFFINE, 4, 128, 1, 0},
    {"int4 g32 affine, offsets (GGUF Q4_1)", RC_QF_AFFINE, 4, 32, 0, 0},
    {"int4 g32 scale (GGUF Q4_0)", RC_QF_SCALE, 4, 32, 0, 0},
    {"int4 g128 scale (GPTQ sym)", RC_QF_SCALE, 4, 128, 0, 0},
    {"int4 g32 affine, zeros, huge scales", RC_QF_AFFINE, 4, 32, 1, 110},
    {"int8 g32 scale, huge scales", RC_QF_SCALE, 8, 32, 0, 110},
    {"int4 g32 scale, tiny scales", RC_QF_SCALE, 4, 32, 0, -110},
    {"int4 g64 affine, zeros, tiny scales", RC_QF_AFFINE, 4, 64, 1, -110},
};

/* N x K pairs: one row, odd N, one group, K at the lane stride (32 blocks) and past it, a 4096-wide row, fewer blocks
 * than lanes with K / 4 not a multiple of 8 (592: int8 per row only) or of 32 (608), and down's 14336 (x in more than
 * 48 KB of shared memory). 4096 and 14336 give every lane the same blocks: the multi-row walk (*nr, *n3) runs there,
 * with 3 row sets a warp in s1u2w16n3 (N = 5: a warp of 3 and one of 2 row sets; N = 19: 3 row sets of 1 row from
 * 7 warps, the last one short). */
static const int shapes[][2] = {{1, 128},  {37, 256}, {67, 384}, {5, 4096}, {131, 1024 + 128}, {33, 2048 + 640},
                                {7, 592}, {9, 608},  {19, 14336}};

static uint64_t rng = 0x5eedull;

/* A random rc_qtensor [n, k] of case c: codes over the family's full range, scales fp16 values in [0.5, 1.5) x 2^-6,
 * zeros in [0, 2^bits) or float offsets. */
static void make_qt(rc_qtensor *t, const qcase *c, int n, int k)
{
    rc_err e = {0};
    const int64_t g = c->group ? c->group : k;
    if (rc_qtensor_alloc(t, "test.weight", (rc_qfamily)c->family, c->bits, n, k, g, c->zero, &e)) {
        printf("FAIL rc_qtensor_alloc: %s\n", e.msg);
        exit(1);
    }
    const int lo = c->family == RC_QF_SCALE ? -(1 << (c->bits - 1)) : 0, span = 1 << c->bits;
    for (int64_t i = 0; i < (int64_t)n * k; i++)
        t->q[i] = (int8_t)(lo + (int)(ekc_splitmix_unif(&rng) * span));
    const int64_t ng = (int64_t)n * (k / g);
    for (int64_t j = 0; j < ng; j++) {
        t->scale[j] = rc_f16_to_f32(rc_f32_to_f16((float)((0.5 + ekc_splitmix_unif(&rng)) / 64.0)));
        if (c->huge && (j & 1))
            t->scale[j] = ldexpf(t->scale[j], c->huge);
        if (c->family == RC_QF_AFFINE && c->zero)
            t->zero[j] = (int16_t)(ekc_splitmix_unif(&rng) * span);
        else if (c->family == RC_QF_AFFINE)
            t->offset[j] = (float)(-(ekc_splitmix_unif(&rng) * span) / 64.0);
    }
    if (c->family == RC_QF_AFFINE && c->zero)
        rc_qtensor_set_offsets(t);
}

/* The packed bytes of t (eng_qfmt.h layout). */
static void *pack(const rc_qtensor *t, eng_qfmt *q)
{
    rc_err e = {0};
    if (eng_qfmt_of(t, q, &e)) {
        printf("FAIL eng_qfmt_of: %s\n", e.msg);
        exit(1);
    }
    void *m = ekc_hmalloc(eng_qmat_bytes(t->n, t->k, q), 1);
    eng_qpack_rows(m, t->n, t->k, q, 0, t, 0, t->n);
    return m;
}

/* The variant called name (every name is in the table). */
static int variant_named(const char *name)
{
    for (int v = 0; v < engk_qgemv_variants(); v++)
        if (!strcmp(engk_qgemv_variant_name(v), name))
            return v;
    printf("FAIL no qgemv variant %s\n", name);
    exit(1);
}

/* ---- the tensor-core variants (k_qgemv_mma): their own order, so a bound against double, not eng_qdot_model ----
 * want[n] = sum_k w x + b + res in double over rc_qtensor_dequant's w. Error sources (A = sum_k |s q x| + |m x|, s, m
 * the group's scale and offset, q the code; S = K / step steps, step = 128 k (int4) or 64 k (int8); NM = 8 (int4) or
 * 4 (int8) MMAs a step):
 *  - x = (hi + lo) 2^e + r, |r| <= 2^-22 |x| + 2^(e-25), 2^e <= 2^-14 max(max|x|, 2^-100): 2^-22 A + 2^-39 mx sum|s q|;
 *  - the kernel computes s (sum q x) + m (sum x), the reference rounds s q (+ m) per weight: 2 u A;
 *  - an MMA (exact fp16 products, f32 accumulation that truncates; Fasi et al. 2021 measure at most ~2 ulp): taken as
 *    2^-21 (|c| + sum|products|) each, a chain of NM from zero a step: NM 2^-21 A;
 *  - f32 roundings after the MMAs, each u times a partial sum <= A: c0 + c1, per step fma(s) and fma(m) (the warp's
 *    <= S steps), the step's x sum (11 roundings, times |m|), the <= 16 warps' partials, PERROW's s: (2 S + 30) u A;
 *    + b, res +: 2 u (|b| + |res|) and want's own rounding (1 ulp).
 * The bound holds whatever the hardware's in-MMA order; it cannot see the loss of x's low part at large K (a sum of
 * random roundings), so a tripwire also holds each row to 2^-16 Q (Q = sqrt(sum_k (s q x)^2 + (m x)^2)): a correct
 * kernel's errors are random-signed roundings of ~2^-20 Q (the MMAs' truncations of ~K/16 partials of size
 * Q sqrt(16 / K)); hi alone (x to 11 bits) gives ~2^-14 Q.
 * The integer form (the i* variants: x to X = rn(x 2^F), 2^F = 2^29 / 2^floor(log2 max(mx, 2^-90)), four int8 digits,
 * the step's sums exact in int32) has its own bound, ibound:
 *  - |x - X 2^-F| <= 2^-(F+1) <= 2^-30 max(mx, 2^-90): 2^-30 max(mx, 2^-90) sum|s q|;
 *  - the reference's own roundings of s q (+ m): 2 u A;
 *  - a step's two lanes' sums as f32 (one rounding each): |P1| 2^16 + |P0| <= sum |q| (|X| + 2^15.01) (balanced
 *    digits), so u A + 2^-36 max(mx, 2^-90) sum|s q|;
 *  - the f32 roundings after them as in the fp16 form (the two lanes joined once more): (2 S + 31) u A;
 *  - + b, res +, want's rounding, and 2^-140 for a result the scaling back leaves below f32's normal range. */
typedef struct mref {
    float *want, *bound, *trip, *ibound;
} mref;

static mref mma_ref(const rc_qtensor *t, const float *x, const float *b, const float *res, int N, int K)
{
    mref r = {ekc_hmalloc(N, 4), ekc_hmalloc(N, 4), ekc_hmalloc(N, 4), ekc_hmalloc(N, 4)};
    const int64_t G = t->group, ng = K / G;
    const int step = t->bits == 4 ? 128 : 64, S = K / step, nm = step / 16;
    double mx = 0x1p-100;
    for (int k = 0; k < K; k++)
        mx = fmax(mx, fabs((double)x[k]));
    float *wd = ekc_hmalloc(K, 4);
    rc_qtensor tr = *t; /* one row at a time: rc_qtensor_dequant of a one-row view */
    for (int n = 0; n < N; n++) {
        tr.n = 1;
        tr.q = t->q + (int64_t)n * K;
        tr.scale = t->scale + n * ng;
        tr.offset = t->offset ? t->offset + n * ng : NULL;
        tr.zero = t->zero ? t->zero + n * ng : NULL;
        rc_qtensor_dequant(&tr, wd);
        double y = 0.0, A = 0.0, Q2 = 0.0, sq = 0.0;
        for (int k = 0; k < K; k++) {
            const double s = tr.scale[k / G], m = tr.offset ? tr.offset[k / G] : 0.0, xk = x[k];
            const double a = fabs(s * tr.q[k] * xk), c = fabs(m * xk);
            y += (double)wd[k] * xk;
            A += a + c;
            Q2 += a * a + c * c;
            sq += fabs(s * tr.q[k]);
        }
        const double bb = b ? b[n] : 0.0, rr = res ? res[n] : 0.0, u = EKC_U;
        r.want[n] = (float)(y + bb + rr);
        const double tail = 0x1p-39 * mx * sq + 2 * u * (fabs(bb) + fabs(rr)) + ekc_ulp(r.want[n]);
        r.bound[n] = (float)((0x1p-22 + 2 * u + nm * 0x1p-21 + (2.0 * S + 30) * u) * A + tail);
        r.trip[n] = (float)(0x1p-16 * sqrt(Q2) + tail);
        const double mi = fmax(mx, 0x1p-90), itail = 2 * u * (fabs(bb) + fabs(rr)) + ekc_ulp(r.want[n]) + 0x1p-140;
        r.ibound[n] = (float)((3 * u + (2.0 * S + 31) * u) * A + (0x1p-30 + 0x1p-36) * mi * sq + itail);
    }
    free(wd);
    return r;
}

static void mref_free(mref *r)
{
    free(r->want);
    free(r->bound);
    free(r->trip);
    free(r->ibound);
}

/* The bound variant v is held to: the integer form's (i*) or the fp16 form's. */
static const float *mref_bound(const mref *r, int v)
{
    return engk_qgemv_variant_name(v)[0] == 'i' ? r->ibound : r->bound;
}

/* y of variant v (plain), checked against the bound and the tripwire and run twice: the same bits; into keep (N
 * floats) too unless NULL. */
static int check_mma_run(int v, const char *fmt, const mref *r, float *dy, const float *dx, const void *dm,
                         const eng_qfmt *q, const float *db, const float *dres, int N, int K, const char *xs,
                         float *keep)
{
    char what[200];
    float *got = ekc_hmalloc(N, 4), *again = ekc_hmalloc(N, 4);
    ekc_poison(dy, N, 4);
    EKC_CU(engk_qgemv_variant(v, 0, dy, dx, dm, q, db, dres, N, K, 0, 0));
    ekc_from_dev(got, dy, N, 4);
    ekc_poison(dy, N, 4);
    EKC_CU(engk_qgemv_variant(v, 0, dy, dx, dm, q, db, dres, N, K, 0, 0));
    ekc_from_dev(again, dy, N, 4);
    const char *name = engk_qgemv_variant_name(v), *br = dres ? " +b +res" : db ? " +b" : "";
    snprintf(what, sizeof what, "mma %s %s N=%d K=%d x %s%s vs double", name, fmt, N, K, xs, br);
    int fails = ekc_check(what, got, r->want, mref_bound(r, v), "MMA bound (see mma_ref)", N);
    snprintf(what, sizeof what, "mma %s %s N=%d K=%d x %s%s tripwire", name, fmt, N, K, xs, br);
    fails += ekc_check(what, got, r->want, r->trip, "2^-16 Q + tail", N);
    snprintf(what, sizeof what, "mma %s %s N=%d K=%d x %s%s run twice", name, fmt, N, K, xs, br);
    fails += ekc_bits(what, again, got, N) != 0;
    if (keep)
        memcpy(keep, got, (size_t)N * 4);
    free(got);
    free(again);
    return fails;
}

/* x for the MMA checks: 0 uniform [-1, 1), 1 |x| log-uniform over 1e-6 .. 3e4 with random signs, 2 all zero. */
static const char *mma_x(float *x, int K, int mode, unsigned long seed)
{
    ekc_fill(x, K, 0, 1, seed);
    for (int k = 0; k < K; k++) {
        const double u = x[k], sgn = (k * 2654435761u >> 7) & 1 ? -1.0 : 1.0;
        const double wide = sgn * pow(10.0, -6.0 + u * (6.0 + log10(3e4)));
        x[k] = mode == 2 ? 0.0f : mode == 1 ? (float)wide : (float)(2 * u - 1);
    }
    return mode == 2 ? "zero" : mode == 1 ? "1e-6..3e4" : "[-1,1)";
}

static const qcase mma_cases[] = {
    {"int8 per-row scale", RC_QF_SCALE, 8, 0, 0, 0},
    {"int4 g128 scale", RC_QF_SCALE, 4, 128, 0, 0},
    {"int4 g128 affine", RC_QF_AFFINE, 4, 128, 1, 0},
    {"int8 g128 scale", RC_QF_SCALE, 8, 128, 0, 0},   /* two steps a group */
    {"int4 g256 affine", RC_QF_AFFINE, 4, 256, 1, 0}, /* two steps a group (K = 128: skipped) */
};

/* The k-split of an m* or i* variant (m<KS>..., i<KS>...) and its form: the only things its order depends on, so
 * variants of one form and KS (ring, tiles a block, registers, a persistent grid) give the same bits. Key: KS for
 * m*, 16 + KS for i*. */
static int mma_ks(int v)
{
    const char *n = engk_qgemv_variant_name(v);
    return n[0] == 'm' ? atoi(n + 1) : n[0] == 'i' ? 16 + atoi(n + 1) : 0;
}

/* y of variant v against the first variant of its KS (ks_y[KS], kept on the first call): bit for bit. */
static int check_mma_ks(int v, const char *what0, const float *got, float **ks_y, int *ks_v, int n)
{
    const int ks = mma_ks(v);
    if (ks < 1 || ks > 32)
        return 0;
    if (!ks_y[ks]) {
        ks_y[ks] = ekc_hmalloc(n, 4);
        memcpy(ks_y[ks], got, (size_t)n * 4);
        ks_v[ks] = v;
        return 0;
    }
    char what[240];
    snprintf(what, sizeof what, "%s: %s vs %s (the same KS)", what0, engk_qgemv_variant_name(v),
             engk_qgemv_variant_name(ks_v[ks]));
    return ekc_check(what, got, ks_y[ks], NULL, "bit equality", n);
}

/* Every m* variant on one format and shape: plain (bound, tripwire, run twice), with and without b / res; the fused
 * GLU (I = N) against the same variant's plain rows + engk_glu, bit for bit; every variant bit-equal to the first of
 * its KS (plain with b and res, or the fused GLU). */
static int check_mma(const qcase *c, int N, int K, int xmode, int glu)
{
    if (c->group && K % c->group)
        return 0;
    rc_qtensor t;
    make_qt(&t, c, glu ? 2 * N : N, K);
    eng_qfmt q;
    void *hm = pack(&t, &q);
    const int rows = glu ? 2 * N : N;
    float *x = ekc_hmalloc(K, 4), *b = ekc_hmalloc(rows, 4), *res = ekc_hmalloc(N, 4);
    const char *xs = mma_x(x, K, xmode, (unsigned long)(N * 131 + K + xmode));
    ekc_fill(b, rows, -0.5, 0.5, (unsigned long)(N + 11));
    ekc_fill(res, N, -1, 1, (unsigned long)(K + 13));
    void *dm = ekc_to_dev(hm, eng_qmat_bytes(rows, K, &q), 1);
    float *dx = ekc_to_dev(x, K, 4), *db = ekc_to_dev(b, rows, 4), *dres = ekc_to_dev(res, N, 4);
    float *dy = ekc_dev_alloc(rows, 4), *dg = ekc_dev_alloc(N, 4);
    int fails = 0, ran = 0, ks_v[33] = {0};
    float *ks_y[33] = {0}, *ky = ekc_hmalloc(N, 4);
    char kwhat[160];
    snprintf(kwhat, sizeof kwhat, "mma%s %s N=%d K=%d x %s", glu ? " glu" : "", c->name, N, K, xs);
    /* plain: without and with b / res; GLU: the 2N plain rows with b */
    mref r0 = mma_ref(&t, x, glu ? b : NULL, NULL, rows, K), r1 = {0};
    if (!glu)
        r1 = mma_ref(&t, x, b, res, N, K);
    for (int v = 0; v < engk_qgemv_variants(); v++) {
        if (!engk_qgemv_variant_mma(v, glu, &q, N, K))
            continue;
        ran++;
        if (!glu) {
            fails += check_mma_run(v, c->name, &r0, dy, dx, dm, &q, NULL, NULL, N, K, xs, NULL);
            fails += check_mma_run(v, c->name, &r1, dy, dx, dm, &q, db, dres, N, K, xs, ky);
            fails += check_mma_ks(v, kwhat, ky, ks_y, ks_v, N);
            continue;
        }
        /* GLU: the 2N plain rows (with b) under the bound, then the fused kernel bit-equal to them + engk_glu */
        fails += check_mma_run(v, c->name, &r0, dy, dx, dm, &q, db, NULL, rows, K, xs, NULL);
        float *got = ekc_hmalloc(N, 4), *want = ekc_hmalloc(N, 4);
        for (int act = 0; act < 2; act++) {
            ekc_poison(dy, rows, 4);
            EKC_CU(engk_qgemv_variant(v, 0, dy, dx, dm, &q, db, NULL, rows, K, 0, 0));
            EKC_CU(engk_glu(dg, dy, 1, N, act ? RC_ACT_GELU_TANH : RC_ACT_SILU, 0));
            ekc_from_dev(want, dg, N, 4);
            ekc_poison(dg, N, 4);
            EKC_CU(engk_qgemv_variant(v, 1, dg, dx, dm, &q, db, NULL, N, K, act ? RC_ACT_GELU_TANH : RC_ACT_SILU, 0));
            ekc_from_dev(got, dg, N, 4);
            char what[200];
            snprintf(what, sizeof what, "mma glu %s %s I=%d K=%d x %s act=%d vs plain + engk_glu",
                     engk_qgemv_variant_name(v), c->name, N, K, xs, act);
            fails += ekc_check(what, got, want, NULL, "bit equality", N);
            if (act == 0)
                fails += check_mma_ks(v, kwhat, got, ks_y, ks_v, N);
        }
        free(got);
        free(want);
    }
    for (int k = 0; k < 33; k++)
        free(ks_y[k]);
    free(ky);
    int major = 0;
    EKC_CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    if (!ran) { /* every format and shape here runs on sm_80+ */
        printf("%-4s mma %s N=%d K=%d: no m* variant runs on this sm_%d device\n", major >= 8 ? "FAIL" : "skip", c->name,
               N, K, major);
        fails += major >= 8;
    }
    mref_free(&r0);
    mref_free(&r1);
    free(x); free(b); free(res); free(hm);
    ekc_dev_free(dm); ekc_dev_free(dx); ekc_dev_free(db); ekc_dev_free(dres); ekc_dev_free(dy); ekc_dev_free(dg);
    rc_qtensor_free(&t);
    return fails;
}

/* A NaN or an infinity anywhere in x makes every output of every m* and i* variant NaN (the fp16 form through the
 * MMAs' products, the integer form, whose fixed point has no such value, by its own check of x). */
static int check_mma_nonfinite(const qcase *c, int N, int K)
{
    if (c->group && K % c->group)
        return 0;
    rc_qtensor t;
    make_qt(&t, c, N, K);
    eng_qfmt q;
    void *hm = pack(&t, &q);
    float *x = ekc_hmalloc(K, 4), *got = ekc_hmalloc(N, 4);
    void *dm = ekc_to_dev(hm, eng_qmat_bytes(N, K, &q), 1);
    float *dy = ekc_dev_alloc(N, 4);
    int fails = 0;
    for (int bad = 0; bad < 2; bad++) {
        ekc_fill(x, K, -1, 1, (unsigned long)(K + bad));
        x[K / 3] = bad ? INFINITY : NAN;
        float *dx = ekc_to_dev(x, K, 4);
        for (int v = 0; v < engk_qgemv_variants(); v++) {
            if (!engk_qgemv_variant_mma(v, 0, &q, N, K))
                continue;
            ekc_fill(got, N, 0, 1, 1); /* finite: the poison below is NaN, so compare against values set here */
            EKC_CU(cudaMemcpy(dy, got, (size_t)N * 4, cudaMemcpyHostToDevice));
            EKC_CU(engk_qgemv_variant(v, 0, dy, dx, dm, &q, NULL, NULL, N, K, 0, 0));
            ekc_from_dev(got, dy, N, 4);
            int n_fin = 0;
            for (int n = 0; n < N; n++)
                n_fin += !isnan(got[n]);
            printf("%-4s mma %s %s N=%d K=%d x with %s: %d of %d outputs not NaN\n", n_fin ? "FAIL" : "ok",
                   engk_qgemv_variant_name(v), c->name, N, K, bad ? "an infinity" : "a NaN", n_fin, N);
            fails += n_fin != 0;
        }
        ekc_dev_free(dx);
    }
    free(hm); free(x); free(got);
    ekc_dev_free(dm); ekc_dev_free(dy);
    rc_qtensor_free(&t);
    return fails;
}

/* A row's bits do not depend on N (the grid): rows [0, n) of an N-row matrix, packed alone, give the same bits. */
static int check_mma_grid(const qcase *c, int N, int n, int K)
{
    if (c->group && K % c->group)
        return 0;
    rc_qtensor t;
    make_qt(&t, c, N, K);
    eng_qfmt q;
    void *big = pack(&t, &q), *small = ekc_hmalloc(eng_qmat_bytes(n, K, &q), 1);
    eng_qpack_rows(small, n, K, &q, 0, &t, 0, n);
    float *x = ekc_hmalloc(K, 4), *a = ekc_hmalloc(N, 4), *s = ekc_hmalloc(n, 4);
    ekc_fill(x, K, -2, 2, (unsigned long)K);
    void *db = ekc_to_dev(big, eng_qmat_bytes(N, K, &q), 1), *ds = ekc_to_dev(small, eng_qmat_bytes(n, K, &q), 1);
    float *dx = ekc_to_dev(x, K, 4), *dy = ekc_dev_alloc(N, 4);
    int fails = 0;
    for (int v = 0; v < engk_qgemv_variants(); v++) {
        if (!engk_qgemv_variant_mma(v, 0, &q, n, K))
            continue;
        ekc_poison(dy, N, 4);
        EKC_CU(engk_qgemv_variant(v, 0, dy, dx, db, &q, NULL, NULL, N, K, 0, 0));
        ekc_from_dev(a, dy, N, 4);
        ekc_poison(dy, N, 4);
        EKC_CU(engk_qgemv_variant(v, 0, dy, dx, ds, &q, NULL, NULL, n, K, 0, 0));
        ekc_from_dev(s, dy, n, 4);
        char what[200];
        snprintf(what, sizeof what, "mma %s %s K=%d rows 0..%d of N=%d vs N=%d", engk_qgemv_variant_name(v), c->name, K,
                 n - 1, N, n);
        fails += ekc_bits(what, s, a, n) != 0;
    }
    free(big); free(small); free(x); free(a); free(s);
    ekc_dev_free(db); ekc_dev_free(ds); ekc_dev_free(dx); ekc_dev_free(dy);
    rc_qtensor_free(&t);
    return fails;
}

static int check_case(const qcase *c, int N, int K)
{
    if (c->group && K % c->group)
        return 0;
    char what[160];
    int fails = 0;
    rc_qtensor t;
    make_qt(&t, c, N, K);
    eng_qfmt q;
    void *hm = pack(&t, &q);
    const int64_t bytes = eng_qmat_bytes(N, K, &q);
    float *x = ekc_hmalloc(K, sizeof *x), *b = ekc_hmalloc(N, sizeof *b), *res = ekc_hmalloc(N, sizeof *res);
    ekc_fill(x, K, -1, 1, (unsigned long)(N * 7919 + K));
    ekc_fill(b, N, -0.5, 0.5, (unsigned long)(N + 3));
    ekc_fill(res, N, -1, 1, (unsigned long)(K + 5));
    float *wd = ekc_hmalloc((int64_t)N * K, sizeof *wd);
    rc_qtensor_dequant(&t, wd); /* model/quant.h's rules: the oracle */
    float *model = ekc_hmalloc(N, sizeof *model), *want = ekc_hmalloc(N, sizeof *want);
    float *bound = ekc_hmalloc(N, sizeof *bound), *got = ekc_hmalloc(N, sizeof *got);
    for (int n = 0; n < N; n++) {
        double s = 0.0, a = 0.0;
        for (int k = 0; k < K; k++) {
            s += (double)wd[(int64_t)n * K + k] * x[k];
            a += fabs((double)wd[(int64_t)n * K + k] * x[k]);
        }
        /* fp32 accumulation of K products in any order: K u sum|w x|; + b, + res: two more roundings */
        want[n] = (float)(s + b[n] + res[n]);
        bound[n] = (float)((K + 2) * EKC_U * (a + fabs(b[n]) + fabs(res[n])) + ekc_ulp(want[n]));
        model[n] = res[n] + (eng_qdot_model(hm, N, K, &q, n, x) + b[n]);
    }
    void *dm = ekc_to_dev(hm, bytes, 1);
    float *dx = ekc_to_dev(x, K, 4), *db = ekc_to_dev(b, N, 4), *dres = ekc_to_dev(res, N, 4);
    float *dy = ekc_dev_alloc(N, 4);
    ekc_poison(dy, N, 4);
    EKC_CU(engk_qgemv(dy, dx, dm, &q, db, dres, N, K, 0));
    ekc_from_dev(got, dy, N, 4);
    mref mr = mma_ref(&t, x, b, res, N, K);
    const int pick = engk_qgemv_pick(0, &q, N, K);
    if (engk_qgemv_variant_mma(pick, 0, &q, N, K)) { /* the pick is k_qgemv_mma */
        snprintf(what, sizeof what, "qgemv %s N=%d K=%d (mma) vs double over rc_qtensor_dequant", c->name, N, K);
        fails += ekc_check(what, got, mr.want, mref_bound(&mr, pick), "MMA bound (see mma_ref)", N);
    } else {
        snprintf(what, sizeof what, "qgemv %s N=%d K=%d vs eng_qdot_model", c->name, N, K);
        fails += ekc_check(what, got, model, NULL, "bit equality (the kernel's order on the host)", N);
        snprintf(what, sizeof what, "qgemv %s N=%d K=%d vs double over rc_qtensor_dequant", c->name, N, K);
        fails += ekc_check(what, got, want, bound, "(K + 2) u sum|w x| + ulp", N);
    }
    /* every variant (k_qgemv's and k_qgemv_s's launch shapes): the same bits; k_qgemv_mma's: its bound */
    for (int v = 0; v < engk_qgemv_variants(); v++) {
        ekc_poison(dy, N, 4);
        EKC_CU(engk_qgemv_variant(v, 0, dy, dx, dm, &q, db, dres, N, K, 0, 0));
        ekc_from_dev(got, dy, N, 4);
        const int mma = engk_qgemv_variant_mma(v, 0, &q, N, K);
        snprintf(what, sizeof what, "qgemv variant %s %s N=%d K=%d%s", engk_qgemv_variant_name(v), c->name, N, K,
                 mma ? " (mma) vs double" : "");
        fails += mma ? ekc_check(what, got, mr.want, mref_bound(&mr, v), "MMA bound (see mma_ref)", N)
                     : ekc_check(what, got, model, NULL, "bit equality", N);
    }
    mref_free(&mr);
    /* dequant: f32 exactly model/quant.h's values; bf16 their round-to-nearest-even */
    float *dd = ekc_dev_alloc((int64_t)N * K, 4), *gd = ekc_hmalloc((int64_t)N * K, 4);
    ekc_poison(dd, (int64_t)N * K, 4);
    EKC_CU(engk_qdequant(dd, 1, dm, &q, N, K, 0));
    ekc_from_dev(gd, dd, (int64_t)N * K, 4);
    snprintf(what, sizeof what, "qdequant f32 %s N=%d K=%d vs rc_qtensor_dequant", c->name, N, K);
    fails += ekc_check(what, gd, wd, NULL, "bit equality", (int64_t)N * K);
    uint16_t *gb = ekc_hmalloc((int64_t)N * K, 2);
    ekc_poison(dd, (int64_t)N * K, 2);
    EKC_CU(engk_qdequant(dd, 0, dm, &q, N, K, 0));
    ekc_from_dev(gb, dd, (int64_t)N * K, 2);
    for (int64_t i = 0; i < (int64_t)N * K; i++) {
        gd[i] = eng_bf16_to_f32(gb[i]);
        wd[i] = eng_bf16_to_f32(eng_f32_to_bf16(wd[i]));
    }
    snprintf(what, sizeof what, "qdequant bf16 %s N=%d K=%d vs rc_qtensor_dequant rounded", c->name, N, K);
    fails += ekc_check(what, gd, wd, NULL, "bit equality", (int64_t)N * K);
    ekc_dev_free(dd);
    free(gd);
    free(gb);
    free(x); free(b); free(res); free(wd); free(model); free(want); free(bound); free(got); free(hm);
    ekc_dev_free(dm); ekc_dev_free(dx); ekc_dev_free(db); ekc_dev_free(dres); ekc_dev_free(dy);
    rc_qtensor_free(&t);
    return fails;
}

/* GLU: rows [0, I) gate and [I, 2I) up of one packed matrix; the fused kernel against engk_qgemv + engk_glu. */
static int check_glu(const qcase *c, int I, int K, int act)
{
    rc_qtensor t;
    make_qt(&t, c, 2 * I, K);
    eng_qfmt q;
    void *hm = pack(&t, &q);
    float *x = ekc_hmalloc(K, 4), *b = ekc_hmalloc(2 * I, 4), *got = ekc_hmalloc(I, 4), *want = ekc_hmalloc(I, 4);
    ekc_fill(x, K, -1, 1, (unsigned long)(I * 31 + K));
    ekc_fill(b, 2 * I, -0.5, 0.5, (unsigned long)I);
    void *dm = ekc_to_dev(hm, eng_qmat_bytes(2 * I, K, &q), 1);
    float *dx = ekc_to_dev(x, K, 4), *db = ekc_to_dev(b, 2 * I, 4), *dgu = ekc_dev_alloc(2 * I, 4);
    float *dy = ekc_dev_alloc(I, 4), *dw = ekc_dev_alloc(I, 4);
    ekc_poison(dy, I, 4);
    ekc_poison(dw, I, 4);
    /* the fused pick against the plain rows of the same variant (every k_qgemv / k_qgemv_s variant has the same
     * bits; a k_qgemv_mma variant its own) + engk_glu */
    const int pick = engk_qgemv_pick(1, &q, I, K);
    EKC_CU(engk_qgemv_glu(dy, dx, dm, &q, db, I, K, act, 0));
    EKC_CU(engk_qgemv_variant(pick, 0, dgu, dx, dm, &q, db, NULL, 2 * I, K, 0, 0));
    EKC_CU(engk_glu(dw, dgu, 1, I, act, 0));
    ekc_from_dev(got, dy, I, 4);
    ekc_from_dev(want, dw, I, 4);
    char what[160];
    snprintf(what, sizeof what, "qgemv_glu %s I=%d K=%d act=%d vs qgemv + engk_glu", c->name, I, K, act);
    int fails = ekc_check(what, got, want, NULL, "bit equality", I);
    if (engk_qgemv_variant_mma(pick, 1, &q, I, K)) { /* the old kernels' bits for the loop below */
        EKC_CU(engk_qgemv_variant(variant_named("r2u2r"), 0, dgu, dx, dm, &q, db, NULL, 2 * I, K, 0, 0));
        EKC_CU(engk_glu(dw, dgu, 1, I, act, 0));
        ekc_from_dev(want, dw, I, 4);
    }
    for (int v = 0; v < engk_qgemv_variants(); v++) /* every fused k_qgemv / k_qgemv_s variant: the same bits */
        if (engk_qgemv_variant_has_glu(v) && !engk_qgemv_variant_mma(v, 1, &q, I, K)) {
            ekc_poison(dy, I, 4);
            EKC_CU(engk_qgemv_variant(v, 1, dy, dx, dm, &q, db, NULL, I, K, act, 0));
            ekc_from_dev(got, dy, I, 4);
            snprintf(what, sizeof what, "qgemv_glu variant %s %s I=%d K=%d act=%d", engk_qgemv_variant_name(v), c->name,
                     I, K, act);
            fails += ekc_check(what, got, want, NULL, "bit equality", I);
        }
    free(x); free(b); free(got); free(want); free(hm);
    ekc_dev_free(dm); ekc_dev_free(dx); ekc_dev_free(db); ekc_dev_free(dgu); ekc_dev_free(dy); ekc_dev_free(dw);
    rc_qtensor_free(&t);
    return fails;
}

/* ---- the fused-norm forms (k_qgemv_s and k_qgemv_mma with NORM) ----
 * Against engk_rmsnorm followed by the same variant's plain form (or its GLU), bit for bit, on one matrix of each
 * case and shape, for each norm kind: y (+ b; GLU: I = N outputs from 2N rows, + b); xn equal to engk_rmsnorm's row
 * bit for bit, written by block 0 only and nowhere past K (a poisoned guard stays NaN); y the same with xn NULL;
 * every variant with a norm form, then the entry point (engk_qgemv_norm / engk_qgemv_glu_norm) against rmsnorm +
 * the variant engk_qgemv_pick_norm names. */
static const qcase norm_cases[] = {
    {"int8 per-row scale", RC_QF_SCALE, 8, 0, 0, 0},
    {"int4 g128 scale", RC_QF_SCALE, 4, 128, 0, 0},
    {"int4 g128 affine, zeros", RC_QF_AFFINE, 4, 128, 1, 0},
    {"int8 g32 scale, huge scales", RC_QF_SCALE, 8, 32, 0, 110},          /* dot_block_slow on the normed copy */
    {"int4 g32 affine, zeros, huge scales", RC_QF_AFFINE, 4, 32, 1, 110}, /* the same, affine */
};

static int check_norm_one(int v, int glu, const char *cname, int kind, float *dy, float *dxn, const float *dx,
                          const float *dnw, const void *dm, const eng_qfmt *q, const float *db, const float *want,
                          const float *xr, int N, int K, int act)
{
    enum { GUARD = 64 };
    const float eps = 1e-5f;
    float *got = ekc_hmalloc(N, 4), *gxn = ekc_hmalloc(K + GUARD, 4);
    const char *vname = v < 0 ? (glu ? "engk_qgemv_glu_norm" : "engk_qgemv_norm") : engk_qgemv_variant_name(v);
    char what[240];
    int fails = 0;
    for (int with_xn = 1; with_xn >= 0; with_xn--) {
        float *xn = with_xn ? dxn : NULL;
        ekc_poison(dy, N, 4);
        ekc_poison(dxn, K + GUARD, 4);
        if (v >= 0)
            EKC_CU(engk_qgemv_variant_norm(v, glu, dy, xn, dx, dnw, eps, kind, dm, q, db, N, K, act, 0));
        else if (glu)
            EKC_CU(engk_qgemv_glu_norm(dy, xn, dx, dnw, eps, kind, dm, q, db, N, K, act, 0));
        else
            EKC_CU(engk_qgemv_norm(dy, xn, dx, dnw, eps, kind, dm, q, db, N, K, 0));
        ekc_from_dev(got, dy, N, 4);
        snprintf(what, sizeof what, "qgemv%s norm %s %s N=%d K=%d kind=%d%s vs engk_rmsnorm + plain", glu ? "_glu" : "",
                 vname, cname, N, K, kind, with_xn ? "" : " (xn NULL)");
        fails += ekc_bits(what, got, want, N) != 0;
        if (!with_xn)
            continue;
        ekc_from_dev(gxn, dxn, K + GUARD, 4);
        snprintf(what, sizeof what, "qgemv%s norm %s %s N=%d K=%d kind=%d xn vs engk_rmsnorm", glu ? "_glu" : "", vname,
                 cname, N, K, kind);
        fails += ekc_bits(what, gxn, xr, K) != 0;
        int touched = 0;
        for (int i = K; i < K + GUARD; i++) {
            uint32_t u;
            memcpy(&u, &gxn[i], 4);
            touched += u != 0xffffffffu;
        }
        if (touched) {
            printf("FAIL qgemv%s norm %s %s N=%d K=%d kind=%d: %d guard element(s) past xn[K] written\n",
                   glu ? "_glu" : "", vname, cname, N, K, kind, touched);
            fails++;
        }
    }
    free(got);
    free(gxn);
    return fails;
}

static int check_norm(const qcase *c, int N, int K, int glu)
{
    if (c->group && K % c->group)
        return 0;
    const int rows = glu ? 2 * N : N;
    rc_qtensor t;
    make_qt(&t, c, rows, K);
    eng_qfmt q;
    void *hm = pack(&t, &q);
    float *x = ekc_hmalloc(K, 4), *nw = ekc_hmalloc(K, 4), *b = ekc_hmalloc(rows, 4);
    float *xr = ekc_hmalloc(K, 4), *want = ekc_hmalloc(N, 4);
    ekc_fill(x, K, -3, 3, (unsigned long)(N * 17 + K));
    ekc_fill(nw, K, 0.5, 1.5, (unsigned long)(K + 19));
    ekc_fill(b, rows, -0.5, 0.5, (unsigned long)(N + 23));
    void *dm = ekc_to_dev(hm, eng_qmat_bytes(rows, K, &q), 1);
    float *dx = ekc_to_dev(x, K, 4), *dnw = ekc_to_dev(nw, K, 4), *db = ekc_to_dev(b, rows, 4);
    float *dxr = ekc_dev_alloc(K, 4), *dxn = ekc_dev_alloc(K + 64, 4), *dy = ekc_dev_alloc(N, 4);
    float *dw = ekc_dev_alloc(N, 4);
    const int act = (N + K) % 2 ? RC_ACT_GELU_TANH : RC_ACT_SILU, pick = engk_qgemv_pick_norm(glu, &q, N, K);
    int fails = 0;
    if (!engk_qgemv_norm_fits(glu, &q, N, K) || pick < 0) { /* every case and shape here fits any sm_70+ device */
        printf("FAIL qgemv%s norm %s N=%d K=%d: no fused-norm form fits (pick %d)\n", glu ? "_glu" : "", c->name, N, K,
               pick);
        fails++;
    }
    static const int kinds[] = {RC_NORM_W, RC_NORM_1PW, RC_NORM_POW_W, RC_NORM_POW};
    for (int ki = 0; ki < 4 && !fails; ki++) {
        const int kind = kinds[ki];
        const float *wp = kind == RC_NORM_POW ? NULL : dnw; /* no weight: the kernels must not read it */
        ekc_poison(dxr, K, 4);
        EKC_CU(engk_rmsnorm(dxr, dx, wp, 1, K, 1e-5f, kind, 0));
        ekc_from_dev(xr, dxr, K, 4);
        for (int v = -1; v < engk_qgemv_variants(); v++) {
            if (v >= 0 && !engk_qgemv_variant_has_norm(v))
                continue;
            ekc_poison(dw, N, 4);
            EKC_CU(engk_qgemv_variant(v < 0 ? pick : v, glu, dw, dxr, dm, &q, db, NULL, N, K, act, 0));
            ekc_from_dev(want, dw, N, 4);
            fails += check_norm_one(v, glu, c->name, kind, dy, dxn, dx, wp, dm, &q, db, want, xr, N, K, act);
        }
    }
    free(x); free(nw); free(b); free(xr); free(want); free(hm);
    ekc_dev_free(dm); ekc_dev_free(dx); ekc_dev_free(dnw); ekc_dev_free(db); ekc_dev_free(dxr); ekc_dev_free(dxn);
    ekc_dev_free(dy); ekc_dev_free(dw);
    rc_qtensor_free(&t);
    return fails;
}

/* Formats the kernels do not run are refused, not run wrong. */
static int check_refusals(void)
{
    static const eng_qfmt bad[] = {{RC_QF_AFFINE, 8, 64}, {RC_QF_SCALE, 4, 16}, {RC_QF_SCALE, 8, 8}, {RC_QF_SCALE, 4, 96},
                                   {0, 0, 0}, {RC_QF_SCALE, 2, 64}};
    int fails = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const cudaError_t err = engk_qgemv((float *)16, (const float *)16, (const void *)16, &bad[i], NULL, NULL, 4, 256, 0);
        const int ok = err == cudaErrorInvalidValue;
        printf("%-4s refused format family %d bits %d group %d: %s\n", ok ? "ok" : "FAIL", bad[i].family, bad[i].bits,
               bad[i].group, cudaGetErrorString(err));
        fails += !ok;
        cudaGetLastError();
    }
    return fails;
}

/* ---- host emulation of k_qgemv_mma's data movement (runs without a GPU) ----
 * Mirrors mma_step (the codes into A registers: xor, shifts / byte_perm, fp16 1024 + u minus the bias), the B
 * pieces' layout (the prologue's writer and the lanes' reads, the zero block) and the m16n8k16 fragment layouts, then
 * checks that column 0 (hi) and column 1 (lo) of the emulated MMAs are the exact dot products of the codes with the
 * hi and lo values at the same k, and columns 2..7 zero: A and B address the same actual k. */
static double emu_half(unsigned h) /* fp16 bits (normal or zero) as a double */
{
    const int e = (int)(h >> 10 & 31);
    const double v = e ? ldexp(1.0 + (h & 1023) / 1024.0, e - 15) : ldexp((h & 1023) / 1024.0, -14);
    return h & 0x8000u ? -v : v;
}

static unsigned emu_f16(int v) /* an integer |v| <= 2048 as fp16 bits */
{
    if (!v)
        return 0;
    const unsigned s = v < 0 ? 0x8000u : 0u;
    int a = abs(v), e = 0;
    while ((a >> e) > 1)
        e++;
    return s | (unsigned)(e + 15) << 10 | (unsigned)((a - (1 << e)) << (10 - e));
}

static unsigned emu_byte_perm(unsigned x, unsigned y, unsigned sel)
{
    const uint64_t b = (uint64_t)y << 32 | x;
    unsigned r = 0;
    for (int n = 0; n < 4; n++)
        r |= (unsigned)(b >> (8 * ((sel >> (4 * n)) & 7)) & 255u) << (8 * n);
    return r;
}

/* an fp16x2 register minus SUB as two doubles (the exact codes) */
static void emu_sub(unsigned r, unsigned sub, double v[2])
{
    v[0] = emu_half(r & 0xffffu) - emu_half(sub & 0xffffu);
    v[1] = emu_half(r >> 16) - emu_half(sub >> 16);
}

/* C[16][8] += A B with the fragments of lane l: a[4] (two doubles each), b[2] (fp16x2 bits). Slots per the PTX ISA. */
static void emu_frag(double A[16][16], double B[16][8], int lane, double a[4][2], const unsigned b[2])
{
    const int g = lane >> 2, t = lane & 3;
    static const int ar[4] = {0, 8, 0, 8}, ak[4] = {0, 0, 8, 8};
    for (int i = 0; i < 4; i++)
        for (int h = 0; h < 2; h++)
            A[g + ar[i]][2 * t + ak[i] + h] = a[i][h];
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < 2; h++)
            B[2 * t + 8 * i + h][g] = emu_half(b[i] >> (16 * h) & 0xffffu);
}

static int emu_mma_layout(int fam, int bits)
{
    const int SK = bits == 4 ? 128 : 64, NQ = SK / 32, PPS = SK / 8, S = 3, K = S * SK;
    const unsigned FLIP = fam == 2 ? 0u : bits == 8 ? 0x80808080u : 0x88888888u;
    const unsigned SUB = bits == 8 ? 0x64806480u : fam == 2 ? 0x64006400u : 0x64086408u;
    unsigned char *codes = ekc_hmalloc((int64_t)16 * K * bits / 8, 1);
    int *hv = ekc_hmalloc(K, sizeof *hv), *lv = ekc_hmalloc(K, sizeof *lv);
    uint32_t *xq = ekc_hmalloc((int64_t)(S + 1) * NQ * 8 * 4, 4); /* uint4 units as 4 words */
    uint64_t st = 0x5eed0 + (uint64_t)bits;
    for (int64_t i = 0; i < (int64_t)16 * K * bits / 8; i++)
        codes[i] = (unsigned char)(ekc_xorshift64(&st) >> 24);
    for (int k = 0; k < K; k++) {
        hv[k] = (int)(ekc_xorshift64(&st) % 2001) - 1000;
        lv[k] = (int)(ekc_xorshift64(&st) % 2001) - 1000;
    }
    /* the prologue's writer: piece p = k [8 p, 8 p + 8), int4 in the order 0 4 1 5 2 6 3 7 */
    for (int p = 0; p < K / 8; p++) {
        const int s = p / PPS, q = p % PPS % NQ, tt = p % PPS / NQ;
        uint32_t *d = xq + 4 * ((s * NQ + q) * 8 + tt);
        for (int i = 0; i < 8; i++) {
            const int k = 8 * p + (bits == 4 ? (i >> 1) + 4 * (i & 1) : i);
            d[i / 2] |= emu_f16(hv[k]) << (16 * (i & 1));
            d[16 + i / 2] |= emu_f16(lv[k]) << (16 * (i & 1)); /* d[4] in uint4 units */
        }
    }
    int fails = 0;
    const int rb = K * bits / 8; /* bytes a row */
    for (int j = 0; j < S; j++) {
        double C[16][8] = {{0}};
        for (int mi = 0; mi < SK / 16; mi++) {
            double A[16][16], B[16][8];
            for (int lane = 0; lane < 32; lane++) {
                const int g = lane >> 2, t = lane & 3;
                unsigned wa[4], wb[4];
                for (int i = 0; i < 4; i++) {
                    memcpy(&wa[i], codes + (int64_t)g * rb + 64 * j + 16 * t + 4 * i, 4);
                    memcpy(&wb[i], codes + (int64_t)(g + 8) * rb + 64 * j + 16 * t + 4 * i, 4);
                }
                /* B: lanes g < 2 at xb + j xst, the others at the zero block; piece q of MMA mi */
                const int xb = g < 2 ? g * 4 + t : S * NQ * 8 + t, xst = g < 2 ? NQ * 8 : 0;
                const int q = bits == 4 ? mi / 2 : mi / 2, half = mi % 2;
                const uint32_t *bx = xq + 4 * (xb + j * xst + 8 * q);
                const unsigned b[2] = {bx[2 * half], bx[2 * half + 1]};
                double a[4][2];
                if (bits == 4) {
                    const unsigned x = wa[mi / 2] ^ FLIP, y = wb[mi / 2] ^ FLIP;
                    const int s0 = 8 * half;
                    emu_sub(((x >> s0) & 0x000F000Fu) | 0x64006400u, SUB, a[0]);
                    emu_sub(((y >> s0) & 0x000F000Fu) | 0x64006400u, SUB, a[1]);
                    emu_sub(((x >> (s0 + 4)) & 0x000F000Fu) | 0x64006400u, SUB, a[2]);
                    emu_sub(((y >> (s0 + 4)) & 0x000F000Fu) | 0x64006400u, SUB, a[3]);
                } else {
                    const unsigned x = wa[mi] ^ FLIP, y = wb[mi] ^ FLIP;
                    emu_sub(emu_byte_perm(x, 0x64646464u, 0x4140u), SUB, a[0]);
                    emu_sub(emu_byte_perm(y, 0x64646464u, 0x4140u), SUB, a[1]);
                    emu_sub(emu_byte_perm(x, 0x64646464u, 0x4342u), SUB, a[2]);
                    emu_sub(emu_byte_perm(y, 0x64646464u, 0x4342u), SUB, a[3]);
                }
                emu_frag(A, B, lane, a, b);
            }
            for (int r = 0; r < 16; r++)
                for (int n = 0; n < 8; n++)
                    for (int k = 0; k < 16; k++)
                        C[r][n] += A[r][k] * B[k][n];
        }
        for (int r = 0; r < 16; r++) {
            double want_h = 0.0, want_l = 0.0;
            for (int k = j * SK; k < (j + 1) * SK; k++) {
                const unsigned char by = codes[(int64_t)r * rb + (bits == 4 ? k / 2 : k)];
                int c = bits == 8 ? (int8_t)by : (k & 1 ? by >> 4 : by & 15);
                if (bits == 4 && fam == 1 && c >= 8)
                    c -= 16;
                want_h += (double)c * hv[k];
                want_l += (double)c * lv[k];
            }
            int bad = C[r][0] != want_h || C[r][1] != want_l;
            for (int n = 2; n < 8; n++)
                bad |= C[r][n] != 0.0;
            if (bad && fails++ < 3)
                printf("    emu family %d bits %d step %d row %d: hi %.0f want %.0f, lo %.0f want %.0f\n", fam, bits, j,
                       r, C[r][0], want_h, C[r][1], want_l);
        }
    }
    printf("%-4s host emulation of k_qgemv_mma's fragments, family %d bits %d: A and B pair the same k\n",
           fails ? "FAIL" : "ok", fam, bits);
    free(codes); free(hv); free(lv); free(xq);
    return fails != 0;
}

/* ---- --bench ---- */
typedef struct bop {
    float *y, *x;
    const void *W;
    eng_qfmt q;
    int N, K, glu, v;
    cudaStream_t s;
    int norm;      /* 0: the GEMV on x; 1: the fused-norm form on x (nw, xn); 2: engk_rmsnorm into xn, then the GEMV */
    float *xn, *nw;
} bop;

static cudaError_t run_bop(void *p)
{
    const bop *o = p;
    if (o->norm == 1)
        return engk_qgemv_variant_norm(o->v, o->glu, o->y, o->xn, o->x, o->nw, 1e-5f, RC_NORM_W, o->W, &o->q, NULL,
                                       o->N, o->K, 0, o->s);
    if (o->norm == 2) {
        const cudaError_t err = engk_rmsnorm(o->xn, o->x, o->nw, 1, o->K, 1e-5f, RC_NORM_W, o->s);
        if (err != cudaSuccess)
            return err;
        return engk_qgemv_variant(o->v, o->glu, o->y, o->xn, o->W, &o->q, NULL, NULL, o->N, o->K, 0, o->s);
    }
    return engk_qgemv_variant(o->v, o->glu, o->y, o->x, o->W, &o->q, NULL, NULL, o->N, o->K, 0, o->s);
}

/* One call's device time in a captured graph of 20 back-to-back calls (as the engine's decode graph runs them:
 * programmatic launches on sm_90, no host launch cost between kernels): the best of 5 replays. */
static double time_graph_us(bop *o)
{
    enum { CALLS = 20 };
    cudaStream_t st;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaEvent_t t0, t1;
    EKC_CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    o->s = st;
    EKC_CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < CALLS; i++)
        EKC_CU(run_bop(o));
    EKC_CU(cudaStreamEndCapture(st, &g));
    o->s = 0;
    EKC_CU(cudaGraphInstantiate(&ge, g, 0));
    EKC_CU(cudaEventCreate(&t0));
    EKC_CU(cudaEventCreate(&t1));
    EKC_CU(cudaGraphLaunch(ge, st));
    double best = INFINITY;
    for (int r = 0; r < 5; r++) {
        float ms = 0.0f;
        EKC_CU(cudaEventRecord(t0, st));
        EKC_CU(cudaGraphLaunch(ge, st));
        EKC_CU(cudaEventRecord(t1, st));
        EKC_CU(cudaEventSynchronize(t1));
        EKC_CU(cudaEventElapsedTime(&ms, t0, t1));
        best = fmin(best, 1e3 * ms / CALLS);
    }
    EKC_CU(cudaEventDestroy(t0));
    EKC_CU(cudaEventDestroy(t1));
    EKC_CU(cudaGraphExecDestroy(ge));
    EKC_CU(cudaGraphDestroy(g));
    EKC_CU(cudaStreamDestroy(st));
    return best;
}

/* The fused-norm form of every k_qgemv_s variant next to engk_rmsnorm + the same variant's plain form (graph times);
 * '<' marks engk_qgemv_pick_norm's; then engk_rmsnorm + the plain pick (engk_qgemv_pick: the engine's fallback).
 * *fused, *sep: the picks' times. */
static void bench_norm(const char *fname, const char *sname, float *y, float *x, float *xn, float *nw, const void *dm,
                       const eng_qfmt *q, int N, int K, int glu, double ceil, double read, double *fused, double *sep)
{
    const int pick = engk_qgemv_pick_norm(glu, q, N, K);
    for (int v = 0; v < engk_qgemv_variants(); v++) {
        if (!engk_qgemv_variant_has_norm(v))
            continue;
        bop o = {y, x, dm, *q, N, K, glu, v, 0, 1, xn, nw};
        const double f = time_graph_us(&o);
        o.norm = 2;
        const double r = time_graph_us(&o);
        printf("bench qgemv %-12s %-20s %-8s norm fused graph %8.1f us %7.0f GB/s %5.1f%% of ceiling; engk_rmsnorm + "
               "plain graph %8.1f us%s\n",
               fname, sname, engk_qgemv_variant_name(v), f, read / f / 1e3, 100.0 * read / f / 1e3 / ceil, r,
               v == pick ? " <" : "");
        if (v == pick)
            *fused = f;
    }
    bop o = {y, x, dm, *q, N, K, glu, engk_qgemv_pick(glu, q, N, K), 0, 2, xn, nw};
    *sep = time_graph_us(&o);
    printf("bench qgemv %-12s %-20s engk_rmsnorm + the plain pick %s: graph %8.1f us\n", fname, sname,
           engk_qgemv_variant_name(o.v), *sep);
    if (pick < 0)
        printf("bench qgemv %-12s %-20s no fused-norm form fits\n", fname, sname);
}

static void bench(void)
{
    static const struct { const char *name; int N, K, glu; } sh[] = {
        {"q|k|v", 6144, 4096, 0}, {"o", 4096, 4096, 0}, {"gate|up (GLU fused)", 14336, 4096, 1},
        {"gate|up", 28672, 4096, 0}, {"down", 4096, 14336, 0}, {"lm_head", 128256, 4096, 0},
    };
    static const struct { const char *name; eng_qfmt q; } fm[] = {
        {"int8 per-row", {RC_QF_SCALE, 8, 0}}, {"int4 g128", {RC_QF_AFFINE, 4, 128}},
    };
    const double ceil = ekc_read_ceiling_gbs();
    printf("bench read ceiling: %.0f GB/s (read-only kernel, 16-byte loads)\n", ceil);
    printf("bench variants: r* = k_qgemv (x through L1), s* = k_qgemv_s (x in shared memory, scales in the ring), "
           "m* = k_qgemv_mma (tensor cores; 'mma' after the row where it ran, else its fallback s2u2w8 ran); "
           "'<' marks the one engk_qgemv / engk_qgemv_glu picks, 'old' is r2u2r, the pick before k_qgemv_s; "
           "us: direct launches (the host's launch cost can hide a fast kernel), graph: in a captured graph (the "
           "engine's decode form; the per-layer lines use these)\n");
    float *x = ekc_dev_alloc(14336, 4), *y = ekc_dev_alloc(128256, 4), *xn = ekc_dev_alloc(14336, 4);
    float *nw = ekc_dev_alloc(14336, 4);
    EKC_CU(cudaMemset(x, 0, 14336 * 4));
    EKC_CU(cudaMemset(nw, 0, 14336 * 4));
    for (size_t f = 0; f < sizeof fm / sizeof fm[0]; f++) {
        double layer_us = 0.0, layer_old = 0.0, layer_best = 0.0, layer_bytes = 0.0, layer_bs = 0.0, layer_bm = 0.0;
        double layer_n = 0.0; /* the picks with their n form (eng_qgemv.cu's Q4_NQ) where one exists */
        double picked_at[sizeof sh / sizeof sh[0]] = {0}, fused_at[sizeof sh / sizeof sh[0]] = {0};
        double sep_at[sizeof sh / sizeof sh[0]] = {0};
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
            eng_qfmt q = fm[f].q;
            if (!q.group)
                q.group = sh[s].K;
            const int rows = sh[s].glu ? 2 * sh[s].N : sh[s].N;
            const int64_t bytes = eng_qmat_bytes(rows, sh[s].K, &q);
            void *hm = ekc_hmalloc(bytes, 1);
            eng_qsynth_rows(hm, rows, sh[s].K, &q, 7, 0, rows);
            void *dm = ekc_to_dev(hm, bytes, 1);
            free(hm);
            const double read = (double)bytes + 4.0 * sh[s].K; /* codes, scales (offsets), x */
            const int pick = engk_qgemv_pick(sh[s].glu, &q, sh[s].N, sh[s].K);
            double best = 1e30, picked = 0.0, old = 0.0, best_s = 1e30, best_m = 1e30, picked_n = 0.0;
            char nname[32];
            snprintf(nname, sizeof nname, "%sn", engk_qgemv_variant_name(pick));
            for (int v = 0; v < engk_qgemv_variants(); v++) {
                if (sh[s].glu && !engk_qgemv_variant_has_glu(v))
                    continue;
                bop o = {y, x, dm, q, sh[s].N, sh[s].K, sh[s].glu, v, 0, 0, xn, nw};
                const double direct = ekc_time_us(run_bop, &o), us = time_graph_us(&o);
                const char *name = engk_qgemv_variant_name(v);
                const int mma = engk_qgemv_variant_mma(v, sh[s].glu, &q, sh[s].N, sh[s].K);
                if (us < best)
                    best = us;
                if (mma && us < best_m)
                    best_m = us;
                if (!mma && us < best_s)
                    best_s = us;
                if (v == pick)
                    picked = us;
                if (!strcmp(name, "r2u2r"))
                    old = us;
                if (!strcmp(name, nname))
                    picked_n = us;
                printf("bench qgemv %-12s %-20s %-8s %8.1f us graph %8.1f us %7.0f GB/s %5.1f%% of ceiling (%.1f MB "
                       "read)%s%s\n",
                       fm[f].name, sh[s].name, name, direct, us, read / us / 1e3, 100.0 * read / us / 1e3 / ceil,
                       read / 1e6, mma ? " mma" : "", v == pick ? " <" : "");
            }
            picked_at[s] = picked;
            if (s == 0 || s == 2) /* the norm-fused forms (q|k|v, gate|up GLU) next to engk_rmsnorm + the plain form */
                bench_norm(fm[f].name, sh[s].name, y, x, xn, nw, dm, &q, sh[s].N, sh[s].K, sh[s].glu, ceil, read,
                           &fused_at[s], &sep_at[s]);
            if (s != 3 && s != 5) { /* the layer uses the fused GLU, not the plain gate|up; lm_head is once a token */
                layer_us += picked;
                layer_n += picked_n > 0.0 ? picked_n : picked;
                layer_old += old;
                layer_best += best;
                layer_bs += best_s;
                layer_bm += best_m;
                layer_bytes += read;
            }
            ekc_dev_free(dm);
        }
        const double lay[6] = {layer_old, layer_us, layer_n, layer_best, layer_bs, layer_bm};
        static const char *const which[6] = {"old (r2u2r)", "picked", "picked, n", "best of all", "best r*/s*",
                                             "best m*"};
        for (int i = 0; i < 6; i++)
            printf("bench qgemv %-12s per layer (q|k|v, o, fused gate|up, down) %-11s: %.1f us for %.1f MB = %.0f GB/s, "
                   "%.1f%% of ceiling; x32 layers %.3f ms, %.0f tok/s from the layer matrices alone\n",
                   fm[f].name, which[i], lay[i], layer_bytes / 1e6, layer_bytes / lay[i] / 1e3,
                   100.0 * layer_bytes / lay[i] / 1e3 / ceil, 32.0 * lay[i] / 1e3, 1e6 / (32.0 * lay[i]));
        /* the engine's decode layer: the norms fused into q|k|v and gate|up (or engk_rmsnorm + the plain picks) */
        const double fused = fused_at[0] + picked_at[1] + fused_at[2] + picked_at[4];
        const double sep = sep_at[0] + picked_at[1] + sep_at[2] + picked_at[4];
        printf("bench qgemv %-12s per layer with both norms: fused %.1f us (x32 %.3f ms), engk_rmsnorm + plain picks "
               "%.1f us (x32 %.3f ms), saving %.1f us a layer\n",
               fm[f].name, fused, 32.0 * fused / 1e3, sep, 32.0 * sep / 1e3, sep - fused);
    }
    ekc_dev_free(x);
    ekc_dev_free(y);
    ekc_dev_free(xn);
    ekc_dev_free(nw);
}

/* k_qgemv_mma's int4 decode (two nibbles to fp16x2 a lop3 and one sub or fma) over every half-word pattern */
static int check_nib8(void)
{
    long bad = -1;
    const cudaError_t err = engk_qgemv_nib8_check(&bad);
    if (err == cudaErrorNotSupported) {
        printf("skip int4 fp16 decode: no k_qgemv_mma below sm_80\n");
        return 0;
    }
    EKC_CU(err);
    printf("%-4s int4 fp16 decode (nib8), 2^16 half-word patterns x 2, affine and symmetric: %ld mismatches\n",
           bad ? "FAIL" : "ok", bad);
    return bad != 0;
}

/* ---- --sanitize: the engine's wide-shape decode picks once a format, for compute-sanitizer ----
 * The persistent gate|up (i8u4p since session 31, m8u4p before: several units a block, the ring crossing units, two
 * reduction buffers) and the wide fused-norm q|k|v (i8t2u2o since session 35) run in the engine only on wide int4
 * shapes, which no golden reaches: so int4 g128 affine (and int8 per row) at I = N = 9001, K = 4096 through
 * engk_qgemv_glu_norm and engk_qgemv_norm (the engine's fused-norm picks), against engk_rmsnorm + the same variant's
 * plain form bit for bit. */
static int sanitize_picks(void)
{
    static const qcase fm[] = {{"int4 g128 affine", RC_QF_AFFINE, 4, 128, 1, 0},
                               {"int8 per-row scale", RC_QF_SCALE, 8, 0, 0, 0}};
    const int I = 9001, K = 4096;
    int fails = 0;
    for (int glu = 1; glu >= 0; glu--)
        for (size_t f = 0; f < sizeof fm / sizeof fm[0]; f++) {
            const qcase *c = &fm[f];
            const int rows = glu ? 2 * I : I;
            rc_qtensor t;
            make_qt(&t, c, rows, K);
            eng_qfmt q;
            void *hm = pack(&t, &q);
            float *x = ekc_hmalloc(K, 4), *nw = ekc_hmalloc(K, 4), *a = ekc_hmalloc(I, 4), *bb = ekc_hmalloc(I, 4);
            ekc_fill(x, K, -3, 3, 71);
            ekc_fill(nw, K, 0.5, 1.5, 73);
            void *dm = ekc_to_dev(hm, eng_qmat_bytes(rows, K, &q), 1);
            float *dx = ekc_to_dev(x, K, 4), *dnw = ekc_to_dev(nw, K, 4), *dxn = ekc_dev_alloc(K, 4);
            float *dy = ekc_dev_alloc(I, 4), *dz = ekc_dev_alloc(I, 4);
            const int pick = engk_qgemv_pick_norm(glu, &q, I, K);
            ekc_poison(dy, I, 4);
            if (glu)
                EKC_CU(engk_qgemv_glu_norm(dy, NULL, dx, dnw, 1e-5f, RC_NORM_W, dm, &q, NULL, I, K, RC_ACT_SILU, 0));
            else
                EKC_CU(engk_qgemv_norm(dy, NULL, dx, dnw, 1e-5f, RC_NORM_W, dm, &q, NULL, I, K, 0));
            EKC_CU(engk_rmsnorm(dxn, dx, dnw, 1, K, 1e-5f, RC_NORM_W, 0));
            ekc_poison(dz, I, 4);
            EKC_CU(engk_qgemv_variant(pick, glu, dz, dxn, dm, &q, NULL, NULL, I, K, RC_ACT_SILU, 0));
            ekc_from_dev(a, dy, I, 4);
            ekc_from_dev(bb, dz, I, 4);
            char what[200];
            snprintf(what, sizeof what, "sanitize: %s %s pick %s N=%d K=%d vs engk_rmsnorm + its plain form", c->name,
                     glu ? "glu_norm" : "norm", engk_qgemv_variant_name(pick), I, K);
            fails += ekc_check(what, a, bb, NULL, "bit equality", I);
            free(hm); free(x); free(nw); free(a); free(bb);
            ekc_dev_free(dm); ekc_dev_free(dx); ekc_dev_free(dnw); ekc_dev_free(dxn); ekc_dev_free(dy); ekc_dev_free(dz);
            rc_qtensor_free(&t);
        }
    printf("sanitize: %d failure(s)\n", fails);
    return fails;
}

int main(int argc, char **argv)
{
    /* the fragment emulation needs no GPU: it runs (and can fail) before the skip */
    if (emu_mma_layout(1, 8) + emu_mma_layout(1, 4) + emu_mma_layout(2, 4))
        return 1;
    ekc_skip_unless_gpu("engine.kernels.qgemv");
    if (argc > 1 && !strcmp(argv[1], "--bench")) {
        bench();
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--sanitize"))
        return sanitize_picks() ? 1 : 0;
    int fails = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            fails += check_case(&cases[c], shapes[s][0], shapes[s][1]);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fails += check_glu(&cases[c], 37, 256, RC_ACT_SILU);
        fails += check_glu(&cases[c], 64, 1024 + 128, RC_ACT_GELU_TANH);
        /* the multi-row walk (the *nr / *n3 variants): K a multiple of 32 blocks, 2 (int4) or 4 (int8) a lane, so
         * a ring of 2 wraps into the next row set at its start; I past one wave of blocks (the nr forms: 2 row sets
         * a warp on a device of up to 140 SMs at two blocks an SM) for two cases */
        fails += check_glu(&cases[c], 37, 2048, RC_ACT_SILU);
        if (c == 0 || c == 4)
            fails += check_glu(&cases[c], 4500, 4096, RC_ACT_SILU);
    }
    /* the widest K (a multiple of 256, every mma case's step and group) whose pieces (4 K bytes and a few hundred)
     * fit the device's opt-in shared memory with 4 KiB to spare, where pieces and flat copy (8 K) cannot */
    int optin = 0;
    EKC_CU(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    const int wide_k = optin > 4096 ? (optin - 4096) / 5 / 256 * 256 : 0;
    for (size_t c = 0; c < sizeof mma_cases / sizeof mma_cases[0]; c++) {
        static const int mk[] = {128, 4096, 14336}, mn[] = {1, 15, 17, 4099};
        for (int ki = 0; ki < 3; ki++)
            for (int ni = 0; ni < 4; ni++)
                fails += check_mma(&mma_cases[c], mn[ni], mk[ki], (ki + ni) % 3, 0);
        for (int ki = 0; ki < 3; ki++)
            fails += check_mma(&mma_cases[c], 17, mk[ki], ki % 2, 1);
        fails += check_mma(&mma_cases[c], 4099, 4096, 1, 1);
        /* past one wave of the persistent forms' blocks (two 16-warp blocks an SM on up to 140 SMs): several units a
         * block, the ring running on into the next unit (K = 4096: 4 steps a warp of 8, a multiple of the ring) or
         * refilled there (K = 1152 at int4: 2 and 1 steps a warp; int8: 3 and 2) */
        fails += check_mma(&mma_cases[c], 9001, 4096, 0, 1);
        fails += check_mma(&mma_cases[c], 9001, 1152, 1, 1);
        fails += check_mma(&mma_cases[c], 20011, 1152, 0, 0);
        /* vocabulary-sized (a packed lm_head: eng_qgemv.cu's vocab_shape takes i8u4p), ~140 units a block */
        fails += check_mma(&mma_cases[c], 40009, 4096, 2, 0);
        /* a row too wide for x's flat copy beside the B pieces in shared memory (each about 4 K bytes) but not for
         * the pieces alone: the plain form then makes its pieces from x in global memory, as without X_STAGE
         * (eng_qgemv_k.cuh, launch_m), and must give the same sums */
        if (wide_k)
            fails += check_mma(&mma_cases[c], 17, wide_k, 1, 0);
        fails += check_mma_grid(&mma_cases[c], 4099, 17, 4096);
        fails += check_mma_nonfinite(&mma_cases[c], 37, 4096);
    }
    for (size_t c = 0; c < sizeof norm_cases / sizeof norm_cases[0]; c++) {
        static const int nsh[][2] = {{1, 128}, {37, 128}, {131, 4096}, {4099, 4096}, {19, 14336}, {9001, 4096}};
        for (size_t i = 0; i < sizeof nsh / sizeof nsh[0]; i++)
            for (int glu = 0; glu < 2; glu++)
                fails += check_norm(&norm_cases[c], nsh[i][0], nsh[i][1], glu);
        fails += check_norm(&norm_cases[c], 40009, 4096, 0); /* a packed lm_head's fused final norm */
    }
    fails += check_refusals();
    fails += check_nib8();
    printf("%s: %d failure(s)\n", fails ? "FAIL" : "PASS", fails);
    return fails ? 1 : 0;
}
