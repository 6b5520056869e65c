/* The report's inline SVG charts: error per layer of a golden, and the trend across recorded reports. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "report.h"

void rc_svg_chart(rc_sbuf *b, const char *title, const char *const *xl, int nx, const rc_series *s, int ns,
                      double hline, const char *hlabel)
{
    const int W = 800, H = 320, L = 84, R = 170, T = 28, B = 76;
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < nx; i++)
            if (isfinite(s[k].v[i]) && s[k].v[i] > 0) {
                lo = fmin(lo, log10(s[k].v[i]));
                hi = fmax(hi, log10(s[k].v[i]));
            }
    if (hline > 0) {
        lo = fmin(lo, log10(hline));
        hi = fmax(hi, log10(hline));
    }
    if (!isfinite(lo)) {
        lo = -8;
        hi = -4;
    }
    lo = floor(lo) - (lo == hi);
    hi = ceil(hi) + (lo == hi);
    if (hi - lo < 2)
        hi = lo + 2;
    char e1[256];
    rc_sb(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "font-family=\"sans-serif\" font-size=\"11\">\n",
       W, H, W, H);
    rc_sb(b, "<text x=\"%d\" y=\"16\" font-size=\"13\" font-weight=\"bold\">%s</text>\n", L, rc_esc(title, e1, sizeof e1));
    const int pw = W - L - R, ph = H - T - B;
#define XP(i) (L + (nx > 1 ? (double)(i) * pw / (nx - 1) : pw / 2.0))
#define YP(v) (T + ph - (log10(v) - lo) / (hi - lo) * ph)
    rc_sb(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", L, T, pw, ph);
    for (int d = (int)lo; d <= (int)hi; d++) {
        double y = T + ph - (d - lo) / (hi - lo) * ph;
        rc_sb(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%d\" y=\"%.1f\" "
              "text-anchor=\"end\">1e%d</text>\n",
           L, L + pw, y, y, L - 4, y + 4, d);
    }
    for (int i = 0; i < nx; i++)
        rc_sb(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"end\" transform=\"rotate(-40 %.1f %d)\">%s</text>\n", XP(i),
           T + ph + 14, XP(i), T + ph + 14, rc_esc(xl[i], e1, sizeof e1));
    if (hline > 0)
        rc_sb(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-dasharray=\"2,3\"/>"
              "<text x=\"%d\" y=\"%.1f\" fill=\"#c00\">%s</text>\n",
           L, L + pw, YP(hline), YP(hline), L + pw + 4, YP(hline) + 4, rc_esc(hlabel, e1, sizeof e1));
    for (int k = 0; k < ns; k++) {
        int open = 0;
        for (int i = 0; i < nx; i++) {
            double v = s[k].v[i];
            if (!(isfinite(v) && v > 0)) {
                if (open)
                    rc_sb(b, "\"/>\n");
                open = 0;
                continue;
            }
            if (!open)
                rc_sb(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", s[k].color,
                   s[k].dashed ? " stroke-dasharray=\"5,4\"" : "");
            open = 1;
            rc_sb(b, "%.1f,%.1f ", XP(i), YP(v));
        }
        if (open)
            rc_sb(b, "\"/>\n");
        for (int i = 0; i < nx; i++)
            if (isfinite(s[k].v[i]) && s[k].v[i] > 0)
                rc_sb(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>%s %s: %.3e</title></circle>\n",
                   XP(i), YP(s[k].v[i]), s[k].color, s[k].name, xl[i], s[k].v[i]);
        rc_sb(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/><text x=\"%d\" "
              "y=\"%d\">%s</text>\n",
           L + pw + 8, L + pw + 28, T + 32 + 16 * k, T + 32 + 16 * k, s[k].color,
           s[k].dashed ? " stroke-dasharray=\"5,4\"" : "", L + pw + 32, T + 36 + 16 * k, rc_esc(s[k].name, e1, sizeof e1));
    }
#undef XP
#undef YP
    rc_sb(b, "</svg></figure>\n");
}

const char *const rc_chart_colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"};

/* x groups of the per-layer chart: "input" (emb, rope), L0..L<n-1>, "output" (final_norm, logits), "greedy" */
static int probe_group(const char *name, int nl)
{
    if (!strncmp(name, "greedy.", 7))
        return nl + 2;
    if (name[0] == 'L' && name[1] >= '0' && name[1] <= '9') {
        int l = atoi(name + 1);
        return l < nl ? 1 + l : -1;
    }
    if (!strcmp(name, "final_norm") || !strncmp(name, "logits", 6))
        return nl + 1;
    return 0;
}

