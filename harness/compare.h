/* harness compare: run a stage on a golden's prompt and compare every probe in data-flow order. */
#ifndef HARNESS_COMPARE_H
#define HARNESS_COMPARE_H

#include "stage.h"

enum { RC_EXIT_PASS = 0, RC_EXIT_BOUND = 1, RC_EXIT_ERROR = 2 };

typedef struct rc_compare_opts {
    const rc_stage *stage;
    rc_stage_opts stage_opts;
    double tol;            /* bound on scaled max-abs */
    const char *probe;     /* fnmatch pattern or NULL */
    int greedy;            /* also check the greedy continuation */
    int quiet;             /* verdict lines only */
} rc_compare_opts;

/* Compares one golden; appends its JSON object to json_out (cJSON *) if not NULL.
 * Returns RC_EXIT_*; errors are printed as one line. */
int rc_compare_golden(const char *path, const rc_compare_opts *o, void *json_out);

#endif
