/* Tolerance file (see tolerance.h). */
#include "tolerance.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"

#ifndef RC_TOL_FILE
#define RC_TOL_FILE "harness/tolerances.json"
#endif

const char *rc_tol_default_path(void)
{
    const char *p = getenv("REFCHAIN_TOLERANCES");
    return p && *p ? p : RC_TOL_FILE;
}

static int add_entry(rc_tolerances *t, const rc_tol_entry *en, rc_err *e)
{
    if (t->n == t->cap) {
        int nc = t->cap ? 2 * t->cap : 16;
        rc_tol_entry *ne = realloc(t->e, (size_t)nc * sizeof *ne);
        if (!ne)
            return rc_fail(e, RC_E_NOMEM, "out of host memory");
        t->e = ne;
        t->cap = nc;
    }
    t->e[t->n++] = *en;
    return RC_OK;
}

static int get_str(const cJSON *o, const char *key, char *out, size_t cap, const char *def, const char *path,
                   const char *where, rc_err *e)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it && def) {
        snprintf(out, cap, "%s", def);
        return RC_OK;
    }
    if (!cJSON_IsString(it) || strlen(it->valuestring) >= cap)
        return rc_fail(e, RC_E_FORMAT, "%s: %s: '%s' must be a string (< %zu chars)", path, where, key, cap);
    snprintf(out, cap, "%s", it->valuestring);
    return RC_OK;
}

static int get_num(const cJSON *o, const char *key, double *out, const char *path, const char *where, rc_err *e)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < 0)
        return rc_fail(e, RC_E_FORMAT, "%s: %s: '%s' must be a non-negative number", path, where, key);
    *out = it->valuedouble;
    return RC_OK;
}

static int parse(rc_tolerances *t, const cJSON *root, const char *path, rc_err *e)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "refchain-tolerances"))
        return rc_fail(e, RC_E_FORMAT, "%s: 'format' must be \"refchain-tolerances\"", path);
    if (!cJSON_IsNumber(ver) || ver->valueint < 1)
        return rc_fail(e, RC_E_FORMAT, "%s: 'version' must be a positive integer", path);
    t->version = ver->valueint;
    int rc;
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(root, "floor");
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(root, "near_tie");
    const cJSON *rg = cJSON_GetObjectItemCaseSensitive(root, "regression");
    if (!cJSON_IsObject(fl) || !cJSON_IsObject(nt) || !cJSON_IsObject(rg))
        return rc_fail(e, RC_E_FORMAT, "%s: needs objects 'floor', 'near_tie' and 'regression'", path);
    if ((rc = get_num(fl, "multiple", &t->floor_multiple, path, "floor", e)) ||
        (rc = get_num(fl, "cap", &t->floor_cap, path, "floor", e)) ||
        (rc = get_str(fl, "reason", t->floor_reason, sizeof t->floor_reason, NULL, path, "floor", e)) ||
        (rc = get_num(nt, "margin", &t->near_tie_margin, path, "near_tie", e)) ||
        (rc = get_str(nt, "reason", t->near_tie_reason, sizeof t->near_tie_reason, NULL, path, "near_tie", e)) ||
        (rc = get_num(rg, "factor", &t->reg_factor, path, "regression", e)) ||
        (rc = get_num(rg, "min", &t->reg_min, path, "regression", e)) ||
        (rc = get_str(rg, "reason", t->reg_reason, sizeof t->reg_reason, NULL, path, "regression", e)))
        return rc;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(root, "reference"); /* optional: HF unless it says exact */
    if (ref) {
        char def[16];
        if (!cJSON_IsObject(ref))
            return rc_fail(e, RC_E_FORMAT, "%s: 'reference' must be an object", path);
        if ((rc = get_str(ref, "default", def, sizeof def, NULL, path, "reference", e)) ||
            (rc = get_str(ref, "reason", t->exact_reason, sizeof t->exact_reason, NULL, path, "reference", e)))
            return rc;
        if (strcmp(def, "HF") && strcmp(def, "exact"))
            return rc_fail(e, RC_E_FORMAT, "%s: reference: 'default' must be \"HF\" or \"exact\"", path);
        t->exact_default = !strcmp(def, "exact");
    }
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "bounds");
    if (!cJSON_IsArray(arr) || !cJSON_GetArraySize(arr))
        return rc_fail(e, RC_E_FORMAT, "%s: 'bounds' must be a non-empty array", path);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        char where[32], metric[32];
        rc_tol_entry en = {0};
        snprintf(where, sizeof where, "bounds[%d]", i++);
        if (!cJSON_IsObject(it))
            return rc_fail(e, RC_E_FORMAT, "%s: %s is not an object", path, where);
        if ((rc = get_str(it, "stage", en.stage, sizeof en.stage, "*", path, where, e)) ||
            (rc = get_str(it, "precision", en.precision, sizeof en.precision, "*", path, where, e)) ||
            (rc = get_str(it, "probe", en.probe, sizeof en.probe, "*", path, where, e)) ||
            (rc = get_str(it, "model", en.model, sizeof en.model, "*", path, where, e)) ||
            (rc = get_str(it, "metric", metric, sizeof metric, NULL, path, where, e)) ||
            (rc = get_num(it, "bound", &en.bound, path, where, e)) ||
            (rc = get_str(it, "reason", en.reason, sizeof en.reason, NULL, path, where, e)))
            return rc;
        if ((en.metric = rc_metric_parse(metric)) < 0)
            return rc_fail(e, RC_E_FORMAT,
                           "%s: %s: unknown metric '%s' (scaled, max_abs, max_rel, rms, nmse, cosine, ulp)", path, where,
                           metric);
        if (!en.reason[0])
            return rc_fail(e, RC_E_FORMAT, "%s: %s: every bound needs a reason", path, where);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(it, "strict");
        en.strict = cJSON_IsTrue(st);
        if ((rc = add_entry(t, &en, e)))
            return rc;
    }
    return RC_OK;
}

