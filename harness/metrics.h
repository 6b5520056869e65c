/* Error metrics between a stage's tensor and the reference (golden) tensor. */
#ifndef HARNESS_METRICS_H
#define HARNESS_METRICS_H

#include <stdint.h>

typedef struct rc_metrics {
    double max_abs;     /* max |a - b| */
    double max_ref;     /* max |b| */
    double scaled;      /* max_abs / max(1, max_ref): "scaled max-abs" */
    double max_rel;     /* max |a - b| / |b| over elements with |b| >= 1e-3 * max_ref */
    double rms;         /* sqrt(mean (a - b)^2) */
    double nmse;        /* sum (a - b)^2 / sum b^2 (0 if both sums are 0) */
    double cosine;      /* a.b / (|a| |b|) (1 if both are all-zero) */
    double max_ulp;     /* max distance in fp32 units in the last place, over finite pairs (b rounded to fp32) */
    int64_t worst;      /* flat index of max_abs (of the first non-finite mismatch if any) */
    int64_t nonfinite;  /* elements where either side is NaN, or one side is infinite and the other is not the same */
    int64_t nan, inf;   /* NaN / Inf elements of a */
} rc_metrics;

/* Metric ids, in the order tables print them; each bound names one. */
typedef enum {
    RC_MET_SCALED, RC_MET_MAX_ABS, RC_MET_MAX_REL, RC_MET_RMS, RC_MET_NMSE, RC_MET_COSINE, RC_MET_ULP, RC_MET_COUNT
} rc_metric_id;

/* NaN/Inf are checked first: any non-finite mismatch makes max_abs, max_rel, rms, nmse, ulp infinite and
 * cosine NaN-free 0. */
void rc_metrics_compute(const float *a, const float *b, int64_t n, rc_metrics *m);
/* The same against a double reference (the noise floor: a = fp32 result, b = double forward). */
void rc_metrics_compute64(const float *a, const double *b, int64_t n, rc_metrics *m);

/* "scaled", "max_abs", ...; -1 if unknown. */
int rc_metric_parse(const char *name);
const char *rc_metric_name(int id);
/* The metric's value in m. */
double rc_metric_value(const rc_metrics *m, int id);
/* 1 if larger is better (cosine): the bound is a lower bound. */
int rc_metric_is_lower_bound(int id);
/* 1 if value satisfies bound for metric id. */
int rc_metric_within(int id, double value, double bound);

/* fp32 units-in-the-last-place distance between two finite floats. */
int64_t rc_ulp_distance(float a, float b);
/* Flat index -> "[i, j, k]". */
const char *rc_index_str(int64_t flat, int ndim, const int64_t *shape, char *buf, int cap);
/* Flat index -> per-dimension indices idx[ndim]. */
void rc_index_unflatten(int64_t flat, int ndim, const int64_t *shape, int64_t *idx);

#endif
