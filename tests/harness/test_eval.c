/* Unit tests of the shared evaluation (harness/eval.c) with fake stages: near-tie token checks at the stage's
 * precision, the noise-floor rule, each verdict class (pass, precision, link, bad input), the exact reference,
 * NaN/Inf first, and where the first divergence sits (layer, op, token, step). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "compare.h"

/* ---- the fake stage: one probe L0.attn.ctx [2, 2] and logits rows chosen per test ---- */
static float probe_data[4];
static float step_rows[2][4];

static int fake_open(void **st, const rc_model *m, const rc_stage_opts *o, rc_err *e)
{
    (void)m; (void)o; (void)e;
    *st = NULL;
    return RC_OK;
}

static int fake_forward(void *st, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink, rc_err *e)
{
    (void)st; (void)ids; (void)e;
    const int64_t shape[2] = {2, 2};
    if (rc_probe_wanted(sink, "L0.attn.ctx")) {
        int rc = sink->emit(sink->user, "L0.attn.ctx", probe_data, 2, shape);
        if (rc)
            return rc;
    }
    if (logits)
        memcpy(logits + (T - 1) * 4, step_rows[T - 2], sizeof step_rows[0]); /* T = 2: step 0, T = 3: step 1 */
    return RC_OK;
}

static void fake_close(void *st) { (void)st; }

static int fake_available(const rc_stage_opts *o, char *why, size_t cap)
{
    (void)o; (void)why; (void)cap;
    return 1;
}

static const rc_stage fake = {"fake", "kernel", 1, fake_available, fake_open, fake_forward, NULL, fake_close, 0, "fp32"};
static const rc_stage fake_bf16 = {"fake-bf16", "pipeline", 1, fake_available, fake_open, fake_forward, NULL,
                                   fake_close, 0, "bf16"};

/* ---- a case: prompt [0, 1], probe L0.attn.ctx = [[1, 1], [1, 1]], two greedy steps over 4 tokens ---- */
static void make_case(rc_case *c, const float hf_steps[2][4], const int32_t tokens[2])
{
    rc_err e = {0};
    memset(c, 0, sizeof *c);
    snprintf(c->label, sizeof c->label, "fake");
    snprintf(c->preset, sizeof c->preset, "fake");
    snprintf(c->precision, sizeof c->precision, "fp32");
    snprintf(c->ref_name, sizeof c->ref_name, "HF");
    c->ids = calloc(2, sizeof *c->ids);
    c->ids[1] = 1;
    c->n_ids = 2;
    float *p = malloc(4 * sizeof *p);
    for (int i = 0; i < 4; i++)
        p[i] = 1.0f;
    const int64_t shape[2] = {2, 2};
    assert_int_equal(rc_tensors_add(&c->probes, "L0.attn.ctx", 2, shape, p, &e), RC_OK);
    c->n_steps = 2;
    c->vocab = 4;
    c->tokens = malloc(2 * sizeof *c->tokens);
    c->step_logits = malloc(8 * sizeof *c->step_logits);
    memcpy(c->tokens, tokens, 2 * sizeof *tokens);
    memcpy(c->step_logits, hf_steps, 8 * sizeof *c->step_logits);
}

static void set_floor(rc_case *c, double max_abs)
{
    c->floor_state = 1;
    c->floor = calloc(1, sizeof *c->floor);
    c->floor_has = calloc(1, 1);
    c->floor_steps = calloc(2, sizeof *c->floor_steps);
    c->floor_steps_has = calloc(2, 1);
    c->floor[0].max_abs = max_abs;
    c->floor[0].scaled = max_abs; /* magnitudes <= 1 here */
    c->floor_has[0] = 1;
}

