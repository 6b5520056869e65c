/* harness chain (see chain.h): every link on one case, the first broken link as the verdict. */
#include "chain.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault.h"
#include "fault_catalogue.h"
#include "util.h"

void rc_chain_default_stages(rc_chain_opts *o)
{
    o->stages[0] = "ref";
    o->stages[1] = "cuda";
    o->stages[2] = "engine";
    o->nstages = 3;
}

int rc_chain_parse_stages(rc_chain_opts *o, const char *list)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    o->nstages = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->nstages == RC_CHAIN_MAX)
            return 0;
        o->stages[o->nstages++] = tok;
    }
    return o->nstages > 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The first link whose stage disagrees with the reference beyond its precision is the broken one; a link that
 * fails only by precision (over --tol) or near-ties is no break: the chain goes on past it, and fails without
 * blaming a link if nothing else breaks. */
static void make_verdict(rc_chain_result *r)
{
    char pre[512] = "", buf[768], soft[768] = "";
    int npre = 0, any_ran = 0, nsoft = 0;
    r->failed = -1;
    r->status = RC_CHAIN_PASS;
    for (int i = 0; i < r->n; i++) {
        rc_chain_link *l = &r->links[i];
        if (l->state == RC_LINK_ERROR) {
            r->status = RC_CHAIN_ERROR;
            snprintf(r->verdict, sizeof r->verdict, "ERROR in stage %s: %s", l->stage, l->why);
            return;
        }
        if (l->state != RC_LINK_RAN) {
            npre += snprintf(pre + npre, sizeof pre - (size_t)npre, "%s%s not run", npre ? ", " : "", l->stage);
            continue;
        }
        any_ran = 1;
        if (l->ev.status == RC_EVAL_PASS || l->ev.cause != RC_CAUSE_LINK) {
            const int soft_fail = l->ev.status == RC_EVAL_FAIL;
            npre += snprintf(pre + npre, sizeof pre - (size_t)npre, "%s%s %s %s%s", npre ? ", " : "", l->stage,
                             soft_fail ? "~" : "=", r->c.ref_name,
                             !soft_fail                               ? ""
                             : l->ev.cause == RC_CAUSE_NEAR_TIE ? " but for near-ties"
                                                                : " within its precision, over --tol");
            if (soft_fail && !nsoft++)
                snprintf(soft, sizeof soft, "%s: %s", l->stage, rc_eval_cause_str(&l->ev, &r->c, buf, sizeof buf));
            continue;
        }
        r->failed = i;
        r->status = RC_CHAIN_FAIL;
        const rc_row *f = &l->ev.rows[l->ev.first];
        /* a skipped link just before this one leaves the break between the last passing link and here */
        const char *unsure = i > 0 && r->links[i - 1].state != RC_LINK_RAN ? " or an unchecked link before it" : "";
        snprintf(r->verdict, sizeof r->verdict, "FAIL at the %s link%s (%s%s%s != %s); first divergent probe: %s%s",
                 l->link, unsure, pre, npre ? ", " : "", l->stage, r->c.ref_name, rc_row_describe(f, buf, sizeof buf),
                 f->status == RC_ROW_NEAR_TIE ? " [near-tie]" : "");
        return;
    }
    if (!any_ran) {
        r->status = RC_CHAIN_NOT_CHECKED;
        snprintf(r->verdict, sizeof r->verdict, "NOT CHECKED: no stage could run (%s)", pre);
        return;
    }
    if (nsoft) {
        r->status = RC_CHAIN_FAIL;
        snprintf(r->verdict, sizeof r->verdict, "FAIL, no broken link (%s); first: %s", pre, soft);
        return;
    }
    snprintf(r->verdict, sizeof r->verdict, "PASS (%s)", pre);
}

