/* ref/forward64.c (the noise floor's double forward) on every bundled golden's prompt: it runs every
 * architecture ref runs, emits exactly ref's probes (names, shapes, order), sits within fp32 noise of ref,
 * returns the logits it reports, and its two gated delta net forms (chunked, recurrent) agree to double
 * rounding.
 *
 * Metric: scaled = max|a - b| / max(1, max|b|), b the double result. ref vs double measures 1.7e-5 (qwen3_5),
 * 4.9e-6 (qwen3_5_short, gemma4), <= 3.9e-7 (llama, qwen3): fp32 noise amplified through random tiny stacks
 * (HF itself is 1.5e-5 from the double forward on qwen3_5's final_norm); a wrong op lands at >= 1e-3.
 * The chunked and recurrent forms are the same map and measure <= 2.4e-14 in double; fp32 noise would be
 * ~1e-7. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "forward64.h"
#include "rope.h"
#include "golden.h"
#include "testutil.h"

#define REF_BOUND 1e-4   /* ref (fp32) vs double, scaled */
#define FORMS_BOUND 1e-12 /* chunked vs recurrent, both double, scaled */
#define MAX_PROBES 512

typedef struct probe64 {
    char name[64];
    int ndim;
    int64_t shape[3];
    int64_t n;
    double *data;
} probe64;

typedef struct probes64 {
    probe64 p[MAX_PROBES];
    int n;
} probes64;

static int64_t numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

static probe64 *add(probes64 *s, const char *name, int ndim, const int64_t *shape)
{
    assert_true(s->n < MAX_PROBES && ndim <= 3);
    probe64 *p = &s->p[s->n++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    p->n = numel(ndim, shape);
    p->data = calloc((size_t)(p->n ? p->n : 1), sizeof *p->data);
    assert_non_null(p->data);
    return p;
}

static int emit64(void *user, const char *name, const double *data, int ndim, const int64_t *shape)
{
    probe64 *p = add(user, name, ndim, shape);
    memcpy(p->data, data, (size_t)p->n * sizeof *data);
    return RC_OK;
}

static int emit32(void *user, const char *name, const float *data, int ndim, const int64_t *shape)
{
    probe64 *p = add(user, name, ndim, shape);
    for (int64_t i = 0; i < p->n; i++)
        p->data[i] = data[i];
    return RC_OK;
}

static void probes_free(probes64 *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->p[i].data);
    s->n = 0;
}

static double scaled(const double *a, const double *b, int64_t n)
{
    double d = 0.0, mag = 1.0;
    for (int64_t i = 0; i < n; i++) {
        const double diff = fabs(a[i] - b[i]);
        if (isnan(diff))
            return INFINITY;
        if (diff > d)
            d = diff;
        if (fabs(b[i]) > mag)
            mag = fabs(b[i]);
    }
    return d / mag;
}

/* Same probes, same order, same shapes; every probe of a within bound of b's. Returns the worst. */
static double expect_same(const char *what, const probes64 *a, const probes64 *b, double bound)
{
    double worst = 0.0;
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        const probe64 *x = &a->p[i], *y = &b->p[i];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->ndim, y->ndim);
        for (int d = 0; d < x->ndim; d++)
            assert_int_equal(x->shape[d], y->shape[d]);
        double s = scaled(x->data, y->data, x->n);
        if (s > bound)
            fprintf(stderr, "  %s: %s scaled %.3e > %.0e\n", what, x->name, s, bound);
        assert_true(s <= bound);
        if (s > worst)
            worst = s;
    }
    if (getenv("RC_TEST_VERBOSE"))
        fprintf(stderr, "  %-36s %3d probes, worst scaled %.3e\n", what, a->n, worst);
    return worst;
}

