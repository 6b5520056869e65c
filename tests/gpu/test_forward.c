/* GPU suite: cuda_fwd against ref_forward on each golden given: the same probes (names, shapes, data-flow order),
 * values within 1e-5 scaled max-abs, probe filtering, a stopping sink, prefixes and bad input. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_forward.h"
#include "forward.h"
#include "gpu_skip.h"

#define TOL 1e-5 /* scaled max-abs = max|a - b| / max(1, max|ref|), as harness compare */

typedef struct fixture {
    const char *path;
    rc_golden g;
    rc_model m;
    cuda_fwd *f;
} fixture;

static const char *current_path;

/* ---- a sink that records every probe in order; optional filter and stop point ---- */
typedef struct recorder {
    rc_tensors got;
    const char *only[2];   /* want() accepts just these when only[0] is set */
    const char *stop_at;   /* emit() returns RC_E_RANGE here */
    rc_err e;
} recorder;

static int rec_want(void *user, const char *name)
{
    recorder *r = user;
    return !r->only[0] || !strcmp(name, r->only[0]) || (r->only[1] && !strcmp(name, r->only[1]));
}

static int rec_emit(void *user, const char *name, const float *data, int ndim, const int64_t *shape)
{
    recorder *r = user;
    if (r->stop_at && !strcmp(name, r->stop_at))
        return RC_E_RANGE;
    int64_t n;
    if (!rc_numel(ndim, shape, &n))
        return RC_E_RANGE;
    float *copy = rc_calloc(n ? n : 1, sizeof *copy, &r->e, name);
    if (!copy)
        return r->e.code;
    memcpy(copy, data, (size_t)n * sizeof *copy);
    return rc_tensors_add(&r->got, name, ndim, shape, copy, &r->e);
}