/* scaled bounds: fp32 1e-3 (or fp32_bound), bf16 3e-2 */
static void load_tols_fp32(rc_tolerances *t, double near_tie, double fp32_bound)
{
    char text[1024], path[] = "/tmp/test_eval.XXXXXX";
    snprintf(text, sizeof text,
             "{\"format\": \"refchain-tolerances\", \"version\": 1, \"floor\": {\"multiple\": 4, \"cap\": 1e-2, \"reason\": \"r\"},"
             " \"near_tie\": {\"margin\": %g, \"reason\": \"r\"}, \"regression\": {\"factor\": 2, \"min\": 1e-7,"
             " \"reason\": \"r\"}, \"bounds\": [{\"metric\": \"scaled\", \"bound\": %g, \"reason\": \"r\"},"
             " {\"precision\": \"bf16\", \"metric\": \"scaled\", \"bound\": 3e-2, \"reason\": \"r\"}]}",
             near_tie, fp32_bound);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_true(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    rc_err e = {0};
    assert_int_equal(rc_tol_load(t, path, &e), RC_OK);
    unlink(path);
}

static void load_tols(rc_tolerances *t, double near_tie)
{
    load_tols_fp32(t, near_tie, 1e-3);
}

static const float hf_tie[2][4] = {{1.0f, 1.0005f, 0, 0}, {0, 0, 3, 0}};
static const int32_t tok_tie[2] = {1, 2};

static void stage_rows_tie(void)
{
    for (int i = 0; i < 4; i++)
        probe_data[i] = 1.0f;
    const float rows[2][4] = {{1.0004f, 1.0003f, 0, 0}, {0, 0, 3, 0}}; /* within 1e-3, argmax 0 != 1 */
    memcpy(step_rows, rows, sizeof rows);
}

static void test_near_tie(void **state)
{
    (void)state;
    rc_case c;
    rc_tolerances t;
    rc_eval ev;
    make_case(&c, hf_tie, tok_tie);
    load_tols(&t, 1e-3);
    stage_rows_tie();
    rc_compare_opts o = {.stage = &fake, .greedy = 1};
    assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
    assert_int_equal(ev.status, RC_EVAL_FAIL);
    assert_int_equal(ev.near_ties, 1);
    assert_int_equal(ev.first_mismatch, 0);
    const rc_row *r = &ev.rows[ev.first];
    assert_string_equal(r->name, "greedy.step00");
    assert_int_equal(r->status, RC_ROW_NEAR_TIE);
    assert_true(r->tok == 0 && r->want_tok == 1 && fabs(r->margin - 5e-4) < 1e-6);
    assert_int_equal(r->where.step, 0);
    assert_int_equal(r->where.token, 1); /* the logits row of the prompt's last token */
    char buf[512];
    assert_non_null(strstr(rc_row_describe(r, buf, sizeof buf), "near-tie"));
    rc_eval_free(&ev);
    o.allow_near_ties = 1;
    assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
    assert_int_equal(ev.status, RC_EVAL_PASS);
    assert_int_equal(ev.near_ties, 1);
    rc_eval_free(&ev);
    rc_tol_free(&t);
    rc_case_free(&c);
}

static void test_token_mismatch_not_a_tie(void **state)
{
    (void)state;
    rc_case c;
    rc_tolerances t;
    rc_eval ev;
    make_case(&c, hf_tie, tok_tie);
    /* the file allows 1e-6 (a near-tie margin of 2e-6): logits within a looser --tol that still flip at a 5e-4
     * margin are a real mismatch */
    load_tols_fp32(&t, 1e-5, 1e-6);
    rc_err e = {0};
    assert_int_equal(rc_tol_override(&t, "1e-3", &e), RC_OK);
    stage_rows_tie();
    rc_compare_opts o = {.stage = &fake, .greedy = 1, .allow_near_ties = 1};
    assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
    assert_int_equal(ev.status, RC_EVAL_FAIL);
    assert_int_equal(ev.rows[ev.first].status, RC_ROW_TOKEN);
    assert_int_equal(ev.cause, RC_CAUSE_LINK);
    assert_int_equal(ev.near_ties, 0);
    rc_eval_free(&ev);
    rc_tol_free(&t);
    rc_case_free(&c);
}

static void test_floor_rule(void **state)
{
    (void)state;
    const float hf[2][4] = {{0, 0, 3, 0}, {0, 0, 3, 0}};
    const int32_t tok[2] = {2, 2};
    rc_tolerances t;
    load_tols(&t, 1e-4);
    memcpy(step_rows, hf, sizeof hf);
    for (int i = 0; i < 4; i++)
        probe_data[i] = 1.0f;
    probe_data[2] = 1.005f; /* [1, 0]: token 1; 5e-3 > the 1e-3 bound */
    rc_compare_opts o = {.stage = &fake, .greedy = 1};
    for (int pass = 0; pass < 4; pass++) {
        rc_case c;
        rc_eval ev;
        make_case(&c, hf, tok);
        if (pass == 1)
            set_floor(&c, 2e-3); /* 2.5x the floor: passes */
        if (pass == 2)
            set_floor(&c, 1e-3); /* 5x: fails */
        if (pass == 3)
            set_floor(&c, 2e-2); /* 0.25x, but the floor is over the 1e-2 cap: not credited, fails */
        assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
        const rc_row *r = &ev.rows[0];
        assert_int_equal(r->status, pass == 1 ? RC_ROW_OK_FLOOR : RC_ROW_FAIL);
        assert_int_equal(ev.status, pass == 1 ? RC_EVAL_PASS : RC_EVAL_FAIL);
        assert_int_equal(r->where.layer, 0);
        assert_string_equal(r->where.op, "attn.ctx");
        assert_int_equal(r->where.token, 1);
        assert_int_equal(r->where.step, -1);
        if (pass)
            assert_true(fabs(r->xfloor - (pass == 1 ? 2.5 : pass == 2 ? 5.0 : 0.25)) < 1e-3);
        rc_eval_free(&ev);
        rc_case_free(&c);
    }
    rc_tol_free(&t);
}

static void test_nonfinite_first(void **state)
{
    (void)state;
    const float hf[2][4] = {{0, 0, 3, 0}, {0, 0, 3, 0}};
    const int32_t tok[2] = {2, 2};
    rc_case c;
    rc_tolerances t;
    rc_eval ev;
    make_case(&c, hf, tok);
    set_floor(&c, 1.0); /* the floor never excuses NaN */
    load_tols(&t, 1e-4);
    memcpy(step_rows, hf, sizeof hf);
    for (int i = 0; i < 4; i++)
        probe_data[i] = 1.0f;
    probe_data[3] = NAN;
    rc_compare_opts o = {.stage = &fake, .greedy = 0};
    assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
    assert_int_equal(ev.rows[0].status, RC_ROW_NONFINITE);
    assert_int_equal(ev.first, 0);
    assert_int_equal(ev.steps, 0);
    rc_eval_free(&ev);
    rc_tol_free(&t);
    rc_case_free(&c);
}

/* A flip at a 1.08e-3 margin: above the fp32 near-tie margin, far below bf16's (2 x 3e-2 x max(1, |logit|)). */
/* HF picks token 2 at both steps with a margin of 3 */
static const float hf_plain[2][4] = {{0, 0, 3, 0}, {0, 0, 3, 0}};
static const int32_t tok_plain[2] = {2, 2};

static const float hf_close[2][4] = {{1.0f, 1.00108f, 0, 0}, {0, 0, 3, 0}};
static const int32_t tok_close[2] = {1, 2};

static void test_near_tie_at_stage_precision(void **state)
{
    (void)state;
    rc_case c;
    rc_tolerances t;
    rc_eval ev;
    char buf[768];
    make_case(&c, hf_close, tok_close);
    load_tols_fp32(&t, 1e-4, 1e-4); /* fp32: margin max(1e-4, 2 x 1e-4 x 1.00108) = 2.0e-4 */
    for (int i = 0; i < 4; i++)
        probe_data[i] = 1.0f;
    const float rows[2][4] = {{1.0106f, 1.0102f, 0, 0}, {0, 0, 3, 0}}; /* argmax 0; within bf16's 3e-2 */
    memcpy(step_rows, rows, sizeof rows);
    rc_compare_opts o = {.stage = &fake_bf16, .greedy = 1};
    assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
    const rc_row *r = &ev.rows[ev.first];
    assert_string_equal(ev.precision, "bf16");
    assert_int_equal(ev.status, RC_EVAL_FAIL);
    assert_int_equal(ev.cause, RC_CAUSE_NEAR_TIE);
    assert_int_equal(r->status, RC_ROW_NEAR_TIE);
    assert_true(r->margin > 1e-3 && r->margin < 1.1e-3 && r->tie_margin >= 6e-2);
    assert_true(fabs(r->logit_tok[0] - 1.0106) < 1e-6 && fabs(r->logit_want[1] - 1.00108) < 1e-6);
    assert_true(isnan(r->xfloor)); /* the floor is no yardstick for bf16 */
    assert_non_null(strstr(rc_eval_cause_str(&ev, &c, buf, sizeof buf), "near-tie, not a broken link"));
    assert_non_null(strstr(rc_row_describe(r, buf, sizeof buf), "logit 1.0106"));
    rc_eval_free(&ev);
    o.allow_near_ties = 1;
    assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
    assert_int_equal(ev.status, RC_EVAL_PASS);
    rc_eval_free(&ev);
    /* the same flip on an fp32 stage fails its logits bound: a broken link */
    o.stage = &fake;
    assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
    assert_int_equal(ev.cause, RC_CAUSE_LINK);
    assert_int_equal(ev.rows[ev.first].status, RC_ROW_FAIL);
    rc_eval_free(&ev);
    rc_tol_free(&t);
    rc_case_free(&c);
}

static void test_pipeline_bug_large_margin(void **state)
{
    (void)state;
    rc_case c;
    rc_tolerances t;
    rc_eval ev;
    char buf[768];
    make_case(&c, hf_plain, tok_plain);
    load_tols(&t, 1e-4);
    for (int i = 0; i < 4; i++)
        probe_data[i] = 1.0f;
    const float rows[2][4] = {{0, 3, 0, 0}, {0, 0, 3, 0}}; /* step 0 picks token 1: HF's margin is 3 */
    memcpy(step_rows, rows, sizeof rows);
    rc_compare_opts o = {.stage = &fake_bf16, .greedy = 1, .allow_near_ties = 1};
    assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
    assert_int_equal(ev.status, RC_EVAL_FAIL);
    assert_int_equal(ev.cause, RC_CAUSE_LINK);
    assert_int_equal(ev.near_ties, 0);
    assert_string_equal(ev.rows[ev.first].name, "greedy.step00");
    assert_string_equal(rc_eval_cause_str(&ev, &c, buf, sizeof buf), "pipeline link");
    rc_eval_free(&ev);
    rc_tol_free(&t);
    rc_case_free(&c);
}

/* --tol 1e-4 on a probe 5e-3 off: precision within the floor multiple (under the cap), else a link */
static void test_verdict_classes(void **state)
{
    (void)state;
    rc_tolerances t;
    rc_err e = {0};
    char buf[768];
    load_tols(&t, 1e-4);
    assert_int_equal(rc_tol_override(&t, "1e-4", &e), RC_OK);
    memcpy(step_rows, hf_plain, sizeof hf_plain);
    rc_compare_opts o = {.stage = &fake, .greedy = 1};
    /* floor: none, 2e-3 (2.5x: precision), 1e-3 (5x: link), 2e-2 (over the cap: link); last, an exact stage */
    const double floors[5] = {0, 2e-3, 1e-3, 2e-2, 0};
    const int cause[5] = {RC_CAUSE_LINK, RC_CAUSE_PRECISION, RC_CAUSE_LINK, RC_CAUSE_LINK, RC_CAUSE_NONE};
    for (int pass = 0; pass < 5; pass++) {
        rc_case c;
        rc_eval ev;
        for (int i = 0; i < 4; i++)
            probe_data[i] = 1.0f;
        probe_data[2] = pass == 4 ? 1.0f : 1.005f;
        make_case(&c, hf_plain, tok_plain);
        if (floors[pass] > 0)
            set_floor(&c, floors[pass]);
        assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
        assert_int_equal(ev.cause, cause[pass]);
        assert_int_equal(ev.status, pass == 4 ? RC_EVAL_PASS : RC_EVAL_FAIL);
        assert_true(fabs(ev.tightest - (pass == 4 ? 0.0 : 0.005)) < 1e-6);
        if (pass == 1) {
            assert_int_equal(ev.rows[0].status, RC_ROW_PRECISION);
            rc_eval_cause_str(&ev, &c, buf, sizeof buf);
            assert_non_null(strstr(buf, "bound below the reference's fp32 precision: HF itself is 0.002"));
            assert_non_null(strstr(buf, "tightest meetable bound on this golden 0.005"));
        } else if (pass < 4)
            assert_string_equal(rc_eval_cause_str(&ev, &c, buf, sizeof buf), "kernel link");
        rc_eval_free(&ev);
        rc_case_free(&c);
    }
    rc_tol_free(&t);
}

/* zero comparisons is bad input, never a pass */
static void test_nothing_compared(void **state)
{
    (void)state;
    rc_case c;
    rc_tolerances t;
    rc_eval ev;
    load_tols(&t, 1e-4);
    make_case(&c, hf_plain, tok_plain);
    rc_compare_opts o = {.stage = &fake, .greedy = 1, .probe = "L99.*"};
    assert_int_not_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
    assert_int_equal(ev.status, RC_EVAL_ERROR);
    assert_non_null(strstr(ev.why, "nothing to compare"));
    rc_eval_free(&ev);
    rc_case_free(&c);
    make_case(&c, hf_plain, tok_plain);
    rc_tensors_free(&c.probes);
    c.n_steps = 0;
    o.probe = NULL;
    assert_int_not_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
    assert_non_null(strstr(ev.why, "no probes and no greedy steps"));
    rc_eval_free(&ev);
    rc_case_free(&c);
    rc_tol_free(&t);
}

/* --against-exact: the double forward is the reference where it is within the floor cap of HF */
static void test_against_exact(void **state)
{
    (void)state;
    rc_tolerances t;
    rc_err e = {0};
    load_tols(&t, 1e-4);
    assert_int_equal(rc_tol_override(&t, "1e-6", &e), RC_OK);
    memcpy(step_rows, hf_plain, sizeof hf_plain);
    for (int i = 0; i < 4; i++)
        probe_data[i] = 1.0f;
    probe_data[2] = 1.005f; /* the stage sits on the exact answer; HF is 5e-3 off it */
    rc_compare_opts o = {.stage = &fake, .greedy = 0, .against = RC_AGAINST_EXACT};
    for (int pass = 0; pass < 2; pass++) {
        rc_case c;
        rc_eval ev;
        make_case(&c, hf_plain, tok_plain);
        set_floor(&c, pass ? 2e-2 : 5e-3); /* 2e-2: over the cap, the exact forward is not vouched for */
        c.exact = calloc(1, sizeof *c.exact);
        c.exact[0] = malloc(4 * sizeof **c.exact);
        for (int i = 0; i < 4; i++)
            c.exact[0][i] = probe_data[i];
        assert_int_equal(rc_eval_stage(&c, &o, &t, &ev), RC_OK);
        assert_int_equal(ev.rows[0].vs_exact, !pass);
        assert_int_equal(ev.status, pass ? RC_EVAL_FAIL : RC_EVAL_PASS);
        assert_int_equal(ev.nexact, !pass);
        rc_eval_free(&ev);
        rc_case_free(&c);
    }
    rc_tol_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_near_tie),
        cmocka_unit_test(test_token_mismatch_not_a_tie),
        cmocka_unit_test(test_floor_rule),
        cmocka_unit_test(test_nonfinite_first),
        cmocka_unit_test(test_near_tie_at_stage_precision),
        cmocka_unit_test(test_pipeline_bug_large_margin),
        cmocka_unit_test(test_verdict_classes),
        cmocka_unit_test(test_nothing_compared),
        cmocka_unit_test(test_against_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
