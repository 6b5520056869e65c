/* Speed in the reports: an `engine bench --json` table recorded in a report (report --bench), rendered as
 * Markdown, and compared by report --diff, where a slowdown beyond the measured noise is a regression. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report.h"
#include "util.h"

cJSON *rc_bench_load(const char *path)
{
    return rc_json_file(path, "bench table", "refchain-bench", "rows", "an engine bench table (engine bench --json)");
}

static void cell(char *buf, size_t cap, const char *fmt, double v)
{
    if (isfinite(v))
        snprintf(buf, cap, fmt, v);
    else
        snprintf(buf, cap, "-");
}

void rc_report_md_speed(rc_sbuf *b, const cJSON *bench)
{
    const cJSON *rf = rc_jget(bench, "rooflines"), *r;
    rc_sb(b, "\n## Speed (engine bench)\n\n");
    rc_sb(b, "- %s %s on %s; %d rounds x (prefill, %d decode steps) per row; medians\n", rc_jstr(bench, "shape"),
          rc_jstr(bench, "dtype"), rc_jstr(bench, "device"), (int)rc_jnum(bench, "rounds"), (int)rc_jnum(bench, "steps"));
    char peak[32];
    cell(peak, sizeof peak, "%.0f TFLOP/s", rc_jnum(rf, "peak_tflops"));
    rc_sb(b, "- rooflines: read %.0f GB/s, device copy %.0f GB/s, pinned H2D %.1f GB/s, bf16 peak %s (%s)\n\n",
          rc_jnum(rf, "read_gbs"), rc_jnum(rf, "d2d_gbs"), rc_jnum(rf, "h2d_gbs"), peak, rc_jstr(rf, "peak_source"));
    rc_sb(b, "| row | prompt | prefill ms | prefill tok/s | %% of roofline | ms/token | tok/s | floor ms | %% of floor | "
             "spread ms (prefill / decode) | plan |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    cJSON_ArrayForEach(r, rc_jget(bench, "rows"))
    {
        if (!cJSON_IsTrue(rc_jget(r, "ok"))) {
            rc_sb(b, "| %s | %d | FAILED | | | | | | | | %s |\n", rc_jstr(r, "id"), (int)rc_jnum(r, "prompt_len"),
                  rc_jstr(r, "mode"));
            continue;
        }
        char pr[32], pf[32];
        cell(pr, sizeof pr, "%.0f%%", rc_jnum(r, "pct_prefill_roof"));
        cell(pf, sizeof pf, "%.0f%%", rc_jnum(r, "pct_floor"));
        rc_sb(b, "| %s | %d | %.2f | %.0f | %s | %.3f | %.1f | %.3f | %s | %.3f / %.3f | %s |\n", rc_jstr(r, "id"),
              (int)rc_jnum(r, "prompt_len"), rc_jnum(r, "prefill_ms"), rc_jnum(r, "prefill_tok_s"), pr,
              rc_jnum(r, "ms_tok"), rc_jnum(r, "tok_s"), rc_jnum(r, "floor_ms"), pf, rc_jnum(r, "prefill_spread_ms"),
              rc_jnum(r, "decode_spread_ms"), rc_jstr(r, "mode"));
    }
}

static const cJSON *find_row(const cJSON *bench, const char *id)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, rc_jget(bench, "rows"))
    {
        if (!strcmp(rc_jstr(r, "id"), id))
            return r;
    }
    return NULL;
}

int rc_speed_diff(const cJSON *a, const cJSON *b, FILE *out, int *missing)
{
    *missing = 0;
    if (!a || !b) {
        if (a || b)
            fprintf(out, "  speed: only %s has an engine bench table: not compared\n", a ? "A" : "B");
        return 0;
    }
    if (strcmp(rc_jstr(a, "device"), rc_jstr(b, "device")) || strcmp(rc_jstr(a, "shape"), rc_jstr(b, "shape")) ||
        strcmp(rc_jstr(a, "dtype"), rc_jstr(b, "dtype"))) {
        fprintf(out, "  speed: not compared: A is %s %s on '%s', B is %s %s on '%s'\n", rc_jstr(a, "shape"),
                rc_jstr(a, "dtype"), rc_jstr(a, "device"), rc_jstr(b, "shape"), rc_jstr(b, "dtype"), rc_jstr(b, "device"));
        return 0;
    }
    fprintf(out, "  speed (regression: a median slower by more than %g x the larger spread + max(%g%% of A, %g ms)):\n",
            RC_SPEED_K, 100 * RC_SPEED_REL_FLOOR, RC_SPEED_ABS_FLOOR_MS);
    static const char *const metric[][3] = {{"prefill ms", "prefill_ms", "prefill_spread_ms"},
                                            {"decode ms/token", "ms_tok", "decode_spread_ms"}};
    int regressions = 0;
    const cJSON *ra, *rb;
    cJSON_ArrayForEach(ra, rc_jget(a, "rows"))
    {
        const char *id = rc_jstr(ra, "id");
        rb = find_row(b, id);
        if (!cJSON_IsTrue(rc_jget(ra, "ok"))) {
            fprintf(out, "    %-16s failed in A: not compared\n", id);
            continue;
        }
        if (!rb) {
            fprintf(out, "    MISSING %-16s measured in A, no such row in B\n", id);
            (*missing)++;
            continue;
        }
        if (!cJSON_IsTrue(rc_jget(rb, "ok"))) {
            fprintf(out, "    REGRESSION %-16s measured in A, FAILED in B\n", id);
            regressions++;
            continue;
        }
        for (int m = 0; m < 2; m++) {
            double va = rc_jnum(ra, metric[m][1]), vb = rc_jnum(rb, metric[m][1]);
            double sa = rc_jnum(ra, metric[m][2]), sb = rc_jnum(rb, metric[m][2]);
            if (!isfinite(va) || !isfinite(vb)) {
                fprintf(out, "    %-16s %-15s not in both\n", id, metric[m][0]);
                continue;
            }
            double spread = fmax(isfinite(sa) ? sa : 0.0, isfinite(sb) ? sb : 0.0);
            double margin = RC_SPEED_K * spread + fmax(RC_SPEED_REL_FLOOR * va, RC_SPEED_ABS_FLOOR_MS);
            const int slower = vb - va > margin, faster = va - vb > margin;
            fprintf(out, "    %s%-16s %-15s %.4g -> %.4g (%+.1f%%, margin %.3g): %s\n", slower ? "REGRESSION " : "", id,
                    metric[m][0], va, vb, va > 0 ? 100.0 * (vb - va) / va : 0.0, margin,
                    slower ? "slower" : faster ? "faster" : "within noise");
            regressions += slower;
        }
    }
    cJSON_ArrayForEach(rb, rc_jget(b, "rows"))
    {
        if (!find_row(a, rc_jstr(rb, "id")))
            fprintf(out, "    %-16s new in B\n", rc_jstr(rb, "id"));
    }
    return regressions;
}