int rc_tol_load(rc_tolerances *t, const char *path, rc_err *e)
{
    memset(t, 0, sizeof *t);
    if (!path)
        path = rc_tol_default_path();
    snprintf(t->path, sizeof t->path, "%s", path);
    char *text = rc_read_text(path, "the tolerance file", 1 << 20, e);
    if (!text)
        return e->code;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root)
        return rc_fail(e, RC_E_FORMAT, "%s: not valid JSON", path);
    int rc = parse(t, root, path, e);
    cJSON_Delete(root);
    if (rc)
        rc_tol_free(t);
    return rc;
}

int rc_tol_override(rc_tolerances *t, const char *spec, rc_err *e)
{
    rc_tol_entry en = {.stage = "*", .precision = "*", .probe = "*", .model = "*", .metric = RC_MET_SCALED};
    char buf[128];
    if (strlen(spec) >= sizeof buf) /* refused, never cut: a cut pattern or bound would change what is checked */
        return rc_fail(e, RC_E_USAGE, "--tol %.32s...: longer than %zu characters", spec, sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", spec);
    char *eq = strchr(buf, '='), *num = buf;
    if (eq) {
        *eq = 0;
        num = eq + 1;
        char *colon = strchr(buf, ':');
        if (colon) {
            *colon = 0;
            if (strlen(colon + 1) >= sizeof en.probe)
                return rc_fail(e, RC_E_USAGE, "--tol %s: the probe pattern is longer than %zu characters", spec,
                               sizeof en.probe - 1);
            snprintf(en.probe, sizeof en.probe, "%s", colon + 1);
        }
        if ((en.metric = rc_metric_parse(buf)) < 0)
            return rc_fail(e, RC_E_USAGE, "--tol %s: unknown metric '%s'", spec, buf);
    }
    char *end;
    errno = 0;
    en.bound = strtod(num, &end);
    if (errno || end == num || *end || !(en.bound >= 0) || !isfinite(en.bound))
        return rc_fail(e, RC_E_USAGE, "--tol %s: needs a non-negative number", spec);
    en.strict = 1; /* a bound the user asks for is not relaxed by the floor */
    en.user = 1;
    snprintf(en.reason, sizeof en.reason, "--tol %s on the command line", spec);
    return add_entry(t, &en, e);
}

void rc_tol_free(rc_tolerances *t)
{
    free(t->e);
    t->e = NULL;
    t->n = t->cap = 0;
}

void rc_tol_bounds(const rc_tolerances *t, const char *stage, const char *precision, const char *model_type,
                   const char *probe, rc_bounds *b)
{
    memset(b, 0, sizeof *b);
    for (int i = 0; i < t->n; i++) {
        const rc_tol_entry *en = &t->e[i];
        if (fnmatch(en->stage, stage, 0) || fnmatch(en->precision, precision, 0) || fnmatch(en->probe, probe, 0) ||
            fnmatch(en->model, model_type, 0))
            continue;
        b->has[en->metric] = 1;
        b->bound[en->metric] = en->bound;
        b->strict[en->metric] = en->strict;
        b->src[en->metric] = en;
    }
}

const char *rc_bound_str(int metric, double bound, char *buf, int cap)
{
    if (metric == RC_MET_ULP)
        snprintf(buf, (size_t)cap, "ulp<=%.0f", bound);
    else
        snprintf(buf, (size_t)cap, "%s%s%.10g", rc_metric_name(metric), rc_metric_is_lower_bound(metric) ? ">=" : "<=",
                 bound);
    return buf;
}