void rc_chain_golden(const char *path, const rc_chain_opts *o, rc_chain_result *r)
{
    rc_err e = {0};
    memset(r, 0, sizeof *r);
    snprintf(r->golden, sizeof r->golden, "%s", path);
    r->failed = -1;
    const double t0 = now_s();
    if (rc_case_from_golden(&r->c, path, &e)) {
        r->status = e.code == RC_E_UNSUPPORTED ? RC_CHAIN_NOT_CHECKED : RC_CHAIN_ERROR;
        snprintf(r->case_why, sizeof r->case_why, "%s", e.msg);
        snprintf(r->verdict, sizeof r->verdict, "%s: %s", r->status == RC_CHAIN_ERROR ? "ERROR" : "NOT CHECKED", e.msg);
        r->seconds = now_s() - t0;
        return;
    }
    r->case_ok = 1;
    for (int i = 0; i < o->nstages; i++) {
        rc_chain_link *l = &r->links[r->n++];
        snprintf(l->stage, sizeof l->stage, "%s", o->stages[i]);
        const rc_stage *s = rc_stage_find(o->stages[i]);
        if (!s) {
            l->state = RC_LINK_NOT_BUILT;
            snprintf(l->why, sizeof l->why, "not built into this harness (built: %s)", rc_stage_names());
            continue;
        }
        snprintf(l->link, sizeof l->link, "%s", s->link);
        rc_compare_opts co = o->base;
        co.stage = s;
        char why[512] = "";
        if (!s->available(&co.stage_opts, why, sizeof why)) {
            l->state = RC_LINK_UNAVAILABLE;
            snprintf(l->why, sizeof l->why, "cannot run here: %s", why);
            continue;
        }
        if (!o->base.no_floor)
            rc_case_floor(&r->c, o->base.probe, s->gdn_recurrent);
        int rc = rc_eval_stage(&r->c, &co, o->tols, &l->ev);
        if (rc) {
            l->state = l->ev.status == RC_EVAL_UNSUPPORTED ? RC_LINK_UNSUPPORTED : RC_LINK_ERROR;
            memcpy(l->why, l->ev.why, sizeof l->why);
            rc_eval_free(&l->ev);
            continue;
        }
        l->state = RC_LINK_RAN;
    }
    make_verdict(r);
    r->seconds = now_s() - t0;
}

const char *rc_chain_status_name(int status)
{
    switch (status) {
    case RC_CHAIN_PASS: return "pass";
    case RC_CHAIN_FAIL: return "fail";
    case RC_CHAIN_NOT_CHECKED: return "not checked";
    }
    return "error";
}

static const char *link_state_name(int s)
{
    switch (s) {
    case RC_LINK_RAN: return "ran";
    case RC_LINK_NOT_BUILT: return "not built";
    case RC_LINK_UNAVAILABLE: return "unavailable";
    case RC_LINK_UNSUPPORTED: return "unsupported";
    }
    return "error";
}

void rc_chain_print(const rc_chain_result *r, const rc_chain_opts *o)
{
    if (r->case_ok)
        for (int i = 0; i < r->n; i++) {
            const rc_chain_link *l = &r->links[i];
            if (l->state == RC_LINK_RAN) {
                rc_eval_print(&l->ev, &r->c, o->tols, o->base.quiet);
                if (!o->base.quiet)
                    printf("\n");
            }
        }
    const char *name = r->case_ok ? r->c.preset : r->golden;
    if (r->case_ok)
        for (int i = 0; i < r->n; i++) {
            const rc_chain_link *l = &r->links[i];
            if (l->state == RC_LINK_RAN)
                printf("  link %-8s %-12s %s (%.2fs)\n", l->stage, l->link,
                       l->ev.status == RC_EVAL_PASS            ? "pass"
                       : l->ev.cause == RC_CAUSE_PRECISION ? "fail (over --tol within its precision; no break)"
                       : l->ev.cause == RC_CAUSE_NEAR_TIE  ? "fail (near-ties only; no break)"
                                                           : "FAIL",
                       l->ev.seconds);
            else
                printf("  link %-8s %-12s skipped: %s\n", l->stage, l->link[0] ? l->link : "-", l->why);
        }
    if (r->case_ok && r->c.floor_state < 0)
        printf("  floor unavailable: %s\n", r->c.floor_why);
    printf("CHAIN %s%s%s: %s\n", name, rc_fault_selected() ? " fault=" : "",
           rc_fault_selected() ? rc_fault_selected() : "", r->verdict);
}

