/* harness compare's cases (see compare.h): what a stage is checked against, its noise floor, the probe collector. */
#include "compare.h"

#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "forward64.h"
#include "golden.h"

int rc_probe_selected(const char *pattern, const char *name)
{
    return !pattern || fnmatch(pattern, name, 0) == 0;
}

int rc_argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (int)best;
}

/* "bfloat16" -> bf16 from config.json's dtype (or torch_dtype); fp32 when absent. */
static void precision_from_config(const char *json, char *out, size_t cap)
{
    snprintf(out, cap, "fp32");
    cJSON *root = json ? cJSON_Parse(json) : NULL;
    if (!root)
        return;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    if (!cJSON_IsString(d))
        d = cJSON_GetObjectItemCaseSensitive(root, "torch_dtype");
    if (cJSON_IsString(d)) {
        if (!strcmp(d->valuestring, "bfloat16"))
            snprintf(out, cap, "bf16");
        else if (!strcmp(d->valuestring, "float16"))
            snprintf(out, cap, "fp16");
    }
    cJSON_Delete(root);
}

/* ---- collecting what a stage reports ---- */
static int collect_want(void *user, const char *name)
{
    rc_collect *c = user;
    if (!c->ref)
        return 1;
    return rc_probe_selected(c->pattern, name) && rc_tensors_find(c->ref, name) != NULL;
}

static int collect_emit(void *user, const char *name, const float *data, int ndim, const int64_t *shape)
{
    rc_collect *c = user;
    int64_t n;
    if (!rc_numel(ndim, shape, &n))
        return rc_fail(c->e, RC_E_RANGE, "probe '%s': size overflow", name);
    if (rc_tensors_find(&c->got, name))
        return RC_OK; /* a stage that reports a probe twice: the first one counts */
    float *copy = rc_calloc(n ? n : 1, sizeof *copy, c->e, name);
    if (!copy)
        return c->e->code;
    memcpy(copy, data, (size_t)n * sizeof *copy);
    return rc_tensors_add(&c->got, name, ndim, shape, copy, c->e);
}

rc_probe_sink rc_collect_sink(rc_collect *cc)
{
    return (rc_probe_sink){.emit = collect_emit, .want = collect_want, .user = cc};
}

/* ---- cases ---- */
typedef struct names_ctx {
    const rc_tensors *probes;
    unsigned char *seen; /* [probes->n] */
    int bad;             /* the first probe whose size differs from ref's, or -1 */
    char ref_shape[48];
} names_ctx;

static int names_find(const names_ctx *nc, const char *name)
{
    for (int i = 0; i < nc->probes->n; i++)
        if (!strcmp(nc->probes->t[i].name, name))
            return i;
    return -1;
}

static int names_want(void *user, const char *name)
{
    names_ctx *nc = user;
    const int i = names_find(nc, name);
    if (i >= 0)
        nc->seen[i] = 1;
    return i >= 0 && nc->bad < 0;
}

static int names_emit(void *user, const char *name, const float *data, int ndim, const int64_t *shape)
{
    names_ctx *nc = user;
    int64_t n;
    const int i = names_find(nc, name);
    (void)data;
    if (i >= 0 && nc->bad < 0 && (!rc_numel(ndim, shape, &n) || n != nc->probes->t[i].numel)) {
        nc->bad = i;
        rc_shape_str(ndim, shape, nc->ref_shape, sizeof nc->ref_shape);
    }
    return RC_OK;
}

/* Every probe the golden names must be one ref asks for (ref reports every probe any stage can), of the size ref
 * gives it for this config: run ref with a sink that records the names and sizes. A model ref cannot run is left
 * to the stage to refuse. Either mismatch is a malformed golden (bad input), never a stage's failure. */
