/* Error metrics between a stage's tensor and the reference (golden) tensor. */
#ifndef HARNESS_METRICS_H
#define HARNESS_METRICS_H

#include <stdint.h>

typedef struct rc_metrics {
    double max_abs;     /* max |a - b| */
    double max_ref;     /* max |b| */
    double scaled;      /* max_abs / max(1, max_ref): the bound --tol applies to */
    double max_rel;     /* max |a - b| / |b| over elements with |b| >= 1e-3 * max_ref */
    double rms;         /* sqrt(mean (a - b)^2) */
    int64_t worst;      /* flat index of max_abs */
    int64_t nonfinite;  /* elements where a is NaN/Inf but b is finite (or vice versa) */
} rc_metrics;

void rc_metrics_compute(const float *a, const float *b, int64_t n, rc_metrics *m);
/* Flat index -> "[i, j, k]". */
const char *rc_index_str(int64_t flat, int ndim, const int64_t *shape, char *buf, int cap);

#endif
