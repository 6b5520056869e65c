/* report --diff A B: what moved between two commits' reports; exit 1 on a regression. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compare.h"
#include "io.h"
#include "report.h"
#include "util.h"

static cJSON *load_one(const char *what, const char *outdir)
{
    char path[4096];
    struct stat sbuf_;
    if (stat(what, &sbuf_) == 0)
        snprintf(path, sizeof path, "%s", what);
    else
        snprintf(path, sizeof path, "%s/%s.json", outdir, what);
    char *text = rc_read_text(path, "report", 0, NULL);
    if (!text) {
        /* a commit prefix: the one report whose name starts with it */
        rc_recorded *recs = NULL;
        int n = rc_reports_load(outdir, &recs), hit = -1, nhit = 0;
        for (int i = 0; i < n; i++)
            if (!strncmp(recs[i].commit, what, strlen(what))) {
                hit = i;
                nhit++;
            }
        cJSON *j = NULL;
        for (int i = 0; i < n; i++) {
            if (i == hit && nhit == 1)
                j = recs[i].j;
            else
                cJSON_Delete(recs[i].j);
        }
        free(recs);
        if (!j)
            fprintf(stderr, "harness: error: report --diff: no report '%s' (%s, or one commit prefix in %s)\n", what,
                    path, outdir);
        return j;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j || strcmp(rc_jstr(j, "format"), "refchain-report")) {
        fprintf(stderr, "harness: error: %s: not a refchain report\n", path);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static const cJSON *find_link(const cJSON *rep, const char *golden, const char *stage)
{
    const cJSON *g, *l;
    cJSON_ArrayForEach(g, rc_jget(rep, "goldens"))
    {
        const char *name = rc_jstr(g, "preset")[0] ? rc_jstr(g, "preset") : rc_jstr(g, "golden");
        if (strcmp(name, golden))
            continue;
        cJSON_ArrayForEach(l, rc_jget(g, "links"))
        {
            if (!strcmp(rc_jstr(l, "stage"), stage))
                return l;
        }
    }
    return NULL;
}

static double link_worst(const cJSON *l)
{
    double v = rc_jnum(l, "worst_scaled"), gs = rc_jnum(l, "greedy_worst_step_scaled");
    return !isnan(gs) && (isnan(v) || gs > v) ? gs : v;
}

int rc_report_diff(const char *a, const char *b, const char *outdir, const char *tolfile)
{
    rc_tolerances t;
    if (rc_load_tolerances(&t, tolfile, NULL, 0))
        return RC_EXIT_ERROR;
    cJSON *A = load_one(a, outdir), *B = A ? load_one(b, outdir) : NULL;
    if (!A || !B) {
        cJSON_Delete(A);
        rc_tol_free(&t);
        return RC_EXIT_ERROR;
    }
    const double F = t.reg_factor, M = t.reg_min;
    printf("report diff %s -> %s (regression: worst scaled max-abs of a stage on a golden grew by > %gx and is above "
           "%g, or a verdict went from pass to fail; %s v%d)\n",
           rc_jstr(A, "commit"), rc_jstr(B, "commit"), F, M, t.path, t.version);
    int regressions = 0, moved = 0;
    const cJSON *g, *l;
    cJSON_ArrayForEach(g, rc_jget(B, "goldens")) cJSON_ArrayForEach(l, rc_jget(g, "links"))
    {
        const char *gname = rc_jstr(g, "preset")[0] ? rc_jstr(g, "preset") : rc_jstr(g, "golden"), *stage = rc_jstr(l, "stage");
        const cJSON *la = find_link(A, gname, stage);
        int ran_b = !strcmp(rc_jstr(l, "state"), "ran"), ran_a = la && !strcmp(rc_jstr(la, "state"), "ran");
        if (!ran_a && !ran_b)
            continue;
        if (ran_a != ran_b) {
            printf("  %-12s %-8s %s\n", gname, stage, ran_b ? "now runs (not in A)" : "no longer runs in B");
            continue;
        }
        const char *va = rc_jstr(la, "verdict"), *vb = rc_jstr(l, "verdict");
        double wa = link_worst(la), wb = link_worst(l);
        int reg = 0;
        if (!strcmp(va, "pass") && strcmp(vb, "pass")) {
            printf("  REGRESSION %-12s %-8s verdict %s -> %s: %s\n", gname, stage, va, vb,
                   rc_jstr(l, "first_divergence_text"));
            reg = 1;
        } else if (isfinite(wb) && wb > M && (!(wa > 0) || wb > F * wa)) {
            printf("  REGRESSION %-12s %-8s worst scaled %.3e -> %.3e (x%.1f)\n", gname, stage, wa, wb,
                   wa > 0 ? wb / wa : INFINITY);
            reg = 1;
        } else if (strcmp(va, vb))
            printf("  %-12s %-8s verdict %s -> %s\n", gname, stage, va, vb);
        else
            printf("  %-12s %-8s worst scaled %.3e -> %.3e (%s)\n", gname, stage, wa, wb, vb);
        regressions += reg;
        /* per-probe moves beyond the margin, for the reader */
        const char *arrs[2] = {"probes", "greedy"};
        for (int k = 0; k < 2; k++) {
            const cJSON *p;
            cJSON_ArrayForEach(p, rc_jget(l, arrs[k]))
            {
                const cJSON *q;
                double vb_ = rc_jnum(p, "scaled"), va_ = NAN;
                cJSON_ArrayForEach(q, rc_jget(la, arrs[k]))
                {
                    if (!strcmp(rc_jstr(q, "probe"), rc_jstr(p, "probe")))
                        va_ = rc_jnum(q, "scaled");
                }
                if (isnan(va_) || isnan(vb_) || fmax(va_, vb_) <= M)
                    continue;
                double ratio = va_ > 0 ? vb_ / va_ : INFINITY;
                if (ratio > F || ratio < 1 / F) {
                    moved++;
                    printf("      %-24s %.3e -> %.3e (x%.2g)\n", rc_jstr(p, "probe"), va_, vb_, ratio);
                }
            }
        }
    }
    int missing = 0, slow = rc_speed_diff(rc_jget(A, "bench"), rc_jget(B, "bench"), stdout, &missing);
    regressions += slow;
    int qmissing = 0, qreg = rc_quality_diff(rc_jget(A, "quality"), rc_jget(B, "quality"), stdout, &qmissing);
    regressions += qreg;
    printf("%d regression%s (%d of speed, %d of quantization quality), %d probe%s moved beyond %gx, %d bench row%s "
           "and %d quality row%s missing in B\n", regressions, regressions == 1 ? "" : "s", slow, qreg, moved,
           moved == 1 ? "" : "s", F, missing, missing == 1 ? "" : "s", qmissing, qmissing == 1 ? "" : "s");
    cJSON_Delete(A);
    cJSON_Delete(B);
    rc_tol_free(&t);
    return regressions ? RC_EXIT_BOUND : RC_EXIT_PASS;
}
