/* Unit tests of the engine's host parts (suite 'unit', no GPU): the host GEMV reproduces the GPU warp's
 * summation order bit for bit (and really fuses, and really uses the butterfly), the sampler, the memory
 * plan, the thread pool's fixed partition, bf16 rounding. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eng_hgemv.h"
#include "eng_plan.h"
#include "eng_pool.h"
#include "eng_sample.h"
#include "eng_weights.h"
#include "model.h"

#ifndef RC_TEST_GOLDEN_DIR
#define RC_TEST_GOLDEN_DIR "golden"
#endif

static uint64_t rng = 88172645463325252ull;
static float frand(void) /* roughly N(0,1)-sized, all exponents of a few decades */
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    float u = (float)(rng >> 40) / 16777216.0f;
    return (2.0f * u - 1.0f) * (float)(1u << (rng & 7)) * 0.25f;
}

static int bits_equal(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* ---- host GEMV vs the scalar model of the GPU order ---- */
static void check_gemv(int f32, int64_t N, int64_t K, eng_pool *pool)
{
    rc_err e = {0};
    void *W = malloc((size_t)(N * K) * (f32 ? 4 : 2));
    float *x = malloc((size_t)K * sizeof *x), *y = malloc((size_t)N * sizeof *y), *ym = malloc((size_t)N * sizeof *ym);
    assert_non_null(W);
    for (int64_t i = 0; i < N * K; i++) {
        if (f32)
            ((float *)W)[i] = frand();
        else
            ((uint16_t *)W)[i] = eng_f32_to_bf16(frand());
    }
    for (int64_t i = 0; i < K; i++)
        x[i] = frand();
    for (int64_t n = 0; n < N; n++)
        ym[n] = eng_dot_model((const char *)W + n * K * (f32 ? 4 : 2), f32, x, K);
    eng_hgemv *g;
    assert_int_equal(eng_hgemv_create(&g, W, f32, N, K, pool, &e), RC_OK);
    eng_hgemv_run(g, x, y);
    assert_true(bits_equal(y, ym, N)); /* the dispatched path */
    const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        if (!eng_hgemv_set_isa(g, isas[i]))
            continue; /* this CPU lacks it */
        memset(y, 0, (size_t)N * sizeof *y);
        eng_hgemv_run(g, x, y);
        assert_true(bits_equal(y, ym, N));
    }
    eng_hgemv_free(g);
    free(W); free(x); free(y); free(ym);
}

static void test_gemv_matches_model(void **state)
{
    (void)state;
    rc_err e = {0};
    eng_pool *pool;
    assert_int_equal(eng_pool_create(&pool, 3, &e), RC_OK);
    const int64_t Ks[] = {8, 64, 136, 256, 264, 4096, 4104};
    for (int f32 = 0; f32 < 2; f32++)
        for (size_t i = 0; i < sizeof Ks / sizeof Ks[0]; i++)
            check_gemv(f32, 37, Ks[i], pool);
    eng_pool_free(pool);
}

/* One f32 row whose result depends on fusion: acc = -(1 + 2^-11); then a*a with a = 1 + 2^-12 gives
 * fmaf -> 2^-24 but fl(a*a) + acc -> 0. */
static void test_gemv_fuses(void **state)
{
    (void)state;
    rc_err e = {0};
    float W[8] = {1.0f, 1.0f + 0x1p-12f}, x[8] = {-(1.0f + 0x1p-11f), 1.0f + 0x1p-12f}, y = -1.0f;
    volatile float p = W[1] * x[1]; /* unfused: rounds to 1 + 2^-11 */
    const float unfused = x[0] + p;
    assert_true(unfused == 0.0f);
    assert_true(eng_dot_model(W, 1, x, 8) == 0x1p-24f);
    eng_pool *pool;
    assert_int_equal(eng_pool_create(&pool, 1, &e), RC_OK);
    eng_hgemv *g;
    assert_int_equal(eng_hgemv_create(&g, W, 1, 1, 8, pool, &e), RC_OK);
    const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        if (!eng_hgemv_set_isa(g, isas[i]))
            continue;
        y = -1.0f;
        eng_hgemv_run(g, x, &y);
        assert_true(y == 0x1p-24f);
    }
    eng_hgemv_free(g);
    eng_pool_free(pool);
}

/* Lane sums 2^24 (lane 0), 1 (lane 1), 1 (lane 3): the xor butterfly adds lanes 1 and 3 first (2^24 + 2,
 * exact); a sequential sum loses both ones (2^24). */
