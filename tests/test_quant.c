/* Quantized weights: the family rules, GPTQ pack/unpack round trips, v1 vs v2 zeros, the writer through the
 * loader, the policy, and every refusal by name. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gguf.h"
#include "gptq_layout.h"
#include "model.h"
#include "quant.h"
#include "safetensors.h"
#include "testutil.h"

/* A deterministic qtensor: codes over the family's whole range, fp16 scales, zeros 0..2^bits - 1. */
static void make_q(rc_qtensor *t, const char *name, rc_qfamily fam, int bits, int64_t n, int64_t k, int64_t g,
                   unsigned seed)
{
    rc_err e = {0};
    assert_int_equal(rc_qtensor_alloc(t, name, fam, bits, n, k, g, fam == RC_QF_AFFINE, &e), RC_OK);
    const int lo = fam == RC_QF_SCALE ? -(1 << (bits - 1)) : 0, span = 1 << bits;
    for (int64_t i = 0; i < n * k; i++) {
        seed = seed * 1103515245u + 12345u;
        t->q[i] = (int8_t)(lo + (int)((seed >> 16) % (unsigned)span));
    }
    for (int64_t i = 0; i < n * (k / g); i++) {
        seed = seed * 1103515245u + 12345u;
        t->scale[i] = rc_f16_to_f32(rc_f32_to_f16(0.001f + (float)((seed >> 16) % 1000) * 1e-5f));
        if (t->zero)
            t->zero[i] = (int16_t)((seed >> 8) % (unsigned)span);
    }
    rc_qtensor_set_offsets(t);
}

/* The packed tensors as a loaded checkpoint's store holds them (I32 raw, scales fp16 -> fp32). */
static void add_packed(rc_tensors *st, const char *prefix, const rc_qtensor *t, const rc_gptq_packed *p)
{
    rc_err e = {0};
    char nm[256];
    const int64_t sw[2] = {p->rows_w, t->n}, sz[2] = {p->groups, p->cols_z}, ss[2] = {p->groups, t->n}, sg[1] = {t->k};
    const int32_t *src[3] = {p->qweight, p->qzeros, p->g_idx};
    const int64_t *shp[3] = {sw, sz, sg};
    const char *suf[3] = {"qweight", "qzeros", "g_idx"};
    for (int i = 0; i < 3; i++) {
        int64_t numel = shp[i][0] * (i == 2 ? 1 : shp[i][1]);
        float *d = malloc((size_t)numel * 4);
        memcpy(d, src[i], (size_t)numel * 4);
        snprintf(nm, sizeof nm, "%s.%s", prefix, suf[i]);
        assert_int_equal(rc_tensors_add(st, nm, i == 2 ? 1 : 2, shp[i], d, &e), RC_OK);
        st->t[st->n - 1].is_i32 = 1;
    }
    float *s = malloc((size_t)(p->groups * t->n) * sizeof *s);
    for (int64_t i = 0; i < p->groups * t->n; i++)
        s[i] = rc_f16_to_f32(p->scales[i]);
    snprintf(nm, sizeof nm, "%s.scales", prefix);
    assert_int_equal(rc_tensors_add(st, nm, 2, ss, s, &e), RC_OK);
}

/* The affine rule rounds s*q to fp32 before adding m: never an fma (which gives another answer here). */
static void test_rules_exact(void **state)
{
    (void)state;
    const float s = 0.1f, m = -0.3f;
    const int q = 3;
    const float sq = (float)((double)s * q); /* exact product, one rounding */
    const float two_step = (float)((double)sq + (double)m);
    assert_true(fmaf(s, (float)q, m) != two_step); /* these values tell the two apart */
    assert_true(rc_qf_affine(s, q, m) == two_step);
    assert_true(rc_qf_scale(s, -7) == (float)((double)s * -7));
    assert_true(rc_qf_affine(0.0123f, 9, rc_qf_offset(0.0123f, 9)) == 0.0f); /* q == z is exactly zero */
    rc_qtensor t;
    make_q(&t, "x.weight", RC_QF_AFFINE, 4, 4, 64, 32, 7);
    float *w = malloc(4 * 64 * sizeof *w);
    rc_qtensor_dequant(&t, w);
    for (int64_t i = 0; i < 4 * 64; i++) {
        const int64_t gi = (i / 64) * 2 + (i % 64) / 32;
        const float a = (float)((double)t.scale[gi] * t.q[i]);
        const float mm = -(float)((double)t.scale[gi] * t.zero[gi]);
        assert_true(w[i] == (float)((double)a + (double)mm));
    }
    free(w);
    rc_qtensor_free(&t);
}