static int check_probe_names(const rc_case *c, rc_err *e)
{
    rc_err ignored = {0};
    if (!c->probes.n || rc_config_check(&c->m.cfg, &ref_caps, &ignored))
        return RC_OK;
    int rc = rc_model_check_ids(&c->m, c->ids, c->n_ids, e);
    unsigned char *seen = rc ? NULL : rc_calloc(c->probes.n, 1, e, "probe names");
    if (!seen)
        return rc ? rc : e->code;
    names_ctx nc = {.probes = &c->probes, .seen = seen, .bad = -1};
    const rc_probe_sink sink = {.emit = names_emit, .want = names_want, .user = &nc};
    if (ref_forward(&c->m, c->ids, c->n_ids, NULL, &sink, &ignored) == RC_OK) {
        for (int i = 0; i < c->probes.n && !rc; i++)
            if (!seen[i])
                rc = rc_fail(e, RC_E_FORMAT, "%s: probe_order names '%s', which no stage produces for this %s model",
                             c->label, c->probes.t[i].name, c->model_type);
        if (!rc && nc.bad >= 0) {
            const rc_tensor *t = &c->probes.t[nc.bad];
            char gs[48];
            rc = rc_fail(e, RC_E_SHAPE, "%s: golden probe '%s' has shape %s, its config and prompt imply %s", c->label,
                         t->name, rc_shape_str(t->ndim, t->shape, gs, sizeof gs), nc.ref_shape);
        }
    }
    free(seen);
    return rc;
}

int rc_case_from_golden(rc_case *c, const char *path, rc_err *e)
{
    memset(c, 0, sizeof *c);
    rc_golden g;
    int rc = rc_golden_load(path, RC_GOLDEN_ALL, &g, e);
    if (rc)
        return rc;
    snprintf(c->label, sizeof c->label, "%s", path);
    snprintf(c->preset, sizeof c->preset, "%s", g.preset);
    snprintf(c->model_type, sizeof c->model_type, "%s", g.model_type);
    snprintf(c->ref_name, sizeof c->ref_name, "HF");
    precision_from_config(g.config_json, c->precision, sizeof c->precision);
    snprintf(c->versions, sizeof c->versions, "transformers %s, torch %s",
             g.transformers_version ? g.transformers_version : "?", g.torch_version ? g.torch_version : "?");
    if ((rc = rc_model_from_golden(&c->m, &g, e)))
        goto out;
    c->has_model = 1;
    if (g.n_steps > 0 && g.vocab != c->m.cfg.vocab) { /* logits rows are sized by the golden's vocab */
        rc = rc_fail(e, RC_E_SHAPE, "%s: greedy/logits has %lld columns, the config's vocab_size is %lld", path,
                     (long long)g.vocab, (long long)c->m.cfg.vocab);
        goto out;
    }
    c->ids = g.ids;
    c->n_ids = g.n_ids;
    c->probes = g.probes;
    c->tokens = g.greedy_tokens;
    c->step_logits = g.greedy_logits;
    c->n_steps = g.n_steps;
    c->vocab = g.vocab;
    g.ids = NULL;
    g.greedy_tokens = NULL;
    g.greedy_logits = NULL;
    memset(&g.probes, 0, sizeof g.probes);
    rc = check_probe_names(c, e);
out:
    rc_golden_free(&g);
    if (rc)
        rc_case_free(c);
    return rc;
}