static void test_gemv_butterfly_order(void **state)
{
    (void)state;
    rc_err e = {0};
    float W[256] = {0}, x[256], y = 0.0f;
    for (int i = 0; i < 256; i++)
        x[i] = 1.0f;
    W[0] = 0x1p24f;  /* chunk 0 = lane 0 */
    W[8] = 1.0f;     /* chunk 1 = lane 1 */
    W[24] = 1.0f;    /* chunk 3 = lane 3 */
    float seq = 0.0f;
    for (int i = 0; i < 256; i++)
        seq += W[i] * x[i];
    assert_true(seq == 0x1p24f);
    assert_true(eng_dot_model(W, 1, x, 256) == 0x1p24f + 2.0f);
    eng_pool *pool;
    assert_int_equal(eng_pool_create(&pool, 2, &e), RC_OK);
    eng_hgemv *g;
    assert_int_equal(eng_hgemv_create(&g, W, 1, 1, 256, pool, &e), RC_OK);
    const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        if (!eng_hgemv_set_isa(g, isas[i]))
            continue;
        y = 0.0f;
        eng_hgemv_run(g, x, &y);
        assert_true(y == 0x1p24f + 2.0f);
    }
    eng_hgemv_free(g);
    eng_pool_free(pool);
}

static void test_gemv_rejects_bad_k(void **state)
{
    (void)state;
    rc_err e = {0};
    float W[12] = {0};
    eng_hgemv *g;
    assert_int_equal(eng_hgemv_create(&g, W, 1, 1, 12, NULL, &e), RC_E_USAGE);
}

/* ---- sampler ---- */
static void test_argmax(void **state)
{
    (void)state;
    const float a[] = {1.0f, 3.0f, NAN, 3.0f, -INFINITY};
    assert_int_equal(eng_argmax(a, 5), 1); /* first of the ties, NaN never wins */
    const float n[] = {NAN, NAN};
    assert_int_equal(eng_argmax(n, 2), -1);
    eng_sampler s;
    eng_sampler_init(&s, 1.0, 0, 1.0, 1);
    rc_err e = {0};
    int32_t t;
    assert_int_equal(eng_sample(&s, n, 2, &t, &e), RC_E_RANGE);
    eng_sampler_free(&s);
}

static void test_greedy_and_degenerate(void **state)
{
    (void)state;
    rc_err e = {0};
    const float lg[] = {0.5f, 2.0f, 1.9f, -1.0f};
    int32_t t;
    eng_sampler s;
    eng_sampler_init(&s, 0.0, 0, 1.0, 5); /* temperature 0 = greedy */
    for (int i = 0; i < 20; i++) {
        assert_int_equal(eng_sample(&s, lg, 4, &t, &e), RC_OK);
        assert_int_equal(t, 1);
    }
    eng_sampler_free(&s);
    eng_sampler_init(&s, 5.0, 1, 1.0, 5); /* top-k 1 = greedy at any temperature */
    for (int i = 0; i < 50; i++) {
        assert_int_equal(eng_sample(&s, lg, 4, &t, &e), RC_OK);
        assert_int_equal(t, 1);
    }
    eng_sampler_free(&s);
    eng_sampler_init(&s, 5.0, 0, 1e-9, 5); /* tiny top-p keeps only the best */
    for (int i = 0; i < 50; i++) {
        assert_int_equal(eng_sample(&s, lg, 4, &t, &e), RC_OK);
        assert_int_equal(t, 1);
    }
    eng_sampler_free(&s);
    const float inf[] = {-INFINITY, 0.0f, -INFINITY};
    eng_sampler_init(&s, 1.0, 0, 1.0, 9); /* -inf never drawn */
    for (int i = 0; i < 50; i++) {
        assert_int_equal(eng_sample(&s, inf, 3, &t, &e), RC_OK);
        assert_int_equal(t, 1);
    }
    eng_sampler_free(&s);
    const float all_inf[] = {-INFINITY, -INFINITY};
    eng_sampler_init(&s, 1.0, 0, 1.0, 9);
    assert_int_equal(eng_sample(&s, all_inf, 2, &t, &e), RC_OK);
    assert_int_equal(t, 0);
    eng_sampler_free(&s);
}

