/* unit.engine_trace: the kernel trace's table (engine/eng_trace.h) on notes made up here, no GPU: each note's time
 * to the next goes to its (site, grid, site before it) row, rows in order of first appearance, per-step figures over
 * the steps added, and print forgets the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eng_trace.h"

#define SITE(unit, line) ((uint32_t)(unit) << 16 | (uint32_t)(line))

static void drain(void)
{
    FILE *f = fopen("/dev/null", "w");
    assert_non_null(f);
    eng_trace_print(f, "drain");
    fclose(f);
}

static void test_attribution(void **state)
{
    (void)state;
    drain();
    /* two steps of three kernels: A (grid 10), B (grid 20), A (grid 30: another launch shape of the same line) */
    const uint64_t t[] = {1000, 1010, 1040, 1100, 1112, 1150};
    const uint32_t site[] = {SITE(0, 7), SITE(0, 9), SITE(0, 7), SITE(0, 7), SITE(0, 9), SITE(0, 7)};
    const uint32_t grid[] = {10, 20, 30, 10, 20, 30};
    assert_int_equal(eng_trace_add(t, site, grid, 6, 2), 0);
    assert_int_equal(eng_trace_rows(), 4);
    eng_trace_row r;
    assert_int_equal(eng_trace_row_get(0, &r), 0); /* A/10 first of the run: 10 ns */
    assert_string_equal(r.unit, "?");
    assert_int_equal(r.line, 7);
    assert_int_equal(r.grid, 10);
    assert_null(r.prev_unit);
    assert_float_equal(r.per_step, 0.5, 1e-12);
    assert_float_equal(r.us_each, 0.010, 1e-12);
    assert_float_equal(r.us_step, 0.005, 1e-12);
    assert_float_equal(r.max_us, 0.010, 1e-12);
    assert_int_equal(eng_trace_row_get(1, &r), 0); /* B/20 after A: 30 and 38 */
    assert_int_equal(r.line, 9);
    assert_string_equal(r.prev_unit, "?");
    assert_int_equal(r.prev_line, 7);
    assert_float_equal(r.per_step, 1.0, 1e-12);
    assert_float_equal(r.us_each, 0.034, 1e-12);
    assert_int_equal(eng_trace_row_get(2, &r), 0); /* A/30 after B: 60 (the last note has no next) */
    assert_int_equal(r.grid, 30);
    assert_int_equal(r.prev_line, 9);
    assert_float_equal(r.per_step, 0.5, 1e-12);
    assert_float_equal(r.us_each, 0.060, 1e-12);
    assert_float_equal(r.us_step, 0.030, 1e-12);
    assert_int_equal(eng_trace_row_get(3, &r), 0); /* A/10 after A (the step before): 12, its own row */
    assert_int_equal(r.line, 7);
    assert_int_equal(r.grid, 10);
    assert_int_equal(r.prev_line, 7);
    assert_float_equal(r.us_each, 0.012, 1e-12);
    assert_int_equal(eng_trace_row_get(4, &r), -1);
    assert_int_equal(eng_trace_row_get(-1, &r), -1);
}

