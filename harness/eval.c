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

/* What a row over its bounds is measured against before a link is blamed. */
typedef struct yardstick {
    const rc_tolerances *t;
    rc_tolerances file;   /* t without the --tol entries (they are appended last) */
    int floor;            /* fp32: the noise floor is the yardstick; bf16/fp16: the file's bounds for the precision */
    int exact;            /* judge against the double forward where it agrees with the reference */
    const char *stage, *precision, *model_type;
} yardstick;

/* 1 if the row's metrics hold every bound of the tolerance file alone (only its strict ones when strict_only). */
static int within_file(const rc_row *r, const yardstick *y, int strict_only)
{
    rc_bounds fb;
    rc_tol_bounds(&y->file, y->stage, y->precision, y->model_type, r->name, &fb);
    for (int k = 0; k < RC_MET_COUNT; k++)
        if (fb.has[k] && (fb.strict[k] || !strict_only) && !rc_metric_within(k, rc_metric_value(&r->m, k), fb.bound[k]))
            return 0;
    return 1;
}

/* r->m is measured; sets status, fail and precision. A row over a --tol bound only, but within the yardstick
 * (fp32: the floor rule; else the file's bounds), fails as PRECISION: no link is to blame. */
static void judge(rc_row *r, const yardstick *y, int ndim, const int64_t *shape)
{
    const rc_tolerances *t = y->t;
    rc_index_str(r->m.worst, ndim, shape, r->worst, sizeof r->worst);
    r->bad_metric = -1;
    r->xfloor = NAN;
    if (y->floor && r->has_floor && r->floor.max_abs > 0 && isfinite(r->floor.max_abs))
        r->xfloor = r->m.max_abs / r->floor.max_abs;
    if (r->m.nonfinite) {
        r->fail = 1;
        r->bad_metric = RC_MET_COUNT;
        r->status = RC_ROW_NONFINITE;
        return;
    }
    int strict_fail = 0, user_only = 1;
    for (int k = 0; k < RC_MET_COUNT; k++)
        if (r->b.has[k] && !rc_metric_within(k, rc_metric_value(&r->m, k), r->b.bound[k])) {
            if (r->bad_metric < 0)
                r->bad_metric = k;
            strict_fail |= r->b.strict[k];
            user_only &= r->b.src[k] && r->b.src[k]->user;
        }
    /* a floor above the cap means the double forward itself disagrees with HF: it excuses nothing */
    const int floor_ok = t->floor_multiple > 0 && isfinite(r->xfloor) && r->xfloor <= t->floor_multiple &&
                         r->floor.scaled <= t->floor_cap;
    if (r->bad_metric < 0)
        r->status = RC_ROW_OK;
    else if (!strict_fail && floor_ok)
        r->status = RC_ROW_OK_FLOOR;
    else {
        r->fail = 1;
        r->precision = user_only && within_file(r, y, 1) && (y->floor ? floor_ok : within_file(r, y, 0));
        r->status = r->precision ? RC_ROW_PRECISION : RC_ROW_FAIL;
    }
}

/* Two logits that each move by e can swap when they are closer than 2e: the near-tie margin is twice the logit
 * error the file allows this row (its scaled bound at the stage's precision, or the floor rule's allowance),
 * never below the file's fp32 margin. */
static double tie_margin(const rc_row *r, const yardstick *y)
{
    rc_bounds fb;
    rc_tol_bounds(&y->file, y->stage, y->precision, y->model_type, r->name, &fb);
    double allowed = fb.has[RC_MET_SCALED] ? fb.bound[RC_MET_SCALED] * fmax(1.0, r->m.max_ref) : 0.0;
    if (y->floor && r->has_floor && r->floor.scaled <= y->t->floor_cap)
        allowed = fmax(allowed, y->t->floor_multiple * r->floor.max_abs);
    return fmax(y->t->near_tie_margin, 2.0 * allowed);
}

int rc_row_has_metrics(const rc_row *r)
{
    return r->status == RC_ROW_OK || r->status == RC_ROW_OK_FLOOR || r->status == RC_ROW_FAIL ||
           r->status == RC_ROW_NONFINITE || r->status == RC_ROW_TOKEN || r->status == RC_ROW_NEAR_TIE ||
           r->status == RC_ROW_PRECISION;
}