static void test_seeded_determinism(void **state)
{
    (void)state;
    rc_err e = {0};
    float lg[100];
    for (int i = 0; i < 100; i++)
        lg[i] = 0.02f * frand(); /* comparable logits: many candidates survive */
    eng_sampler a, b, c;
    eng_sampler_init(&a, 0.9, 40, 0.95, 1234);
    eng_sampler_init(&b, 0.9, 40, 0.95, 1234);
    eng_sampler_init(&c, 0.9, 40, 0.95, 1235);
    int differ = 0;
    for (int i = 0; i < 200; i++) {
        int32_t ta, tb, tc;
        assert_int_equal(eng_sample(&a, lg, 100, &ta, &e), RC_OK);
        assert_int_equal(eng_sample(&b, lg, 100, &tb, &e), RC_OK);
        assert_int_equal(eng_sample(&c, lg, 100, &tc, &e), RC_OK);
        assert_int_equal(ta, tb);
        differ += ta != tc;
    }
    assert_true(differ > 0);
    eng_sampler_free(&a);
    eng_sampler_free(&b);
    eng_sampler_free(&c);
}

static void test_top_k_top_p_sets(void **state)
{
    (void)state;
    rc_err e = {0};
    /* probabilities 0.4, 0.35, 0.25 at temperature 1, shuffled over ids */
    const float lg[] = {logf(0.25f), logf(0.4f), -INFINITY, logf(0.35f)};
    int seen[4] = {0};
    eng_sampler s;
    eng_sampler_init(&s, 1.0, 2, 1.0, 77); /* top-k 2: ids 1 and 3 only */
    for (int i = 0; i < 2000; i++) {
        int32_t t;
        assert_int_equal(eng_sample(&s, lg, 4, &t, &e), RC_OK);
        seen[t]++;
    }
    assert_int_equal(seen[0], 0);
    assert_int_equal(seen[2], 0);
    assert_true(seen[1] > 0 && seen[3] > 0);
    eng_sampler_free(&s);
    memset(seen, 0, sizeof seen);
    eng_sampler_init(&s, 1.0, 0, 0.5, 78); /* top-p 0.5: 0.4 < 0.5, 0.4 + 0.35 >= 0.5 -> ids 1, 3 */
    for (int i = 0; i < 2000; i++) {
        int32_t t;
        assert_int_equal(eng_sample(&s, lg, 4, &t, &e), RC_OK);
        seen[t]++;
    }
    assert_int_equal(seen[0], 0);
    assert_int_equal(seen[2], 0);
    assert_true(seen[1] > seen[3] && seen[3] > 0);
    eng_sampler_free(&s);
    eng_sampler_init(&s, 1.0, 1000, 1.0, 79); /* top-k beyond V: all three finite ids */
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 3000; i++) {
        int32_t t;
        assert_int_equal(eng_sample(&s, lg, 4, &t, &e), RC_OK);
        seen[t]++;
    }
    assert_int_equal(seen[2], 0);
    assert_true(seen[0] > 600 && seen[0] < 900); /* ~750 */
    eng_sampler_free(&s);
}

static void test_uniform_range(void **state)
{
    (void)state;
    eng_sampler s;
    eng_sampler_init(&s, 1.0, 0, 1.0, 0);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = eng_sampler_uniform(&s);
        assert_true(u >= 0.0 && u < 1.0);
        sum += u;
    }
    assert_true(fabs(sum / 100000 - 0.5) < 0.01);
}

/* ---- memory plan ---- */
static eng_plan_sizes sizes(void)
{
    eng_plan_sizes s = {.n_layers = 4, .layer_total = 400, .layer_max = 100, .vocab_dev = 50, .logits_dev = 5,
                        .kv_resident = 200, .kv_offload = 20, .workspace = 30};
    return s;
}

