/* CPU unit tests of the engine's packed quantized weights (engine/eng_qpack.h, eng_weights.c): every matrix of each
 * quantized golden, packed into the layer blob (q|k|v and gate|up rows concatenated), dequantizes bit for bit to the
 * fp32 weights model/ loaded (rc_model_load's exact dequant); the layer blobs are smaller than bf16 storage and the
 * streaming plan counts the packed bytes; the synthesized quantized store; --weights names; refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eng_plan.h"
#include "eng_qpack.h"
#include "eng_weights.h"

#ifndef RC_TEST_GOLDEN_DIR
#define RC_TEST_GOLDEN_DIR "golden"
#endif

/* Rows [r0, r0 + n) of the packed matrix at blob + off equal src[n, K] bit for bit. */
static void expect_rows(const char *blob, int64_t off, const eng_qfmt *q, int64_t N, int64_t K, int64_t r0,
                        const float *src, int64_t n, const char *what)
{
    float *row = malloc((size_t)K * sizeof *row);
    assert_non_null(row);
    for (int64_t r = 0; r < n; r++) {
        eng_qdequant_row(blob + off, N, K, q, r0 + r, row);
        if (memcmp(row, src + r * K, (size_t)K * sizeof *row)) {
            for (int64_t k = 0; k < K; k++)
                if (memcmp(&row[k], &src[r * K + k], sizeof *row))
                    fail_msg("%s: row %lld col %lld: packed %.9g, model %.9g", what, (long long)r, (long long)k,
                             (double)row[k], (double)src[r * K + k]);
        }
    }
    free(row);
}

static void check_golden(const char *name, int bits)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.h5", RC_TEST_GOLDEN_DIR, name);
    rc_model m;
    memset(&m, 0, sizeof m);
    rc_err e = {0};
    if (rc_model_load(&m, path, &e))
        fail_msg("%s: %s", path, e.msg);
    assert_true(m.quant.on);
    for (int f32 = 0; f32 < 2; f32++) {
        eng_weights *w = NULL;
        if (eng_weights_from_model(&w, &m, f32, 2, &e))
            fail_msg("%s: %s", name, e.msg);
        assert_true(w->quant);
        /* int8 packs ~1/2 of bf16 (plus scales), int4 ~1/4 */
        assert_true(w->layer_bytes_total < w->plain_layer_bytes);
        assert_true(w->layer_bytes_total * (bits == 8 ? 3 : 5) < w->plain_layer_bytes * (f32 ? 1 : 2) * 2);
        const int64_t Hd = m.cfg.hidden;
        for (int i = 0; i < m.cfg.n_layers; i++) {
            const eng_layer_layout *L = &w->lay[i];
            const rc_layer_weights *s = &m.w.layers[i];
            const char *blob = w->layer[i];
            assert_int_equal(L->qqkv.bits, bits);
            assert_int_equal(L->qdown.bits, bits);
            expect_rows(blob, L->wqkv, &L->qqkv, L->nqkv, Hd, 0, s->q, L->qd, "q");
            expect_rows(blob, L->wqkv, &L->qqkv, L->nqkv, Hd, L->qd, s->k, L->kd, "k");
            expect_rows(blob, L->wqkv, &L->qqkv, L->nqkv, Hd, L->qd + L->kd, s->v, L->kd, "v");
            expect_rows(blob, L->wo, &L->qo, Hd, L->qd, 0, s->o, Hd, "o");
            expect_rows(blob, L->wgu, &L->qgu, 2 * L->inter, Hd, 0, s->gate, L->inter, "gate");
            expect_rows(blob, L->wgu, &L->qgu, 2 * L->inter, Hd, L->inter, s->up, L->inter, "up");
            expect_rows(blob, L->wdown, &L->qdown, Hd, L->inter, 0, s->down, Hd, "down");
        }
        /* one streaming slot holds the largest packed layer */
        eng_plan_sizes ps = {.n_layers = m.cfg.n_layers, .layer_total = w->layer_bytes_total,
                             .layer_max = w->layer_bytes_max};
        eng_plan p;
        eng_plan_bytes(&ps, 1, 0, 1, &p);
        assert_int_equal(p.weights, w->layer_bytes_max);
        char buf[2048] = {0};
        FILE *f = fmemopen(buf, sizeof buf - 1, "w"); /* the last byte stays NUL */
        assert_non_null(f);
        eng_weights_print_quant(w, f);
        fclose(f);
        assert_non_null(strstr(buf, bits == 8 ? "int8 per-row scale" : "int4 g"));
        eng_weights_free(w);
    }
    rc_model_free(&m);
}

