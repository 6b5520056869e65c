/* The report rendered as one self-contained HTML page: the Markdown summary as HTML, then the charts. */
#include <stdio.h>
#include <string.h>

#include "chain.h"
#include "report.h"
#include "util.h"

static void md_to_html_table(rc_sbuf *b, const char *md)
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
            rc_sb(b, "</table>\n");
            in_table = 0;
        }
        if (in_list && strncmp(line, "- ", 2)) {
            rc_sb(b, "</ul>\n");
            in_list = 0;
        }
        if (!strncmp(line, "# ", 2))
            rc_sb(b, "<h1>%s</h1>\n", rc_esc(line + 2, e1, sizeof e1));
        else if (!strncmp(line, "## ", 3))
            rc_sb(b, "<h2>%s</h2>\n", rc_esc(line + 3, e1, sizeof e1));
        else if (!strncmp(line, "- ", 2)) {
            if (!in_list)
                rc_sb(b, "<ul>\n");
            in_list = 1;
            rc_sb(b, "<li>%s</li>\n", rc_esc(line + 2, e1, sizeof e1));
        } else if (line[0] == '|') {
            if (strstr(line, "|---"))
                continue;
            const char *tag = in_table ? "td" : "th";
            if (!in_table)
                rc_sb(b, "<table>\n");
            in_table = 1;
            rc_sb(b, "<tr>");
            char *save = NULL;
            for (char *c = strtok_r(line + 1, "|", &save); c; c = strtok_r(NULL, "|", &save)) {
                while (*c == ' ')
                    c++;
                rc_rstrip(c);
                const int bad = strstr(c, "FAIL") || strstr(c, "WRONG") || !strcmp(c, "NO");
                const int good = !strncmp(c, "pass", 4) || !strncmp(c, "PASS", 4) || !strcmp(c, "ok");
                const char *cls = bad ? " class=\"bad\"" : good ? " class=\"good\"" : "";
                rc_sb(b, "<%s%s>%s</%s>", tag, cls, rc_esc(c, e1, sizeof e1), tag);
            }
            rc_sb(b, "</tr>\n");
        } else if (line[0]) {
            /* **bold** spans */
            rc_esc(line, e1, sizeof e1);
            rc_sb(b, "<p>");
            int bold = 0;
            for (char *c = e1; *c; c++) {
                if (c[0] == '*' && c[1] == '*') {
                    rc_sb(b, bold ? "</b>" : "<b>");
                    bold = !bold;
                    c++;
                } else
                    rc_sb(b, "%c", *c);
            }
            rc_sb(b, "</p>\n");
        }
    }
    if (in_table)
        rc_sb(b, "</table>\n");
    if (in_list)
        rc_sb(b, "</ul>\n");
}

void rc_report_html(rc_sbuf *b, const cJSON *rep, const char *md, rc_recorded *recs, int nrec)
{
    char e1[256];
    rc_sb(b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>refchain report %s</title>\n<style>"
          "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
          "table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;"
          "text-align:left;vertical-align:top}th{background:#f3f3f3}.bad{background:#fdd}.good{background:#dfd}"
          "figure{margin:1em 0}</style></head><body>\n",
       rc_esc(rc_jstr(rep, "commit"), e1, sizeof e1));
    md_to_html_table(b, md);
    rc_sb(b, "<h2>Error per layer</h2>\n<p>Worst scaled max-abs (max|a-b| / max(1, max|ref|)) over each layer's probes, "
          "per stage; dashed grey: fp32's own distance from the double-precision forward (the noise floor); dotted "
          "red: the scaled bound.</p>\n");
    const cJSON *g;
    cJSON_ArrayForEach(g, rc_jget(rep, "goldens")) rc_chart_layers(b, g);
    rc_sb(b, "<h2>Trend</h2>\n");
    const char *stages[RC_CHAIN_MAX];
    int nst = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, rc_jget(rep, "stages"))
    {
        if (cJSON_IsString(s) && nst < RC_CHAIN_MAX)
            stages[nst++] = s->valuestring;
    }
    rc_chart_trend(b, recs, nrec, stages, nst);
    rc_sb(b, "</body></html>\n");
}