void *rc_chain_json(const rc_chain_result *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "golden", r->golden);
    if (r->case_ok) {
        cJSON_AddStringToObject(j, "preset", r->c.preset);
        cJSON_AddStringToObject(j, "model_type", r->c.model_type);
        cJSON_AddStringToObject(j, "precision", r->c.precision);
        cJSON_AddStringToObject(j, "versions", r->c.versions);
        cJSON_AddStringToObject(j, "floor", r->c.floor_state > 0 ? "available" : "unavailable");
        if (r->c.floor_state <= 0)
            cJSON_AddStringToObject(j, "floor_why", r->c.floor_why[0] ? r->c.floor_why : "not computed");
    } else
        cJSON_AddStringToObject(j, "why", r->case_why);
    if (rc_fault_selected())
        cJSON_AddStringToObject(j, "fault", rc_fault_selected());
    cJSON_AddStringToObject(j, "status", rc_chain_status_name(r->status));
    cJSON_AddStringToObject(j, "verdict_text", r->verdict);
    cJSON_AddNumberToObject(j, "seconds", r->seconds);
    if (r->failed >= 0) {
        const rc_chain_link *l = &r->links[r->failed];
        const rc_row *f = &l->ev.rows[l->ev.first];
        char buf[768];
        cJSON *v = cJSON_AddObjectToObject(j, "verdict");
        cJSON_AddStringToObject(v, "link", l->link);
        cJSON_AddStringToObject(v, "stage", l->stage);
        cJSON_AddStringToObject(v, "probe", f->name);
        cJSON_AddStringToObject(v, "result", rc_row_status_name(f->status));
        if (f->where.layer >= 0)
            cJSON_AddNumberToObject(v, "layer", f->where.layer);
        else
            cJSON_AddNullToObject(v, "layer");
        cJSON_AddStringToObject(v, "op", f->where.op);
        if (f->where.token >= 0)
            cJSON_AddNumberToObject(v, "token", (double)f->where.token);
        else
            cJSON_AddNullToObject(v, "token");
        if (f->where.step >= 0)
            cJSON_AddNumberToObject(v, "step", f->where.step);
        else
            cJSON_AddNullToObject(v, "step");
        cJSON_AddBoolToObject(v, "near_tie", f->status == RC_ROW_NEAR_TIE);
        cJSON_AddStringToObject(v, "text", rc_row_describe(f, buf, sizeof buf));
    }
    cJSON *links = cJSON_AddArrayToObject(j, "links");
    for (int i = 0; i < r->n; i++) {
        const rc_chain_link *l = &r->links[i];
        cJSON *x;
        if (l->state == RC_LINK_RAN)
            x = rc_eval_json(&l->ev, &r->c);
        else {
            x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "stage", l->stage);
            cJSON_AddStringToObject(x, "why", l->why);
        }
        cJSON_AddStringToObject(x, "link", l->link);
        cJSON_AddStringToObject(x, "state", link_state_name(l->state));
        cJSON_AddItemToArray(links, x);
    }
    return j;
}

void rc_chain_free(rc_chain_result *r)
{
    for (int i = 0; i < r->n; i++)
        rc_eval_free(&r->links[i].ev);
    if (r->case_ok)
        rc_case_free(&r->c);
    r->n = 0;
    r->case_ok = 0;
}

int rc_chain_exit_code(const rc_chain_result *r)
{
    return r->status == RC_CHAIN_PASS ? 0 : r->status == RC_CHAIN_FAIL ? 1 : 2;
}