static void test_golden_int8(void **st) { (void)st; check_golden("llama_int8", 8); }
static void test_golden_int4_g32(void **st) { (void)st; check_golden("llama_int4_g32", 4); }
static void test_golden_int4_g128(void **st) { (void)st; check_golden("llama_int4_g128", 4); }

static void test_synth(void **st)
{
    (void)st;
    rc_err e = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/llama_int4_g128.h5", RC_TEST_GOLDEN_DIR); /* hidden 128, intermediate 256 */
    rc_model m;
    memset(&m, 0, sizeof m);
    if (rc_model_load(&m, path, &e))
        fail_msg("%s: %s", path, e.msg);
    const rc_config cfg = m.cfg;
    const char *names[] = {"int8", "int4-g32", "int4-g128", "int4-g64-sym"};
    for (int n = 0; n < 4; n++) {
        eng_qfmt q;
        int on;
        assert_int_equal(eng_qfmt_parse(names[n], &q, &on, NULL, &e), RC_OK);
        assert_true(on);
        eng_weights *a = NULL, *b = NULL;
        if (eng_weights_synth_quant(&a, &cfg, 0, &q, 0, 3, 1, &e) || eng_weights_synth_quant(&b, &cfg, 0, &q, 0, 3, 2, &e))
            fail_msg("synth %s: %s", names[n], e.msg);
        assert_true(a->quant);
        assert_int_equal(a->lay[0].qdown.group, q.group ? q.group : a->lay[0].inter);
        assert_true(a->layer_bytes_total < a->plain_layer_bytes);
        for (int i = 0; i < 2; i++) /* same seed, same bits, whatever the thread count */
            assert_memory_equal(a->layer[i], b->layer[i], (size_t)a->lay[i].bytes);
        eng_weights_free(a);
        eng_weights_free(b);
    }
    /* "+lm_head": an untied lm_head packed in the scheme's format, the same bits whatever the thread count; a tied
     * one refused by name (the embedding is a row gather, kept) */
    for (int n = 0; n < 4; n++) {
        char name[48];
        snprintf(name, sizeof name, "%s+lm_head", names[n]);
        eng_qfmt q;
        int on, lm = 0;
        assert_int_equal(eng_qfmt_parse(name, &q, &on, &lm, &e), RC_OK);
        assert_true(on && lm);
        rc_config untied = cfg, tied = cfg;
        untied.tie_embeddings = 0;
        tied.tie_embeddings = 1;
        eng_weights *a = NULL, *b = NULL;
        if (eng_weights_synth_quant(&a, &untied, 0, &q, 1, 3, 1, &e) ||
            eng_weights_synth_quant(&b, &untied, 0, &q, 1, 3, 2, &e))
            fail_msg("synth %s: %s", name, e.msg);
        assert_int_equal(a->qlm.family, q.family);
        assert_int_equal(a->qlm.group, q.group ? q.group : (int)cfg.hidden);
        assert_int_equal(a->lm_bytes, eng_qmat_bytes(cfg.vocab, cfg.hidden, &a->qlm));
        assert_true(a->lm_bytes < a->vocab_bytes);
        assert_memory_equal(a->lm_head, b->lm_head, (size_t)a->lm_bytes);
        float row[4096];
        assert_true(cfg.hidden <= 4096);
        eng_qdequant_row(a->lm_head, cfg.vocab, cfg.hidden, &a->qlm, cfg.vocab - 1, row);
        double ss = 0;
        for (int64_t k = 0; k < cfg.hidden; k++)
            ss += (double)row[k] * row[k];
        assert_true(ss > 0); /* the last row was written */
        eng_weights_free(a);
        eng_weights_free(b);
        a = NULL;
        assert_int_equal(eng_weights_synth_quant(&a, &tied, 0, &q, 1, 3, 1, &e), RC_E_UNSUPPORTED);
        assert_null(a);
        assert_non_null(strstr(e.msg, "lm_head"));
        /* without the flag lm_head stays in the store's bf16 */
        assert_int_equal(eng_weights_synth_quant(&a, &untied, 0, &q, 0, 3, 1, &e), RC_OK);
        assert_int_equal(a->qlm.family, 0);
        assert_int_equal(a->lm_bytes, a->vocab_bytes);
        eng_weights_free(a);
    }
    rc_model_free(&m);
    eng_qfmt q;
    int on;
    assert_int_equal(eng_qfmt_parse("bf16", &q, &on, NULL, &e), RC_OK);
    assert_false(on);
    assert_int_equal(eng_qfmt_parse("int3", &q, &on, NULL, &e), RC_E_USAGE);
    assert_non_null(strstr(e.msg, "int3"));
}

