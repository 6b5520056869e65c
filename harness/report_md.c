/* The report rendered as Markdown: header, chain verdicts, one row per stage and golden, the faults. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

static void cell_text(const cJSON *l, char *buf, size_t cap)
{
    const char *state = rc_jstr(l, "state");
    if (strcmp(state, "ran")) {
        snprintf(buf, cap, "skipped: %s", rc_jstr(l, "why"));
        return;
    }
    const char *v = rc_jstr(l, "verdict");
    double w = rc_jnum(l, "worst_scaled"), xf = rc_jnum(l, "worst_xfloor");
    char xs[32] = "";
    if (isfinite(xf))
        snprintf(xs, sizeof xs, ", %.1fx floor", xf);
    if (!strcmp(v, "fail"))
        snprintf(buf, cap, "FAIL at %s (%.2fs)", rc_jstr(l, "first_divergence_text"), rc_jnum(l, "seconds"));
    else
        snprintf(buf, cap, "%s (worst %.2e at %s%s; greedy %d/%d; %.2fs)", v, w, rc_jstr(l, "worst_probe"), xs,
                 (int)rc_jnum(l, "greedy_tokens_equal"), (int)rc_jnum(l, "greedy_steps"), rc_jnum(l, "seconds"));
}

void rc_report_md(rc_sbuf *b, const cJSON *rep)
{
    const cJSON *g, *l, *dev = rc_jget(rep, "device"), *ver = rc_jget(rep, "versions");
    rc_sb(b, "# refchain report %s%s\n\n", rc_jstr(rep, "commit"),
       cJSON_IsTrue(rc_jget(rep, "dirty")) ? " (dirty tree)"
       : !strcmp(rc_jstr(rep, "tree"), "unknown") ? " (tree state unknown: the named commit is not this checkout's HEAD)" : "");
    rc_sb(b, "- created: %s on %s\n- device: CPU %s; GPU %s\n- refchain %s, %s, HDF5 %s, cJSON %s\n", rc_jstr(rep, "created"),
       rc_jstr(rep, "host"), rc_jstr(dev, "cpu"), rc_jstr(dev, "gpu"), rc_jstr(ver, "refchain"), rc_jstr(ver, "compiler"),
       rc_jstr(ver, "hdf5"), rc_jstr(ver, "cjson"));
    rc_sb(b, "- tolerances: %s version %d; stages built: %s; fault hooks: %s\n- total time %.2fs\n\n",
       rc_jstr(ver, "tolerances_file"), (int)rc_jnum(ver, "tolerances_version"), rc_jstr(rep, "stages_built"),
       cJSON_IsTrue(rc_jget(rep, "fault_hooks")) ? "compiled in" : "not compiled in", rc_jnum(rep, "seconds"));
    rc_sb(b, "## Chain verdicts\n\n| golden | verdict |\n|---|---|\n");
    cJSON_ArrayForEach(g, rc_jget(rep, "goldens"))
        rc_sb(b, "| %s | %s |\n", rc_jstr(g, "preset")[0] ? rc_jstr(g, "preset") : rc_jstr(g, "golden"), rc_jstr(g, "verdict_text"));
    rc_sb(b, "\n## Stages\n\n| golden | stage | result |\n|---|---|---|\n");
    cJSON_ArrayForEach(g, rc_jget(rep, "goldens")) cJSON_ArrayForEach(l, rc_jget(g, "links"))
    {
        char cell[1024];
        cell_text(l, cell, sizeof cell);
        rc_sb(b, "| %s | %s | %s |\n", rc_jstr(g, "preset"), rc_jstr(l, "stage"), cell);
    }
    const cJSON *f = rc_jget(rep, "faults");
    if (cJSON_IsObject(f)) {
        rc_sb(b, "\n## Injected faults\n\n");
        if (rc_jnum(f, "runnable") > 0)
            rc_sb(b, "Detection rate **%d/%d**, attribution accuracy **%d/%d** (link %d/%d, first probe %d/%d); %d "
                  "catalogued.\n\n",
               (int)rc_jnum(f, "detected"), (int)rc_jnum(f, "runnable"),
               (int)(rc_jnum(f, "detected") * rc_jnum(f, "attribution_accuracy") + 0.5), (int)rc_jnum(f, "detected"),
               (int)rc_jnum(f, "link_correct"), (int)rc_jnum(f, "detected"), (int)rc_jnum(f, "probe_correct"),
               (int)rc_jnum(f, "detected"), (int)rc_jnum(f, "catalogued"));
        else
            rc_sb(b, "No fault could run here (%d catalogued).\n\n", (int)rc_jnum(f, "catalogued"));
        rc_sb(b, "| fault | stage | expected link | expected probe | detected | attributed link | first divergent probe | "
              "result |\n|---|---|---|---|---|---|---|---|\n");
        const cJSON *x;
        cJSON_ArrayForEach(x, rc_jget(f, "faults"))
        {
            int skipped = !strcmp(rc_jstr(x, "result"), "skipped");
            rc_sb(b, "| %s | %s | %s | %s | %s | %s | %s | %s%s%s |\n", rc_jstr(x, "fault"), rc_jstr(x, "stage"),
               rc_jstr(x, "expected_link"), rc_jstr(x, "expected_probe"),
               skipped ? "-" : cJSON_IsTrue(rc_jget(x, "detected")) ? "yes" : "NO", skipped ? "-" : rc_jstr(x, "link"),
               skipped ? "-" : rc_jstr(x, "first_probe"), rc_jstr(x, "result"), skipped ? ": " : "", rc_jstr(x, "why"));
        }
    } else
        rc_sb(b, "\n## Injected faults\n\nNot run: %s\n", rc_jstr(rep, "faults_why"));
    if (cJSON_IsObject(rc_jget(rep, "bench")))
        rc_report_md_speed(b, rc_jget(rep, "bench"));
    if (cJSON_IsObject(rc_jget(rep, "quality")))
        rc_report_md_quality(b, rc_jget(rep, "quality"));
}
