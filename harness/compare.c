/* harness compare (see compare.h): cases, the noise floor, one evaluation, its table and its JSON. */
#include "compare.h"

#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault.h"
#include "forward64.h"
#include "golden.h"

static int probe_selected(const char *pattern, const char *name)
{
    return !pattern || fnmatch(pattern, name, 0) == 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (int)best;
}

/* top-1 minus top-2 */
static double top2_margin(const float *x, int64_t n)
{
    double a = -INFINITY, b = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] > a) {
            b = a;
            a = x[i];
        } else if (x[i] > b)
            b = x[i];
    }
    return n > 1 ? a - b : INFINITY;
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

/* The precision a stage stores weights (and KV) in: the engine keeps bf16 unless --f32; the other stages
 * widen everything to fp32. */
static const char *stage_storage(const rc_stage *s, const rc_stage_opts *o)
{
    return !strcmp(s->name, "engine") && !o->f32 ? "bf16" : "fp32";
}

/* bf16 (8 significant bits) over fp16 (11) over fp32 */
static const char *lossier(const char *a, const char *b)
{
    if (!strcmp(a, "bf16") || !strcmp(b, "bf16"))
        return "bf16";
    if (!strcmp(a, "fp16") || !strcmp(b, "fp16"))
        return "fp16";
    return "fp32";
}

/* ---- collecting what a stage reports ---- */
typedef struct collect_ctx {
    const rc_tensors *ref; /* NULL: keep every probe (the stage is the reference) */
    const char *pattern;
    rc_tensors got;
    rc_err *e;
} collect_ctx;

static int collect_want(void *user, const char *name)
{
    collect_ctx *c = user;
    if (!c->ref)
        return 1;
    return probe_selected(c->pattern, name) && rc_tensors_find(c->ref, name) != NULL;
}

static int collect_emit(void *user, const char *name, const float *data, int ndim, const int64_t *shape)
{
    collect_ctx *c = user;
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

/* ---- cases ---- */
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
    snprintf(c->precision, sizeof c->precision, "%s", stage_storage(B, bo)); /* B computes what it stores */
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
    collect_ctx cc = {.ref = NULL, .e = e};
    rc_probe_sink sink = {.emit = collect_emit, .want = collect_want, .user = &cc};
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
            ids[T] = c->tokens[s] = argmax(logits + (T - 1) * V, V);
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
    return probe_selected(f->pattern, name) && rc_tensors_find(&f->c->probes, name) != NULL;
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
            }
            break;
        }
    return RC_OK;
}

