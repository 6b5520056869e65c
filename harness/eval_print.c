/* harness compare's text output (see compare.h): the table, the first divergence, the VERDICT line. */
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"

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
    case RC_ROW_PRECISION: return "PRECISION";
    }
    return "?";
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
        snprintf(buf, (size_t)cap,
                 "%s %s: stage token %d (logit %.6g, reference %.6g), reference token %d (logit %.6g, reference "
                 "%.6g), reference top-1/top-2 margin %.3e %s near-tie margin %.2e (%s)",
                 r->name, r->status == RC_ROW_NEAR_TIE ? "near-tie token mismatch" : "token mismatch", r->tok,
                 r->logit_tok[0], r->logit_tok[1], r->want_tok, r->logit_want[0], r->logit_want[1], r->margin,
                 r->margin < r->tie_margin ? "<" : ">=", r->tie_margin, where);
    else if ((r->status == RC_ROW_FAIL || r->status == RC_ROW_PRECISION) && r->bad_metric >= 0 &&
             r->bad_metric < RC_MET_COUNT)
        snprintf(buf, (size_t)cap, "%s %s (%s = %.3e, bound %s, at %s; %s)", r->name,
                 r->status == RC_ROW_PRECISION ? "over --tol only" : "FAIL", rc_metric_name(r->bad_metric),
                 rc_metric_value(&r->m, r->bad_metric),
                 rc_bound_str(r->bad_metric, r->b.bound[r->bad_metric], bs, sizeof bs), r->worst, where);
    else
        snprintf(buf, (size_t)cap, "%s %s (%s)", r->name, rc_row_status_name(r->status), where);
    return buf;
}

/* The largest xfloor of a failing row: what "within the floor multiple" means on this evaluation. */
static double t_mult(const rc_eval *ev)
{
    double m = 0;
    for (int i = 0; i < ev->nrows; i++)
        if (ev->rows[i].precision && isfinite(ev->rows[i].xfloor))
            m = fmax(m, ev->rows[i].xfloor);
    return ceil(m * 10) / 10;
}

/* x rounded up to two significant digits, as a --tol a user can type that x passes. */
static const char *round_up2(double x, char *buf, int cap)
{
    if (!(x > 0) || !isfinite(x)) {
        snprintf(buf, (size_t)cap, "%g", isfinite(x) ? 0.0 : x);
        return buf;
    }
    int ex = (int)floor(log10(x)) - 1;
    for (long d = (long)floor(x / pow(10, ex)); ; d++) {
        snprintf(buf, (size_t)cap, "%lde%d", d, ex);
        if (strtod(buf, NULL) >= x)
            break;
    }
    snprintf(buf, (size_t)cap, "%.2g", strtod(buf, NULL));
    return buf;
}

const char *rc_eval_cause_str(const rc_eval *ev, const rc_case *c, char *buf, int cap)
{
    char y[32];
    const rc_row *p = ev->first >= 0 ? &ev->rows[ev->first] : NULL;
    round_up2(ev->tightest, y, sizeof y);
    if (ev->cause == RC_CAUSE_LINK || !p)
        snprintf(buf, (size_t)cap, "%s link", ev->link);
    else if (ev->cause == RC_CAUSE_NEAR_TIE)
        snprintf(buf, (size_t)cap,
                 "near-tie, not a broken link: %d greedy token flip%s below the %s near-tie margin, first at %s "
                 "(margin %.3e < %.2e); --allow-near-ties accepts %s",
                 ev->near_ties, ev->near_ties == 1 ? "" : "s", ev->precision, p->name, p->margin, p->tie_margin,
                 ev->near_ties == 1 ? "it" : "them");
    else if (strcmp(ev->precision, "fp32"))
        snprintf(buf, (size_t)cap,
                 "bound below the stage's %s storage precision: %s is %.3g off (scaled), within the tolerance file's "
                 "%s bounds; tightest meetable bound on this golden %s",
                 ev->precision, p->name, p->m.scaled, ev->precision, y);
    else {
        const rc_row *f = ev->ref_floor_row >= 0 ? &ev->rows[ev->ref_floor_row] : p;
        snprintf(buf, (size_t)cap,
                 "%s: %s%s is %.3g %s at %s, and every probe over --tol is within %gx of %s's own distance at that "
                 "probe; tightest meetable bound on this golden %s",
                 p->vs_exact ? "bound below fp32 precision even against the exact answer"
                             : "bound below the reference's fp32 precision",
                 c->ref_name, p->vs_exact ? "'s own fp32" : " itself", ev->ref_floor,
                 p->vs_exact ? "off" : "from the exact answer", f->name, t_mult(ev), c->ref_name, y);
    }
    return buf;
}

const char *rc_eval_tightest_str(const rc_eval *ev, const rc_case *c, char *buf, int cap)
{
    char y[32];
    int n;
    if (ev->cause == RC_CAUSE_LINK)
        n = snprintf(buf, (size_t)cap, "none: the %s link fails the tolerance file itself", ev->link);
    else if (ev->tightest_row < 0)
        n = snprintf(buf, (size_t)cap, "none measured");
    else
        n = snprintf(buf, (size_t)cap, "this stage passes --tol %s%s (its worst: %s, scaled %.3e)",
                     round_up2(ev->tightest, y, sizeof y), ev->against_exact ? " --against-exact" : "",
                     ev->rows[ev->tightest_row].name, ev->tightest);
    if (n >= cap)
        return buf;
    if (ev->ref_floor_row < 0)
        snprintf(buf + n, (size_t)(cap - n), "; %s's floor unavailable", c->ref_name);
    else
        snprintf(buf + n, (size_t)(cap - n), "; %s's own distance from the exact answer peaks at %.3e (%s): %s",
                 c->ref_name, ev->ref_floor, ev->rows[ev->ref_floor_row].name,
                 ev->against_exact ? "an fp32 forward as good as HF's gets no closer to the exact answer"
                                   : "no fp32 stage can be held below it against HF");
    return buf;
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
    if (ev->against_exact && c->floor_state > 0)
        printf("reference: the exact (double) forward wherever it is within the floor cap %.0e of %s (%d of %d rows; "
               "'vs' column), else %s\n",
               t->floor_cap, c->ref_name, ev->nexact, ev->nsel + ev->steps, c->ref_name);
    else if (ev->against_exact)
        printf("reference: %s (--against-exact: the exact forward is unavailable)\n", c->ref_name);
    else
        printf("reference: %s's tensors (--against-exact judges against the exact forward)\n", c->ref_name);
}