/* pack -> store -> unpack gives the same codes, scales and zeros, for each scheme and both zero conventions. */
static void test_pack_round_trip(void **state)
{
    (void)state;
    static const struct { rc_qfamily fam; int bits; int64_t g; int v1; } cases[] = {
        {RC_QF_SCALE, 8, 0, 0}, {RC_QF_SCALE, 8, 0, 1}, {RC_QF_AFFINE, 4, 32, 0}, {RC_QF_AFFINE, 4, 32, 1},
        {RC_QF_AFFINE, 4, 64, 0}, {RC_QF_AFFINE, 4, 128, 0}, {RC_QF_SCALE, 4, 32, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const rc_quant_scheme s = {.family = cases[c].fam, .bits = cases[c].bits, .group = cases[c].g,
                                   .gptq_v1 = cases[c].v1};
        const int64_t N = 24, K = 256, g = s.group ? s.group : K;
        rc_qtensor t;
        make_q(&t, "model.layers.0.mlp.up_proj.weight", s.family, s.bits, N, K, g, 11u + (unsigned)c);
        for (int64_t i = 0; t.zero && i < N * (K / g); i++)
            if (s.gptq_v1 && t.zero[i] == 0) /* v1 cannot store z = 0 */
                t.zero[i] = 1;
        rc_qtensor_set_offsets(&t);
        rc_gptq_packed p;
        rc_err e = {0};
        if (rc_gptq_pack(&t, &s, &p, &e))
            fail_msg("case %zu: %s", c, e.msg);
        rc_tensors st = {0};
        add_packed(&st, "model.layers.0.mlp.up_proj", &t, &p);
        rc_quant q;
        if (rc_gptq_dequant_store(&st, &s, &q, "test", &e))
            fail_msg("case %zu: %s", c, e.msg);
        assert_int_equal(q.n, 1);
        const rc_qtensor *u = &q.t[0];
        assert_int_equal(u->family, t.family);
        assert_int_equal(u->group, g);
        assert_memory_equal(u->q, t.q, (size_t)(N * K));
        assert_memory_equal(u->scale, t.scale, (size_t)(N * (K / g)) * sizeof(float));
        if (t.zero)
            assert_memory_equal(u->zero, t.zero, (size_t)(N * (K / g)) * sizeof(int16_t));
        const rc_tensor *w = rc_tensors_find(&st, "model.layers.0.mlp.up_proj.weight");
        assert_non_null(w);
        assert_int_equal(st.n, 1);
        float *want = malloc((size_t)(N * K) * sizeof *want);
        rc_qtensor_dequant(&t, want);
        assert_memory_equal(w->data, want, (size_t)(N * K) * sizeof *want);
        free(want);
        rc_quant_free(&q);
        rc_tensors_free(&st);
        rc_gptq_packed_free(&p);
        rc_qtensor_free(&t);
    }
}

/* The same bytes read as v1 (stored z - 1) and as gptq_v2 (stored z): zeros one apart, and v1 refuses to write
 * z = 0. */
static void test_v1_v2_zeros(void **state)
{
    (void)state;
    rc_quant_scheme v2 = {.family = RC_QF_AFFINE, .bits = 4, .group = 32}, v1 = v2;
    v1.gptq_v1 = 1;
    rc_qtensor t;
    make_q(&t, "model.layers.0.self_attn.o_proj.weight", RC_QF_AFFINE, 4, 8, 64, 32, 3);
    for (int i = 0; i < 16; i++)
        t.zero[i] = (int16_t)(i % 15); /* 0 .. 14: stored + 1 stays within 4 bits */
    rc_qtensor_set_offsets(&t);
    rc_gptq_packed p;
    rc_err e = {0};
    assert_int_equal(rc_gptq_pack(&t, &v2, &p, &e), RC_OK);
    rc_quant a, b;
    rc_tensors s1 = {0}, s2 = {0};
    add_packed(&s1, "model.layers.0.self_attn.o_proj", &t, &p);
    add_packed(&s2, "model.layers.0.self_attn.o_proj", &t, &p);
    assert_int_equal(rc_gptq_dequant_store(&s1, &v2, &a, "v2", &e), RC_OK);
    assert_int_equal(rc_gptq_dequant_store(&s2, &v1, &b, "v1", &e), RC_OK);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(a.t[0].zero[i], t.zero[i]);
        assert_int_equal(b.t[0].zero[i], t.zero[i] + 1);
    }
    assert_memory_not_equal(s1.t[0].data, s2.t[0].data, 8 * 64 * sizeof(float));
    rc_gptq_packed_free(&p);
    assert_int_equal(rc_gptq_pack(&t, &v1, &p, &e), RC_E_RANGE); /* z = 0 has no v1 encoding */
    assert_non_null(strstr(e.msg, "gptq (v1: z - 1)"));
    rc_quant_free(&a);
    rc_quant_free(&b);
    rc_tensors_free(&s1);
    rc_tensors_free(&s2);
    rc_qtensor_free(&t);
}

