/* harness compare's evaluation (see compare.h): a stage run on a case, every probe and greedy step judged. */
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

/* bf16 (8 significant bits) over fp16 (11) over fp32 */
static const char *lossier(const char *a, const char *b)
{
    if (!strcmp(a, "bf16") || !strcmp(b, "bf16"))
        return "bf16";
    if (!strcmp(a, "fp16") || !strcmp(b, "fp16"))
        return "fp16";
    return "fp32";
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

int rc_row_has_metrics(const rc_row *r)
{
    return r->status == RC_ROW_OK || r->status == RC_ROW_OK_FLOOR || r->status == RC_ROW_FAIL ||
           r->status == RC_ROW_NONFINITE || r->status == RC_ROW_TOKEN || r->status == RC_ROW_NEAR_TIE;
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
        r->tok = rc_argmax(last, V);
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
    snprintf(ev->precision, sizeof ev->precision, "%s", lossier(c->precision, rc_stage_storage(o->stage, &o->stage_opts)));
    ev->first = ev->worst = ev->first_mismatch = -1;
    ev->allow_near_ties = o->allow_near_ties;
    void *st = NULL;
    int stage_ok = 0;
    const int P = c->probes.n;
    const double t0 = now_s();
    rc_collect cc = {.ref = &c->probes, .pattern = o->probe, .e = &e};
    rc_probe_sink sink = rc_collect_sink(&cc);
    int do_greedy = o->greedy && c->n_steps > 0 && rc_probe_selected(o->probe, "greedy.step00");
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
        if (!rc_probe_selected(o->probe, want->name)) {
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
