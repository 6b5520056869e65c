/* harness compare (see compare.h): the command's driver, one case at a time. */
#include "compare.h"

#include <cjson/cJSON.h>
#include <stdio.h>

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