/* The committed v1 golden reads as v1: every zero >= 1 (stored zero + 1). */
static void test_golden_v1(void **state)
{
    (void)state;
    rc_model m;
    rc_err e = {0};
    if (rc_model_load(&m, GOLDEN("llama_int4_g32.h5"), &e))
        fail_msg("%s", e.msg);
    assert_true(m.quant.on);
    assert_int_equal(m.quant.scheme.gptq_v1, 1);
    assert_int_equal(m.quant.n, 14);
    for (int i = 0; i < m.quant.n; i++)
        for (int64_t j = 0; j < m.quant.t[i].n * (m.quant.t[i].k / 32); j++)
            assert_true(m.quant.t[i].zero[j] >= 1);
    const rc_qtensor *q = rc_quant_find(&m.quant, "model.layers.1.mlp.down_proj.weight");
    assert_non_null(q);
    float *w = malloc((size_t)(q->n * q->k) * sizeof *w);
    rc_qtensor_dequant(q, w);
    assert_memory_equal(w, m.w.layers[1].down, (size_t)(q->n * q->k) * sizeof *w); /* the binding is the dequant */
    free(w);
    rc_model_free(&m);
}

/* The writer through the loader: the llama golden's matrices quantized (int4-g32 asym, v2) and written as a GPTQ
 * folder load back with the same codes, the policy's tensors in full precision, and fp32 weights equal to the
 * dequant. */
