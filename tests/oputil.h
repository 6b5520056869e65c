/* Shared by the ref/ops.c suites (test_ops.c, test_ops_hybrid.c): the fp32-against-double checker, allocations
 * that fail the test, and the group's seeded GSL rng. Include after <cmocka.h>.
 *
 * The checker: element i passes iff |got_i - want_i| <= atol + rtol * mag_i (mag NULL: |want_i|); where want_i
 * is not finite, got_i must equal it; a NaN or Inf got_i where want_i is finite fails. */
#ifndef RC_OPUTIL_H
#define RC_OPUTIL_H

#include <float.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define EPS ((double)FLT_EPSILON)

static gsl_rng *rng; /* opened by rng_setup, freed by rng_teardown */
static int quiet;    /* negative tests: failures are expected, do not print them */

/* Counts elements outside the bound; prints the first five (llm.c style) unless quiet. RC_TEST_VERBOSE=1 also
 * prints the worst err/bound of the check. */
static inline int64_t count_bad(const char *what, const float *got, const double *want, const double *mag, int64_t n,
                                double atol, double rtol)
{
    int64_t bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double bound = atol + rtol * (mag ? mag[i] : fabs(want[i]));
        double err = fabs((double)got[i] - want[i]);
        int ok = isfinite(want[i]) ? isfinite(got[i]) && err <= bound : (double)got[i] == want[i];
        if (bound > 0 && err / bound > worst)
            worst = err / bound;
        if (!ok && bad++ < 5 && !quiet)
            fprintf(stderr, "  %s[%lld]: got %.9g want %.9g |err| %.3g > bound %.3g\n", what, (long long)i,
                    (double)got[i], want[i], err, bound);
    }
    if (bad && !quiet)
        fprintf(stderr, "  %s: %lld of %lld elements out of bounds\n", what, (long long)bad, (long long)n);
    if (getenv("RC_TEST_VERBOSE"))
        fprintf(stderr, "  %-32s n=%-7lld worst err/bound %.3f\n", what, (long long)n, worst);
    return bad;
}

#define EXPECT_CLOSE(what, got, want, mag, n, atol, rtol) \
    assert_int_equal(count_bad((what), (got), (want), (mag), (n), (atol), (rtol)), 0)

static inline void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    assert_non_null(p);
    return p;
}
#define FALLOC(n) ((float *)xmalloc((size_t)(n) * sizeof(float)))
#define DALLOC(n) ((double *)xmalloc((size_t)(n) * sizeof(double)))

/* x[i] ~ N(0, sd^2) */
static inline void fill(float *x, int64_t n, double sd)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)gsl_ran_gaussian(rng, sd);
}

/* For a group setup: a Mersenne-twister rng seeded with s, with GSL's abort-on-error handler off. */
static inline int rng_setup(unsigned long s)
{
    gsl_set_error_handler_off();
    rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!rng)
        return -1;
    gsl_rng_set(rng, s);
    return 0;
}

static inline int rng_teardown(void **state)
{
    (void)state;
    gsl_rng_free(rng);
    return 0;
}

#endif