/* one launch site in two places of a step, as the o and down GEMVs (one k_gemv line, one grid): two rows */
static void test_one_site_two_places(void **state)
{
    (void)state;
    drain();
    /* attention (line 2), G (line 1), gate|up (line 3), G again, q|k|v (line 4); two steps */
    const uint64_t t[] = {0, 8, 16, 72, 100, 116, 124, 132, 188, 216, 232};
    const uint32_t s[] = {SITE(0, 4), SITE(0, 2), SITE(0, 1), SITE(0, 3), SITE(0, 1),
                          SITE(0, 4), SITE(0, 2), SITE(0, 1), SITE(0, 3), SITE(0, 1), SITE(0, 4)};
    const uint32_t g[] = {384, 264, 256, 264, 256, 384, 264, 256, 264, 256, 384};
    assert_int_equal(eng_trace_add(t, s, g, 11, 2), 0);
    int after_attn = -1, after_glu = -1;
    for (int i = 0; i < eng_trace_rows(); i++) {
        eng_trace_row r;
        assert_int_equal(eng_trace_row_get(i, &r), 0);
        if (r.line == 1 && r.prev_line == 2)
            after_attn = i;
        if (r.line == 1 && r.prev_line == 3)
            after_glu = i;
    }
    assert_true(after_attn >= 0 && after_glu >= 0 && after_attn != after_glu);
    eng_trace_row o, down;
    assert_int_equal(eng_trace_row_get(after_attn, &o), 0);
    assert_int_equal(eng_trace_row_get(after_glu, &down), 0);
    assert_float_equal(o.us_each, 0.056, 1e-12);    /* 72 - 16, 188 - 132 */
    assert_float_equal(down.us_each, 0.016, 1e-12); /* 116 - 100, 232 - 216 */
    assert_float_equal(o.per_step, 1.0, 1e-12);
    assert_float_equal(down.per_step, 1.0, 1e-12);
    drain();
}

static void test_runs_add_up_and_print_forgets(void **state)
{
    (void)state;
    drain();
    const uint64_t t1[] = {0, 100, 300}, t2[] = {5000, 5300, 5500};
    const uint32_t s1[] = {SITE(1, 3), SITE(1, 4), SITE(1, 3)}, g[] = {1, 1, 1};
    assert_int_equal(eng_trace_add(t1, s1, g, 3, 1), 0);
    assert_int_equal(eng_trace_add(t2, s1, g, 3, 1), 0); /* no time from 300 to 5000: runs are apart */
    eng_trace_row r;
    assert_int_equal(eng_trace_row_get(0, &r), 0);
    assert_float_equal(r.us_each, 0.2, 1e-12); /* 100 and 300 ns */
    assert_float_equal(r.us_step, 0.2, 1e-12);
    assert_int_equal(eng_trace_row_get(1, &r), 0);
    assert_float_equal(r.us_each, 0.2, 1e-12); /* 200 and 200 */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    eng_trace_print(f, "unit test");
    fclose(f);
    assert_non_null(strstr(buf, "trace (unit test): 2 steps, 0.4 us a step"));
    assert_non_null(strstr(buf, "?:3"));
    assert_non_null(strstr(buf, "?:4"));
    assert_non_null(strstr(buf, "after (unit:line)"));
    free(buf);
    assert_int_equal(eng_trace_rows(), 0);
}

static void test_backwards_time_counts_zero(void **state)
{
    (void)state;
    drain();
    const uint64_t t[] = {100, 90, 95}; /* a timer read out of order must not wrap to ~2^64 ns */
    const uint32_t s[] = {SITE(0, 1), SITE(0, 2), SITE(0, 1)}, g[] = {4, 4, 4};
    assert_int_equal(eng_trace_add(t, s, g, 3, 1), 0);
    eng_trace_row r;
    assert_int_equal(eng_trace_row_get(0, &r), 0);
    assert_float_equal(r.us_each, 0.0, 0.0);
    assert_int_equal(eng_trace_row_get(1, &r), 0);
    assert_float_equal(r.us_each, 0.005, 1e-12);
}

static void test_table_full(void **state)
{
    (void)state;
    drain();
    enum { N = 300 };
    uint64_t t[N];
    uint32_t s[N], g[N];
    for (int i = 0; i < N; i++) {
        t[i] = (uint64_t)i;
        s[i] = SITE(0, i);
        g[i] = 1;
    }
    assert_int_equal(eng_trace_add(t, s, g, N, 1), -1); /* more sites than the table holds: said, not a crash */
    assert_true(eng_trace_rows() > 0);
    drain();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attribution),
        cmocka_unit_test(test_one_site_two_places),
        cmocka_unit_test(test_runs_add_up_and_print_forgets),
        cmocka_unit_test(test_backwards_time_counts_zero),
        cmocka_unit_test(test_table_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