static void test_write_then_load(void **state)
{
    (void)state;
    rc_golden g;
    rc_model src, m;
    rc_err e = {0};
    assert_int_equal(rc_golden_load(GOLDEN("llama.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    char *cfg = strdup(g.config_json);
    assert_int_equal(rc_model_from_golden(&src, &g, &e), RC_OK);
    rc_golden_free(&g);
    rc_quant_scheme s;
    assert_int_equal(rc_quant_scheme_parse("int4-g32", &s, &e), RC_OK);
    rc_qtensor q[32];
    rc_tensors full = {0};
    int nq = 0;
    for (int i = 0; i < src.store.n; i++) {
        const rc_tensor *t = &src.store.t[i];
        if (!rc_quant_policy_quantizes(t->name, &s)) {
            float *d = malloc((size_t)t->numel * sizeof *d);
            memcpy(d, t->data, (size_t)t->numel * sizeof *d);
            assert_int_equal(rc_tensors_add(&full, t->name, t->ndim, t->shape, d, &e), RC_OK);
            continue;
        }
        make_q(&q[nq], t->name, RC_QF_AFFINE, 4, t->shape[0], t->shape[1], 32, (unsigned)i);
        nq++;
    }
    assert_int_equal(nq, 14);
    char *dir = tu_tmpdir();
    if (rc_gptq_write(dir, cfg, &s, &full, q, nq, &e))
        fail_msg("%s", e.msg);
    if (rc_model_load(&m, dir, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(m.quant.n, nq);
    assert_int_equal(m.quant.scheme.gptq_v1, 0);
    for (int i = 0; i < nq; i++) {
        const rc_qtensor *u = rc_quant_find(&m.quant, q[i].name);
        assert_non_null(u);
        assert_memory_equal(u->q, q[i].q, (size_t)(u->n * u->k));
        assert_memory_equal(u->zero, q[i].zero, (size_t)(u->n * (u->k / 32)) * sizeof(int16_t));
        float *w = malloc((size_t)(u->n * u->k) * sizeof *w);
        rc_qtensor_dequant(&q[i], w);
        assert_memory_equal(rc_tensors_find(&m.store, q[i].name)->data, w, (size_t)(u->n * u->k) * sizeof *w);
        free(w);
    }
    assert_memory_equal(m.w.embed, src.w.embed, (size_t)(m.cfg.vocab * m.cfg.hidden) * sizeof(float));
    assert_memory_equal(m.w.layers[0].attn_norm, src.w.layers[0].attn_norm, (size_t)m.cfg.hidden * sizeof(float));
    /* a scale that is not an fp16 value is refused: the layout could not store it */
    q[0].scale[0] = 0.1f;
    assert_int_equal(rc_gptq_write(dir, cfg, &s, &full, q, nq, &e), RC_E_RANGE);
    assert_non_null(strstr(e.msg, "not an fp16 value"));
    rc_model_free(&m);
    rc_model_free(&src);
    for (int i = 0; i < nq; i++)
        rc_qtensor_free(&q[i]);
    rc_tensors_free(&full);
    free(cfg);
    tu_rmdir(dir);
}

static void expect_cfg(const char *json, int code, const char *needle)
{
    rc_quant_scheme s;
    int found;
    rc_err e = {0};
    int rc = rc_gptq_config_parse(json, "config.json", &s, &found, &e);
    if (rc != code || (needle && !strstr(e.msg, needle)))
        fail_msg("'%s': got %s '%s', want %s naming '%s'", json, rc_code_name(rc), e.msg, rc_code_name(code),
                 needle ? needle : "");
}

static void test_config_refusals(void **state)
{
    (void)state;
    rc_quant_scheme s;
    int found;
    rc_err e = {0};
    assert_int_equal(rc_gptq_config_parse("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, "
                                          "\"group_size\": 128, \"desc_act\": false, \"sym\": false}}",
                                          "c", &s, &found, &e), RC_OK);
    assert_true(found && s.family == RC_QF_AFFINE && s.bits == 4 && s.group == 128 && s.gptq_v1); /* v1 default */
    assert_int_equal(rc_gptq_config_parse("{\"bits\": 8, \"group_size\": -1, \"sym\": true, \"checkpoint_format\": "
                                          "\"gptq_v2\"}", "quantize_config.json", &s, &found, &e), RC_OK);
    assert_true(found && s.family == RC_QF_SCALE && s.bits == 8 && s.group == 0 && !s.gptq_v1);
    assert_int_equal(rc_gptq_config_parse("{\"model_type\": \"llama\"}", "c", &s, &found, &e), RC_OK);
    assert_false(found);
    assert_int_equal(rc_gptq_config_parse("{\"quantization_config\": {\"quant_method\": \"gguf\"}}", "c", &s, &found,
                                          &e), RC_OK);
    assert_false(found);
#define QC(body) "{\"quantization_config\": {\"quant_method\": \"gptq\", " body "}}"
    expect_cfg(QC("\"bits\": 4, \"group_size\": 128, \"desc_act\": true"), RC_E_UNSUPPORTED, "desc_act (act-order)");
    expect_cfg(QC("\"bits\": 3, \"group_size\": 128"), RC_E_UNSUPPORTED, "bits 3 is not supported");
    expect_cfg(QC("\"bits\": 2, \"group_size\": 128"), RC_E_UNSUPPORTED, "bits 2");
    expect_cfg(QC("\"bits\": 8, \"group_size\": 128, \"sym\": false"), RC_E_UNSUPPORTED, "asymmetric int8");
    expect_cfg(QC("\"bits\": 4, \"group_size\": 0"), RC_E_UNSUPPORTED, "group_size");
    expect_cfg(QC("\"bits\": 4, \"group_size\": 128, \"checkpoint_format\": \"marlin\""), RC_E_UNSUPPORTED,
               "checkpoint_format \"marlin\"");
    expect_cfg(QC("\"bits\": 4, \"group_size\": 128, \"pack_dtype\": \"int16\""), RC_E_UNSUPPORTED, "pack_dtype");
    expect_cfg("{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4}}", RC_E_UNSUPPORTED, "\"awq\"");
    expect_cfg("{\"quantization_config\": 3}", RC_E_FORMAT, "not an object");
#undef QC
}

/* A store the scheme does not describe: refused by name. */
static void expect_store(rc_tensors *st, const rc_quant_scheme *s, int code, const char *needle)
{
    rc_quant q;
    rc_err e = {0};
    int rc = rc_gptq_dequant_store(st, s, &q, "ckpt", &e);
    if (rc != code || !strstr(e.msg, needle))
        fail_msg("got %s '%s', want %s naming '%s'", rc_code_name(rc), e.msg, rc_code_name(code), needle);
    rc_tensors_free(st);
}

static void packed_store(rc_tensors *st, const char *prefix, rc_qfamily fam, int bits, int64_t n, int64_t k,
                         int64_t g, rc_qtensor *t, rc_gptq_packed *p)
{
    const rc_quant_scheme s = {.family = fam, .bits = bits, .group = g};
    rc_err e = {0};
    char nm[256];
    snprintf(nm, sizeof nm, "%s.weight", prefix);
    make_q(t, nm, fam, bits, n, k, g, 5);
    assert_int_equal(rc_gptq_pack(t, &s, p, &e), RC_OK);
    memset(st, 0, sizeof *st);
    add_packed(st, prefix, t, p);
}

static void test_store_refusals(void **state)
{
    (void)state;
    const rc_quant_scheme a32 = {.family = RC_QF_AFFINE, .bits = 4, .group = 32};
    rc_tensors st;
    rc_qtensor t;
    rc_gptq_packed p;
    /* act-order: g_idx not k / g */
    packed_store(&st, "model.layers.0.mlp.up_proj", RC_QF_AFFINE, 4, 16, 64, 32, &t, &p);
    const int32_t gi = 1; /* column 3 claimed by group 1 */
    memcpy(&rc_tensors_find(&st, "model.layers.0.mlp.up_proj.g_idx")->data[3], &gi, 4);
    expect_store(&st, &a32, RC_E_UNSUPPORTED, "act-order");
    rc_gptq_packed_free(&p);
    rc_qtensor_free(&t);
    /* a group size that does not divide K */
    packed_store(&st, "model.layers.0.mlp.up_proj", RC_QF_AFFINE, 4, 16, 64, 32, &t, &p);
    const rc_quant_scheme a48 = {.family = RC_QF_AFFINE, .bits = 4, .group = 48};
    expect_store(&st, &a48, RC_E_UNSUPPORTED, "group_size 48 does not divide the 64 input columns");
    rc_gptq_packed_free(&p);
    rc_qtensor_free(&t);
    /* bits in the config differ from the layout: shapes disagree */
    packed_store(&st, "model.layers.0.mlp.up_proj", RC_QF_AFFINE, 4, 16, 64, 32, &t, &p);
    const rc_quant_scheme s8 = {.family = RC_QF_SCALE, .bits = 8, .group = 32};
    expect_store(&st, &s8, RC_E_SHAPE, "qzeros' has shape");
    rc_gptq_packed_free(&p);
    rc_qtensor_free(&t);
    /* symmetric scheme over asymmetric zeros */
    packed_store(&st, "model.layers.0.mlp.up_proj", RC_QF_AFFINE, 4, 16, 64, 32, &t, &p);
    const rc_quant_scheme s4 = {.family = RC_QF_SCALE, .bits = 4, .group = 32};
    expect_store(&st, &s4, RC_E_FORMAT, "is symmetric (sym true) but row");
    rc_gptq_packed_free(&p);
    rc_qtensor_free(&t);
    /* a norm quantized: the policy keeps it in full precision */
    packed_store(&st, "model.layers.0.input_layernorm", RC_QF_AFFINE, 4, 16, 64, 32, &t, &p);
    expect_store(&st, &a32, RC_E_UNSUPPORTED, "stays in full precision");
    rc_gptq_packed_free(&p);
    rc_qtensor_free(&t);
    /* a missing part */
    packed_store(&st, "model.layers.0.mlp.up_proj", RC_QF_AFFINE, 4, 16, 64, 32, &t, &p);
    free(st.t[3].name);
    st.t[3].name = strdup("model.layers.0.mlp.up_proj.scalez");
    rc_err e = {0};
    assert_int_equal(rc_tensors_reindex(&st, &e), RC_OK);
    expect_store(&st, &a32, RC_E_MISSING, "up_proj.scales' is missing");
    rc_gptq_packed_free(&p);
    rc_qtensor_free(&t);
    /* no quantized tensor at all */
    memset(&st, 0, sizeof st);
    expect_store(&st, &a32, RC_E_MISSING, "no tensor is named");
    /* packed int32 tensors without a GPTQ config reach the binding, which refuses them by name */
    rc_golden g;
    rc_model m;
    assert_int_equal(rc_golden_load(GOLDEN("llama.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    g.weights.t[0].is_i32 = 1;
    assert_int_equal(rc_model_from_golden(&m, &g, &e), RC_E_FORMAT);
    assert_non_null(strstr(e.msg, "holds int32 values"));
    rc_golden_free(&g);
}

static void test_schemes_and_policy(void **state)
{
    (void)state;
    rc_quant_scheme s;
    rc_err e = {0};
    char buf[96];
    assert_int_equal(rc_quant_scheme_parse("int8", &s, &e), RC_OK);
    assert_true(s.family == RC_QF_SCALE && s.bits == 8 && s.group == 0);
    assert_int_equal(rc_quant_scheme_parse("int4-g128", &s, &e), RC_OK);
    assert_true(s.family == RC_QF_AFFINE && s.bits == 4 && s.group == 128);
    assert_string_equal(rc_quant_scheme_str(&s, buf, sizeof buf), "int4-g128 (per group, asymmetric)");
    assert_int_equal(rc_quant_scheme_parse("int4-g64-sym", &s, &e), RC_OK);
    assert_true(s.family == RC_QF_SCALE && s.group == 64);
    assert_int_equal(rc_quant_scheme_parse("int4-g48", &s, &e), RC_E_USAGE);
    assert_int_equal(rc_quant_scheme_parse("int4-g128-symx", &s, &e), RC_E_USAGE);
    assert_false(s.lm_head);
    assert_int_equal(rc_quant_scheme_parse("int4-g128-sym+lm_head", &s, &e), RC_OK);
    assert_true(s.family == RC_QF_SCALE && s.bits == 4 && s.group == 128 && s.lm_head);
    assert_string_equal(rc_quant_scheme_str(&s, buf, sizeof buf), "int4-g128-sym (per group, symmetric, lm_head quantized)");
    assert_int_equal(rc_quant_scheme_parse("int8+lm_head", &s, &e), RC_OK);
    assert_true(s.bits == 8 && s.lm_head);
    assert_int_equal(rc_quant_scheme_parse("+lm_head", &s, &e), RC_E_USAGE);
    assert_int_equal(rc_quant_scheme_parse("int8+lm_head+lm_head", &s, &e), RC_E_USAGE);
    assert_int_equal(rc_quant_scheme_parse("int8+lm_headx", &s, &e), RC_E_USAGE);
    assert_false(s.lm_head);
    const char *why;
    assert_int_equal(rc_quant_policy("model.layers.3.self_attn.q_proj.weight", &why), RC_QP_QUANT);
    assert_int_equal(rc_quant_policy("model.layers.3.self_attn.q_proj.bias", &why), RC_QP_FULL);
    assert_int_equal(rc_quant_policy("model.layers.0.linear_attn.A_log", &why), RC_QP_FULL);
    assert_int_equal(rc_quant_policy("model.layers.0.linear_attn.in_proj_a.weight", &why), RC_QP_KEEP);
    assert_int_equal(rc_quant_policy("model.layers.0.linear_attn.in_proj_qkv.weight", &why), RC_QP_QUANT);
    assert_int_equal(rc_quant_policy("model.layers.0.self_attn.k_norm.weight", &why), RC_QP_FULL);
    assert_int_equal(rc_quant_policy("model.embed_tokens.weight", &why), RC_QP_KEEP);
    assert_int_equal(rc_quant_policy("lm_head.weight", &why), RC_QP_LM_HEAD);
    assert_false(rc_quant_policy_quantizes("lm_head.weight", &s));
    s.lm_head = 1;
    assert_true(rc_quant_policy_quantizes("lm_head.weight", &s));
    /* f32 -> f16 rounding: nearest even, subnormals, overflow */
    assert_int_equal(rc_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(rc_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(rc_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(rc_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
    assert_int_equal(rc_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);           /* tie -> even (0) */
    assert_int_equal(rc_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);    /* tie -> even */
    assert_int_equal(rc_f32_to_f16(1.0f + ldexpf(3.0f, -11)), 0x3c02);    /* tie -> even (up) */
    assert_int_equal(rc_f32_to_f16(-2.0f), 0xc000);
    for (uint32_t h = 0; h < 0x7c00; h++) /* every finite half round-trips */
        assert_int_equal(rc_f32_to_f16(rc_f16_to_f32((uint16_t)h)), h);
}

#ifndef RC_TEST_GGUF_DIR
#define RC_TEST_GGUF_DIR "tests/gguf"
#endif

/* GGUF's quantized blocks as the families: Q8_0 and Q4_0 scale, Q4_1 affine; the qtensor dequantizes to the
 * bytes the reader (itself bit-exact against the gguf package) gives. */
static void test_gguf_families(void **state)
{
    (void)state;
    static const struct { const char *name; rc_qfamily fam; int bits; } cases[] = {
        {"q8_0", RC_QF_SCALE, 8}, {"q4_0", RC_QF_SCALE, 4}, {"q4_1", RC_QF_AFFINE, 4}};
    rc_gguf g;
    rc_err e = {0};
    assert_int_equal(rc_gguf_open(&g, RC_TEST_GGUF_DIR "/dequant.gguf", &e), RC_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const rc_gguf_tensor *t = rc_gguf_find_tensor(&g, cases[i].name);
        assert_non_null(t);
        rc_qtensor q;
        float *want, *got = malloc((size_t)t->numel * sizeof *got);
        assert_int_equal(rc_gguf_tensor_qtensor(t, cases[i].name, &q, &e), RC_OK);
        assert_int_equal(q.family, cases[i].fam);
        assert_int_equal(q.bits, cases[i].bits);
        assert_int_equal(q.group, 32);
        assert_int_equal(q.n * q.k, t->numel);
        assert_int_equal(rc_qtensor_check(&q, &e), RC_OK);
        assert_int_equal(rc_gguf_tensor_f32(&g, t, &want, &e), RC_OK);
        rc_qtensor_dequant(&q, got);
        assert_memory_equal(got, want, (size_t)t->numel * sizeof *got);
        free(got);
        free(want);
        rc_qtensor_free(&q);
    }
    assert_int_equal(rc_gguf_tensor_qtensor(rc_gguf_find_tensor(&g, "f16"), "f16", &(rc_qtensor){0}, &e),
                     RC_E_UNSUPPORTED);
    rc_gguf_close(&g);
    /* a GGUF model keeps its quantized matrices, q/k rows un-permuted like the fp32 copies the stages bind */
    rc_model m;
    if (rc_model_load(&m, RC_TEST_GGUF_DIR "/tiny_llama.gguf", &e))
        fail_msg("%s", e.msg);
    assert_true(m.quant.on);
    int qk = 0;
    for (int i = 0; i < m.quant.n; i++) {
        const rc_qtensor *q = &m.quant.t[i];
        const rc_tensor *t = rc_tensors_find(&m.store, q->name);
        assert_non_null(t);
        float *w = malloc((size_t)t->numel * sizeof *w);
        rc_qtensor_dequant(q, w);
        assert_memory_equal(w, t->data, (size_t)t->numel * sizeof *w);
        free(w);
        qk += strstr(q->name, "q_proj") || strstr(q->name, "k_proj");
    }
    assert_true(m.quant.n >= 8 && qk >= 2);
    rc_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_exact),     cmocka_unit_test(test_pack_round_trip),
        cmocka_unit_test(test_v1_v2_zeros),     cmocka_unit_test(test_golden_v1),
        cmocka_unit_test(test_write_then_load), cmocka_unit_test(test_config_refusals),
        cmocka_unit_test(test_store_refusals),  cmocka_unit_test(test_schemes_and_policy),
        cmocka_unit_test(test_gguf_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
