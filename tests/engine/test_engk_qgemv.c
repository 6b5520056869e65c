/* GPU suite: the quantized decode GEMV and prefill dequant (engine/eng_qgemv.h) on packed matrices built from
 * model/quant.h rc_qtensors (seeded codes over each family's full range, fp16-valued scales, integer zeros and float
 * offsets): the GEMV bit for bit against its host model (eng_qdot_model) and within a stated fp32 bound of a double
 * dot product over model/quant.h's rc_qtensor_dequant; the fused GLU against the GEMV + engk_glu; the dequant bit for
 * bit against rc_qtensor_dequant (f32) and its bf16 rounding; refused formats. Odd N, K of 1 and many groups and
 * lane-stride edges, NaN-poisoned outputs. --bench: llama3-8b decode shapes at int8 per row and int4 g128, GB/s of
 * the bytes read against a read ceiling measured in the same run. Exit 77 without a GPU; 1 on any failure. */
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
 * 48 KB of shared memory). */
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
    snprintf(what, sizeof what, "qgemv %s N=%d K=%d vs eng_qdot_model", c->name, N, K);
    fails += ekc_check(what, got, model, NULL, "bit equality (the kernel's order on the host)", N);
    snprintf(what, sizeof what, "qgemv %s N=%d K=%d vs double over rc_qtensor_dequant", c->name, N, K);
    fails += ekc_check(what, got, want, bound, "(K + 2) u sum|w x| + ulp", N);
    /* every variant (k_qgemv's and k_qgemv_s's launch shapes): the same bits */
    for (int v = 0; v < engk_qgemv_variants(); v++) {
        ekc_poison(dy, N, 4);
        EKC_CU(engk_qgemv_variant(v, 0, dy, dx, dm, &q, db, dres, N, K, 0, 0));
        ekc_from_dev(got, dy, N, 4);
        snprintf(what, sizeof what, "qgemv variant %s %s N=%d K=%d", engk_qgemv_variant_name(v), c->name, N, K);
        fails += ekc_check(what, got, model, NULL, "bit equality", N);
    }
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
    EKC_CU(engk_qgemv_glu(dy, dx, dm, &q, db, I, K, act, 0));
    EKC_CU(engk_qgemv(dgu, dx, dm, &q, db, NULL, 2 * I, K, 0));
    EKC_CU(engk_glu(dw, dgu, 1, I, act, 0));
    ekc_from_dev(got, dy, I, 4);
    ekc_from_dev(want, dw, I, 4);
    char what[160];
    snprintf(what, sizeof what, "qgemv_glu %s I=%d K=%d act=%d vs qgemv + engk_glu", c->name, I, K, act);
    int fails = ekc_check(what, got, want, NULL, "bit equality", I);
    for (int v = 0; v < engk_qgemv_variants(); v++) /* every fused variant: the same bits */
        if (engk_qgemv_variant_has_glu(v)) {
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

/* ---- --bench ---- */
typedef struct bop {
    float *y, *x;
    const void *W;
    eng_qfmt q;
    int N, K, glu, v;
} bop;

static cudaError_t run_bop(void *p)
{
    const bop *o = p;
    return engk_qgemv_variant(o->v, o->glu, o->y, o->x, o->W, &o->q, NULL, NULL, o->N, o->K, 0, 0);
}

static void bench(void)
{
    static const struct { const char *name; int N, K, glu; } sh[] = {
        {"q|k|v", 6144, 4096, 0}, {"o", 4096, 4096, 0}, {"gate|up (GLU fused)", 14336, 4096, 1},
        {"gate|up", 28672, 4096, 0}, {"down", 4096, 14336, 0},
    };
    static const struct { const char *name; eng_qfmt q; } fm[] = {
        {"int8 per-row", {RC_QF_SCALE, 8, 0}}, {"int4 g128", {RC_QF_AFFINE, 4, 128}},
    };
    const double ceil = ekc_read_ceiling_gbs();
    printf("bench read ceiling: %.0f GB/s (read-only kernel, 16-byte loads)\n", ceil);
    printf("bench variants: r* = k_qgemv (x through L1), s* = k_qgemv_s (x in shared memory, scales in the ring); "
           "'<' marks the one engk_qgemv / engk_qgemv_glu picks, 'old' is r2u2r, the pick before k_qgemv_s\n");
    float *x = ekc_dev_alloc(14336, 4), *y = ekc_dev_alloc(28672, 4);
    EKC_CU(cudaMemset(x, 0, 14336 * 4));
    for (size_t f = 0; f < sizeof fm / sizeof fm[0]; f++) {
        double layer_us = 0.0, layer_old = 0.0, layer_best = 0.0, layer_bytes = 0.0;
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
            double best = 1e30, picked = 0.0, old = 0.0;
            for (int v = 0; v < engk_qgemv_variants(); v++) {
                if (sh[s].glu && !engk_qgemv_variant_has_glu(v))
                    continue;
                bop o = {y, x, dm, q, sh[s].N, sh[s].K, sh[s].glu, v};
                const double us = ekc_time_us(run_bop, &o);
                const char *name = engk_qgemv_variant_name(v);
                if (us < best)
                    best = us;
                if (v == pick)
                    picked = us;
                if (!strcmp(name, "r2u2r"))
                    old = us;
                printf("bench qgemv %-12s %-20s %-8s %8.1f us %7.0f GB/s %5.1f%% of ceiling (%.1f MB read)%s\n",
                       fm[f].name, sh[s].name, name, us, read / us / 1e3, 100.0 * read / us / 1e3 / ceil, read / 1e6,
                       v == pick ? " <" : "");
            }
            if (s != 3) { /* the layer uses the fused GLU, not the plain gate|up */
                layer_us += picked;
                layer_old += old;
                layer_best += best;
                layer_bytes += read;
            }
            ekc_dev_free(dm);
        }
        const double lay[3] = {layer_old, layer_us, layer_best};
        static const char *const which[3] = {"old (r2u2r)", "picked", "best of all"};
        for (int i = 0; i < 3; i++)
            printf("bench qgemv %-12s per layer (q|k|v, o, fused gate|up, down) %-11s: %.1f us for %.1f MB = %.0f GB/s, "
                   "%.1f%% of ceiling; x32 layers %.3f ms, %.0f tok/s from the layer matrices alone\n",
                   fm[f].name, which[i], lay[i], layer_bytes / 1e6, layer_bytes / lay[i] / 1e3,
                   100.0 * layer_bytes / lay[i] / 1e3 / ceil, 32.0 * lay[i] / 1e3, 1e6 / (32.0 * lay[i]));
    }
    ekc_dev_free(x);
    ekc_dev_free(y);
}

int main(int argc, char **argv)
{
    ekc_skip_unless_gpu("engine.kernels.qgemv");
    if (argc > 1 && !strcmp(argv[1], "--bench")) {
        bench();
        return 0;
    }
    int fails = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            fails += check_case(&cases[c], shapes[s][0], shapes[s][1]);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fails += check_glu(&cases[c], 37, 256, RC_ACT_SILU);
        fails += check_glu(&cases[c], 64, 1024 + 128, RC_ACT_GELU_TANH);
    }
    fails += check_refusals();
    printf("%s: %d failure(s)\n", fails ? "FAIL" : "PASS", fails);
    return fails ? 1 : 0;
}