static void floor_free(rc_case *c)
{
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
    ids = calloc((size_t)(T0 + c->n_steps), sizeof *ids);
    if (!c->floor || !c->floor_has || !c->floor_steps || !c->floor_steps_has || !ids) {
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
    if (c->n_steps && probe_selected(probe_pattern, "greedy.step00")) {
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
    free(c->ids);
    rc_tensors_free(&c->probes);
    free(c->tokens);
    free(c->step_logits);
    floor_free(c);
    memset(c, 0, sizeof *c);
}

/* ---- judging one row ---- */
static void where_of(rc_where *w, const char *name, int ndim, const int64_t *shape, int64_t flat, int64_t T)
{
    w->layer = -1;
    w->step = -1;
    w->token = -1;
    const char *op = name;
    if (name[0] == 'L' && name[1] >= '0' && name[1] <= '9') {
        char *end;
        long l = strtol(name + 1, &end, 10);
        if (*end == '.') {
            w->layer = (int)l;
            op = end + 1;
        }
    }
    snprintf(w->op, sizeof w->op, "%s", op);
    if (ndim >= 2 && shape[0] == T && !strstr(op, "state")) {
        int64_t idx[RC_MAX_DIMS];
        rc_index_unflatten(flat, ndim, shape, idx);
        w->token = idx[0];
    }
}

static void judge(rc_row *r, const float *a, const float *b, int64_t n, int ndim, const int64_t *shape,
                  const rc_tolerances *t, double floor_multiple)
{
    rc_metrics_compute(a, b, n, &r->m);
    rc_index_str(r->m.worst, ndim, shape, r->worst, sizeof r->worst);
    r->bad_metric = -1;
    r->xfloor = NAN;
    if (r->has_floor && r->floor.max_abs > 0 && isfinite(r->floor.max_abs))
        r->xfloor = r->m.max_abs / r->floor.max_abs;
    if (r->m.nonfinite) {
        r->fail = 1;
        r->bad_metric = RC_MET_COUNT;
        r->status = RC_ROW_NONFINITE;
        return;
    }
    int strict_fail = 0;
    for (int k = 0; k < RC_MET_COUNT; k++)
        if (r->b.has[k] && !rc_metric_within(k, rc_metric_value(&r->m, k), r->b.bound[k])) {
            if (r->bad_metric < 0)
                r->bad_metric = k;
            strict_fail |= r->b.strict[k];
        }
    if (r->bad_metric < 0)
        r->status = RC_ROW_OK;
    else if (!strict_fail && floor_multiple > 0 && isfinite(r->xfloor) && r->xfloor <= floor_multiple &&
             r->floor.scaled <= t->floor_cap)
        r->status = RC_ROW_OK_FLOOR; /* a floor above the cap means the double forward itself disagrees with HF */
    else {
        r->status = RC_ROW_FAIL;
        r->fail = 1;
    }
}

const char *rc_row_status_name(rc_row_status s)
{
    switch (s) {
    case RC_ROW_UNSELECTED: return "-";
    case RC_ROW_OK: return "ok";
    case RC_ROW_OK_FLOOR: return "ok(floor)";
    case RC_ROW_FAIL: return "FAIL";
    case RC_ROW_NONFINITE: return "NaN/Inf";
    case RC_ROW_MISSING: return "MISSING";
    case RC_ROW_SKIPPED: return "skipped";
    case RC_ROW_SHAPE: return "SHAPE";
    case RC_ROW_TOKEN: return "TOKEN";
    case RC_ROW_NEAR_TIE: return "NEAR-TIE";
    }
    return "?";
}

static int row_has_metrics(const rc_row *r)
{
    return r->status == RC_ROW_OK || r->status == RC_ROW_OK_FLOOR || r->status == RC_ROW_FAIL ||
           r->status == RC_ROW_NONFINITE || r->status == RC_ROW_TOKEN || r->status == RC_ROW_NEAR_TIE;
}

const char *rc_where_str(const rc_where *w, char *buf, int cap)
{
    int n;
    if (w->step >= 0)
        n = snprintf(buf, (size_t)cap, "greedy decode step %d, op %s", w->step, w->op);
    else if (w->layer >= 0)
        n = snprintf(buf, (size_t)cap, "layer %d, op %s", w->layer, w->op);
    else
        n = snprintf(buf, (size_t)cap, "global, op %s", w->op);
    if (w->token >= 0 && n < cap)
        snprintf(buf + n, (size_t)(cap - n), ", token %lld", (long long)w->token);
    return buf;
}

const char *rc_row_describe(const rc_row *r, char *buf, int cap)
{
    char where[128], bs[48];
    rc_where_str(&r->where, where, sizeof where);
    if (r->status == RC_ROW_NONFINITE)
        snprintf(buf, (size_t)cap, "%s NaN/Inf (%lld NaN, %lld Inf, %lld non-finite mismatches, first at %s; %s)",
                 r->name, (long long)r->m.nan, (long long)r->m.inf, (long long)r->m.nonfinite, r->worst, where);
    else if (r->status == RC_ROW_TOKEN || r->status == RC_ROW_NEAR_TIE)
        snprintf(buf, (size_t)cap, "%s %s: stage token %d, reference token %d, reference top-1/top-2 margin %.3e (%s)",
                 r->name, r->status == RC_ROW_NEAR_TIE ? "near-tie token mismatch" : "token mismatch", r->tok,
                 r->want_tok, r->margin, where);
    else if (r->status == RC_ROW_FAIL && r->bad_metric >= 0 && r->bad_metric < RC_MET_COUNT)
        snprintf(buf, (size_t)cap, "%s FAIL (%s = %.3e, bound %s, at %s; %s)", r->name, rc_metric_name(r->bad_metric),
                 rc_metric_value(&r->m, r->bad_metric),
                 rc_bound_str(r->bad_metric, r->b.bound[r->bad_metric], bs, sizeof bs), r->worst, where);
    else
        snprintf(buf, (size_t)cap, "%s %s (%s)", r->name, rc_row_status_name(r->status), where);
    return buf;
}

/* ---- one evaluation ---- */
static int eval_greedy(const rc_case *c, const rc_compare_opts *o, const rc_tolerances *t, void *st, rc_eval *ev,
                       rc_err *e)
{
    const int64_t T0 = c->n_ids, N = c->n_steps, V = c->vocab;
    int32_t *ids = rc_calloc(T0 + N, sizeof *ids, e, "greedy ids");
    float *logits = rc_calloc((T0 + N) * V, sizeof *logits, e, "greedy logits");
    int rc = (!ids || !logits) ? e->code : RC_OK;
    ev->first_mismatch = -1;
    if (!rc) {
        memcpy(ids, c->ids, (size_t)T0 * sizeof *ids);
        memcpy(ids + T0, c->tokens, (size_t)N * sizeof *ids);
    }
    if (!rc && o->stage->greedy)
        rc = o->stage->greedy(st, c->ids, T0, c->tokens, N, logits, e);
    for (int64_t s = 0; s < N && !rc; s++) {
        const int64_t T = T0 + s;
        const float *last;
        if (o->stage->greedy)
            last = logits + s * V;
        else {
            if ((rc = o->stage->forward(st, ids, T, logits, NULL, e)))
                break;
            last = logits + (T - 1) * V;
        }
        const float *want = c->step_logits + s * V;
        rc_row *r = &ev->rows[ev->nrows++];
        snprintf(r->name, sizeof r->name, "greedy.step%02d", (int)s);
        int64_t shape[1] = {V};
        snprintf(r->shape, sizeof r->shape, "[%lld]", (long long)V);
        rc_tol_bounds(t, o->stage->name, ev->precision, c->model_type, r->name, &r->b);
        if (c->floor_state > 0 && c->floor_steps_has[s]) {
            r->has_floor = 1;
            r->floor = c->floor_steps[s];
        }
        judge(r, last, want, V, 1, shape, t, t->floor_multiple);
        r->where.layer = -1;
        r->where.step = (int)s;
        r->where.token = T - 1;
        snprintf(r->where.op, sizeof r->where.op, "logits");
        r->tok = argmax(last, V);
        r->want_tok = c->tokens[s];
        r->margin = top2_margin(want, V);
        if (r->tok == r->want_tok)
            ev->equal++;
        else {
            int near = r->margin < t->near_tie_margin;
            ev->near_ties += near;
            if (!r->fail) { /* logits within bounds: the token decides */
                r->status = near ? RC_ROW_NEAR_TIE : RC_ROW_TOKEN;
                r->fail = !(near && o->allow_near_ties);
            }
            if (ev->first_mismatch < 0)
                ev->first_mismatch = (int)s;
        }
        if (r->m.scaled > ev->worst_step_scaled || s == 0) {
            ev->worst_step_scaled = r->m.scaled;
            ev->worst_step_abs = r->m.max_abs;
            ev->worst_step = (int)s;
        }
        ev->steps++;
    }
    free(ids);
    free(logits);
    return rc;
}

int rc_eval_stage(const rc_case *c, const rc_compare_opts *o, const rc_tolerances *t, rc_eval *ev)
{
    rc_err e = {0};
    memset(ev, 0, sizeof *ev);
    snprintf(ev->stage, sizeof ev->stage, "%s", o->stage->name);
    snprintf(ev->link, sizeof ev->link, "%s", o->stage->link);
    snprintf(ev->precision, sizeof ev->precision, "%s", lossier(c->precision, stage_storage(o->stage, &o->stage_opts)));
    ev->first = ev->worst = ev->first_mismatch = -1;
    ev->allow_near_ties = o->allow_near_ties;
    void *st = NULL;
    int stage_ok = 0;
    const int P = c->probes.n;
    const double t0 = now_s();
    collect_ctx cc = {.ref = &c->probes, .pattern = o->probe, .e = &e};
    rc_probe_sink sink = {.emit = collect_emit, .want = collect_want, .user = &cc};
    int do_greedy = o->greedy && c->n_steps > 0 && probe_selected(o->probe, "greedy.step00");
    int rc = RC_OK;
    if (!(ev->rows = rc_calloc(P + (do_greedy ? c->n_steps : 0) + 1, sizeof *ev->rows, &e, "rows"))) {
        rc = e.code;
        goto out;
    }
    if ((rc = o->stage->open(&st, &c->m, &o->stage_opts, &e)))
        goto out;
    stage_ok = 1;
    if ((rc = o->stage->forward(st, c->ids, c->n_ids, NULL, &sink, &e)))
        goto out;
    for (int i = 0; i < P; i++) {
        const rc_tensor *want = &c->probes.t[i];
        rc_row *r = &ev->rows[ev->nrows++];
        snprintf(r->name, sizeof r->name, "%s", want->name);
        rc_shape_str(want->ndim, want->shape, r->shape, sizeof r->shape);
        r->bad_metric = -1;
        where_of(&r->where, want->name, want->ndim, want->shape, 0, c->n_ids);
        r->where.token = -1;
        if (!probe_selected(o->probe, want->name)) {
            r->status = RC_ROW_UNSELECTED;
            continue;
        }
        ev->nsel++;
        rc_tol_bounds(t, o->stage->name, ev->precision, c->model_type, want->name, &r->b);
        if (c->floor_state > 0 && c->floor_has[i]) {
            r->has_floor = 1;
            r->floor = c->floor[i];
        }
        const rc_tensor *got = rc_tensors_find(&cc.got, want->name);
        if (!got) {
            r->fail = o->stage->reports_all_probes;
            r->status = r->fail ? RC_ROW_MISSING : RC_ROW_SKIPPED;
            ev->nskip += !r->fail;
        } else if (got->numel != want->numel) {
            char gs[48];
            r->fail = 1;
            r->status = RC_ROW_SHAPE;
            fprintf(stderr, "harness: probe %s: stage %s reported %s, the reference has %s\n", want->name,
                    o->stage->name, rc_shape_str(got->ndim, got->shape, gs, sizeof gs), r->shape);
        } else {
            judge(r, got->data, want->data, want->numel, want->ndim, want->shape, t, t->floor_multiple);
            where_of(&r->where, want->name, want->ndim, want->shape, r->m.worst, c->n_ids);
            ev->nfloor_pass += r->status == RC_ROW_OK_FLOOR;
            if (ev->worst < 0 || r->m.scaled > ev->rows[ev->worst].m.scaled)
                ev->worst = i;
        }
        if (r->fail) {
            ev->nfail++;
            if (ev->first < 0)
                ev->first = i;
        }
    }
    ev->nprobes = ev->nrows;
    if (do_greedy && (rc = eval_greedy(c, o, t, st, ev, &e)))
        goto out;
    for (int s = ev->nprobes; s < ev->nrows; s++)
        if (ev->rows[s].fail) {
            ev->gfail++;
            if (ev->first < 0)
                ev->first = s;
        }
    ev->status = ev->nfail + ev->gfail ? RC_EVAL_FAIL : RC_EVAL_PASS;
out:
    ev->seconds = now_s() - t0;
    if (rc) {
        ev->status = rc == RC_E_UNSUPPORTED ? RC_EVAL_UNSUPPORTED : RC_EVAL_ERROR;
        snprintf(ev->why, sizeof ev->why, "%s", e.msg[0] ? e.msg : rc_code_name(rc));
    }
    rc_tensors_free(&cc.got);
    if (stage_ok)
        o->stage->close(st);
    return rc;
}

void rc_eval_free(rc_eval *ev)
{
    free(ev->rows);
    ev->rows = NULL;
    ev->nrows = 0;
}

/* ---- printing ---- */
static void print_bounds_summary(const rc_eval *ev, const rc_case *c, const rc_tolerances *t)
{
    /* the distinct bounds in force on the selected rows, each with the probes it covers */
    const rc_tol_entry *seen[64];
    int ns = 0;
    printf("bounds (%s v%d, stage %s, %s):", t->path, t->version, ev->stage, ev->precision);
    for (int i = 0; i < ev->nrows; i++)
        for (int k = 0; k < RC_MET_COUNT; k++) {
            const rc_tol_entry *s = ev->rows[i].b.src[k];
            if (!s || ev->rows[i].status == RC_ROW_UNSELECTED)
                continue;
            int dup = 0;
            for (int j = 0; j < ns; j++)
                dup |= seen[j] == s;
            if (dup || ns == 64)
                continue;
            seen[ns++] = s;
            char bs[48];
            printf("%s %s [%s%s%s]%s", ns > 1 ? ";" : "", rc_bound_str(s->metric, s->bound, bs, sizeof bs), s->probe,
                   strcmp(s->model, "*") ? ", model " : "", strcmp(s->model, "*") ? s->model : "",
                   s->strict ? " strict" : "");
        }
    printf("\n");
    if (c->floor_state > 0)
        printf("floor: a probe within %gx of %s's own distance from the double-precision forward passes "
               "(xfloor column; strict bounds excepted)\n",
               t->floor_multiple, c->ref_name);
    else
        printf("floor unavailable: %s\n", c->floor_why[0] ? c->floor_why : "not computed (--no-floor)");
}

static void print_row(const rc_row *r)
{
    char bs[48] = "-", res[64];
    int k = r->bad_metric >= 0 && r->bad_metric < RC_MET_COUNT ? r->bad_metric
            : r->b.has[RC_MET_SCALED]                         ? RC_MET_SCALED
                                                              : -1;
    if (k >= 0)
        rc_bound_str(k, r->b.bound[k], bs, sizeof bs);
    if (r->status == RC_ROW_TOKEN || r->status == RC_ROW_NEAR_TIE)
        snprintf(res, sizeof res, "%s %d!=%d%s", r->status == RC_ROW_NEAR_TIE ? "near-tie" : "tok", r->tok,
                 r->want_tok, r->fail ? "" : " (allowed)");
    else
        snprintf(res, sizeof res, "%s", rc_row_status_name(r->status));
    if (!row_has_metrics(r)) {
        printf("%-22s %-13s %9s %9s %9s %9s %9s %9s %6s %9s %7s %-13s %-16s %s\n", r->name, r->shape, "-", "-", "-", "-",
               "-", "-", "-", "-", "-", "-", bs, res);
        return;
    }
    char fl[16] = "-", xf[16] = "-", ulp[16];
    if (r->has_floor)
        snprintf(fl, sizeof fl, "%.2e", r->floor.max_abs);
    if (isfinite(r->xfloor))
        snprintf(xf, sizeof xf, r->xfloor < 1e4 ? "%.1f" : "%.1e", r->xfloor);
    if (isfinite(r->m.max_ulp))
        snprintf(ulp, sizeof ulp, "%.0f", r->m.max_ulp);
    else
        snprintf(ulp, sizeof ulp, "inf");
    printf("%-22s %-13s %9.2e %9.2e %9.2e %9.2e %9.2e %9.2e %6s %9s %7s %-13s %-16s %s\n", r->name, r->shape,
           r->m.max_abs, r->m.scaled, r->m.max_rel, r->m.rms, r->m.nmse, 1.0 - r->m.cosine, ulp, fl, xf, r->worst, bs,
           res);
}

void rc_eval_print(const rc_eval *ev, const rc_case *c, const rc_tolerances *t, int quiet)
{
    char buf[768];
    if (ev->status == RC_EVAL_UNSUPPORTED || ev->status == RC_EVAL_ERROR) {
        printf("VERDICT %s stage=%s: %s - %s\n", c->preset, ev->stage,
               ev->status == RC_EVAL_UNSUPPORTED ? "NOT RUN (unsupported)" : "ERROR", ev->why);
        return;
    }
    if (!quiet) {
        printf("%s %s  preset %s  model_type %s  stage %s vs %s%s%s%s\n", strcmp(c->ref_name, "HF") ? "model" : "golden",
               c->label, c->preset, c->model_type, ev->stage, c->ref_name, c->versions[0] ? "  (" : "", c->versions,
               c->versions[0] ? ")" : "");
        if (rc_fault_selected())
            printf("FAULT INJECTED: %s\n", rc_fault_selected());
        print_bounds_summary(ev, c, t);
        printf("%-22s %-13s %9s %9s %9s %9s %9s %9s %6s %9s %7s %-13s %-16s %s\n", "probe", "shape", "max-abs", "scaled",
               "max-rel", "rms", "nmse", "1-cos", "ulp", "floor", "xfloor", "worst", "bound", "result");
        for (int i = 0; i < ev->nrows; i++)
            if (ev->rows[i].status != RC_ROW_UNSELECTED)
                print_row(&ev->rows[i]);
        for (int i = ev->nprobes; i < ev->nrows; i++) {
            const rc_row *r = &ev->rows[i];
            if (r->tok != r->want_tok)
                printf("greedy step %d: stage token %d, %s token %d, %s top-1/top-2 margin %.3e %s near-tie bound "
                       "%.1e: %s\n",
                       r->where.step, r->tok, c->ref_name, r->want_tok, c->ref_name, r->margin,
                       r->margin < t->near_tie_margin ? "<" : ">=", t->near_tie_margin,
                       r->status == RC_ROW_NEAR_TIE
                           ? (r->fail ? "NEAR-TIE (fails; --allow-near-ties accepts it)" : "NEAR-TIE (allowed)")
                       : r->status == RC_ROW_TOKEN ? "a real token mismatch"
                                                   : "logits out of bounds too");
        }
    }
    if (ev->first >= 0)
        printf("first divergence: %s\n", rc_row_describe(&ev->rows[ev->first], buf, sizeof buf));
    if (ev->status == RC_EVAL_FAIL)
        printf("VERDICT %s stage=%s: FAIL (%s link) - %d of %d probes, %d of %d greedy steps out of bounds%s; first: "
               "%s\n",
               c->preset, ev->stage, ev->link, ev->nfail, ev->nsel, ev->gfail, ev->steps,
               ev->near_ties ? (ev->allow_near_ties ? " (near-ties allowed)" : " (near-ties fail; --allow-near-ties)")
                             : "",
               buf);
    else {
        const rc_row *w = ev->worst >= 0 ? &ev->rows[ev->worst] : NULL;
        char xf[32] = "";
        if (w && isfinite(w->xfloor))
            snprintf(xf, sizeof xf, ", %.1fx floor", w->xfloor);
        printf("VERDICT %s stage=%s: PASS - %d probes%s within bounds%s (worst scaled max-abs %.3e at %s%s); greedy "
               "%d/%d tokens equal%s, worst step logits max-abs %.3e\n",
               c->preset, ev->stage, ev->nsel - ev->nskip, ev->nskip ? " (others skipped)" : "",
               ev->nfloor_pass ? " or the floor" : "", w ? w->m.scaled : 0.0, w ? w->name : "-", xf, ev->equal,
               ev->steps, ev->near_ties ? " (near-ties allowed)" : "", ev->worst_step_abs);
    }
}

/* ---- JSON ---- */
static void num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else if (isnan(v))
        cJSON_AddNullToObject(o, k);
    else
        cJSON_AddStringToObject(o, k, v > 0 ? "inf" : "-inf");
}

/* the floor: the reference's distance from the double forward */
static cJSON *floor_json(const rc_metrics *m)
{
    cJSON *o = cJSON_CreateObject();
    num(o, "max_abs", m->max_abs);
    num(o, "scaled", m->scaled);
    num(o, "nmse", m->nmse);
    return o;
}

static cJSON *where_json(const rc_where *w)
{
    cJSON *o = cJSON_CreateObject();
    if (w->layer >= 0)
        cJSON_AddNumberToObject(o, "layer", w->layer);
    else
        cJSON_AddNullToObject(o, "layer");
    cJSON_AddStringToObject(o, "op", w->op);
    if (w->token >= 0)
        cJSON_AddNumberToObject(o, "token", (double)w->token);
    else
        cJSON_AddNullToObject(o, "token");
    if (w->step >= 0)
        cJSON_AddNumberToObject(o, "step", w->step);
    else
        cJSON_AddNullToObject(o, "step");
    return o;
}

static cJSON *row_json(const rc_row *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "probe", r->name);
    cJSON_AddStringToObject(o, "shape", r->shape);
    cJSON_AddStringToObject(o, "result", rc_row_status_name(r->status));
    cJSON_AddBoolToObject(o, "fail", r->fail);
    if (row_has_metrics(r)) {
        num(o, "max_abs", r->m.max_abs);
        num(o, "scaled", r->m.scaled);
        num(o, "max_rel", r->m.max_rel);
        num(o, "rms", r->m.rms);
        num(o, "nmse", r->m.nmse);
        num(o, "cosine", r->m.cosine);
        num(o, "ulp", r->m.max_ulp);
        num(o, "max_ref", r->m.max_ref);
        cJSON_AddNumberToObject(o, "nonfinite", (double)r->m.nonfinite);
        if (r->m.nan || r->m.inf) {
            cJSON_AddNumberToObject(o, "nan", (double)r->m.nan);
            cJSON_AddNumberToObject(o, "inf", (double)r->m.inf);
        }
        cJSON_AddStringToObject(o, "worst_index", r->worst);
        if (r->has_floor)
            cJSON_AddItemToObject(o, "floor", floor_json(&r->floor));
        num(o, "xfloor", r->xfloor);
    }
    cJSON *b = cJSON_AddArrayToObject(o, "bounds"); /* every bound in force, each naming its metric */
    for (int k = 0; k < RC_MET_COUNT; k++)
        if (r->b.has[k]) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "metric", rc_metric_name(k));
            cJSON_AddNumberToObject(x, "bound", r->b.bound[k]);
            if (r->b.strict[k])
                cJSON_AddBoolToObject(x, "strict", 1);
            cJSON_AddItemToArray(b, x);
        }
    if (r->bad_metric >= 0)
        cJSON_AddStringToObject(o, "failed_metric",
                                r->bad_metric == RC_MET_COUNT ? "finite" : rc_metric_name(r->bad_metric));
    cJSON_AddItemToObject(o, "where", where_json(&r->where));
    if (r->where.step >= 0) {
        cJSON_AddNumberToObject(o, "token", r->tok);
        cJSON_AddNumberToObject(o, "ref_token", r->want_tok);
        num(o, "ref_margin", r->margin);
        cJSON_AddBoolToObject(o, "near_tie", r->status == RC_ROW_NEAR_TIE);
    }
    return o;
}

