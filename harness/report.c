/* harness report: the chain on every golden written as reports/<commit>.{json,md,html}, and
 * report --diff A B: what moved between two commits' reports, exit 1 on a regression. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"
#include "fault.h"
#include "io.h"
#include "util.h"

#ifndef RC_VERSION
#define RC_VERSION "?"
#endif

/* ---- a growing string ---- */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

__attribute__((format(printf, 2, 3))) static void sb(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int need = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (need < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && b->n + (size_t)need < b->cap) {
            b->n += (size_t)need;
            return;
        }
        size_t nc = (b->cap + (size_t)need + 1) * 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
}

/* HTML-escaped copy of s into buf */
static const char *esc(const char *s, char *buf, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        const char *r = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : *s == '"' ? "&quot;" : NULL;
        if (r) {
            memcpy(buf + n, r, strlen(r));
            n += strlen(r);
        } else
            buf[n++] = *s;
    }
    buf[n] = 0;
    return buf;
}

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : "";
}

static double jnum(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsNumber(it))
        return it->valuedouble;
    if (cJSON_IsString(it) && !strcmp(it->valuestring, "inf"))
        return INFINITY;
    return NAN;
}

static const cJSON *jget(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* ---- git ---- */
static int git_out(const char *repo, char *const args[], char *out, size_t cap)
{
    char *argv[16] = {"git", "-C", (char *)repo};
    int n = 3;
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char *text = NULL;
    int rc = rc_run(argv, NULL, &text);
    snprintf(out, cap, "%s", text ? rc_rstrip(text) : "");
    free(text);
    return rc;
}

static void repo_root(const char *given, char *out, size_t cap)
{
    if (given) {
        snprintf(out, cap, "%s", given);
        return;
    }
    char *args[] = {"rev-parse", "--show-toplevel", NULL};
    if (git_out(".", args, out, cap) != 0 || !out[0])
        snprintf(out, cap, ".");
}

/* ---- SVG charts: log-scale y, one polyline per series ---- */
typedef struct series {
    const char *name, *color;
    int dashed;
    double *v; /* [nx], NAN = gap */
} series;

static void svg_chart(sbuf *b, const char *title, const char *const *xl, int nx, const series *s, int ns,
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
    sb(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "font-family=\"sans-serif\" font-size=\"11\">\n",
       W, H, W, H);
    sb(b, "<text x=\"%d\" y=\"16\" font-size=\"13\" font-weight=\"bold\">%s</text>\n", L, esc(title, e1, sizeof e1));
    const int pw = W - L - R, ph = H - T - B;
#define XP(i) (L + (nx > 1 ? (double)(i) * pw / (nx - 1) : pw / 2.0))
#define YP(v) (T + ph - (log10(v) - lo) / (hi - lo) * ph)
    sb(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", L, T, pw, ph);
    for (int d = (int)lo; d <= (int)hi; d++) {
        double y = T + ph - (d - lo) / (hi - lo) * ph;
        sb(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%d\" y=\"%.1f\" "
              "text-anchor=\"end\">1e%d</text>\n",
           L, L + pw, y, y, L - 4, y + 4, d);
    }
    for (int i = 0; i < nx; i++)
        sb(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"end\" transform=\"rotate(-40 %.1f %d)\">%s</text>\n", XP(i),
           T + ph + 14, XP(i), T + ph + 14, esc(xl[i], e1, sizeof e1));
    if (hline > 0)
        sb(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-dasharray=\"2,3\"/>"
              "<text x=\"%d\" y=\"%.1f\" fill=\"#c00\">%s</text>\n",
           L, L + pw, YP(hline), YP(hline), L + pw + 4, YP(hline) + 4, esc(hlabel, e1, sizeof e1));
    for (int k = 0; k < ns; k++) {
        int open = 0;
        for (int i = 0; i < nx; i++) {
            double v = s[k].v[i];
            if (!(isfinite(v) && v > 0)) {
                if (open)
                    sb(b, "\"/>\n");
                open = 0;
                continue;
            }
            if (!open)
                sb(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", s[k].color,
                   s[k].dashed ? " stroke-dasharray=\"5,4\"" : "");
            open = 1;
            sb(b, "%.1f,%.1f ", XP(i), YP(v));
        }
        if (open)
            sb(b, "\"/>\n");
        for (int i = 0; i < nx; i++)
            if (isfinite(s[k].v[i]) && s[k].v[i] > 0)
                sb(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>%s %s: %.3e</title></circle>\n",
                   XP(i), YP(s[k].v[i]), s[k].color, s[k].name, xl[i], s[k].v[i]);
        sb(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/><text x=\"%d\" "
              "y=\"%d\">%s</text>\n",
           L + pw + 8, L + pw + 28, T + 32 + 16 * k, T + 32 + 16 * k, s[k].color,
           s[k].dashed ? " stroke-dasharray=\"5,4\"" : "", L + pw + 32, T + 36 + 16 * k, esc(s[k].name, e1, sizeof e1));
    }
#undef XP
#undef YP
    sb(b, "</svg></figure>\n");
}

static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"};

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

static void layer_chart(sbuf *b, const cJSON *g)
{
    const cJSON *links = jget(g, "links"), *l;
    int nl = 0;
    cJSON_ArrayForEach(l, links)
    {
        const cJSON *p;
        cJSON_ArrayForEach(p, jget(l, "probes"))
        {
            const char *n = jstr(p, "probe");
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
    series s[8];
    double vals[8][260];
    int ns = 0;
    double bound = 0;
    cJSON_ArrayForEach(l, links)
    {
        if (ns >= 6 || strcmp(jstr(l, "state"), "ran"))
            continue;
        int fl = ns == 0; /* the floor series comes from the first link (it is the same for all) */
        for (int i = 0; i < nx; i++)
            vals[ns][i] = vals[ns + 1][i] = NAN;
        const cJSON *arrs[2] = {jget(l, "probes"), jget(l, "greedy")};
        for (int a = 0; a < 2; a++) {
            const cJSON *p;
            cJSON_ArrayForEach(p, arrs[a])
            {
                int x = probe_group(jstr(p, "probe"), nl);
                double v = jnum(p, "scaled");
                if (x < 0 || !(v >= 0))
                    continue;
                if (!isfinite(v))
                    v = 1e3;
                vals[ns][x] = isnan(vals[ns][x]) ? fmax(v, 1e-12) : fmax(vals[ns][x], fmax(v, 1e-12));
                const cJSON *f = jget(p, "floor");
                if (fl && f) {
                    double fv = jnum(f, "scaled");
                    if (fv >= 0)
                        vals[ns + 1][x] = isnan(vals[ns + 1][x]) ? fmax(fv, 1e-12) : fmax(vals[ns + 1][x], fv);
                }
                const cJSON *bd;
                cJSON_ArrayForEach(bd, jget(p, "bounds"))
                {
                    if (!strcmp(jstr(bd, "metric"), "scaled"))
                        bound = jnum(bd, "bound");
                }
            }
        }
        s[ns] = (series){jstr(l, "stage"), colors[ns % 6], 0, vals[ns]};
        ns++;
        if (fl && !strcmp(jstr(g, "floor"), "available")) {
            s[ns] = (series){"fp32 floor (HF vs double)", "#777", 1, vals[ns]};
            ns++;
        }
    }
    if (!ns)
        return;
    char title[256];
    snprintf(title, sizeof title, "%s: worst scaled max-abs per layer, per stage", jstr(g, "preset"));
    svg_chart(b, title, xl, nx, s, ns, bound, "bound");
}

/* ---- reading the recorded reports ---- */
typedef struct recorded {
    char commit[64], created[40];
    cJSON *j;
} recorded;

static int cmp_created(const void *a, const void *b)
{
    return strcmp(((const recorded *)a)->created, ((const recorded *)b)->created);
}

static int load_reports(const char *dir, recorded **out)
{
    DIR *d = opendir(dir);
    recorded *list = NULL;
    int n = 0;
    if (!d) {
        *out = NULL;
        return 0;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".json"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        char *text = rc_read_text(path, "report", 0, NULL);
        cJSON *j = text ? cJSON_Parse(text) : NULL;
        free(text);
        if (!j || strcmp(jstr(j, "format"), "refchain-report")) {
            cJSON_Delete(j);
            continue;
        }
        recorded *nl = realloc(list, (size_t)(n + 1) * sizeof *nl);
        if (!nl) {
            cJSON_Delete(j);
            break;
        }
        list = nl;
        snprintf(list[n].commit, sizeof list[n].commit, "%s", jstr(j, "commit"));
        snprintf(list[n].created, sizeof list[n].created, "%s", jstr(j, "created"));
        list[n].j = j;
        n++;
    }
    closedir(d);
    qsort(list, (size_t)n, sizeof *list, cmp_created);
    *out = list;
    return n;
}

/* worst scaled max-abs of a stage over a report's goldens (NAN if it never ran) */
static double worst_of(const cJSON *rep, const char *stage)
{
    double w = NAN;
    const cJSON *g, *l;
    cJSON_ArrayForEach(g, jget(rep, "goldens")) cJSON_ArrayForEach(l, jget(g, "links"))
    {
        if (strcmp(jstr(l, "stage"), stage) || strcmp(jstr(l, "state"), "ran"))
            continue;
        double v = jnum(l, "worst_scaled"), gs = jnum(l, "greedy_worst_step_scaled");
        if (!isnan(gs) && (isnan(v) || gs > v))
            v = gs;
        if (!isnan(v) && (isnan(w) || v > w))
            w = v;
    }
    return w;
}

static void trend_chart(sbuf *b, recorded *recs, int n, const char *const *stages, int nst)
{
    if (n < 1 || n > 200)
        return;
    char lbl[200][24];
    const char *xl[200];
    double vals[RC_CHAIN_MAX][200];
    series s[RC_CHAIN_MAX];
    for (int i = 0; i < n; i++) {
        snprintf(lbl[i], sizeof lbl[i], "%.10s%s", recs[i].commit, cJSON_IsTrue(jget(recs[i].j, "dirty")) ? "+" : "");
        xl[i] = lbl[i];
    }
    for (int k = 0; k < nst; k++) {
        for (int i = 0; i < n; i++)
            vals[k][i] = worst_of(recs[i].j, stages[k]);
        s[k] = (series){stages[k], colors[k % 6], 0, vals[k]};
    }
    svg_chart(b, "worst scaled max-abs per stage across recorded commits (+ = dirty tree)", xl, n, s, nst, 0, "");
}

/* ---- the report ---- */
static void cpu_name(char *out, size_t cap)
{
    snprintf(out, cap, "unknown CPU");
    char *t = rc_read_text("/proc/cpuinfo", "cpuinfo", 0, NULL);
    char *p = t ? strstr(t, "model name") : NULL;
    if (p && (p = strchr(p, ':'))) {
        p++;
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, "\n");
        snprintf(out, cap, "%.*s", (int)n, p);
    }
    free(t);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    size_t len = strlen(out);
    snprintf(out + len, cap - len, " x%ld", ncpu);
}

static void gpu_name(int device, char *out, size_t cap)
{
    char cmd[256], *text = NULL;
    snprintf(cmd, sizeof cmd, "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i %d 2>/dev/null",
             device);
    snprintf(out, cap, "none");
    if (rc_sh(cmd, &text) == 0 && text && text[0])
        snprintf(out, cap, "%s", rc_rstrip(text));
    free(text);
}

static void cell_text(const cJSON *l, char *buf, size_t cap)
{
    const char *state = jstr(l, "state");
    if (strcmp(state, "ran")) {
        snprintf(buf, cap, "skipped: %s", jstr(l, "why"));
        return;
    }
    const char *v = jstr(l, "verdict");
    double w = jnum(l, "worst_scaled"), xf = jnum(l, "worst_xfloor");
    char xs[32] = "";
    if (isfinite(xf))
        snprintf(xs, sizeof xs, ", %.1fx floor", xf);
    if (!strcmp(v, "fail"))
        snprintf(buf, cap, "FAIL at %s (%.2fs)", jstr(l, "first_divergence_text"), jnum(l, "seconds"));
    else
        snprintf(buf, cap, "%s (worst %.2e at %s%s; greedy %d/%d; %.2fs)", v, w, jstr(l, "worst_probe"), xs,
                 (int)jnum(l, "greedy_tokens_equal"), (int)jnum(l, "greedy_steps"), jnum(l, "seconds"));
}

static void write_md(sbuf *b, const cJSON *rep)
{
    const cJSON *g, *l, *dev = jget(rep, "device"), *ver = jget(rep, "versions");
    sb(b, "# refchain report %s%s\n\n", jstr(rep, "commit"),
       cJSON_IsTrue(jget(rep, "dirty")) ? " (dirty tree)"
       : !strcmp(jstr(rep, "tree"), "unknown") ? " (tree state unknown: the named commit is not this checkout's HEAD)" : "");
    sb(b, "- created: %s on %s\n- device: CPU %s; GPU %s\n- refchain %s, %s, HDF5 %s, cJSON %s\n", jstr(rep, "created"),
       jstr(rep, "host"), jstr(dev, "cpu"), jstr(dev, "gpu"), jstr(ver, "refchain"), jstr(ver, "compiler"),
       jstr(ver, "hdf5"), jstr(ver, "cjson"));
    sb(b, "- tolerances: %s version %d; stages built: %s; fault hooks: %s\n- total time %.2fs\n\n",
       jstr(ver, "tolerances_file"), (int)jnum(ver, "tolerances_version"), jstr(rep, "stages_built"),
       cJSON_IsTrue(jget(rep, "fault_hooks")) ? "compiled in" : "not compiled in", jnum(rep, "seconds"));
    sb(b, "## Chain verdicts\n\n| golden | verdict |\n|---|---|\n");
    cJSON_ArrayForEach(g, jget(rep, "goldens"))
        sb(b, "| %s | %s |\n", jstr(g, "preset")[0] ? jstr(g, "preset") : jstr(g, "golden"), jstr(g, "verdict_text"));
    sb(b, "\n## Stages\n\n| golden | stage | result |\n|---|---|---|\n");
    cJSON_ArrayForEach(g, jget(rep, "goldens")) cJSON_ArrayForEach(l, jget(g, "links"))
    {
        char cell[1024];
        cell_text(l, cell, sizeof cell);
        sb(b, "| %s | %s | %s |\n", jstr(g, "preset"), jstr(l, "stage"), cell);
    }
    const cJSON *f = jget(rep, "faults");
    if (cJSON_IsObject(f)) {
        sb(b, "\n## Injected faults\n\n");
        if (jnum(f, "runnable") > 0)
            sb(b, "Detection rate **%d/%d**, attribution accuracy **%d/%d** (link %d/%d, first probe %d/%d); %d "
                  "catalogued.\n\n",
               (int)jnum(f, "detected"), (int)jnum(f, "runnable"),
               (int)(jnum(f, "detected") * jnum(f, "attribution_accuracy") + 0.5), (int)jnum(f, "detected"),
               (int)jnum(f, "link_correct"), (int)jnum(f, "detected"), (int)jnum(f, "probe_correct"),
               (int)jnum(f, "detected"), (int)jnum(f, "catalogued"));
        else
            sb(b, "No fault could run here (%d catalogued).\n\n", (int)jnum(f, "catalogued"));
        sb(b, "| fault | stage | expected link | expected probe | detected | attributed link | first divergent probe | "
              "result |\n|---|---|---|---|---|---|---|---|\n");
        const cJSON *x;
        cJSON_ArrayForEach(x, jget(f, "faults"))
        {
            int skipped = !strcmp(jstr(x, "result"), "skipped");
            sb(b, "| %s | %s | %s | %s | %s | %s | %s | %s%s%s |\n", jstr(x, "fault"), jstr(x, "stage"),
               jstr(x, "expected_link"), jstr(x, "expected_probe"),
               skipped ? "-" : cJSON_IsTrue(jget(x, "detected")) ? "yes" : "NO", skipped ? "-" : jstr(x, "link"),
               skipped ? "-" : jstr(x, "first_probe"), jstr(x, "result"), skipped ? ": " : "", jstr(x, "why"));
        }
    } else
        sb(b, "\n## Injected faults\n\nNot run: %s\n", jstr(rep, "faults_why"));
}

static void md_to_html_table(sbuf *b, const char *md)
{
    /* the markdown is ours: headings, "- " lists, pipe tables, paragraphs */
    char line[8192], e1[8192];
    int in_table = 0, in_list = 0;
    const char *p = md;
    while (*p) {
        size_t n = strcspn(p, "\n");
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
        p += n + (p[n] == '\n');
        if (in_table && line[0] != '|') {
            sb(b, "</table>\n");
            in_table = 0;
        }
        if (in_list && strncmp(line, "- ", 2)) {
            sb(b, "</ul>\n");
            in_list = 0;
        }
        if (!strncmp(line, "# ", 2))
            sb(b, "<h1>%s</h1>\n", esc(line + 2, e1, sizeof e1));
        else if (!strncmp(line, "## ", 3))
            sb(b, "<h2>%s</h2>\n", esc(line + 3, e1, sizeof e1));
        else if (!strncmp(line, "- ", 2)) {
            if (!in_list)
                sb(b, "<ul>\n");
            in_list = 1;
            sb(b, "<li>%s</li>\n", esc(line + 2, e1, sizeof e1));
        } else if (line[0] == '|') {
            if (strstr(line, "|---"))
                continue;
            const char *tag = in_table ? "td" : "th";
            if (!in_table)
                sb(b, "<table>\n");
            in_table = 1;
            sb(b, "<tr>");
            char *save = NULL;
            for (char *c = strtok_r(line + 1, "|", &save); c; c = strtok_r(NULL, "|", &save)) {
                while (*c == ' ')
                    c++;
                rc_rstrip(c);
                const int bad = strstr(c, "FAIL") || strstr(c, "WRONG") || !strcmp(c, "NO");
                const int good = !strncmp(c, "pass", 4) || !strncmp(c, "PASS", 4) || !strcmp(c, "ok");
                const char *cls = bad ? " class=\"bad\"" : good ? " class=\"good\"" : "";
                sb(b, "<%s%s>%s</%s>", tag, cls, esc(c, e1, sizeof e1), tag);
            }
            sb(b, "</tr>\n");
        } else if (line[0]) {
            /* **bold** spans */
            esc(line, e1, sizeof e1);
            sb(b, "<p>");
            int bold = 0;
            for (char *c = e1; *c; c++) {
                if (c[0] == '*' && c[1] == '*') {
                    sb(b, bold ? "</b>" : "<b>");
                    bold = !bold;
                    c++;
                } else
                    sb(b, "%c", *c);
            }
            sb(b, "</p>\n");
        }
    }
    if (in_table)
        sb(b, "</table>\n");
    if (in_list)
        sb(b, "</ul>\n");
}

static void write_html(sbuf *b, const cJSON *rep, const char *md, recorded *recs, int nrec)
{
    char e1[256];
    sb(b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>refchain report %s</title>\n<style>"
          "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
          "table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;"
          "text-align:left;vertical-align:top}th{background:#f3f3f3}.bad{background:#fdd}.good{background:#dfd}"
          "figure{margin:1em 0}</style></head><body>\n",
       esc(jstr(rep, "commit"), e1, sizeof e1));
    md_to_html_table(b, md);
    sb(b, "<h2>Error per layer</h2>\n<p>Worst scaled max-abs (max|a-b| / max(1, max|ref|)) over each layer's probes, "
          "per stage; dashed grey: fp32's own distance from the double-precision forward (the noise floor); dotted "
          "red: the scaled bound.</p>\n");
    const cJSON *g;
    cJSON_ArrayForEach(g, jget(rep, "goldens")) layer_chart(b, g);
    sb(b, "<h2>Trend</h2>\n");
    const char *stages[RC_CHAIN_MAX];
    int nst = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, jget(rep, "stages"))
    {
        if (cJSON_IsString(s) && nst < RC_CHAIN_MAX)
            stages[nst++] = s->valuestring;
    }
    trend_chart(b, recs, nrec, stages, nst);
    sb(b, "</body></html>\n");
}

static void iso_now(char *out, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int report_diff(const char *a, const char *b, const char *outdir, const char *tolfile);

int rc_cmd_report(int argc, char **argv)
{
    const char *out = NULL, *repo_arg = NULL, *tolfile = NULL, *diff_a = NULL, *diff_b = NULL, *commit_arg = NULL;
    int force = 0, no_faults = 0, ng = 0, device = 0, no_floor = 0, x_opt;
    char **goldens = calloc((size_t)argc + 1, sizeof *goldens);
    rc_chain_opts o = {.base = {.greedy = 1, .quiet = 1}};
    rc_chain_default_stages(&o);
    if (!goldens)
        return RC_EXIT_ERROR;
    for (int i = 0; i < argc; i++) {
        int has = i + 1 < argc;
        const char *x = argv[i];
        if (!strcmp(x, "--out") && has)
            out = argv[++i];
        else if (!strcmp(x, "--force"))
            force = 1;
        else if (!strcmp(x, "--golden") && has)
            goldens[ng++] = argv[++i];
        else if (!strcmp(x, "--stages") && has) {
            if (!rc_chain_parse_stages(&o, argv[++i])) {
                free(goldens);
                fprintf(stderr, "harness: --stages needs a comma-separated list (see harness --help)\n");
                return RC_EXIT_ERROR;
            }
        } else if (!strcmp(x, "--device") && has) {
            if (!rc_parse_device(argv[++i], &device)) {
                free(goldens);
                fprintf(stderr, "harness: --device needs a GPU ordinal in [0, 1024], got '%s'\n", argv[i]);
                return RC_EXIT_ERROR;
            }
        }
        else if (!strcmp(x, "--tolerances") && has)
            tolfile = argv[++i];
        else if (!strcmp(x, "--repo") && has)
            repo_arg = argv[++i];
        else if (!strcmp(x, "--commit") && has)
            commit_arg = argv[++i];
        else if (!strcmp(x, "--no-faults"))
            no_faults = 1;
        else if (!strcmp(x, "--no-floor"))
            no_floor = 1;
        else if (!strcmp(x, "--diff") && i + 2 < argc) {
            diff_a = argv[++i];
            diff_b = argv[++i];
        } else if ((x_opt = rc_stage_opt_parse(argc, argv, &i, &o.base.stage_opts)) != 0) {
            if (x_opt < 0) {
                free(goldens);
                return RC_EXIT_ERROR;
            }
        } else {
            free(goldens);
            fprintf(stderr, "harness: report: unknown argument '%s' (see harness --help)\n", x);
            return RC_EXIT_ERROR;
        }
    }
    char repo[4096], outdir[4200];
    repo_root(repo_arg, repo, sizeof repo);
    if (out)
        snprintf(outdir, sizeof outdir, "%s", out);
    else
        snprintf(outdir, sizeof outdir, "%s/reports", repo);
    if (diff_a) {
        free(goldens);
        return report_diff(diff_a, diff_b, outdir, tolfile);
    }
    o.base.stage_opts.device = device;
    o.base.no_floor = no_floor;
    rc_tolerances tols;
    if (rc_load_tolerances(&tols, tolfile, NULL, 0)) {
        free(goldens);
        return RC_EXIT_ERROR;
    }
    o.tols = &tols;

    char commit[128], dirty_text[64];
    char *a_head[] = {"rev-parse", "HEAD", NULL};
    char *a_status[] = {"status", "--porcelain", "--", ".", ":(exclude)reports", NULL};
    int have_commit = git_out(repo, a_head, commit, sizeof commit) == 0 && commit[0];
    const int head_is_named = have_commit && commit_arg && !strcmp(commit, commit_arg);
    if (commit_arg) { /* a copy of the tree without .git (a GPU machine): the caller names the commit */
        if (!commit_arg[0] || strspn(commit_arg, "0123456789abcdefABCDEF-_.+") != strlen(commit_arg)) {
            fprintf(stderr, "harness: report --commit needs a commit id, got '%s'\n", commit_arg);
            free(goldens);
            rc_tol_free(&tols);
            return RC_EXIT_ERROR;
        }
        snprintf(commit, sizeof commit, "%s", commit_arg);
        have_commit = 1;
    } else if (!have_commit) {
        fprintf(stderr, "harness: warning: %s: no git commit (git rev-parse HEAD failed); naming the report "
                        "'uncommitted'\n", repo);
        snprintf(commit, sizeof commit, "uncommitted");
    }
    /* tree: clean or dirty against HEAD; unknown where --commit names a commit that is not this checkout's
     * HEAD (a copy of the tree on a GPU machine, with no .git or an unrelated one) */
    const int status_ok = have_commit && (!commit_arg || head_is_named) &&
                          git_out(repo, a_status, dirty_text, sizeof dirty_text) == 0;
    const char *tree = status_ok ? (dirty_text[0] ? "dirty" : "clean") : commit_arg ? "unknown" : "dirty";
    const int dirty = !strcmp(tree, "dirty");

    char pj[4400], pm[4400], ph[4400];
    snprintf(pj, sizeof pj, "%s/%s.json", outdir, commit);
    snprintf(pm, sizeof pm, "%s/%s.md", outdir, commit);
    snprintf(ph, sizeof ph, "%s/%s.html", outdir, commit);
    if (!force && (!access(pj, F_OK) || !access(pm, F_OK) || !access(ph, F_OK))) {
        fprintf(stderr, "harness: error: a report for %s exists in %s; refusing to overwrite it (--force replaces "
                        "it)\n", commit, outdir);
        free(goldens);
        rc_tol_free(&tols);
        return RC_EXIT_ERROR;
    }
    mkdir(outdir, 0777);

    char **bundled = NULL;
    int nb = 0, rc = RC_EXIT_PASS;
    if (!ng && (rc = rc_golden_list(&bundled, &nb))) {
        free(goldens);
        rc_tol_free(&tols);
        return rc;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cJSON *rep = cJSON_CreateObject();
    char created[40], host[256] = "?", cpu[256], gpu[256];
    iso_now(created, sizeof created);
    gethostname(host, sizeof host - 1);
    cpu_name(cpu, sizeof cpu);
    gpu_name(device, gpu, sizeof gpu);
    cJSON_AddStringToObject(rep, "format", "refchain-report");
    cJSON_AddNumberToObject(rep, "format_version", 1);
    cJSON_AddStringToObject(rep, "commit", commit);
    cJSON_AddBoolToObject(rep, "dirty", dirty);
    cJSON_AddStringToObject(rep, "tree", tree);
    cJSON_AddStringToObject(rep, "created", created);
    cJSON_AddStringToObject(rep, "host", host);
    cJSON *dev = cJSON_AddObjectToObject(rep, "device");
    cJSON_AddStringToObject(dev, "cpu", cpu);
    cJSON_AddStringToObject(dev, "gpu", gpu);
    cJSON_AddNumberToObject(dev, "ordinal", device);
    cJSON *ver = cJSON_AddObjectToObject(rep, "versions");
    unsigned hmaj = 0, hmin = 0, hrel = 0;
    H5get_libversion(&hmaj, &hmin, &hrel);
    char hv[32];
    snprintf(hv, sizeof hv, "%u.%u.%u", hmaj, hmin, hrel);
    cJSON_AddStringToObject(ver, "refchain", RC_VERSION);
    cJSON_AddStringToObject(ver, "compiler", "cc " __VERSION__);
    cJSON_AddStringToObject(ver, "hdf5", hv);
    cJSON_AddStringToObject(ver, "cjson", cJSON_Version());
    cJSON_AddStringToObject(ver, "tolerances_file", tols.path);
    cJSON_AddNumberToObject(ver, "tolerances_version", tols.version);
    cJSON_AddStringToObject(rep, "stages_built", rc_stage_names());
    cJSON_AddBoolToObject(rep, "fault_hooks", RC_FAULTS_BUILT);
    cJSON *st = cJSON_AddArrayToObject(rep, "stages");
    for (int i = 0; i < o.nstages; i++)
        cJSON_AddItemToArray(st, cJSON_CreateString(o.stages[i]));
    cJSON *garr = cJSON_AddArrayToObject(rep, "goldens");
    int n = ng ? ng : nb, nfail = 0, nerr = 0;
    for (int i = 0; i < n; i++) {
        rc_chain_result r;
        rc_chain_golden(ng ? goldens[i] : bundled[i], &o, &r);
        printf("CHAIN %s: %s\n", r.case_ok ? r.c.preset : r.golden, r.verdict);
        nfail += r.status == RC_CHAIN_FAIL;
        nerr += r.status == RC_CHAIN_ERROR;
        cJSON_AddItemToArray(garr, rc_chain_json(&r));
        rc_chain_free(&r);
    }
    if (no_faults)
        cJSON_AddStringToObject(rep, "faults_why", "--no-faults");
    else if (!RC_FAULTS_BUILT)
        cJSON_AddStringToObject(rep, "faults_why", "this harness was built without fault hooks (-Dfaults=true)");
    else {
        int fcode;
        cJSON *fj = rc_faults_run(NULL, NULL, &tols, 0, &fcode);
        if (fj) {
            cJSON_AddItemToObject(rep, "faults", fj);
            printf("faults: detection rate %d/%d, attribution accuracy %.0f%%\n", (int)jnum(fj, "detected"),
                   (int)jnum(fj, "runnable"), 100 * jnum(fj, "attribution_accuracy"));
        } else
            cJSON_AddStringToObject(rep, "faults_why", "the fault catalogue could not be read");
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cJSON_AddNumberToObject(rep, "seconds", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));

    char *json = cJSON_Print(rep);
    sbuf md = {0}, html = {0};
    write_md(&md, rep);
    /* the trend includes this report: write the JSON first, then read the folder */
    rc = json && md.s && !md.oom ? rc_write_file_atomic(pj, json, force) : RC_EXIT_ERROR;
    if (!rc) {
        recorded *recs = NULL;
        int nrec = load_reports(outdir, &recs);
        write_html(&html, rep, md.s, recs, nrec);
        for (int i = 0; i < nrec; i++)
            cJSON_Delete(recs[i].j);
        free(recs);
        rc = rc_write_file_atomic(pm, md.s, force);
        if (!rc)
            rc = html.s && !html.oom ? rc_write_file_atomic(ph, html.s, force) : RC_EXIT_ERROR;
    }
    if (!rc)
        printf("report: %s, %s, %s\n", pj, pm, ph);
    free(json);
    free(md.s);
    free(html.s);
    cJSON_Delete(rep);
    rc_free_list(bundled, nb);
    free(goldens);
    rc_tol_free(&tols);
    if (rc)
        return RC_EXIT_ERROR;
    return nerr ? RC_EXIT_ERROR : nfail ? RC_EXIT_BOUND : RC_EXIT_PASS;
}

/* ---- report --diff ---- */
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
        recorded *recs = NULL;
        int n = load_reports(outdir, &recs), hit = -1, nhit = 0;
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
    if (!j || strcmp(jstr(j, "format"), "refchain-report")) {
        fprintf(stderr, "harness: error: %s: not a refchain report\n", path);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static const cJSON *find_link(const cJSON *rep, const char *golden, const char *stage)
{
    const cJSON *g, *l;
    cJSON_ArrayForEach(g, jget(rep, "goldens"))
    {
        const char *name = jstr(g, "preset")[0] ? jstr(g, "preset") : jstr(g, "golden");
        if (strcmp(name, golden))
            continue;
        cJSON_ArrayForEach(l, jget(g, "links"))
        {
            if (!strcmp(jstr(l, "stage"), stage))
                return l;
        }
    }
    return NULL;
}

static double link_worst(const cJSON *l)
{
    double v = jnum(l, "worst_scaled"), gs = jnum(l, "greedy_worst_step_scaled");
    return !isnan(gs) && (isnan(v) || gs > v) ? gs : v;
}

static int report_diff(const char *a, const char *b, const char *outdir, const char *tolfile)
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
           jstr(A, "commit"), jstr(B, "commit"), F, M, t.path, t.version);
    int regressions = 0, moved = 0;
    const cJSON *g, *l;
    cJSON_ArrayForEach(g, jget(B, "goldens")) cJSON_ArrayForEach(l, jget(g, "links"))
    {
        const char *gname = jstr(g, "preset")[0] ? jstr(g, "preset") : jstr(g, "golden"), *stage = jstr(l, "stage");
        const cJSON *la = find_link(A, gname, stage);
        int ran_b = !strcmp(jstr(l, "state"), "ran"), ran_a = la && !strcmp(jstr(la, "state"), "ran");
        if (!ran_a && !ran_b)
            continue;
        if (ran_a != ran_b) {
            printf("  %-12s %-8s %s\n", gname, stage, ran_b ? "now runs (not in A)" : "no longer runs in B");
            continue;
        }
        const char *va = jstr(la, "verdict"), *vb = jstr(l, "verdict");
        double wa = link_worst(la), wb = link_worst(l);
        int reg = 0;
        if (!strcmp(va, "pass") && strcmp(vb, "pass")) {
            printf("  REGRESSION %-12s %-8s verdict %s -> %s: %s\n", gname, stage, va, vb,
                   jstr(l, "first_divergence_text"));
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
            cJSON_ArrayForEach(p, jget(l, arrs[k]))
            {
                const cJSON *q;
                double vb_ = jnum(p, "scaled"), va_ = NAN;
                cJSON_ArrayForEach(q, jget(la, arrs[k]))
                {
                    if (!strcmp(jstr(q, "probe"), jstr(p, "probe")))
                        va_ = jnum(q, "scaled");
                }
                if (isnan(va_) || isnan(vb_) || fmax(va_, vb_) <= M)
                    continue;
                double ratio = va_ > 0 ? vb_ / va_ : INFINITY;
                if (ratio > F || ratio < 1 / F) {
                    moved++;
                    printf("      %-24s %.3e -> %.3e (x%.2g)\n", jstr(p, "probe"), va_, vb_, ratio);
                }
            }
        }
    }
    printf("%d regression%s, %d probe%s moved beyond %gx\n", regressions, regressions == 1 ? "" : "s", moved,
           moved == 1 ? "" : "s", F);
    cJSON_Delete(A);
    cJSON_Delete(B);
    rc_tol_free(&t);
    return regressions ? RC_EXIT_BOUND : RC_EXIT_PASS;
}
