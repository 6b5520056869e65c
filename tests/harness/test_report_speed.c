/* Unit tests of report --diff's speed part (harness/report_speed.c) on synthetic engine bench tables: a 20%
 * slowdown is a regression, a change within the measured noise is not, a missing row is reported. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "report.h"

/* one row: id, decode ms/token and its spread, prefill ms and its spread; ok = 0 writes a failed row */
static cJSON *row(const char *id, int ok, double ms_tok, double dspread, double pre_ms, double pspread)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", id);
    cJSON_AddBoolToObject(r, "ok", ok);
    cJSON_AddNumberToObject(r, "prompt_len", 16);
    if (ok) {
        cJSON_AddNumberToObject(r, "ms_tok", ms_tok);
        cJSON_AddNumberToObject(r, "decode_spread_ms", dspread);
        cJSON_AddNumberToObject(r, "prefill_ms", pre_ms);
        cJSON_AddNumberToObject(r, "prefill_spread_ms", pspread);
    }
    return r;
}

static cJSON *table(const char *device, cJSON *r1, cJSON *r2)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "format", "refchain-bench");
    cJSON_AddStringToObject(t, "device", device);
    cJSON_AddStringToObject(t, "shape", "llama3-8b");
    cJSON_AddStringToObject(t, "dtype", "bf16");
    cJSON *rows = cJSON_AddArrayToObject(t, "rows");
    if (r1)
        cJSON_AddItemToArray(rows, r1);
    if (r2)
        cJSON_AddItemToArray(rows, r2);
    return t;
}

/* rc_speed_diff(a, b) with its printed text in out (cap bytes) */
static int diff(cJSON *a, cJSON *b, int *missing, char *out, size_t cap)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    int n = rc_speed_diff(a, b, f, missing);
    rewind(f);
    size_t len = fread(out, 1, cap - 1, f);
    out[len] = 0;
    fclose(f);
    cJSON_Delete(a);
    cJSON_Delete(b);
    return n;
}

static void slowdown_of_20_percent_is_a_regression(void **state)
{
    (void)state;
    char out[4096];
    int missing;
    /* decode 4.00 -> 4.80 ms/token, spreads 0.02 / 0.03: margin 3 x 0.03 + 4% of 4 = 0.25 ms */
    int n = diff(table("H200", row("resident/p16", 1, 4.0, 0.02, 30.0, 0.5), NULL),
                 table("H200", row("resident/p16", 1, 4.8, 0.03, 30.1, 0.5), NULL), &missing, out, sizeof out);
    assert_int_equal(n, 1);
    assert_int_equal(missing, 0);
    assert_non_null(strstr(out, "REGRESSION resident/p16     decode ms/token 4 -> 4.8 (+20.0%"));
    assert_non_null(strstr(out, "prefill ms      30 -> 30.1 (+0.3%, margin 2.7): within noise"));
    /* a prefill 20% slower is one too */
    n = diff(table("H200", row("resident/p2048", 1, 5.0, 0.02, 60.0, 0.5), NULL),
             table("H200", row("resident/p2048", 1, 5.0, 0.02, 72.0, 0.6), NULL), &missing, out, sizeof out);
    assert_int_equal(n, 1);
    assert_non_null(strstr(out, "REGRESSION resident/p2048   prefill ms"));
}

static void change_within_noise_is_not(void **state)
{
    (void)state;
    char out[4096];
    int missing;
    /* 3% slower with small spreads: under the 4% floor */
    int n = diff(table("H200", row("resident/p16", 1, 4.0, 0.01, 30.0, 0.1), NULL),
                 table("H200", row("resident/p16", 1, 4.12, 0.01, 30.9, 0.1), NULL), &missing, out, sizeof out);
    assert_int_equal(n, 0);
    assert_null(strstr(out, "REGRESSION"));
    /* 20% slower, but the run measured a spread of 1 ms on 10 ms: margin 3 x 1 + 0.4 = 3.4 ms > 2 ms */
    n = diff(table("H200", row("resident/p16", 1, 10.0, 1.0, 30.0, 0.1), NULL),
             table("H200", row("resident/p16", 1, 12.0, 0.5, 30.0, 0.1), NULL), &missing, out, sizeof out);
    assert_int_equal(n, 0);
    assert_non_null(strstr(out, "10 -> 12 (+20.0%, margin 3.4): within noise"));
    /* faster is never a regression */
    n = diff(table("H200", row("resident/p16", 1, 4.0, 0.01, 30.0, 0.1), NULL),
             table("H200", row("resident/p16", 1, 2.0, 0.01, 10.0, 0.1), NULL), &missing, out, sizeof out);
    assert_int_equal(n, 0);
    assert_non_null(strstr(out, ": faster"));
}