void *rc_eval_json(const rc_eval *ev, const rc_case *c)
{
    static const char *const st[] = {"pass", "fail", "unsupported", "error"};
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "golden", c->label);
    cJSON_AddStringToObject(j, "preset", c->preset);
    cJSON_AddStringToObject(j, "model_type", c->model_type);
    cJSON_AddStringToObject(j, "precision", ev->precision);
    cJSON_AddStringToObject(j, "stage", ev->stage);
    cJSON_AddStringToObject(j, "reference", c->ref_name);
    cJSON_AddStringToObject(j, "verdict", st[ev->status]);
    cJSON_AddNumberToObject(j, "seconds", ev->seconds);
    if (rc_fault_selected())
        cJSON_AddStringToObject(j, "fault", rc_fault_selected());
    if (ev->status == RC_EVAL_UNSUPPORTED || ev->status == RC_EVAL_ERROR) {
        cJSON_AddStringToObject(j, "why", ev->why);
        return j;
    }
    cJSON_AddStringToObject(j, "floor", c->floor_state > 0 ? "available" : "unavailable");
    if (c->floor_state <= 0)
        cJSON_AddStringToObject(j, "floor_why", c->floor_why[0] ? c->floor_why : "not computed");
    if (ev->status == RC_EVAL_FAIL) {
        char buf[768];
        const rc_row *f = &ev->rows[ev->first];
        cJSON_AddStringToObject(j, "link", ev->link);
        cJSON_AddStringToObject(j, "first_divergence", f->name);
        cJSON_AddStringToObject(j, "first_divergence_text", rc_row_describe(f, buf, sizeof buf));
        cJSON_AddItemToObject(j, "first_where", where_json(&f->where));
    }
    if (ev->worst >= 0) {
        cJSON_AddStringToObject(j, "worst_probe", ev->rows[ev->worst].name);
        num(j, "worst_scaled", ev->rows[ev->worst].m.scaled);
        num(j, "worst_xfloor", ev->rows[ev->worst].xfloor);
    }
    cJSON *arr = cJSON_AddArrayToObject(j, "probes");
    for (int i = 0; i < ev->nprobes; i++)
        if (ev->rows[i].status != RC_ROW_UNSELECTED)
            cJSON_AddItemToArray(arr, row_json(&ev->rows[i]));
    cJSON *ga = cJSON_AddArrayToObject(j, "greedy");
    for (int s = ev->nprobes; s < ev->nrows; s++)
        cJSON_AddItemToArray(ga, row_json(&ev->rows[s]));
    cJSON_AddNumberToObject(j, "greedy_tokens_equal", ev->equal);
    cJSON_AddNumberToObject(j, "greedy_steps", ev->steps);
    cJSON_AddNumberToObject(j, "greedy_near_ties", ev->near_ties);
    cJSON_AddBoolToObject(j, "near_ties_allowed", ev->allow_near_ties);
    num(j, "greedy_worst_step_scaled", ev->worst_step_scaled);
    return j;
}