static double scaled_max_abs(const float *a, const float *b, int64_t n)
{
    double d = 0.0, mx = 1.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        d = fmax(d, fabs((double)a[i] - b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    return d / mx;
}

/* Both sequences hold the same probes in the same order with the same shapes, values within TOL. */
static int same_probes(const rc_tensors *got, const rc_tensors *want)
{
    int bad = 0;
    if (got->n != want->n) {
        printf("  cuda reported %d probes, ref %d\n", got->n, want->n);
        bad++;
    }
    for (int i = 0; i < got->n && i < want->n; i++) {
        const rc_tensor *a = &got->t[i], *b = &want->t[i];
        char sa[48], sb[48];
        rc_shape_str(a->ndim, a->shape, sa, sizeof sa);
        rc_shape_str(b->ndim, b->shape, sb, sizeof sb);
        if (strcmp(a->name, b->name) || strcmp(sa, sb)) {
            printf("  probe %d: cuda %s %s, ref %s %s\n", i, a->name, sa, b->name, sb);
            bad++;
            continue;
        }
        double s = scaled_max_abs(a->data, b->data, a->numel);
        if (!(s <= TOL)) {
            printf("  probe %s: scaled max-abs %.3e > %.1e\n", a->name, s, TOL);
            bad++;
        }
    }
    return bad;
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    rc_err e = {0};
    if (!fx)
        return -1;
    fx->path = current_path;
    if (rc_golden_load(fx->path, RC_GOLDEN_ALL, &fx->g, &e) || rc_model_from_golden(&fx->m, &fx->g, &e) ||
        cuda_fwd_open(&fx->f, &fx->m, 0, &e)) {
        fprintf(stderr, "%s: %s\n", fx->path, e.msg);
        return -1;
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    if (!fx)
        return 0;
    cuda_fwd_close(fx->f);
    rc_model_free(&fx->m);
    rc_golden_free(&fx->g);
    free(fx);
    return 0;
}

/* ---- every probe, as ref reports it ---- */
static void test_probes_match_ref(void **state)
{
    fixture *fx = *state;
    const int64_t T = fx->g.n_ids, V = fx->m.cfg.vocab;
    recorder rr = {0}, rg = {0};
    rc_probe_sink sr = {rec_emit, NULL, &rr}, sg = {rec_emit, NULL, &rg};
    float *lr = calloc((size_t)(T * V), sizeof *lr), *lg = calloc((size_t)(T * V), sizeof *lg);
    rc_err e = {0};
    assert_non_null(lr);
    assert_non_null(lg);
    assert_int_equal(ref_forward(&fx->m, fx->g.ids, T, lr, &sr, &e), RC_OK);
    if (cuda_fwd_forward(fx->f, fx->g.ids, T, lg, &sg, &e))
        fail_msg("%s", e.msg);
    printf("  %s: %d probes from ref, %d from cuda\n", fx->path, rr.got.n, rg.got.n);
    assert_int_equal(same_probes(&rg.got, &rr.got), 0);
    const rc_tensor *lp = rc_tensors_find(&rg.got, "logits");
    assert_non_null(lp);
    assert_memory_equal(lp->data, lg, (size_t)(T * V) * sizeof *lg);
    assert_true(scaled_max_abs(lg, lr, T * V) <= TOL);
    rc_tensors_free(&rr.got);
    rc_tensors_free(&rg.got);
    free(lr);
    free(lg);
}

/* ---- the sink's want() decides what is copied back; logits without probes ---- */
static void test_filter_and_logits_only(void **state)
{
    fixture *fx = *state;
    const int64_t T = fx->g.n_ids, V = fx->m.cfg.vocab;
    recorder r = {.only = {"L0.mlp.act", "logits"}};
    rc_probe_sink s = {rec_emit, rec_want, &r};
    rc_err e = {0};
    if (cuda_fwd_forward(fx->f, fx->g.ids, T, NULL, &s, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(r.got.n, 2);
    assert_string_equal(r.got.t[0].name, "L0.mlp.act");
    assert_string_equal(r.got.t[1].name, "logits");
    float *lg = calloc((size_t)(T * V), sizeof *lg);
    assert_non_null(lg);
    if (cuda_fwd_forward(fx->f, fx->g.ids, T, lg, NULL, &e))
        fail_msg("%s", e.msg);
    assert_memory_equal(r.got.t[1].data, lg, (size_t)(T * V) * sizeof *lg);
    rc_tensors_free(&r.got);
    free(lg);
}

/* ---- shorter prompts (the harness's greedy check reruns growing prefixes on one handle) ---- */
static void test_prefixes(void **state)
{
    fixture *fx = *state;
    const int64_t V = fx->m.cfg.vocab;
    for (int64_t T = 1; T <= fx->g.n_ids; T += (T < 4 ? 1 : 7)) {
        float *lr = calloc((size_t)(T * V), sizeof *lr), *lg = calloc((size_t)(T * V), sizeof *lg);
        rc_err e = {0};
        assert_non_null(lr);
        assert_non_null(lg);
        assert_int_equal(ref_forward(&fx->m, fx->g.ids, T, lr, NULL, &e), RC_OK);
        if (cuda_fwd_forward(fx->f, fx->g.ids, T, lg, NULL, &e))
            fail_msg("%s", e.msg);
        double s = scaled_max_abs(lg, lr, T * V);
        printf("  T=%lld logits scaled max-abs %.3e\n", (long long)T, s);
        assert_true(s <= TOL);
        free(lr);
        free(lg);
    }
}

/* ---- errors: a sink that stops, bad ids, an empty prompt; the handle stays usable ---- */
static void test_errors(void **state)
{
    fixture *fx = *state;
    const int64_t T = fx->g.n_ids;
    recorder r = {.stop_at = "L0.mlp_norm"};
    rc_probe_sink s = {rec_emit, NULL, &r};
    rc_err e = {0};
    assert_int_equal(cuda_fwd_forward(fx->f, fx->g.ids, T, NULL, &s, &e), RC_E_RANGE);
    printf("  stopping sink: %s\n", e.msg);
    assert_non_null(strstr(e.msg, "probe consumer stopped"));
    assert_string_equal(r.got.t[r.got.n - 1].name, "L0.mid");
    rc_tensors_free(&r.got);

    int32_t *ids = malloc((size_t)T * sizeof *ids);
    assert_non_null(ids);
    memcpy(ids, fx->g.ids, (size_t)T * sizeof *ids);
    ids[T - 1] = (int32_t)fx->m.cfg.vocab;
    assert_int_equal(cuda_fwd_forward(fx->f, ids, T, NULL, NULL, &e), RC_E_RANGE);
    printf("  bad id: %s\n", e.msg);
    assert_int_equal(cuda_fwd_forward(fx->f, ids, 0, NULL, NULL, &e), RC_E_USAGE);
    free(ids);
    assert_int_equal(cuda_fwd_forward(fx->f, fx->g.ids, T, NULL, NULL, &e), RC_OK);
}

int main(int argc, char **argv)
{
    gpu_skip_unless_present("cuda.forward");
    if (argc < 2) {
        fprintf(stderr, "usage: test_cuda_forward GOLDEN.h5...\n");
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probes_match_ref),
        cmocka_unit_test(test_filter_and_logits_only),
        cmocka_unit_test(test_prefixes),
        cmocka_unit_test(test_errors),
    };
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        current_path = argv[i];
        failed += cmocka_run_group_tests_name(argv[i], tests, setup, teardown);
    }
    return failed ? 1 : 0;
}