static void missing_and_failed_rows(void **state)
{
    (void)state;
    char out[4096];
    int missing;
    int n = diff(table("H200", row("resident/p16", 1, 4.0, 0.01, 30.0, 0.1), row("stream/p16", 1, 300, 2, 400, 3)),
                 table("H200", row("resident/p16", 1, 4.0, 0.01, 30.0, 0.1), row("resident/p32768", 1, 6, 0.1, 900, 9)),
                 &missing, out, sizeof out);
    assert_int_equal(n, 0);
    assert_int_equal(missing, 1);
    assert_non_null(strstr(out, "MISSING stream/p16       measured in A, no such row in B"));
    assert_non_null(strstr(out, "resident/p32768  new in B"));
    /* measured in A, failed in B: a regression */
    n = diff(table("H200", row("resident/p16", 1, 4.0, 0.01, 30.0, 0.1), NULL),
             table("H200", row("resident/p16", 0, 0, 0, 0, 0), NULL), &missing, out, sizeof out);
    assert_int_equal(n, 1);
    assert_non_null(strstr(out, "REGRESSION resident/p16     measured in A, FAILED in B"));
}

static void other_device_or_one_side_is_not_compared(void **state)
{
    (void)state;
    char out[4096];
    int missing;
    int n = diff(table("H200", row("resident/p16", 1, 4.0, 0.01, 30.0, 0.1), NULL),
                 table("A100", row("resident/p16", 1, 9.0, 0.01, 90.0, 0.1), NULL), &missing, out, sizeof out);
    assert_int_equal(n, 0);
    assert_non_null(strstr(out, "not compared: A is llama3-8b bf16 on 'H200', B is llama3-8b bf16 on 'A100'"));
    n = diff(table("H200", row("resident/p16", 1, 4.0, 0.01, 30.0, 0.1), NULL), NULL, &missing, out, sizeof out);
    assert_int_equal(n, 0);
    assert_non_null(strstr(out, "only A has an engine bench table"));
}

static void markdown_and_load(void **state)
{
    (void)state;
    cJSON *t = table("H200", row("resident/p16", 1, 4.0, 0.01, 30.0, 0.1), row("stream/p16", 0, 0, 0, 0, 0));
    rc_sbuf b = {0};
    rc_report_md_speed(&b, t);
    assert_non_null(b.s);
    assert_non_null(strstr(b.s, "## Speed (engine bench)"));
    assert_non_null(strstr(b.s, "| resident/p16 | 16 | 30.00 |"));
    assert_non_null(strstr(b.s, "| stream/p16 | 16 | FAILED |"));
    free(b.s);
    char path[] = "/tmp/test_report_speed.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char *text = cJSON_Print(t);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    free(text);
    cJSON *j = rc_bench_load(path);
    assert_non_null(j);
    assert_string_equal(rc_jstr(j, "device"), "H200");
    cJSON_Delete(j);
    f = fopen(path, "w");
    fputs("{\"format\": \"refchain-report\"}", f); /* a report is not a bench table */
    fclose(f);
    assert_null(rc_bench_load(path));
    unlink(path);
    assert_null(rc_bench_load("/nonexistent/bench.json"));
    cJSON_Delete(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slowdown_of_20_percent_is_a_regression),
        cmocka_unit_test(change_within_noise_is_not),
        cmocka_unit_test(missing_and_failed_rows),
        cmocka_unit_test(other_device_or_one_side_is_not_compared),
        cmocka_unit_test(markdown_and_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