static void test_plan(void **state)
{
    (void)state;
    rc_err e = {0};
    eng_plan_sizes s = sizes();
    eng_plan p;
    eng_plan_bytes(&s, ENG_ALL_LAYERS, 0, 0, &p);
    assert_int_equal(p.total, 400 + 50 + 200 + 30 + 5);
    eng_plan_bytes(&s, 9, 0, 0, &p); /* N >= layers = all */
    assert_int_equal(p.resident_layers, ENG_ALL_LAYERS);
    eng_plan_bytes(&s, 2, 1, 1, &p);
    assert_int_equal(p.total, 200 + 20 + 30);
    assert_int_equal(eng_plan_choose(&s, 685, -2, -1, -1, &p, &e), RC_OK); /* everything fits */
    assert_int_equal(p.resident_layers, ENG_ALL_LAYERS);
    assert_int_equal(p.kv_offload, 0);
    /* 600: streaming (all weights per token, 400) costs more than offloading the KV (200) */
    assert_int_equal(eng_plan_choose(&s, 600, -2, -1, -1, &p, &e), RC_OK);
    assert_int_equal(p.resident_layers, ENG_ALL_LAYERS);
    assert_int_equal(p.kv_offload, 1);
    assert_true(p.total <= 600);
    /* the user pinned the KV on the device: stream weights instead */
    assert_int_equal(eng_plan_choose(&s, 600, -2, 0, -1, &p, &e), RC_OK);
    assert_int_equal(p.kv_offload, 0);
    assert_int_equal(p.resident_layers, 2);
    assert_int_equal(eng_plan_choose(&s, 100, -2, -1, -1, &p, &e), RC_OK); /* 0 + 20 + 30 (+5 logits?) */
    assert_true(p.total <= 100);
    assert_int_equal(eng_plan_choose(&s, 49, -2, -1, -1, &p, &e), RC_E_NOMEM);
    assert_non_null(strstr(e.msg, "too small"));
}

/* ---- thread pool: a fixed partition, every index once ---- */
typedef struct pool_ctx {
    int hits[1000];
    int owner[1000];
} pool_ctx;

static void mark(void *ctx, int64_t b, int64_t end, int w)
{
    pool_ctx *c = ctx;
    for (int64_t i = b; i < end; i++) {
        c->hits[i]++;
        c->owner[i] = w;
    }
}

static void test_pool(void **state)
{
    (void)state;
    rc_err e = {0};
    eng_pool *p;
    assert_int_equal(eng_pool_create(&p, 4, &e), RC_OK);
    static pool_ctx c;
    for (int round = 0; round < 50; round++) {
        memset(&c, 0, sizeof c);
        eng_pool_run(p, 1000, mark, &c);
        for (int i = 0; i < 1000; i++) {
            assert_int_equal(c.hits[i], 1);
            assert_int_equal(c.owner[i], (int)((int64_t)i * eng_pool_size(p) / 1000));
        }
    }
    eng_pool_run(p, 0, mark, &c);
    eng_pool_free(p);
}