/* ---- the compare command's per-case driver ---- */
static int compare_case(rc_case *c, const rc_compare_opts *o, void *json_out)
{
    rc_tolerances own;
    const rc_tolerances *t = o->tols;
    rc_err e = {0};
    if (!t) {
        if (rc_tol_load(&own, NULL, &e)) {
            fprintf(stderr, "harness: error: %s\n", e.msg);
            return RC_EXIT_ERROR;
        }
        t = &own;
    }
    if (!o->no_floor)
        rc_case_floor(c, o->probe, o->stage->gdn_recurrent);
    rc_eval ev;
    int rc = rc_eval_stage(c, o, t, &ev);
    if (rc)
        fprintf(stderr, "harness: error: %s\n", ev.why);
    else
        rc_eval_print(&ev, c, t, o->quiet);
    if (json_out)
        cJSON_AddItemToArray((cJSON *)json_out, rc_eval_json(&ev, c));
    int exit_code = rc ? RC_EXIT_ERROR : ev.status == RC_EVAL_PASS ? RC_EXIT_PASS : RC_EXIT_BOUND;
    rc_eval_free(&ev);
    if (t == &own)
        rc_tol_free(&own);
    return exit_code;
}

int rc_compare_golden(const char *path, const rc_compare_opts *o, void *json_out)
{
    rc_err e = {0};
    rc_case c;
    if (rc_case_from_golden(&c, path, &e)) {
        fprintf(stderr, "harness: error: %s\n", e.msg);
        return RC_EXIT_ERROR;
    }
    int rc = compare_case(&c, o, json_out);
    rc_case_free(&c);
    return rc;
}

int rc_compare_pair(const char *model_path, const int32_t *prompt, int64_t n_prompt, int64_t n_steps,
                    const rc_stage *B, const rc_compare_opts *o, void *json_out)
{
    rc_err e = {0};
    rc_case c;
    if (rc_case_from_stage(&c, model_path, prompt, n_prompt, B, &o->stage_opts, n_steps, &e)) {
        fprintf(stderr, "harness: error: reference stage %s: %s\n", B->name, e.msg);
        return RC_EXIT_ERROR;
    }
    int rc = compare_case(&c, o, json_out);
    rc_case_free(&c);
    return rc;
}
