/* Quantization quality in the reports: a `harness quant-quality --json` table (ΔNLL, KL, top-1 per scheme) recorded
 * in a report (report --quality, or <out>/<commit>.quality.json), rendered as Markdown and compared by report --diff,
 * where a scheme whose ΔNLL grew beyond RC_QUALITY_DNLL_MARGIN is a regression. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report.h"
#include "util.h"

cJSON *rc_quality_load(const char *path)
{
    return rc_json_file(path, "quality table", "refchain-quant-quality", "rows",
                        "a quantization quality table (harness quant-quality --json)");
}

void rc_report_md_quality(rc_sbuf *b, const cJSON *q)
{
    const cJSON *r;
    rc_sb(b, "\n## Quantization quality (harness quant-quality)\n\n");
    rc_sb(b, "- %s: ref on each scheme's dequantized weights against ref unquantized; %d held-out tokens, %d "
             "calibration tokens, damp %g, block %d\n\n",
          rc_jstr(q, "model"), (int)rc_jnum(q, "heldout_tokens"), (int)rc_jnum(q, "calibration_tokens"),
          rc_jnum(q, "damp"), (int)rc_jnum(q, "block"));
    rc_sb(b, "| scheme | zero | method | ΔNLL | KL mean | KL max | top-1 | greedy equal |\n"
             "|---|---|---|---|---|---|---|---|\n");
    cJSON_ArrayForEach(r, rc_jget(q, "rows"))
        rc_sb(b, "| %s | %s | %s | %+.5e | %.5e | %.5e | %.2f%% | %d/%d |\n", rc_jstr(r, "scheme"), rc_jstr(r, "zero"),
              rc_jstr(r, "method"), rc_jnum(r, "dnll"), rc_jnum(r, "kl_mean"), rc_jnum(r, "kl_max"),
              100.0 * rc_jnum(r, "top1_agreement"), (int)rc_jnum(r, "greedy_equal"), (int)rc_jnum(r, "greedy_tokens"));
}

static int same_row(const cJSON *a, const cJSON *b)
{
    return !strcmp(rc_jstr(a, "scheme"), rc_jstr(b, "scheme")) && !strcmp(rc_jstr(a, "zero"), rc_jstr(b, "zero")) &&
           !strcmp(rc_jstr(a, "method"), rc_jstr(b, "method"));
}

int rc_quality_diff(const cJSON *a, const cJSON *b, FILE *out, int *missing)
{
    int reg = 0;
    *missing = 0;
    if (!a || !b)
        return 0;
    if (strcmp(rc_jstr(a, "model"), rc_jstr(b, "model")) ||
        rc_jnum(a, "heldout_tokens") != rc_jnum(b, "heldout_tokens")) {
        fprintf(out, "  quality: tables of different models or held-out streams (%s, %s); not compared\n",
                rc_jstr(a, "model"), rc_jstr(b, "model"));
        return 0;
    }
    fprintf(out, "  quality (regression: a scheme's ΔNLL grew by more than %g):\n", RC_QUALITY_DNLL_MARGIN);
    const cJSON *ra, *rb;
    cJSON_ArrayForEach(ra, rc_jget(a, "rows"))
    {
        const cJSON *hit = NULL;
        cJSON_ArrayForEach(rb, rc_jget(b, "rows"))
        {
            if (same_row(ra, rb))
                hit = rb;
        }
        char id[96];
        snprintf(id, sizeof id, "%s %s %s", rc_jstr(ra, "scheme"), rc_jstr(ra, "zero"), rc_jstr(ra, "method"));
        if (!hit) {
            fprintf(out, "  %-28s not in B\n", id);
            ++*missing;
            continue;
        }
        const double da = rc_jnum(ra, "dnll"), db = rc_jnum(hit, "dnll");
        const int bad = !isfinite(db) || db > da + RC_QUALITY_DNLL_MARGIN;
        reg += bad;
        fprintf(out, "  %s%-28s ΔNLL %+.5e -> %+.5e, KL mean %.3e -> %.3e, top-1 %.2f%% -> %.2f%%\n",
                bad ? "REGRESSION " : "", id, da, db, rc_jnum(ra, "kl_mean"), rc_jnum(hit, "kl_mean"),
                100.0 * rc_jnum(ra, "top1_agreement"), 100.0 * rc_jnum(hit, "top1_agreement"));
    }
    return reg;
}
