/* Metrics (see metrics.h). */
#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int64_t rc_ulp_distance(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    /* map the sign-magnitude bit patterns onto one ordered integer line (-0 and +0 meet) */
    int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia, ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return oa > ob ? oa - ob : ob - oa;
}

/* One pass over (a[i], ref(i)); the reference comes as fp32 (bf) or double (bd). */
static void compute(const float *a, const float *bf, const double *bd, int64_t n, rc_metrics *m)
{
    double max_abs = 0, max_ref = 0, ss = 0, sb = 0, sa = 0, sab = 0;
    int64_t worst = 0, nonfinite = 0, nan = 0, inf = 0, max_ulp = 0;
    for (int64_t i = 0; i < n; i++) {
        double bi = bf ? (double)bf[i] : bd[i], ai = a[i];
        nan += isnan(ai);
        inf += isinf(ai);
        if (isfinite(bi) && fabs(bi) > max_ref)
            max_ref = fabs(bi);
        /* NaN equals nothing, itself included; an infinity only the same infinity */
        if (isfinite(ai) != isfinite(bi) || isnan(ai) || isnan(bi) || (isinf(ai) && ai != bi)) {
            nonfinite++;
            if (nonfinite == 1)
                worst = i;
            continue;
        }
        if (!isfinite(ai))
            continue; /* the same infinity on both sides */
        double d = fabs(ai - bi);
        ss += d * d;
        sb += bi * bi;
        sa += ai * ai;
        sab += ai * bi;
        int64_t u = rc_ulp_distance(a[i], bf ? bf[i] : (float)bd[i]);
        if (u > max_ulp)
            max_ulp = u;
        if (d > max_abs) {
            max_abs = d;
            if (!nonfinite)
                worst = i;
        }
    }
    double floor_ = 1e-3 * max_ref, max_rel = 0;
    for (int64_t i = 0; i < n; i++) {
        double bi = bf ? (double)bf[i] : bd[i], ai = a[i];
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
    m->rms = nonfinite ? INFINITY : n ? sqrt(ss / (double)n) : 0.0;
    m->nmse = nonfinite ? INFINITY : sb > 0 ? ss / sb : ss > 0 ? INFINITY : 0.0;
    m->cosine = nonfinite ? 0.0 : (sa > 0 && sb > 0) ? sab / sqrt(sa * sb) : (sa == 0 && sb == 0) ? 1.0 : 0.0;
    m->max_ulp = nonfinite ? INFINITY : (double)max_ulp;
    m->worst = worst;
    m->nonfinite = nonfinite;
    m->nan = nan;
    m->inf = inf;
}

void rc_metrics_compute(const float *a, const float *b, int64_t n, rc_metrics *m)
{
    compute(a, b, NULL, n, m);
}

void rc_metrics_compute64(const float *a, const double *b, int64_t n, rc_metrics *m)
{
    compute(a, NULL, b, n, m);
}

static const char *const metric_names[RC_MET_COUNT] = {"scaled", "max_abs", "max_rel", "rms", "nmse", "cosine",
                                                       "ulp"};

int rc_metric_parse(const char *name)
{
    for (int i = 0; i < RC_MET_COUNT; i++)
        if (!strcmp(name, metric_names[i]))
            return i;
    return -1;
}

const char *rc_metric_name(int id)
{
    return id >= 0 && id < RC_MET_COUNT ? metric_names[id] : "?";
}

double rc_metric_value(const rc_metrics *m, int id)
{
    switch (id) {
    case RC_MET_SCALED: return m->scaled;
    case RC_MET_MAX_ABS: return m->max_abs;
    case RC_MET_MAX_REL: return m->max_rel;
    case RC_MET_RMS: return m->rms;
    case RC_MET_NMSE: return m->nmse;
    case RC_MET_COSINE: return m->cosine;
    case RC_MET_ULP: return m->max_ulp;
    }
    return NAN;
}

int rc_metric_is_lower_bound(int id)
{
    return id == RC_MET_COSINE;
}

int rc_metric_within(int id, double value, double bound)
{
    return rc_metric_is_lower_bound(id) ? value >= bound : value <= bound;
}

void rc_index_unflatten(int64_t flat, int ndim, const int64_t *shape, int64_t *idx)
{
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = shape[i] ? flat % shape[i] : 0;
        flat = shape[i] ? flat / shape[i] : 0;
    }
}

const char *rc_index_str(int64_t flat, int ndim, const int64_t *shape, char *buf, int cap)
{
    int64_t idx[8];
    rc_index_unflatten(flat, ndim, shape, idx);
    int n = snprintf(buf, (size_t)cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += snprintf(buf + n, (size_t)(cap - n), "%s%lld", i ? "," : "", (long long)idx[i]);
    if (n < cap)
        snprintf(buf + n, (size_t)(cap - n), "]");
    return buf;
}