int rc_case_from_stage(rc_case *c, const char *model_path, const int32_t *prompt, int64_t n_prompt,
                       const rc_stage *B, const rc_stage_opts *bo, int64_t n_steps, rc_err *e)
{
    memset(c, 0, sizeof *c);
    snprintf(c->label, sizeof c->label, "%s", model_path);
    snprintf(c->ref_name, sizeof c->ref_name, "%s", B->name);
    snprintf(c->precision, sizeof c->precision, "%s", rc_stage_storage(B, bo)); /* B computes what it stores */
    size_t pl = strlen(model_path);
    int is_h5 = pl > 3 && !strcmp(model_path + pl - 3, ".h5");
    int rc;
    if (is_h5) {
        rc_golden g;
        if ((rc = rc_golden_load(model_path, 0, &g, e)))
            return rc;
        snprintf(c->preset, sizeof c->preset, "%s", g.preset);
        if (!prompt) {
            c->ids = g.ids;
            c->n_ids = g.n_ids;
            g.ids = NULL;
        }
        rc_golden_free(&g);
    } else {
        const char *base = strrchr(model_path, '/');
        snprintf(c->preset, sizeof c->preset, "%s", base && base[1] ? base + 1 : model_path);
    }
    if ((rc = rc_model_load(&c->m, model_path, e))) {
        rc_case_free(c);
        return rc;
    }
    c->has_model = 1;
    snprintf(c->model_type, sizeof c->model_type, "%s", c->m.cfg.model_type);
    const int64_t V = c->m.cfg.vocab;
    if (!c->ids) {
        /* the given prompt, or a fixed one: 16 ids spread over the vocabulary */
        int64_t n = prompt ? n_prompt : 16;
        if (!(c->ids = rc_calloc(n, sizeof *c->ids, e, "prompt"))) {
            rc_case_free(c);
            return e->code;
        }
        for (int64_t i = 0; i < n; i++)
            c->ids[i] = prompt ? prompt[i] : (int32_t)((1 + i * 7919) % V);
        c->n_ids = n;
    }
    c->n_steps = n_steps;
    c->vocab = V;
    void *st = NULL;
    rc_collect cc = {.ref = NULL, .e = e};
    rc_probe_sink sink = rc_collect_sink(&cc);
    int32_t *ids = rc_calloc(c->n_ids + n_steps, sizeof *ids, e, "greedy ids");
    float *logits = rc_calloc((c->n_ids + n_steps) * V, sizeof *logits, e, "logits");
    c->tokens = rc_calloc(n_steps ? n_steps : 1, sizeof *c->tokens, e, "tokens");
    c->step_logits = rc_calloc((n_steps ? n_steps : 1) * V, sizeof *c->step_logits, e, "step logits");
    if (!ids || !logits || !c->tokens || !c->step_logits)
        rc = e->code;
    else if ((rc = rc_model_check_ids(&c->m, c->ids, c->n_ids, e)) == RC_OK &&
             (rc = B->open(&st, &c->m, bo, e)) == RC_OK) {
        rc = B->forward(st, c->ids, c->n_ids, NULL, &sink, e);
        memcpy(ids, c->ids, (size_t)c->n_ids * sizeof *ids);
        for (int64_t s = 0; s < n_steps && !rc; s++) {
            const int64_t T = c->n_ids + s;
            if ((rc = B->forward(st, ids, T, logits, NULL, e)))
                break;
            memcpy(c->step_logits + s * V, logits + (T - 1) * V, (size_t)V * sizeof *logits);
            ids[T] = c->tokens[s] = rc_argmax(logits + (T - 1) * V, V);
        }
        B->close(st);
    }
    free(ids);
    free(logits);
    c->probes = cc.got;
    if (rc)
        rc_case_free(c);
    return rc;
}

/* ---- the noise floor ---- */
typedef struct floor_ctx {
    rc_case *c;
    const char *pattern;
} floor_ctx;

static int floor_want(void *user, const char *name)
{
    floor_ctx *f = user;
    return rc_probe_selected(f->pattern, name) && rc_tensors_find(&f->c->probes, name) != NULL;
}

static int floor_emit(void *user, const char *name, const double *data, int ndim, const int64_t *shape)
{
    floor_ctx *f = user;
    const rc_tensors *p = &f->c->probes;
    int64_t n;
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->t[i].name, name)) {
            if (rc_numel(ndim, shape, &n) && n == p->t[i].numel) {
                rc_metrics_compute64(p->t[i].data, data, n, &f->c->floor[i]);
                f->c->floor_has[i] = 1;
                if ((f->c->exact[i] = malloc((size_t)(n ? n : 1) * sizeof *data)))
                    memcpy(f->c->exact[i], data, (size_t)n * sizeof *data);
            }
            break;
        }
    return RC_OK;
}

