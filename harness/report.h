/* The report's internal pieces, one unit per job: report.c builds the report data (the chain on every
 * golden, the faults, machine and versions) and writes the JSON; report_md.c renders Markdown,
 * report_html.c HTML (with report_chart.c's inline SVG charts), report_diff.c compares two reports;
 * report_store.c reads recorded reports; sbuf.c is the growing string they render into. */
#ifndef HARNESS_REPORT_H
#define HARNESS_REPORT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

/* a growing string; oom set (and the text cut) if an allocation failed */
typedef struct rc_sbuf {
    char *s;
    size_t n, cap;
    int oom;
} rc_sbuf;

__attribute__((format(printf, 2, 3))) void rc_sb(rc_sbuf *b, const char *fmt, ...);
/* HTML-escaped copy of s into buf */
const char *rc_esc(const char *s, char *buf, size_t cap);

/* report fields: "" / NAN ("inf" read as infinity) / NULL where absent or of another type */
const char *rc_jstr(const cJSON *o, const char *key);
double rc_jnum(const cJSON *o, const char *key);
const cJSON *rc_jget(const cJSON *o, const char *key);

/* the refchain reports recorded in a folder, oldest first */
typedef struct rc_recorded {
    char commit[64], created[40];
    cJSON *j;
} rc_recorded;
int rc_reports_load(const char *dir, rc_recorded **out);

/* SVG charts: log-scale y, one polyline per series */
typedef struct rc_series {
    const char *name, *color;
    int dashed;
    double *v; /* [nx], NAN = gap */
} rc_series;
extern const char *const rc_chart_colors[6];
void rc_svg_chart(rc_sbuf *b, const char *title, const char *const *xl, int nx, const rc_series *s, int ns,
                  double hline, const char *hlabel);
/* worst scaled error per probe group (input, each layer, output, greedy) of one golden's links */
void rc_chart_layers(rc_sbuf *b, const cJSON *g);
/* worst scaled error per stage across recorded reports */
void rc_chart_trend(rc_sbuf *b, rc_recorded *recs, int n, const char *const *stages, int nst);

void rc_report_md(rc_sbuf *b, const cJSON *rep);
/* the page: md's summary as HTML, the per-layer charts, the trend over recs */
void rc_report_html(rc_sbuf *b, const cJSON *rep, const char *md, rc_recorded *recs, int nrec);
/* report --diff A B: exit 0, 1 on a regression, 2 on bad input */
int rc_report_diff(const char *a, const char *b, const char *outdir, const char *tolfile);

/* speed (report_speed.c): an `engine bench --json` table, checked (NULL and one error line if it is not one) */
cJSON *rc_bench_load(const char *path);
void rc_report_md_speed(rc_sbuf *b, const cJSON *bench);
/* report --diff's speed part: a row's median (prefill ms, decode ms/token) is a regression when B is slower than A
 * by more than RC_SPEED_K x the larger of the two rows' spreads (each run's measured noise) plus the floor
 * max(RC_SPEED_REL_FLOOR x A, RC_SPEED_ABS_FLOOR_MS) (what one run cannot measure: the GPU's state between runs;
 * bench/README.md, "Speed in the reports"); a row failed in B is one too. Returns the regressions; *missing: rows of A absent
 * from B (printed, not regressions). Tables of different devices or shapes are not compared. */
#define RC_SPEED_K 3.0
#define RC_SPEED_REL_FLOOR 0.04
#define RC_SPEED_ABS_FLOOR_MS 0.002
int rc_speed_diff(const cJSON *a, const cJSON *b, FILE *out, int *missing);

/* quantization quality (report_quality.c): a `harness quant-quality --json` table, checked (NULL and one error line
 * if it is not one), rendered, and compared by report --diff: a scheme whose ΔNLL in B exceeds A's by more than
 * RC_QUALITY_DNLL_MARGIN (nats) is a regression. The table is deterministic (ref on the CPU, fixed calibration and
 * held-out ids), so the margin only keeps a compiler's last-bit changes in the quantizer from counting: they move
 * ΔNLL by < 1e-6 on the tiny goldens, a worse quantizer by >= 1e-3. Returns the regressions; *missing: A's rows
 * absent from B. Tables of different models or held-out streams are not compared. */
#define RC_QUALITY_DNLL_MARGIN 1e-4
cJSON *rc_quality_load(const char *path);
void rc_report_md_quality(rc_sbuf *b, const cJSON *quality);
int rc_quality_diff(const cJSON *a, const cJSON *b, FILE *out, int *missing);

#endif