static void print_row(const rc_row *r, const char *ref_name)
{
    const char *vs = r->vs_exact ? "exact" : ref_name;
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
    if (!rc_row_has_metrics(r)) {
        printf("%-22s %-13s %9s %9s %9s %9s %9s %9s %6s %9s %7s %-13s %-16s %-5s %s\n", r->name, r->shape, "-", "-", "-",
               "-", "-", "-", "-", "-", "-", "-", bs, vs, res);
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
    printf("%-22s %-13s %9.2e %9.2e %9.2e %9.2e %9.2e %9.2e %6s %9s %7s %-13s %-16s %-5s %s\n", r->name, r->shape,
           r->m.max_abs, r->m.scaled, r->m.max_rel, r->m.rms, r->m.nmse, 1.0 - r->m.cosine, ulp, fl, xf, r->worst, bs,
           vs, res);
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
        printf("%-22s %-13s %9s %9s %9s %9s %9s %9s %6s %9s %7s %-13s %-16s %-5s %s\n", "probe", "shape", "max-abs",
               "scaled", "max-rel", "rms", "nmse", "1-cos", "ulp", "floor", "xfloor", "worst", "bound", "vs", "result");
        for (int i = 0; i < ev->nrows; i++)
            if (ev->rows[i].status != RC_ROW_UNSELECTED)
                print_row(&ev->rows[i], c->ref_name);
        for (int i = ev->nprobes; i < ev->nrows; i++) {
            const rc_row *r = &ev->rows[i];
            if (r->tok != r->want_tok)
                printf("greedy step %d: stage token %d (logit %.6g, %s %.6g), %s token %d (logit %.6g, %s %.6g), %s "
                       "top-1/top-2 margin %.3e %s the %s near-tie margin %.2e: %s\n",
                       r->where.step, r->tok, r->logit_tok[0], r->vs_exact ? "exact" : c->ref_name, r->logit_tok[1],
                       r->vs_exact ? "exact" : c->ref_name, r->want_tok, r->logit_want[0],
                       r->vs_exact ? "exact" : c->ref_name, r->logit_want[1], r->vs_exact ? "exact" : c->ref_name,
                       r->margin, r->margin < r->tie_margin ? "<" : ">=", ev->precision, r->tie_margin,
                       r->status == RC_ROW_NEAR_TIE
                           ? (r->fail ? "NEAR-TIE (fails; --allow-near-ties accepts it)" : "NEAR-TIE (allowed)")
                       : r->status == RC_ROW_TOKEN ? "a real token mismatch"
                                                   : "logits out of bounds too");
        }
        printf("tightest bound: %s\n", rc_eval_tightest_str(ev, c, buf, sizeof buf));
    }
    if (ev->first >= 0)
        printf("first divergence: %s\n", rc_row_describe(&ev->rows[ev->first], buf, sizeof buf));
    if (ev->status == RC_EVAL_FAIL) {
        char cause[768];
        rc_eval_cause_str(ev, c, cause, sizeof cause);
        printf("VERDICT %s stage=%s: FAIL (%s) - %d of %d probes, %d of %d greedy steps %s%s; first: %s\n", c->preset,
               ev->stage, cause, ev->nfail, ev->nsel, ev->gfail, ev->steps,
               ev->cause == RC_CAUSE_LINK ? "out of bounds" : "failing, no link to blame",
               ev->near_ties ? (ev->allow_near_ties ? " (near-ties allowed)" : " (near-ties fail; --allow-near-ties)")
                             : "",
               buf);
    } else {
        const rc_row *w = ev->worst >= 0 ? &ev->rows[ev->worst] : NULL;
        char xf[64] = "";
        if (w && isfinite(w->xfloor))
            snprintf(xf, sizeof xf, ", %.1fx floor", w->xfloor);
        else if (w && strcmp(ev->precision, "fp32") && w->b.has[RC_MET_SCALED]) /* the floor is no yardstick there */
            snprintf(xf, sizeof xf, ", %.2fx its %s bound", w->m.scaled / w->b.bound[RC_MET_SCALED], ev->precision);
        printf("VERDICT %s stage=%s: PASS - %d probes%s within bounds%s (worst scaled max-abs %.3e at %s%s); greedy "
               "%d/%d tokens equal%s, worst step logits max-abs %.3e\n",
               c->preset, ev->stage, ev->nsel - ev->nskip, ev->nskip ? " (others skipped)" : "",
               ev->nfloor_pass ? " or the floor" : ev->nexact ? " of the exact answer" : "", w ? w->m.scaled : 0.0, w ? w->name : "-", xf, ev->equal,
               ev->steps, ev->near_ties ? " (near-ties allowed)" : "", ev->worst_step_abs);
    }
}
