/* Unit tests of harness/metrics.c: every metric on hand-made tensors, NaN/Inf first, ULP distance. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "metrics.h"

static void test_ulp(void **state)
{
    (void)state;
    assert_int_equal(rc_ulp_distance(1.0f, 1.0f), 0);
    assert_int_equal(rc_ulp_distance(1.0f, nextafterf(1.0f, 2.0f)), 1);
    assert_int_equal(rc_ulp_distance(nextafterf(1.0f, 0.0f), 1.0f), 1);
    assert_int_equal(rc_ulp_distance(0.0f, -0.0f), 0);
    /* across zero: the smallest subnormals on both sides are 2 apart */
    assert_int_equal(rc_ulp_distance(nextafterf(0.0f, 1.0f), nextafterf(0.0f, -1.0f)), 2);
}

static void test_identical(void **state)
{
    (void)state;
    const float a[4] = {1, -2, 3, 0.5f};
    rc_metrics m;
    rc_metrics_compute(a, a, 4, &m);
    assert_true(m.max_abs == 0 && m.scaled == 0 && m.max_rel == 0 && m.rms == 0 && m.nmse == 0);
    assert_true(m.cosine > 1 - 1e-15 && m.max_ulp == 0 && m.nonfinite == 0);
    assert_true(m.max_ref == 3);
}

static void test_values(void **state)
{
    (void)state;
    const float b[4] = {4, 0, 0, 0}, a[4] = {4, 3, 0, 0};
    rc_metrics m;
    rc_metrics_compute(a, b, 4, &m);
    assert_true(m.max_abs == 3 && m.worst == 1);
    assert_true(fabs(m.scaled - 0.75) < 1e-15);   /* 3 / max(1, 4) */
    assert_true(fabs(m.rms - 1.5) < 1e-15);       /* sqrt(9 / 4) */
    assert_true(fabs(m.nmse - 9.0 / 16) < 1e-15);
    assert_true(fabs(m.cosine - 0.8) < 1e-15);    /* 16 / (5 * 4) */
    assert_true(m.max_rel == 0);                  /* only |b| >= 1e-3 max|b| counts: b[0] */
    for (int k = 0; k < RC_MET_COUNT; k++)
        assert_true(rc_metric_parse(rc_metric_name(k)) == k);
    assert_true(rc_metric_parse("bogus") == -1);
    assert_true(rc_metric_within(RC_MET_COSINE, 0.8, 0.7) && !rc_metric_within(RC_MET_COSINE, 0.8, 0.9));
    assert_true(rc_metric_within(RC_MET_NMSE, 0.5, 0.6) && !rc_metric_within(RC_MET_NMSE, 0.5, 0.4));
}

static void test_nonfinite(void **state)
{
    (void)state;
    const float b[3] = {1, 2, 3}, a[3] = {1, NAN, INFINITY};
    rc_metrics m;
    rc_metrics_compute(a, b, 3, &m);
    assert_int_equal(m.nonfinite, 2);
    assert_int_equal(m.nan, 1);
    assert_int_equal(m.inf, 1);
    assert_int_equal(m.worst, 1);
    assert_true(isinf(m.max_abs) && isinf(m.nmse) && isinf(m.max_ulp) && m.cosine == 0);
    /* the same non-finite value on both sides is not a mismatch */
    const float c[2] = {INFINITY, 1}, d[2] = {INFINITY, 1};
    rc_metrics_compute(c, d, 2, &m);
    assert_int_equal(m.nonfinite, 0);
    assert_true(m.max_abs == 0);
}

static void test_double_reference(void **state)
{
    (void)state;
    const double b[2] = {1.0 + 1e-12, -2.0};
    const float a[2] = {1.0f, -2.0f};
    rc_metrics m;
    rc_metrics_compute64(a, b, 2, &m);
    assert_true(fabs(m.max_abs - 1e-12) < 1e-15);
    assert_true(m.max_ulp == 0); /* the double reference rounds to the same float */
    int64_t idx[3];
    const int64_t shape[3] = {2, 3, 4};
    rc_index_unflatten(23, 3, shape, idx);
    assert_true(idx[0] == 1 && idx[1] == 2 && idx[2] == 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ulp),       cmocka_unit_test(test_identical),        cmocka_unit_test(test_values),
        cmocka_unit_test(test_nonfinite), cmocka_unit_test(test_double_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
