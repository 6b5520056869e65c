/* Unit tests of harness/tolerance.c: the repository's file loads, the last matching entry wins per metric,
 * --tol specs, strictness, and broken files are refused with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tolerance.h"

static void test_repo_file(void **state)
{
    (void)state;
    rc_tolerances t;
    rc_err e = {0};
    assert_int_equal(rc_tol_load(&t, NULL, &e), RC_OK);
    assert_true(t.version >= 1 && t.floor_multiple > 1 && t.near_tie_margin > 0 && t.reg_factor > 1);
    for (int i = 0; i < t.n; i++)
        assert_true(t.e[i].reason[0]); /* every bound says why */
    rc_bounds b;
    rc_tol_bounds(&t, "ref", "fp32", "llama", "L0.attn.q", &b);
    assert_true(b.has[RC_MET_SCALED] && b.has[RC_MET_NMSE] && b.has[RC_MET_COSINE] && !b.has[RC_MET_ULP]);
    rc_tol_bounds(&t, "cuda", "fp32", "llama", "rope.all.inv_freq", &b);
    assert_true(b.has[RC_MET_ULP] && b.bound[RC_MET_ULP] == 0 && b.strict[RC_MET_ULP]);
    rc_bounds b16;
    rc_tol_bounds(&t, "engine", "bf16", "llama", "logits", &b16);
    rc_tol_bounds(&t, "engine", "fp32", "llama", "logits", &b);
    assert_true(b16.bound[RC_MET_SCALED] > b.bound[RC_MET_SCALED]);
    rc_tol_free(&t);
}

static char *write_tmp(const char *text)
{
    char *p = strdup("/tmp/test_tolerance.XXXXXX");
    int fd = mkstemp(p);
    assert_true(fd >= 0);
    assert_true(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    return p;
}

#define HEAD "{\"format\": \"refchain-tolerances\", \"version\": 3, " \
    "\"floor\": {\"multiple\": 4, \"cap\": 1e-4, \"reason\": \"r\"}, \"near_tie\": {\"margin\": 1e-4, \"reason\": \"r\"}, " \
    "\"regression\": {\"factor\": 2, \"min\": 1e-7, \"reason\": \"r\"}, "

static void test_last_match_and_override(void **state)
{
    (void)state;
    char *p = write_tmp(HEAD "\"bounds\": ["
                             "{\"metric\": \"scaled\", \"bound\": 1e-5, \"reason\": \"all\"},"
                             "{\"stage\": \"engine\", \"probe\": \"L*\", \"metric\": \"scaled\", \"bound\": 1e-4, \"reason\": \"x\"},"
                             "{\"stage\": \"eng*\", \"probe\": \"L1.*\", \"metric\": \"max_rel\", \"bound\": 0.5, \"reason\": \"y\"},"
                             "{\"model\": \"qwen3*\", \"probe\": \"logits\", \"metric\": \"scaled\", \"bound\": 3e-5, \"reason\": \"z\"}]}");
    rc_tolerances t;
    rc_err e = {0};
    assert_int_equal(rc_tol_load(&t, p, &e), RC_OK);
    assert_int_equal(t.version, 3);
    rc_bounds b;
    rc_tol_bounds(&t, "engine", "fp32", "llama", "L1.mid", &b);
    assert_true(b.bound[RC_MET_SCALED] == 1e-4 && b.has[RC_MET_MAX_REL] && !b.strict[RC_MET_SCALED]);
    rc_tol_bounds(&t, "ref", "fp32", "llama", "L1.mid", &b);
    assert_true(b.bound[RC_MET_SCALED] == 1e-5 && !b.has[RC_MET_MAX_REL]);
    rc_tol_bounds(&t, "ref", "fp32", "qwen3_5_text", "logits", &b);
    assert_true(b.bound[RC_MET_SCALED] == 3e-5);
    rc_tol_bounds(&t, "ref", "fp32", "llama", "logits", &b);
    assert_true(b.bound[RC_MET_SCALED] == 1e-5);
    assert_int_equal(rc_tol_override(&t, "2e-3", &e), RC_OK);
    assert_int_equal(rc_tol_override(&t, "nmse:logits=1e-8", &e), RC_OK);
    rc_tol_bounds(&t, "engine", "fp32", "llama", "L1.mid", &b);
    assert_true(b.bound[RC_MET_SCALED] == 2e-3 && b.strict[RC_MET_SCALED] && !b.has[RC_MET_NMSE]);
    rc_tol_bounds(&t, "engine", "fp32", "llama", "logits", &b);
    assert_true(b.has[RC_MET_NMSE] && b.bound[RC_MET_NMSE] == 1e-8);
    assert_int_equal(rc_tol_override(&t, "bogus=1", &e), RC_E_USAGE);
    assert_int_equal(rc_tol_override(&t, "-1", &e), RC_E_USAGE);
    assert_int_equal(rc_tol_override(&t, "nmse=abc", &e), RC_E_USAGE);
    char buf[48];
    assert_string_equal(rc_bound_str(RC_MET_COSINE, 0.999999, buf, sizeof buf), "cosine>=0.999999");
    assert_string_equal(rc_bound_str(RC_MET_SCALED, 1e-5, buf, sizeof buf), "scaled<=1e-05");
    rc_tol_free(&t);
    unlink(p);
    free(p);
}

static void test_refused(void **state)
{
    (void)state;
    const char *bad[] = {
        "{\"format\": \"other\", \"version\": 1}",
        HEAD "\"bounds\": []}",
        HEAD "\"bounds\": [{\"metric\": \"scaled\", \"bound\": 1e-5}]}", /* no reason */
        HEAD "\"bounds\": [{\"metric\": \"speed\", \"bound\": 1e-5, \"reason\": \"r\"}]}",
        HEAD "\"bounds\": [{\"metric\": \"scaled\", \"bound\": -1, \"reason\": \"r\"}]}",
        "not json",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *p = write_tmp(bad[i]);
        rc_tolerances t;
        rc_err e = {0};
        assert_int_not_equal(rc_tol_load(&t, p, &e), RC_OK);
        assert_true(strstr(e.msg, p) != NULL); /* names the file */
        unlink(p);
        free(p);
    }
    rc_tolerances t;
    rc_err e = {0};
    assert_int_equal(rc_tol_load(&t, "/nonexistent/tolerances.json", &e), RC_E_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repo_file),
        cmocka_unit_test(test_last_match_and_override),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