/* ---- one evaluation ---- */
static int eval_greedy(const rc_case *c, const rc_compare_opts *o, const yardstick *y, void *st, rc_eval *ev,
                       rc_err *e)
{
    const int64_t T0 = c->n_ids, N = c->n_steps, V = c->vocab;
    int32_t *ids = rc_calloc(T0 + N, sizeof *ids, e, "greedy ids");
    float *logits = rc_calloc((T0 + N) * V, sizeof *logits, e, "greedy logits");
    float *exact_row = rc_calloc(V, sizeof *exact_row, e, "greedy logits");
    int rc = (!ids || !logits || !exact_row) ? e->code : RC_OK;
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
        rc_tol_bounds(y->t, o->stage->name, ev->precision, c->model_type, r->name, &r->b);
        if (c->floor_state > 0 && c->floor_steps_has[s]) {
            r->has_floor = 1;
            r->floor = c->floor_steps[s];
        }
        /* against the exact answer: its logits, and its argmax as the reference token */
        r->vs_exact = y->exact && r->has_floor && r->floor.scaled <= y->t->floor_cap;
        if (r->vs_exact) {
            const double *x = c->exact_steps + s * V;
            rc_metrics_compute64(last, x, V, &r->m);
            for (int64_t v = 0; v < V; v++)
                exact_row[v] = (float)x[v];
            want = exact_row;
        } else
            rc_metrics_compute(last, want, V, &r->m);
        judge(r, y, 1, shape);
        r->where.layer = -1;
        r->where.step = (int)s;
        r->where.token = T - 1;
        snprintf(r->where.op, sizeof r->where.op, "logits");
        r->tok = rc_argmax(last, V);
        r->want_tok = r->vs_exact ? rc_argmax(want, V) : c->tokens[s];
        r->margin = top2_margin(want, V);
        r->tie_margin = tie_margin(r, y);
        if (r->tok == r->want_tok)
            ev->equal++;
        else {
            const int near = r->margin < r->tie_margin, prec = r->precision;
            r->logit_tok[0] = last[r->tok];
            r->logit_tok[1] = want[r->tok];
            const int in_vocab = r->want_tok >= 0 && r->want_tok < V; /* else the stage refuses the id next */
            r->logit_want[0] = in_vocab ? last[r->want_tok] : NAN;
            r->logit_want[1] = in_vocab ? want[r->want_tok] : NAN;
            ev->near_ties += near;
            if (!r->fail || prec) { /* logits within the yardstick: the token decides */
                r->status = near ? RC_ROW_NEAR_TIE : RC_ROW_TOKEN;
                r->precision = near && prec;
                r->fail = !near || !o->allow_near_ties || prec;
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
    free(exact_row);
    return rc;
}

/* What a failing row says about the stage: RC_CAUSE_LINK, _PRECISION or _NEAR_TIE (NONE if it passes). */
static int row_cause(const rc_row *r, int allow_near_ties)
{
    if (!r->fail)
        return RC_CAUSE_NONE;
    if (r->status == RC_ROW_NEAR_TIE) /* an allowed near-tie that fails is over --tol too */
        return allow_near_ties ? RC_CAUSE_PRECISION : RC_CAUSE_NEAR_TIE;
    return r->precision ? RC_CAUSE_PRECISION : RC_CAUSE_LINK;
}

/* Counts, the first failure (the first blaming a link if any), the cause, and the tightest bounds. */
static void summarize(rc_eval *ev)
{
    int first_any = -1, any[RC_CAUSE_NEAR_TIE + 1] = {0};
    ev->first = ev->tightest_row = ev->ref_floor_row = -1;
    ev->ref_floor = NAN;
    for (int i = 0; i < ev->nrows; i++) {
        const rc_row *r = &ev->rows[i];
        if (r->status == RC_ROW_UNSELECTED)
            continue;
        ev->nexact += r->vs_exact;
        if (rc_row_has_metrics(r) && (ev->tightest_row < 0 || !(r->m.scaled <= ev->tightest))) {
            ev->tightest = r->m.scaled;
            ev->tightest_row = i;
        }
        if (r->has_floor && (ev->ref_floor_row < 0 || r->floor.scaled > ev->ref_floor)) {
            ev->ref_floor = r->floor.scaled;
            ev->ref_floor_row = i;
        }
        const int cause = row_cause(r, ev->allow_near_ties);
        if (cause == RC_CAUSE_NONE)
            continue;
        any[cause]++;
        if (i < ev->nprobes)
            ev->nfail++;
        else
            ev->gfail++;
        if (first_any < 0)
            first_any = i;
        if (cause == RC_CAUSE_LINK && ev->first < 0)
            ev->first = i;
    }
    ev->nlink = any[RC_CAUSE_LINK];
    if (ev->first < 0)
        ev->first = first_any;
    ev->cause = any[RC_CAUSE_LINK] ? RC_CAUSE_LINK : any[RC_CAUSE_PRECISION] ? RC_CAUSE_PRECISION
                : any[RC_CAUSE_NEAR_TIE]                               ? RC_CAUSE_NEAR_TIE
                                                                       : RC_CAUSE_NONE;
    ev->status = ev->cause == RC_CAUSE_NONE ? RC_EVAL_PASS : RC_EVAL_FAIL;
}

/* Zero comparisons is never a pass: a selection (or a golden) that leaves nothing to compare is bad input. */
static int nothing_selected(const rc_case *c, const rc_compare_opts *o, int nsel, int greedy, rc_err *e)
{
    if (nsel || greedy)
        return RC_OK;
    if (!c->probes.n && !c->n_steps)
        return rc_fail(e, RC_E_FORMAT, "%s: no probes and no greedy steps: nothing to compare", c->label);
    if (o->probe)
        return rc_fail(e, RC_E_USAGE, "--probe '%s' selects none of the %d probes of %s%s: nothing to compare",
                       o->probe, c->probes.n, c->label,
                       !c->n_steps ? "" : o->greedy ? " nor its greedy steps (greedy.step00)" : " (greedy steps off)");
    return rc_fail(e, RC_E_FORMAT, "%s: no probes, and the greedy steps are %s: nothing to compare", c->label,
                   c->n_steps ? "off (--no-greedy)" : "absent");
}

int rc_eval_stage(const rc_case *c, const rc_compare_opts *o, const rc_tolerances *t, rc_eval *ev)
{
    rc_err e = {0};
    memset(ev, 0, sizeof *ev);
    snprintf(ev->stage, sizeof ev->stage, "%s", o->stage->name);
    snprintf(ev->link, sizeof ev->link, "%s", o->stage->link);
    snprintf(ev->precision, sizeof ev->precision, "%s",
             lossier(c->precision, rc_stage_storage(o->stage, &o->stage_opts)));
    ev->first = ev->worst = ev->first_mismatch = -1;
    ev->allow_near_ties = o->allow_near_ties;
    ev->against_exact = o->against == RC_AGAINST_EXACT || (o->against == RC_AGAINST_DEFAULT && t->exact_default);
    yardstick y = {.t = t, .file = *t, .floor = !strcmp(ev->precision, "fp32"), .exact = ev->against_exact,
                   .stage = o->stage->name, .precision = ev->precision, .model_type = c->model_type};
    y.file.n = 0;
    while (y.file.n < t->n && !t->e[y.file.n].user)
        y.file.n++;
    void *st = NULL;
    int stage_ok = 0, nsel = 0;
    const int P = c->probes.n;
    const double t0 = now_s();
    rc_collect cc = {.ref = &c->probes, .pattern = o->probe, .e = &e};
    rc_probe_sink sink = rc_collect_sink(&cc);
    int do_greedy = o->greedy && c->n_steps > 0 && rc_probe_selected(o->probe, "greedy.step00");
    for (int i = 0; i < P; i++)
        nsel += rc_probe_selected(o->probe, c->probes.t[i].name);
    int rc = nothing_selected(c, o, nsel, do_greedy, &e);
    if (rc)
        goto out;
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
            /* the exact answer only where it agrees with the reference within the floor cap */
            r->vs_exact = y.exact && r->has_floor && c->exact[i] && r->floor.scaled <= t->floor_cap;
            if (r->vs_exact)
                rc_metrics_compute64(got->data, c->exact[i], want->numel, &r->m);
            else
                rc_metrics_compute(got->data, want->data, want->numel, &r->m);
            judge(r, &y, want->ndim, want->shape);
            where_of(&r->where, want->name, want->ndim, want->shape, r->m.worst, c->n_ids);
            ev->nfloor_pass += r->status == RC_ROW_OK_FLOOR;
            if (ev->worst < 0 || r->m.scaled > ev->rows[ev->worst].m.scaled)
                ev->worst = i;
        }
    }
    ev->nprobes = ev->nrows;
    if (do_greedy && (rc = eval_greedy(c, o, &y, st, ev, &e)))
        goto out;
    if (ev->nsel == ev->nskip && !ev->steps) {
        rc = rc_fail(&e, RC_E_USAGE, "stage %s reports none of the %d selected probes and ran no greedy step: "
                     "nothing to compare", o->stage->name, ev->nsel);
        goto out;
    }
    summarize(ev);
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