/* ---- harness chain ---- */
int rc_cmd_chain(int argc, char **argv)
{
    rc_chain_opts o = {.base = {.greedy = 1}};
    rc_chain_default_stages(&o);
    const char *json = NULL, *tolfile = NULL, *fault = NULL;
    const char *tol_specs[16] = {0};
    int ntol = 0, ng = 0, rc = RC_EXIT_PASS;
    char **goldens = calloc((size_t)argc + 1, sizeof *goldens), **bundled = NULL;
    if (!goldens)
        return RC_EXIT_ERROR;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--golden") && has)
            goldens[ng++] = argv[++i];
        else if (!strcmp(a, "--stages") && has) {
            if (!rc_chain_parse_stages(&o, argv[++i])) {
                free(goldens);
                return rc_usage_error("--stages needs a comma-separated list of at most 8 stages, got '%s'", argv[i]);
            }
        } else if (!strcmp(a, "--tol") && has && ntol == 16) {
            free(goldens);
            return rc_usage_error("at most 16 --tol options; the 17th is '%s'", argv[i + 1]);
        } else if (!strcmp(a, "--tol") && has)
            tol_specs[ntol++] = argv[++i];
        else if (!strcmp(a, "--tolerances") && has)
            tolfile = argv[++i];
        else if (!strcmp(a, "--probe") && has)
            o.base.probe = argv[++i];
        else if (!strcmp(a, "--json") && has)
            json = argv[++i];
        else if (!strcmp(a, "--fault") && has)
            fault = argv[++i];
        else if (!strcmp(a, "--device") && has) {
            if (!rc_parse_device(argv[++i], &o.base.stage_opts.device)) {
                free(goldens);
                return rc_usage_error("--device needs a GPU ordinal in [0, 1024], got '%s'", argv[i]);
            }
        } else if (!strcmp(a, "--no-greedy"))
            o.base.greedy = 0;
        else if (!strcmp(a, "--quiet"))
            o.base.quiet = 1;
        else if (!strcmp(a, "--allow-near-ties"))
            o.base.allow_near_ties = 1;
        else if (!strcmp(a, "--no-floor"))
            o.base.no_floor = 1;
        else if (!strcmp(a, "--against-exact") || !strcmp(a, "--against-hf"))
            o.base.against = !strcmp(a, "--against-exact") ? RC_AGAINST_EXACT : RC_AGAINST_REF;
        else {
            int k = rc_stage_opt_parse(argc, argv, &i, &o.base.stage_opts); /* engine pass-through flags */
            if (k == 1)
                continue;
            free(goldens);
            if (k < 0)
                return RC_EXIT_ERROR;
            static const char *const value_opts[] = {"--golden", "--stages", "--tol", "--tolerances", "--probe",
                                                     "--json", "--fault", "--device", "--resident-layers",
                                                     "--kv-tile", NULL};
            return rc_usage_error(rc_arg_error_fmt(a, value_opts), a);
        }
    }
    if (fault && rc_fault_use(fault)) {
        free(goldens);
        return RC_EXIT_ERROR;
    }
    rc_tolerances tols;
    if (rc_load_tolerances(&tols, tolfile, tol_specs, ntol)) {
        free(goldens);
        return RC_EXIT_ERROR;
    }
    o.tols = &tols;
    int nb = 0;
    if (!ng) {
        if ((rc = rc_golden_list(&bundled, &nb))) {
            free(goldens);
            rc_tol_free(&tols);
            return rc;
        }
    }
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    int n = ng ? ng : nb, worst = RC_EXIT_PASS;
    for (int i = 0; i < n; i++) {
        rc_chain_result r;
        rc_chain_golden(ng ? goldens[i] : bundled[i], &o, &r);
        rc_chain_print(&r, &o);
        if (r.status == RC_CHAIN_ERROR) /* bad input: its one line goes to stderr too */
            fprintf(stderr, "harness: %s\n", r.verdict);
        if (arr)
            cJSON_AddItemToArray(arr, rc_chain_json(&r));
        int x = rc_chain_exit_code(&r);
        if (x == RC_EXIT_ERROR || (x == RC_EXIT_BOUND && worst != RC_EXIT_ERROR))
            worst = x;
        rc_chain_free(&r);
        if (i + 1 < n && !o.base.quiet)
            printf("\n");
    }
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "tool", "refchain harness chain");
        cJSON_AddNumberToObject(root, "exit_code", worst);
        if (rc_fault_selected())
            cJSON_AddStringToObject(root, "fault", rc_fault_selected());
        else
            cJSON_AddNullToObject(root, "fault");
        cJSON *st = cJSON_AddArrayToObject(root, "stages");
        for (int i = 0; i < o.nstages; i++)
            cJSON_AddItemToArray(st, cJSON_CreateString(o.stages[i]));
        cJSON_AddItemToObject(root, "results", arr);
        const int wrc = rc_write_json_file(json, root);
        cJSON_Delete(root);
        if (wrc)
            worst = RC_EXIT_ERROR;
    }
    rc_free_list(bundled, nb);
    free(goldens);
    rc_tol_free(&tols);
    return worst;
}
