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
        assert_int_equal(eng_qfmt_parse(names[n], &q, &on, &e), RC_OK);
        assert_true(on);
        eng_weights *a = NULL, *b = NULL;
        if (eng_weights_synth_quant(&a, &cfg, 0, &q, 3, 1, &e) || eng_weights_synth_quant(&b, &cfg, 0, &q, 3, 2, &e))
            fail_msg("synth %s: %s", names[n], e.msg);
        assert_true(a->quant);
        assert_int_equal(a->lay[0].qdown.group, q.group ? q.group : a->lay[0].inter);
        assert_true(a->layer_bytes_total < a->plain_layer_bytes);
        for (int i = 0; i < 2; i++) /* same seed, same bits, whatever the thread count */
            assert_memory_equal(a->layer[i], b->layer[i], (size_t)a->lay[i].bytes);
        eng_weights_free(a);
        eng_weights_free(b);
    }
    rc_model_free(&m);
    eng_qfmt q;
    int on;
    assert_int_equal(eng_qfmt_parse("bf16", &q, &on, &e), RC_OK);
    assert_false(on);
    assert_int_equal(eng_qfmt_parse("int3", &q, &on, &e), RC_E_USAGE);
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
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
