/* harness faults: the catalogue of injectable bugs (harness/faults.json) run through the chain, each
 * checked for detection, the link it is attributed to and the first divergent probe. */
#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "fault_catalogue.h"
#include "fault.h"
#include "io.h"
#include "util.h"

#ifndef RC_GOLDEN_DIR
#define RC_GOLDEN_DIR "golden"
#endif

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : "";
}

void *rc_faults_run(const char *catalogue, const char *only, const rc_tolerances *t, int print, int *exit_code)
{
    *exit_code = RC_EXIT_ERROR;
    cJSON *root = rc_fault_catalogue_load(catalogue ? catalogue : rc_fault_catalogue_path());
    if (!root)
        return NULL;
    const char *gdir = getenv("REFCHAIN_GOLDEN_DIR");
    if (!gdir || !*gdir)
        gdir = RC_GOLDEN_DIR;
    cJSON *out = cJSON_CreateObject(), *rows = cJSON_CreateArray();
    cJSON_AddStringToObject(out, "format", "refchain-fault-results"); /* report --faults reads it back */
    cJSON_AddStringToObject(out, "catalogue", catalogue ? catalogue : rc_fault_catalogue_path());
    cJSON_AddBoolToObject(out, "hooks_built", RC_FAULTS_BUILT);
    int total = 0, runnable = 0, detected = 0, link_ok = 0, probe_ok = 0, all_ok = 0, matched = 0;
    if (print)
        printf("%-25s %-7s %-13s %-18s %-9s %-13s %-22s %s\n", "fault", "stage", "expect link", "expect probe",
               "detected", "attributed", "first divergent probe", "result");
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(root, "faults"))
    {
        const char *name = str(f, "name"), *stage = str(f, "stage"), *link = str(f, "link"), *probe = str(f, "probe");
        if (only && strcmp(only, name))
            continue;
        matched++;
        total++;
        cJSON *row = cJSON_CreateObject();
        cJSON_AddStringToObject(row, "fault", name);
        cJSON_AddStringToObject(row, "stage", stage);
        cJSON_AddStringToObject(row, "expected_link", link);
        cJSON_AddStringToObject(row, "expected_probe", probe);
        char skip[1024] = "", got_link[32] = "-", got_probe[64] = "-";
        int det = 0, lok = 0, pok = 0;
        if (strcmp(str(f, "status"), "implemented"))
            snprintf(skip, sizeof skip, "%s", str(f, "status"));
        else if (!RC_FAULTS_BUILT)
            snprintf(skip, sizeof skip, "fault hooks not compiled in (-Dfaults=true)");
        else if (!rc_stage_find(stage))
            snprintf(skip, sizeof skip, "stage %s not built into this harness", stage);
        /* the stage options the fault needs ("args": e.g. engine memory modes) */
        rc_chain_opts o = {.base = {.greedy = 1, .quiet = 1}, .tols = t};
        rc_chain_default_stages(&o);
        char *args[16];
        int na = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(f, "args"))
        {
            if (cJSON_IsString(a) && na < 16)
                args[na++] = a->valuestring;
        }
        for (int i = 0; i < na && !skip[0]; i++)
            if (rc_stage_opt_parse(na, args, &i, &o.base.stage_opts) != 1)
                snprintf(skip, sizeof skip, "catalogue: '%s' is not a stage option", args[i]);
        if (!skip[0] && str(f, "stages")[0] && !rc_chain_parse_stages(&o, str(f, "stages")))
            snprintf(skip, sizeof skip, "catalogue: stages '%s' is not a stage list", str(f, "stages"));
        if (!skip[0]) {
            char path[1024];
            const char *g = str(f, "golden");
            if (g[0] == '/')
                snprintf(path, sizeof path, "%s", g);
            else
                snprintf(path, sizeof path, "%s/%s", gdir, g);
            rc_fault_select(name);
            rc_chain_result r;
            rc_chain_golden(path, &o, &r);
            rc_fault_select(NULL);
            int fault_link_ran = 0;
            for (int i = 0; i < r.n; i++)
                if (!strcmp(r.links[i].stage, stage)) {
                    fault_link_ran = r.links[i].state == RC_LINK_RAN;
                    if (!fault_link_ran)
                        snprintf(skip, sizeof skip, "stage %s %s", stage, r.links[i].why);
                }
            if (!r.case_ok)
                snprintf(skip, sizeof skip, "golden %s: %s", g, r.case_why);
            else if (!fault_link_ran && !skip[0])
                snprintf(skip, sizeof skip, "stage %s is not in the chain", stage);
            if (!skip[0]) {
                det = r.status == RC_CHAIN_FAIL && r.failed >= 0; /* a failure without a broken link is no catch */
                if (det) {
                    const rc_chain_link *l = &r.links[r.failed];
                    snprintf(got_link, sizeof got_link, "%s", l->link);
                    snprintf(got_probe, sizeof got_probe, "%s", l->ev.rows[l->ev.first].name);
                    lok = !strcmp(got_link, link);
                    pok = fnmatch(probe, got_probe, 0) == 0;
                }
                cJSON_AddStringToObject(row, "verdict_text", r.verdict);
            }
            rc_chain_free(&r);
        }
        if (skip[0]) {
            cJSON_AddStringToObject(row, "result", "skipped");
            cJSON_AddStringToObject(row, "why", skip);
            if (print)
                printf("%-25s %-7s %-13s %-18s %-9s %-13s %-22s skipped: %s\n", name, stage, link, probe, "-", "-", "-",
                       skip);
        } else {
            runnable++;
            detected += det;
            link_ok += det && lok;
            probe_ok += det && pok;
            all_ok += det && lok && pok;
            cJSON_AddBoolToObject(row, "detected", det);
            cJSON_AddStringToObject(row, "link", got_link);
            cJSON_AddStringToObject(row, "first_probe", got_probe);
            cJSON_AddBoolToObject(row, "link_ok", lok);
            cJSON_AddBoolToObject(row, "probe_ok", pok);
            cJSON_AddStringToObject(row, "result", det && lok && pok ? "ok" : "WRONG");
            if (print)
                printf("%-25s %-7s %-13s %-18s %-9s %-13s %-22s %s\n", name, stage, link, probe, det ? "yes" : "NO",
                       got_link, got_probe, det && lok && pok ? "ok" : !det ? "MISSED" : "MISATTRIBUTED");
        }
        cJSON_AddItemToArray(rows, row);
    }
    cJSON_Delete(root);
    cJSON_AddItemToObject(out, "faults", rows);
    cJSON_AddNumberToObject(out, "catalogued", total);
    cJSON_AddNumberToObject(out, "runnable", runnable);
    cJSON_AddNumberToObject(out, "detected", detected);
    cJSON_AddNumberToObject(out, "link_correct", link_ok);
    cJSON_AddNumberToObject(out, "probe_correct", probe_ok);
    if (runnable) {
        cJSON_AddNumberToObject(out, "detection_rate", (double)detected / runnable);
        cJSON_AddNumberToObject(out, "attribution_accuracy", detected ? (double)all_ok / detected : 0.0);
    }
    if (print)
        printf("faults: %d catalogued, %d runnable here, detection rate %d/%d, attribution accuracy %d/%d "
               "(link %d/%d, first probe %d/%d)\n",
               total, runnable, detected, runnable, all_ok, detected, link_ok, detected, probe_ok, detected);
    if (only && !matched) {
        fprintf(stderr, "harness: error: fault '%s' is not in the catalogue\n", only);
        cJSON_Delete(out);
        return NULL;
    }
    *exit_code = !runnable ? 77 : all_ok == runnable ? RC_EXIT_PASS : RC_EXIT_BOUND;
    return out;
}

int rc_cmd_faults(int argc, char **argv)
{
    const char *only = NULL, *json = NULL, *cat = NULL, *tolfile = NULL;
    for (int i = 0; i < argc; i++) {
        int has = i + 1 < argc;
        if (!strcmp(argv[i], "--only") && has)
            only = argv[++i];
        else if (!strcmp(argv[i], "--json") && has)
            json = argv[++i];
        else if (!strcmp(argv[i], "--catalogue") && has)
            cat = argv[++i];
        else if (!strcmp(argv[i], "--tolerances") && has)
            tolfile = argv[++i];
        else {
            fprintf(stderr, "harness: faults: unknown argument '%s' (see harness --help)\n", argv[i]);
            return RC_EXIT_ERROR;
        }
    }
    rc_tolerances t;
    if (rc_load_tolerances(&t, tolfile, NULL, 0))
        return RC_EXIT_ERROR;
    int code;
    cJSON *out = rc_faults_run(cat, only, &t, 1, &code);
    rc_tol_free(&t);
    if (out && json && rc_write_json_file(json, out))
        code = RC_EXIT_ERROR;
    cJSON_Delete(out);
    return code;
}