static void test_bf16(void **state)
{
    (void)state;
    assert_int_equal(eng_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(eng_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);           /* tie -> even */
    assert_int_equal(eng_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81); /* above the tie */
    assert_int_equal(eng_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);       /* tie -> even, up */
    assert_true(isnan(eng_bf16_to_f32(eng_f32_to_bf16(NAN))));
    assert_true(eng_bf16_to_f32(eng_f32_to_bf16(-INFINITY)) == -INFINITY);
    assert_true(eng_bf16_to_f32(0x3f81) == 1.0f + 0x1p-7f);
}

/* ---- weight store: every tensor lands where eng_layer_layout says (q|k|v, gate|up, biases, norms) ---- */
static void check_rows(const void *blob, int64_t off, int f32, const float *src, int64_t n)
{
    assert_non_null(src);
    for (int64_t i = 0; i < n; i++) {
        const float want = f32 ? src[i] : eng_bf16_to_f32(eng_f32_to_bf16(src[i]));
        const float got = f32 ? ((const float *)((const char *)blob + off))[i]
                              : eng_bf16_to_f32(((const uint16_t *)((const char *)blob + off))[i]);
        if (memcmp(&want, &got, sizeof got))
            fail_msg("element %lld at offset %lld: %g != %g", (long long)i, (long long)off, got, want);
    }
}

static void check_vec(const void *blob, int64_t off, const float *src, int64_t n)
{
    if (!src) {
        assert_true(off < 0);
        return;
    }
    assert_true(off >= 0 && off % 4 == 0);
    assert_memory_equal((const char *)blob + off, src, (size_t)n * sizeof(float));
}

static void check_store(const char *golden, int f32)
{
    rc_err e = {0};
    rc_model m;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", RC_TEST_GOLDEN_DIR, golden);
    if (rc_model_load(&m, path, &e) != RC_OK)
        fail_msg("%s", e.msg);
    eng_weights *w;
    assert_int_equal(eng_weights_from_model(&w, &m, f32, 2, &e), RC_OK);
    const int64_t Hd = m.cfg.hidden, el = f32 ? 4 : 2;
    for (int l = 0; l < m.cfg.n_layers; l++) {
        const eng_layer_layout *L = &w->lay[l];
        const rc_layer_weights *s = &m.w.layers[l];
        const void *b = w->layer[l];
        check_rows(b, L->wqkv, f32, s->q, (int64_t)L->qd * Hd);
        check_rows(b, L->wqkv + (int64_t)L->qd * Hd * el, f32, s->k, (int64_t)L->kd * Hd);
        check_rows(b, L->wqkv + (int64_t)(L->qd + L->kd) * Hd * el, f32, s->v, (int64_t)L->kd * Hd);
        check_rows(b, L->wo, f32, s->o, Hd * L->qd);
        check_rows(b, L->wgu, f32, s->gate, (int64_t)L->inter * Hd);
        check_rows(b, L->wgu + (int64_t)L->inter * Hd * el, f32, s->up, (int64_t)L->inter * Hd);
        check_rows(b, L->wdown, f32, s->down, Hd * L->inter);
        check_vec(b, L->attn_norm, s->attn_norm, Hd);
        check_vec(b, L->mlp_norm, s->mlp_norm, Hd);
        check_vec(b, L->q_norm, s->q_norm, m.cfg.layers[l].head_dim);
        check_vec(b, L->k_norm, s->k_norm, m.cfg.layers[l].head_dim);
        check_vec(b, L->bo, s->o_b, Hd);
        check_vec(b, L->bdown, s->down_b, Hd);
        if (s->q_b) {
            check_vec(b, L->bqkv, s->q_b, L->qd);
            check_vec(b, L->bqkv + 4 * (int64_t)L->qd, s->k_b, L->kd);
            check_vec(b, L->bqkv + 4 * (int64_t)(L->qd + L->kd), s->v_b, L->kd);
        } else
            assert_true(L->bqkv < 0);
        if (s->gate_b) {
            check_vec(b, L->bgu, s->gate_b, L->inter);
            check_vec(b, L->bgu + 4 * (int64_t)L->inter, s->up_b, L->inter);
        }
        assert_true(L->wo % ENG_ALIGN == 0 && L->wgu % ENG_ALIGN == 0 && L->wdown % ENG_ALIGN == 0);
    }
    check_rows(w->embed, 0, f32, m.w.embed, m.cfg.vocab * Hd);
    check_rows(w->lm_head, 0, f32, m.w.lm_head, m.cfg.vocab * Hd);
    assert_true(m.cfg.tie_embeddings == (w->lm_head == w->embed));
    assert_memory_equal(w->final_norm, m.w.final_norm, (size_t)Hd * sizeof(float));
    eng_weights_free(w);
    rc_model_free(&m);
}

/* A golden's model and its engine weight store (2 threads). */
static void load_store(const char *golden, int f32, rc_model *m, eng_weights **w)
{
    rc_err e = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", RC_TEST_GOLDEN_DIR, golden);
    if (rc_model_load(m, path, &e) != RC_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(eng_weights_from_model(w, m, f32, 2, &e), RC_OK);
}

/* qwen3_5: a GDN layer's in_proj rows qkv | z | b | a and out_proj in matrix storage, conv1d / A_log / dt_bias /
 * norm in fp32; a gated attention layer's q_proj split per head into queries (wqkv) and gates (wgate). */
static void check_hybrid_store(int f32)
{
    rc_model m;
    eng_weights *w;
    load_store("qwen3_5.h5", f32, &m, &w);
    const int64_t Hd = m.cfg.hidden, el = f32 ? 4 : 2;
    int gdn = 0, gated = 0;
    for (int l = 0; l < m.cfg.n_layers; l++) {
        const eng_layer_layout *L = &w->lay[l];
        const rc_layer_weights *s = &m.w.layers[l];
        const rc_layer_desc *d = &m.cfg.layers[l];
        const void *b = w->layer[l];
        if (d->mixer == RC_MIXER_GDN) {
            const int64_t Hv = d->gdn_v_heads, C = L->gch, Vd = L->gvd;
            assert_int_equal(L->gnin, C + Vd + 2 * Hv);
            check_rows(b, L->gin, f32, s->gdn_qkv, C * Hd);
            check_rows(b, L->gin + C * Hd * el, f32, s->gdn_z, Vd * Hd);
            check_rows(b, L->gin + (C + Vd) * Hd * el, f32, s->gdn_b, Hv * Hd);
            check_rows(b, L->gin + (C + Vd + Hv) * Hd * el, f32, s->gdn_a, Hv * Hd);
            check_rows(b, L->gout, f32, s->gdn_out, Hd * Vd);
            check_vec(b, L->gconv, s->gdn_conv, C * d->gdn_conv_kernel);
            check_vec(b, L->galog, s->gdn_A_log, Hv);
            check_vec(b, L->gdt, s->gdn_dt_bias, Hv);
            check_vec(b, L->gnorm, s->gdn_norm, d->gdn_v_dim);
            assert_true(L->wqkv < 0 && L->wo < 0 && L->wgate < 0);
            gdn++;
        } else {
            const int64_t D = d->head_dim;
            assert_true(d->out_gate && L->wgate >= 0);
            for (int h = 0; h < d->n_heads; h++) {
                check_rows(b, L->wqkv + h * D * Hd * el, f32, s->q + 2 * h * D * Hd, D * Hd);
                check_rows(b, L->wgate + h * D * Hd * el, f32, s->q + (2 * h + 1) * D * Hd, D * Hd);
            }
            check_rows(b, L->wqkv + (int64_t)L->qd * Hd * el, f32, s->k, (int64_t)L->kd * Hd);
            check_rows(b, L->wqkv + (int64_t)(L->qd + L->kd) * Hd * el, f32, s->v, (int64_t)L->kd * Hd);
            check_rows(b, L->wo, f32, s->o, Hd * L->qd);
            check_vec(b, L->q_norm, s->q_norm, d->head_dim);
            check_vec(b, L->k_norm, s->k_norm, d->head_dim);
            gated++;
        }
        check_rows(b, L->wgu, f32, s->gate, (int64_t)L->inter * Hd);
        check_rows(b, L->wgu + (int64_t)L->inter * Hd * el, f32, s->up, (int64_t)L->inter * Hd);
        check_rows(b, L->wdown, f32, s->down, Hd * L->inter);
        check_vec(b, L->attn_norm, s->attn_norm, Hd);
        check_vec(b, L->mlp_norm, s->mlp_norm, Hd);
    }
    assert_true(gdn == 3 && gated == 1);
    eng_weights_free(w);
    rc_model_free(&m);
}

/* gemma4: sandwich norms, layer scalar and the PLE branch in each blob; the PLE table and model projection in matrix
 * storage beside the vocab, the projection norm fp32. */
static void check_gemma_store(int f32)
{
    rc_model m;
    eng_weights *w;
    load_store("gemma4.h5", f32, &m, &w);
    const int64_t Hd = m.cfg.hidden, P = m.cfg.ple_dim, LP = (int64_t)m.cfg.n_layers * P;
    assert_true(P > 0);
    for (int l = 0; l < m.cfg.n_layers; l++) {
        const eng_layer_layout *L = &w->lay[l];
        const rc_layer_weights *s = &m.w.layers[l];
        const void *b = w->layer[l];
        check_vec(b, L->post_attn_norm, s->attn_post_norm, Hd);
        check_vec(b, L->post_mlp_norm, s->mlp_post_norm, Hd);
        check_vec(b, L->lscalar, s->layer_scalar, 1);
        check_vec(b, L->ple_norm, s->ple_norm, Hd);
        check_rows(b, L->ple_gate, f32, s->ple_gate, P * Hd);
        check_rows(b, L->ple_proj, f32, s->ple_proj, Hd * P);
        check_rows(b, L->wqkv, f32, s->q, (int64_t)L->qd * Hd);
    }
    check_rows(w->ple_embed, 0, f32, m.w.ple_embed, m.cfg.ple_vocab * LP);
    check_rows(w->ple_mproj, 0, f32, m.w.ple_model_proj, LP * Hd);
    assert_memory_equal(w->ple_pnorm, m.w.ple_proj_norm, (size_t)P * sizeof(float));
    eng_weights_free(w);
    rc_model_free(&m);
}

static void test_weight_store(void **state)
{
    (void)state;
    const char *goldens[] = {"llama.h5", "llama_bias.h5", "qwen3.h5"};
    for (int i = 0; i < 3; i++)
        for (int f32 = 0; f32 < 2; f32++)
            check_store(goldens[i], f32);
    check_hybrid_store(0);
    check_hybrid_store(1);
    check_gemma_store(0);
    check_gemma_store(1);
}

static void test_refusals(void **state)
{
    (void)state;
    rc_err e = {0};
    rc_model m;
    char path[1024];
    snprintf(path, sizeof path, "%s/llama.h5", RC_TEST_GOLDEN_DIR);
    assert_int_equal(rc_model_load(&m, path, &e), RC_OK);
    m.cfg.layers[1].state = RC_STATE_KV_RING;
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "layer 1"));
    m.cfg.layers[1].state = RC_STATE_RECURRENT; /* a recurrent state belongs to a gated delta net layer */
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "layer 1: a recurrent state"));
    m.cfg.layers[1].state = RC_STATE_KV;
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_OK);
    m.cfg.layers[1].window = 8; /* a window over a full cache (masked) or over a ring of 8 rows */
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_OK);
    m.cfg.layers[1].state = RC_STATE_KV_RING;
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_OK);
    m.cfg.layers[1].state = RC_STATE_KV;
    m.cfg.layers[1].window = 0;
    m.cfg.layers[0].mixer = RC_MIXER_GDN;
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_E_UNSUPPORTED);
    rc_model_free(&m);
    /* qwen3_5 runs; a DeltaNet key head wider than the delta kernel's registers is refused by name */
    snprintf(path, sizeof path, "%s/qwen3_5.h5", RC_TEST_GOLDEN_DIR);
    assert_int_equal(rc_model_load(&m, path, &e), RC_OK);
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_OK);
    m.cfg.layers[0].gdn_k_dim = 512;
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "linear_key_head_dim 512"));
    m.cfg.layers[0].gdn_k_dim = 16;
    m.cfg.layers[0].gdn_v_dim = 21; /* 4 x 21 = 84: not a multiple of 8 */
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "linear value width"));
    rc_model_free(&m);
    /* gemma4 runs; per-layer embeddings narrower than a vector load, or a table short of the vocabulary, do not */
    snprintf(path, sizeof path, "%s/gemma4.h5", RC_TEST_GOLDEN_DIR);
    assert_int_equal(rc_model_load(&m, path, &e), RC_OK);
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_OK);
    m.cfg.ple_dim = 12;
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "per-layer embeddings of width 12"));
    m.cfg.ple_dim = 8;
    m.cfg.ple_vocab = m.cfg.vocab - 1;
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_E_UNSUPPORTED);
    m.cfg.ple_vocab = m.cfg.vocab;
    m.cfg.layers[0].window = 0; /* a ring without a window */
    assert_int_equal(eng_config_check(&m.cfg, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "layer 0: a ring KV cache"));
    rc_model_free(&m);
}