void rc_chart_layers(rc_sbuf *b, const cJSON *g)
{
    const cJSON *links = rc_jget(g, "links"), *l;
    int nl = 0;
    cJSON_ArrayForEach(l, links)
    {
        const cJSON *p;
        cJSON_ArrayForEach(p, rc_jget(l, "probes"))
        {
            const char *n = rc_jstr(p, "probe");
            if (n[0] == 'L' && atoi(n + 1) + 1 > nl)
                nl = atoi(n + 1) + 1;
        }
    }
    if (nl > 256)
        return;
    const int nx = nl + 3;
    char lbl[260][16];
    const char *xl[260];
    snprintf(lbl[0], 16, "input");
    for (int i = 0; i < nl; i++)
        snprintf(lbl[1 + i], 16, "L%d", i);
    snprintf(lbl[nl + 1], 16, "output");
    snprintf(lbl[nl + 2], 16, "greedy");
    for (int i = 0; i < nx; i++)
        xl[i] = lbl[i];
    rc_series s[8];
    double vals[8][260];
    int ns = 0;
    double bound = 0;
    cJSON_ArrayForEach(l, links)
    {
        if (ns >= 6 || strcmp(rc_jstr(l, "state"), "ran"))
            continue;
        int fl = ns == 0; /* the floor series comes from the first link (it is the same for all) */
        for (int i = 0; i < nx; i++)
            vals[ns][i] = vals[ns + 1][i] = NAN;
        const cJSON *arrs[2] = {rc_jget(l, "probes"), rc_jget(l, "greedy")};
        for (int a = 0; a < 2; a++) {
            const cJSON *p;
            cJSON_ArrayForEach(p, arrs[a])
            {
                int x = probe_group(rc_jstr(p, "probe"), nl);
                double v = rc_jnum(p, "scaled");
                if (x < 0 || !(v >= 0))
                    continue;
                if (!isfinite(v))
                    v = 1e3;
                vals[ns][x] = isnan(vals[ns][x]) ? fmax(v, 1e-12) : fmax(vals[ns][x], fmax(v, 1e-12));
                const cJSON *f = rc_jget(p, "floor");
                if (fl && f) {
                    double fv = rc_jnum(f, "scaled");
                    if (fv >= 0)
                        vals[ns + 1][x] = isnan(vals[ns + 1][x]) ? fmax(fv, 1e-12) : fmax(vals[ns + 1][x], fv);
                }
                const cJSON *bd;
                cJSON_ArrayForEach(bd, rc_jget(p, "bounds"))
                {
                    if (!strcmp(rc_jstr(bd, "metric"), "scaled"))
                        bound = rc_jnum(bd, "bound");
                }
            }
        }
        s[ns] = (rc_series){rc_jstr(l, "stage"), rc_chart_colors[ns % 6], 0, vals[ns]};
        ns++;
        if (fl && !strcmp(rc_jstr(g, "floor"), "available")) {
            s[ns] = (rc_series){"fp32 floor (HF vs double)", "#777", 1, vals[ns]};
            ns++;
        }
    }
    if (!ns)
        return;
    char title[256];
    snprintf(title, sizeof title, "%s: worst scaled max-abs per layer, per stage", rc_jstr(g, "preset"));
    rc_svg_chart(b, title, xl, nx, s, ns, bound, "bound");
}

/* worst scaled max-abs of a stage over a report's goldens (NAN if it never ran) */
static double worst_of(const cJSON *rep, const char *stage)
{
    double w = NAN;
    const cJSON *g, *l;
    cJSON_ArrayForEach(g, rc_jget(rep, "goldens")) cJSON_ArrayForEach(l, rc_jget(g, "links"))
    {
        if (strcmp(rc_jstr(l, "stage"), stage) || strcmp(rc_jstr(l, "state"), "ran"))
            continue;
        double v = rc_jnum(l, "worst_scaled"), gs = rc_jnum(l, "greedy_worst_step_scaled");
        if (!isnan(gs) && (isnan(v) || gs > v))
            v = gs;
        if (!isnan(v) && (isnan(w) || v > w))
            w = v;
    }
    return w;
}

void rc_chart_trend(rc_sbuf *b, rc_recorded *recs, int n, const char *const *stages, int nst)
{
    if (n < 1 || n > 200)
        return;
    char lbl[200][24];
    const char *xl[200];
    double vals[RC_CHAIN_MAX][200];
    rc_series s[RC_CHAIN_MAX];
    for (int i = 0; i < n; i++) {
        snprintf(lbl[i], sizeof lbl[i], "%.10s%s", recs[i].commit, cJSON_IsTrue(rc_jget(recs[i].j, "dirty")) ? "+" : "");
        xl[i] = lbl[i];
    }
    for (int k = 0; k < nst; k++) {
        for (int i = 0; i < n; i++)
            vals[k][i] = worst_of(recs[i].j, stages[k]);
        s[k] = (rc_series){stages[k], rc_chart_colors[k % 6], 0, vals[k]};
    }
    rc_svg_chart(b, "worst scaled max-abs per stage across recorded commits (+ = dirty tree)", xl, n, s, nst, 0, "");
}
