/* Metrics (see metrics.h). */
#include "metrics.h"

#include <math.h>
#include <stdio.h>

void rc_metrics_compute(const float *a, const float *b, int64_t n, rc_metrics *m)
{
    double max_abs = 0, max_ref = 0, ss = 0;
    int64_t worst = 0, nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        double bi = b[i], ai = a[i];
        if (isfinite(bi) && fabs(bi) > max_ref)
            max_ref = fabs(bi);
        if (isfinite(ai) != isfinite(bi) || (isnan(ai) != isnan(bi))) {
            nonfinite++;
            if (nonfinite == 1)
                worst = i;
            continue;
        }
        if (!isfinite(ai))
            continue; /* both the same non-finite value class */
        double d = fabs(ai - bi);
        ss += d * d;
        if (d > max_abs) {
            max_abs = d;
            if (!nonfinite)
                worst = i;
        }
    }
    double floor_ = 1e-3 * max_ref, max_rel = 0;
    for (int64_t i = 0; i < n; i++) {
        double bi = b[i], ai = a[i];
        if (isfinite(ai) && isfinite(bi) && fabs(bi) >= floor_ && fabs(bi) > 0) {
            double r = fabs(ai - bi) / fabs(bi);
            if (r > max_rel)
                max_rel = r;
        }
    }
    m->max_abs = nonfinite ? INFINITY : max_abs;
    m->max_ref = max_ref;
    m->scaled = m->max_abs / (max_ref > 1.0 ? max_ref : 1.0);
    m->max_rel = nonfinite ? INFINITY : max_rel;
    m->rms = n ? sqrt(ss / (double)n) : 0.0;
    m->worst = worst;
    m->nonfinite = nonfinite;
}

const char *rc_index_str(int64_t flat, int ndim, const int64_t *shape, char *buf, int cap)
{
    int64_t idx[8];
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = shape[i] ? flat % shape[i] : 0;
        flat = shape[i] ? flat / shape[i] : 0;
    }
    int n = snprintf(buf, (size_t)cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += snprintf(buf + n, (size_t)(cap - n), "%s%lld", i ? "," : "", (long long)idx[i]);
    if (n < cap)
        snprintf(buf + n, (size_t)(cap - n), "]");
    return buf;
}