static void test_synth(void **state)
{
    (void)state;
    rc_err e = {0};
    rc_config c;
    const char *json = "{\"model_type\": \"llama\", \"vocab_size\": 300, \"hidden_size\": 64, "
                       "\"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                       "\"num_key_value_heads\": 2}";
    assert_int_equal(rc_config_parse(json, &c, &e), RC_OK);
    eng_weights *a, *b;
    assert_int_equal(eng_weights_synth(&a, &c, 0, 42, 1, &e), RC_OK);
    assert_int_equal(eng_weights_synth(&b, &c, 0, 42, 5, &e), RC_OK); /* thread count does not matter */
    for (int l = 0; l < 2; l++)
        assert_memory_equal(a->layer[l], b->layer[l], (size_t)a->lay[l].bytes);
    assert_memory_equal(a->embed, b->embed, (size_t)a->vocab_bytes);
    double ss = 0;
    const uint16_t *q = (const uint16_t *)((const char *)a->layer[0] + a->lay[0].wqkv);
    const int64_t n = (int64_t)a->lay[0].nqkv * 64;
    for (int64_t i = 0; i < n; i++)
        ss += (double)eng_bf16_to_f32(q[i]) * eng_bf16_to_f32(q[i]);
    assert_true(fabs(sqrt(ss / (double)n) - 0.02) < 0.002); /* std 0.02 */
    eng_weights_free(a);
    eng_weights_free(b);
    rc_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemv_matches_model),
        cmocka_unit_test(test_gemv_fuses),
        cmocka_unit_test(test_gemv_butterfly_order),
        cmocka_unit_test(test_gemv_rejects_bad_k),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_greedy_and_degenerate),
        cmocka_unit_test(test_seeded_determinism),
        cmocka_unit_test(test_top_k_top_p_sets),
        cmocka_unit_test(test_uniform_range),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_weight_store),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_synth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