/* q|k|v with one part unquantized (a GGUF mixing types): kept in full precision, counted in the banner. */
static void test_mixed_parts(void **st)
{
    (void)st;
    char path[512];
    snprintf(path, sizeof path, "%s/llama_int4_g128.h5", RC_TEST_GOLDEN_DIR);
    rc_model m;
    memset(&m, 0, sizeof m);
    rc_err e = {0};
    if (rc_model_load(&m, path, &e))
        fail_msg("%s: %s", path, e.msg);
    int hit = 0;
    for (int k = 0; k < m.quant.n; k++)
        if (strstr(m.quant.t[k].name, "layers.0.self_attn.k_proj.weight")) {
            m.quant.t[k].name[strlen(m.quant.t[k].name) - 1] = '#'; /* no longer found: k_proj of layer 0 reads as full precision */
            hit = 1;
        }
    assert_true(hit);
    eng_weights *w = NULL;
    if (eng_weights_from_model(&w, &m, 1, 1, &e))
        fail_msg("%s", e.msg);
    const eng_layer_layout *L = &w->lay[0];
    assert_int_equal(L->qqkv.family, 0);
    assert_int_equal(w->quant_plain, 2); /* q and v of layer 0 */
    assert_int_not_equal(L->qo.family, 0);
    assert_int_not_equal(w->lay[1].qqkv.family, 0);
    assert_memory_equal((const char *)w->layer[0] + L->wqkv, m.w.layers[0].q, (size_t)L->qd * m.cfg.hidden * 4);
    assert_memory_equal((const char *)w->layer[0] + L->wqkv + (int64_t)L->qd * m.cfg.hidden * 4, m.w.layers[0].k,
                        (size_t)L->kd * m.cfg.hidden * 4);
    eng_weights_free(w);
    rc_model_free(&m);
}

/* A checkpoint's quantized lm_head (GPTQ's lm_head flag): packed when untied and in a format the kernels run (its
 * rows dequantize to model/'s rule bit for bit), else kept in the store's precision and counted on the banner. */
