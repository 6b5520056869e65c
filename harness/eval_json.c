/* harness compare's JSON output (see compare.h): one evaluation as an object for --json and the reports. */
#include "compare.h"

#include <cjson/cJSON.h>
#include <math.h>

#include "fault.h"

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

static cJSON *row_json(const rc_row *r, const char *ref_name)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "probe", r->name);
    cJSON_AddStringToObject(o, "reference", r->vs_exact ? "exact" : ref_name);
    cJSON_AddStringToObject(o, "shape", r->shape);
    cJSON_AddStringToObject(o, "result", rc_row_status_name(r->status));
    cJSON_AddBoolToObject(o, "fail", r->fail);
    if (rc_row_has_metrics(r)) {
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
        num(o, "near_tie_margin", r->tie_margin);
        if (r->tok != r->want_tok) {
            num(o, "stage_logit_of_token", r->logit_tok[0]);
            num(o, "ref_logit_of_token", r->logit_tok[1]);
            num(o, "stage_logit_of_ref_token", r->logit_want[0]);
            num(o, "ref_logit_of_ref_token", r->logit_want[1]);
        }
    }
    if (r->precision)
        cJSON_AddBoolToObject(o, "over_tol_within_precision", 1);
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
    static const char *const cause[] = {"none", "link", "precision", "near-tie"};
    char text[768];
    cJSON_AddStringToObject(j, "cause", cause[ev->cause]);
    cJSON_AddStringToObject(j, "against", ev->against_exact ? "exact" : c->ref_name);
    cJSON_AddNumberToObject(j, "judged_against_exact", ev->nexact);
    if (ev->tightest_row >= 0 && ev->cause != RC_CAUSE_LINK) {
        num(j, "tightest_tol", ev->tightest);
        cJSON_AddStringToObject(j, "tightest_probe", ev->rows[ev->tightest_row].name);
    }
    if (ev->ref_floor_row >= 0) {
        num(j, "reference_floor", ev->ref_floor);
        cJSON_AddStringToObject(j, "reference_floor_probe", ev->rows[ev->ref_floor_row].name);
    }
    cJSON_AddStringToObject(j, "tightest_text", rc_eval_tightest_str(ev, c, text, sizeof text));
    if (ev->status == RC_EVAL_FAIL) {
        char buf[768];
        const rc_row *f = &ev->rows[ev->first];
        cJSON_AddStringToObject(j, "cause_text", rc_eval_cause_str(ev, c, text, sizeof text));
        if (ev->cause == RC_CAUSE_LINK)
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
            cJSON_AddItemToArray(arr, row_json(&ev->rows[i], c->ref_name));
    cJSON *ga = cJSON_AddArrayToObject(j, "greedy");
    for (int s = ev->nprobes; s < ev->nrows; s++)
        cJSON_AddItemToArray(ga, row_json(&ev->rows[s], c->ref_name));
    cJSON_AddNumberToObject(j, "greedy_tokens_equal", ev->equal);
    cJSON_AddNumberToObject(j, "greedy_steps", ev->steps);
    cJSON_AddNumberToObject(j, "greedy_near_ties", ev->near_ties);
    cJSON_AddBoolToObject(j, "near_ties_allowed", ev->allow_near_ties);
    num(j, "greedy_worst_step_scaled", ev->worst_step_scaled);
    return j;
}