static void check_golden(const char *path, int has_gdn)
{
    rc_err e = {0};
    rc_golden g;
    rc_model m;
    assert_int_equal(rc_golden_load(path, RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    assert_int_equal(rc_model_from_golden(&m, &g, &e), RC_OK);
    assert_int_equal(ref64_check(&m, &e), RC_OK);
    const int64_t T = g.n_ids, V = m.cfg.vocab;

    probes64 *ref = calloc(1, sizeof *ref), *dbl = calloc(1, sizeof *dbl), *rec = calloc(1, sizeof *rec);
    double *logits = calloc((size_t)(T * V), sizeof *logits);
    assert_true(ref && dbl && rec && logits);
    rc_probe_sink s32 = {.emit = emit32, .want = NULL, .user = ref};
    ref64_sink s64 = {.emit = emit64, .want = NULL, .user = dbl};
    assert_int_equal(ref_forward(&m, g.ids, T, NULL, &s32, &e), RC_OK);
    assert_int_equal(ref64_forward(&m, g.ids, T, logits, &s64, &e), RC_OK);
    char what[128];
    snprintf(what, sizeof what, "%s ref vs double", path + strlen(RC_TEST_GOLDEN_DIR) + 1);
    expect_same(what, ref, dbl, REF_BOUND);
    /* RoPE from the model's fp32 inverse frequencies and fp32 angles, as HF and ref form them: inv_freq
     * identical, cos/sin within one rounding of ref's fp32 values (exact angles would be off by 1.8e-7); two
     * roundings where yarn's attention factor multiplies them (fp32 cos, then the fp32 product) */
    int scaled_rope = 0;
    for (int r = 0; r < m.cfg.n_ropes; r++)
        scaled_rope |= rc_rope_attn_factor(&m.cfg.ropes[r]) != 1.0f;
    for (int i = 0; i < dbl->n; i++)
        if (!strncmp(dbl->p[i].name, "rope.", 5)) {
            double s = scaled(ref->p[i].data, dbl->p[i].data, dbl->p[i].n);
            assert_true(strstr(dbl->p[i].name, "inv_freq") ? s == 0.0 : s <= (scaled_rope ? 0x1p-23 : 0x1p-24));
        }
    const probe64 *lp = &dbl->p[dbl->n - 1];
    assert_string_equal(lp->name, "logits");
    assert_memory_equal(lp->data, logits, (size_t)(T * V) * sizeof *logits);

    /* the recurrent form: the same probes; without a gated delta net layer, bit-identical */
    const ref_opts ro = {.gdn_recurrent = 1};
    s64.user = rec;
    assert_int_equal(ref64_forward_ex(&m, g.ids, T, NULL, &s64, &ro, &e), RC_OK);
    snprintf(what, sizeof what, "%s chunked vs recurrent", path + strlen(RC_TEST_GOLDEN_DIR) + 1);
    double w = expect_same(what, dbl, rec, has_gdn ? FORMS_BOUND : 0.0);
    if (has_gdn)
        assert_true(w > 0.0); /* two algorithms, not one run twice */

    probes_free(ref);
    probes_free(dbl);
    probes_free(rec);
    free(ref);
    free(dbl);
    free(rec);
    free(logits);
    rc_model_free(&m);
    rc_golden_free(&g);
}

static void test_llama(void **state) { (void)state; check_golden(GOLDEN("llama.h5"), 0); }
static void test_llama_bias(void **state) { (void)state; check_golden(GOLDEN("llama_bias.h5"), 0); }
static void test_qwen3(void **state) { (void)state; check_golden(GOLDEN("qwen3.h5"), 0); }
static void test_qwen3_5(void **state) { (void)state; check_golden(GOLDEN("qwen3_5.h5"), 1); }
static void test_qwen3_5_short(void **state) { (void)state; check_golden(GOLDEN("qwen3_5_short.h5"), 1); }
static void test_gemma4(void **state) { (void)state; check_golden(GOLDEN("gemma4.h5"), 0); }
static void test_rope_llama3(void **state) { (void)state; check_golden(GOLDEN("llama_rope_llama3.h5"), 0); }
static void test_rope_linear(void **state) { (void)state; check_golden(GOLDEN("llama_rope_linear.h5"), 0); }
static void test_rope_yarn(void **state) { (void)state; check_golden(GOLDEN("qwen3_rope_yarn.h5"), 0); }
static void test_mistral(void **state) { (void)state; check_golden(GOLDEN("mistral.h5"), 0); }

/* a sink that stops the forward: the error names the consumer */
static int stop64(void *user, const char *name, const double *data, int ndim, const int64_t *shape)
{
    (void)user; (void)data; (void)ndim; (void)shape;
    return strcmp(name, "L0.mid") ? RC_OK : RC_E_USAGE;
}

static void test_stopped_and_bad_input(void **state)
{
    (void)state;
    rc_err e = {0};
    rc_golden g;
    rc_model m;
    assert_int_equal(rc_golden_load(GOLDEN("qwen3_5_short.h5"), RC_GOLDEN_WEIGHTS, &g, &e), RC_OK);
    assert_int_equal(rc_model_from_golden(&m, &g, &e), RC_OK);
    ref64_sink s = {.emit = stop64, .want = NULL, .user = NULL};
    assert_int_equal(ref64_forward(&m, g.ids, g.n_ids, NULL, &s, &e), RC_E_USAGE);
    assert_non_null(strstr(e.msg, "probe consumer stopped"));
    assert_int_equal(ref64_forward(&m, g.ids, 0, NULL, NULL, &e), RC_E_USAGE);
    int32_t bad = (int32_t)m.cfg.vocab;
    assert_int_not_equal(ref64_forward(&m, &bad, 1, NULL, NULL, &e), RC_OK);
    rc_model_free(&m);
    rc_golden_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_llama_bias),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_qwen3_5),
        cmocka_unit_test(test_qwen3_5_short),
        cmocka_unit_test(test_rope_llama3),
        cmocka_unit_test(test_rope_linear),
        cmocka_unit_test(test_rope_yarn),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_gemma4),
        cmocka_unit_test(test_stopped_and_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