static void test_lm_head_packed(void **st)
{
    (void)st;
    char path[512];
    snprintf(path, sizeof path, "%s/llama_int4_g128.h5", RC_TEST_GOLDEN_DIR);
    static const struct { rc_qfamily fam; int bits, group, zero, tied, packed; } cases[] = {
        {RC_QF_AFFINE, 4, 32, 1, 0, 1},  /* int4 g32 with integer zeros */
        {RC_QF_SCALE, 8, 0, 0, 0, 1},    /* int8 per row */
        {RC_QF_AFFINE, 8, 64, 0, 0, 0},  /* affine int8: not a format the kernels run */
        {RC_QF_SCALE, 4, 64, 0, 1, 0},   /* tied: the embedding's gather, kept */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rc_model m;
        memset(&m, 0, sizeof m);
        rc_err e = {0};
        if (rc_model_load(&m, path, &e))
            fail_msg("%s: %s", path, e.msg);
        const int64_t V = m.cfg.vocab, Hd = m.cfg.hidden, g = cases[c].group ? cases[c].group : Hd;
        m.cfg.tie_embeddings = cases[c].tied;
        rc_qtensor *t = realloc(m.quant.t, (size_t)(m.quant.n + 1) * sizeof *t);
        assert_non_null(t);
        m.quant.t = t;
        rc_qtensor *lm = &m.quant.t[m.quant.n];
        assert_int_equal(rc_qtensor_alloc(lm, "lm_head.weight", cases[c].fam, cases[c].bits, V, Hd, g,
                                          cases[c].zero, &e), RC_OK);
        m.quant.n++;
        const int lo = cases[c].fam == RC_QF_AFFINE ? 0 : -(1 << (cases[c].bits - 1));
        const int span = 1 << cases[c].bits;
        for (int64_t i = 0; i < V * Hd; i++)
            lm->q[i] = (int8_t)(lo + (int)((i * 2654435761u + (uint64_t)c) % (uint64_t)span));
        for (int64_t j = 0; j < V * (Hd / g); j++) {
            lm->scale[j] = 0.001f * (float)(1 + j % 7);
            if (lm->zero)
                lm->zero[j] = (int16_t)(j % 16);
            else if (lm->offset)
                lm->offset[j] = -0.003f * (float)(j % 5);
        }
        if (lm->zero)
            rc_qtensor_set_offsets(lm);
        eng_weights *w = NULL;
        if (eng_weights_from_model(&w, &m, 1, 2, &e))
            fail_msg("case %zu: %s", c, e.msg);
        if (cases[c].packed) {
            assert_int_equal(w->qlm.family, cases[c].fam);
            assert_int_equal(w->qlm.bits, cases[c].bits);
            assert_int_equal(w->qlm.group, (int)g);
            assert_int_equal(w->lm_bytes, eng_qmat_bytes(V, Hd, &w->qlm));
            float *want = malloc((size_t)(V * Hd) * sizeof *want), *got = malloc((size_t)Hd * sizeof *got);
            assert_non_null(want);
            assert_non_null(got);
            rc_qtensor_dequant(lm, want);
            for (int64_t r = 0; r < V; r += V / 7 + 1) {
                eng_qdequant_row(w->lm_head, V, Hd, &w->qlm, r, got);
                assert_memory_equal(got, want + r * Hd, (size_t)Hd * sizeof *got);
            }
            eng_qdequant_row(w->lm_head, V, Hd, &w->qlm, V - 1, got);
            assert_memory_equal(got, want + (V - 1) * Hd, (size_t)Hd * sizeof *got);
            free(want);
            free(got);
        } else {
            assert_int_equal(w->qlm.family, 0);
            assert_int_equal(w->lm_bytes, cases[c].tied ? 0 : w->vocab_bytes);
            if (!cases[c].tied) /* kept: the fp32 copy model/ dequantized at load, counted on the banner */
                assert_memory_equal(w->lm_head, m.w.lm_head, (size_t)w->vocab_bytes);
        }
        eng_weights_free(w);
        rc_model_free(&m);
    }
}

/* Formats the kernels do not run are refused by the tensor's name. */
static void test_refusals(void **st)
{
    (void)st;
    rc_err e = {0};
    rc_qtensor t;
    assert_int_equal(rc_qtensor_alloc(&t, "model.layers.0.mlp.up_proj.weight", RC_QF_AFFINE, 4, 4, 64, 16, 1, &e), RC_OK);
    eng_qfmt q;
    assert_int_equal(eng_qfmt_of(&t, &q, &e), RC_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "up_proj"));
    rc_qtensor_free(&t);
    assert_int_equal(rc_qtensor_alloc(&t, "model.layers.0.mlp.up_proj.weight", RC_QF_SCALE, 8, 4, 64, 64, 0, &e), RC_OK);
    assert_int_equal(eng_qfmt_of(&t, &q, &e), RC_OK);
    assert_int_equal(q.group, 64);
    rc_qtensor_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_int8),
        cmocka_unit_test(test_golden_int4_g32),
        cmocka_unit_test(test_golden_int4_g128),
        cmocka_unit_test(test_synth),
        cmocka_unit_test(test_mixed_parts),
        cmocka_unit_test(test_lm_head_packed),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