static void floor_free(rc_case *c)
{
    for (int i = 0; c->exact && i < c->probes.n; i++)
        free(c->exact[i]);
    free(c->exact);
    free(c->exact_steps);
    c->exact = NULL;
    c->exact_steps = NULL;
    free(c->floor);
    free(c->floor_has);
    free(c->floor_steps);
    free(c->floor_steps_has);
    c->floor = NULL;
    c->floor_has = c->floor_steps_has = NULL;
    c->floor_steps = NULL;
}

void rc_case_floor(rc_case *c, const char *probe_pattern, int gdn_recurrent)
{
    if (c->floor_state && c->floor_recurrent == gdn_recurrent)
        return;
    floor_free(c);
    rc_err e = {0};
    const int64_t V = c->vocab, T0 = c->n_ids;
    const ref_opts fo = {.gdn_recurrent = gdn_recurrent};
    int32_t *ids = NULL;
    double *logits = NULL;
    c->floor_state = -1;
    c->floor_recurrent = gdn_recurrent;
    if (!c->has_model || ref64_check(&c->m, &e)) {
        snprintf(c->floor_why, sizeof c->floor_why, "%s", c->has_model ? e.msg : "no model");
        return;
    }
    int np = c->probes.n ? c->probes.n : 1, ns = c->n_steps ? (int)c->n_steps : 1;
    c->floor = calloc((size_t)np, sizeof *c->floor);
    c->floor_has = calloc((size_t)np, 1);
    c->floor_steps = calloc((size_t)ns, sizeof *c->floor_steps);
    c->floor_steps_has = calloc((size_t)ns, 1);
    c->exact = calloc((size_t)np, sizeof *c->exact);
    c->exact_steps = calloc((size_t)(ns * V), sizeof *c->exact_steps);
    ids = calloc((size_t)(T0 + c->n_steps), sizeof *ids);
    if (!c->floor || !c->floor_has || !c->floor_steps || !c->floor_steps_has || !c->exact || !c->exact_steps || !ids) {
        snprintf(c->floor_why, sizeof c->floor_why, "out of host memory");
        goto out;
    }
    floor_ctx fc = {.c = c, .pattern = probe_pattern};
    ref64_sink sink = {.emit = floor_emit, .want = floor_want, .user = &fc};
    if (ref64_forward_ex(&c->m, c->ids, T0, NULL, &sink, &fo, &e)) {
        snprintf(c->floor_why, sizeof c->floor_why, "%s", e.msg);
        goto out;
    }
    memcpy(ids, c->ids, (size_t)T0 * sizeof *ids);
    memcpy(ids + T0, c->tokens, (size_t)c->n_steps * sizeof *ids);
    if (c->n_steps && rc_probe_selected(probe_pattern, "greedy.step00")) {
        if (!(logits = malloc((size_t)((T0 + c->n_steps) * V) * sizeof *logits))) {
            snprintf(c->floor_why, sizeof c->floor_why, "out of host memory");
            goto out;
        }
        for (int64_t s = 0; s < c->n_steps; s++) {
            const int64_t T = T0 + s;
            if (ref64_forward_ex(&c->m, ids, T, logits, NULL, &fo, &e)) {
                snprintf(c->floor_why, sizeof c->floor_why, "%s", e.msg);
                goto out;
            }
            rc_metrics_compute64(c->step_logits + s * V, logits + (T - 1) * V, V, &c->floor_steps[s]);
            memcpy(c->exact_steps + s * V, logits + (T - 1) * V, (size_t)V * sizeof *logits);
            c->floor_steps_has[s] = 1;
        }
    }
    c->floor_state = 1;
    c->floor_why[0] = 0;
out:
    free(ids);
    free(logits);
}

void rc_case_free(rc_case *c)
{
    if (c->has_model)
        rc_model_free(&c->m);
    floor_free(c); /* before the probes: their count sizes c->exact */
    free(c->ids);
    rc_tensors_free(&c->probes);
    free(c->tokens);
    free(c->step_logits);
    memset(c, 0, sizeof *c);
}
