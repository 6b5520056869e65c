/* Unit tests of harness/quality.c's scoring: NLL, KL(ref || stage) and top-1 agreement on hand-made logits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "quality.h"

/* ref p = (1/2, 1/4, 1/4), stage q = uniform over 3, at two positions; the second row's stage prefers token 2 */
static void test_known_values(void **state)
{
    (void)state;
    const float off = 1000.0f; /* a large common offset: the log-softmax must not overflow */
    const float ref[9] = {off + logf(0.5f), off + logf(0.25f), off + logf(0.25f),
                          off + logf(0.5f), off + logf(0.25f), off + logf(0.25f), 0, 0, 0};
    const float stage[9] = {-off, -off, -off, 0, 0, 1, 0, 0, 0};
    const int32_t ids[3] = {0, 0, 1};
    rc_quality q;
    assert_int_equal(rc_quality_score(ref, stage, ids, 3, 3, &q), 0);
    assert_int_equal(q.n, 2);
    /* ref NLL: -ln(1/2) for token 0, -ln(1/4) for token 1 */
    assert_true(fabs(q.nll_ref - 0.5 * (log(2.0) + log(4.0))) < 1e-5);
    const double z = 2 + exp(1.0); /* row 1 of the stage: softmax(0, 0, 1) */
    assert_true(fabs(q.nll_stage - 0.5 * (log(3.0) + log(z))) < 1e-5);
    const double kl0 = 0.5 * log(1.5) + 0.5 * log(0.75);
    const double kl1 = 0.5 * log(0.5 * z) + 0.25 * log(0.25 * z) + 0.25 * log(0.25 * z / exp(1.0));
    assert_true(fabs(q.kl_mean - 0.5 * (kl0 + kl1)) < 1e-5);
    assert_true(fabs(q.kl_max - kl1) < 1e-5 && q.kl_max_pos == 1);
    assert_int_equal(q.top1_agree, 1);
    assert_int_equal(q.bad_pos, -1);
}

static void test_self_is_zero(void **state)
{
    (void)state;
    const float x[8] = {3, -1, 2, 0.5f, -4, 7, 7, 1};
    const int32_t ids[2] = {1, 3};
    rc_quality q;
    assert_int_equal(rc_quality_score(x, x, ids, 2, 4, &q), 0);
    assert_true(q.n == 1 && q.kl_mean == 0 && q.kl_max == 0 && q.top1_agree == 1);
    assert_true(q.nll_ref == q.nll_stage);
    const double lse = 3 + log(1 + exp(-4.0) + exp(-1.0) + exp(-2.5));
    assert_true(fabs(q.nll_ref - (lse - 0.5)) < 1e-9); /* -log p(token 3) = lse - x[3] */
}

static void test_nonfinite(void **state)
{
    (void)state;
    const float ref[6] = {0, 1, 2, 0, 1, 2}, stage[6] = {0, NAN, 2, 0, 1, 2};
    const int32_t ids[3] = {0, 1, 2};
    rc_quality q;
    assert_int_equal(rc_quality_score(ref, stage, ids, 2, 3, &q), -1);
    assert_true(q.bad_pos == 0 && q.bad_stage == 1);
    assert_int_equal(rc_quality_score(stage, ref, ids, 2, 3, &q), -1);
    assert_true(q.bad_pos == 0 && q.bad_stage == 0);
    assert_int_equal(rc_quality_score(ref, ref, ids, 1, 3, &q), -1); /* one token predicts nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_self_is_zero),
        cmocka_unit_test(test_nonfinite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
