/* The one versioned tolerance file (harness/tolerances.json): every bound names its metric and applies
 * per stage, per storage precision and per probe pattern (optionally per model_type); plus the noise-floor
 * multiple, the near-tie margin of greedy tokens and the regression margin of `report --diff`. */
#ifndef HARNESS_TOLERANCE_H
#define HARNESS_TOLERANCE_H

#include "err.h"
#include "metrics.h"

typedef struct rc_tol_entry {
    char stage[32], precision[16], probe[64]; /* shell patterns ("*" = any) */
    char model[32];                           /* pattern on the config's model_type (optional, "*") */
    int metric;                               /* rc_metric_id */
    double bound;                             /* upper bound (lower bound for cosine) */
    int strict;                               /* the noise-floor rule cannot pass a probe over this bound */
    int user;                                 /* from --tol: a probe over it only is judged against the file */
    char reason[512];
} rc_tol_entry;

typedef struct rc_tolerances {
    char path[512];
    int version;
    rc_tol_entry *e;
    int n, cap;
    double floor_multiple;   /* a probe within this multiple of HF's distance from double passes */
    double floor_cap;        /* ... only while that distance (scaled max-abs) is itself below this */
    char floor_reason[1024];
    double near_tie_margin;  /* reference top-1 minus top-2 logit below this: a token mismatch is a near-tie */
    char near_tie_reason[1024];
    double reg_factor, reg_min; /* report --diff: worst scaled error grew by > factor and is above min */
    int exact_default;       /* compare judges against the double forward without --against-exact */
    char exact_reason[1024];
    char reg_reason[1024];
} rc_tolerances;

/* The bounds in force for one probe: per metric, the last matching entry of the file wins. */
typedef struct rc_bounds {
    int has[RC_MET_COUNT];
    double bound[RC_MET_COUNT];
    int strict[RC_MET_COUNT];
    const rc_tol_entry *src[RC_MET_COUNT];
} rc_bounds;

/* The file harness reads without --tolerances: $REFCHAIN_TOLERANCES, else the source tree's. */
const char *rc_tol_default_path(void);
/* Loads and validates path (NULL = default). */
int rc_tol_load(rc_tolerances *t, const char *path, rc_err *e);
/* --tol SPEC: "1e-5" (scaled max-abs of every probe) or "METRIC=VALUE" or "METRIC:PATTERN=VALUE";
 * appended last, so it wins over the file. */
int rc_tol_override(rc_tolerances *t, const char *spec, rc_err *e);
void rc_tol_free(rc_tolerances *t);

void rc_tol_bounds(const rc_tolerances *t, const char *stage, const char *precision, const char *model_type,
                   const char *probe, rc_bounds *b);
/* "scaled<=1e-05" into buf. */
const char *rc_bound_str(int metric, double bound, char *buf, int cap);

#endif
