/* The kernel trace's host side (eng_trace.h): the registry of traced units, the device buffer, the table. */
#include "eng_trace.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define MAX_UNITS 16
#define MAX_SITES 256

static struct {
    const char *name;
    eng_trace_attach_fn attach;
} units[MAX_UNITS];
static int n_units;
static eng_trace_buf *dbuf; /* device */

struct site {
    unsigned site, grid;
    uint64_t n;    /* deltas attributed */
    double sum_ns; /* their sum */
    double max_ns;
};
static struct site sites[MAX_SITES];
static int n_sites, steps_total, overflow;
static uint64_t min_dt = UINT64_MAX;

int eng_trace_register(const char *unit, eng_trace_attach_fn attach)
{
    if (n_units >= MAX_UNITS)
        return -1;
    const char *b = strrchr(unit, '/');
    units[n_units].name = b ? b + 1 : unit;
    units[n_units].attach = attach;
    return n_units++;
}

int eng_trace_built(void) { return n_units > 0; }

int eng_trace_reset(void)
{
    if (!dbuf) {
        if (cudaMalloc((void **)&dbuf, sizeof *dbuf) != cudaSuccess) {
            dbuf = NULL;
            return -1;
        }
        for (int u = 0; u < n_units; u++)
            if (units[u].attach(dbuf, (unsigned)u) != 0)
                return -1;
    }
    return cudaDeviceSynchronize() == cudaSuccess && cudaMemset(dbuf, 0, sizeof(unsigned)) == cudaSuccess &&
                   cudaDeviceSynchronize() == cudaSuccess
               ? 0
               : -1;
}

static struct site *site_of(unsigned id, unsigned grid)
{
    for (int i = 0; i < n_sites; i++)
        if (sites[i].site == id && sites[i].grid == grid)
            return &sites[i];
    if (n_sites >= MAX_SITES)
        return NULL;
    struct site *s = &sites[n_sites++];
    memset(s, 0, sizeof *s);
    s->site = id;
    s->grid = grid;
    return s;
}

int eng_trace_add(const uint64_t *t, const uint32_t *site, const uint32_t *grid, uint32_t n, int steps)
{
    int rc = 0;
    for (uint32_t i = 0; i + 1 < n; i++) { /* in the counter's order: each kernel waited for the one before */
        const uint64_t dt = t[i + 1] >= t[i] ? t[i + 1] - t[i] : 0;
        struct site *s = site_of(site[i], grid[i]);
        if (!s) {
            rc = -1;
            continue;
        }
        s->n++;
        s->sum_ns += (double)dt;
        s->max_ns = s->max_ns > (double)dt ? s->max_ns : (double)dt;
        if (dt > 0 && dt < min_dt)
            min_dt = dt;
    }
    steps_total += steps;
    return rc;
}

int eng_trace_collect(int steps)
{
    if (!dbuf)
        return -1;
    unsigned n = 0;
    uint64_t *t = malloc(ENG_TRACE_CAP * sizeof *t);
    uint32_t *id = malloc(ENG_TRACE_CAP * sizeof *id), *gr = malloc(ENG_TRACE_CAP * sizeof *gr);
    int rc = t && id && gr && cudaDeviceSynchronize() == cudaSuccess &&
                     cudaMemcpy(&n, dbuf, sizeof n, cudaMemcpyDeviceToHost) == cudaSuccess
                 ? 0
                 : -1;
    if (!rc) {
        overflow |= n > ENG_TRACE_CAP;
        n = n < ENG_TRACE_CAP ? n : ENG_TRACE_CAP;
        if (n && (cudaMemcpy(t, dbuf->t, n * sizeof *t, cudaMemcpyDeviceToHost) != cudaSuccess ||
                  cudaMemcpy(id, dbuf->site, n * sizeof *id, cudaMemcpyDeviceToHost) != cudaSuccess ||
                  cudaMemcpy(gr, dbuf->grid, n * sizeof *gr, cudaMemcpyDeviceToHost) != cudaSuccess))
            rc = -1;
    }
    if (!rc) {
        overflow |= eng_trace_add(t, id, gr, n, steps) != 0;
        rc = eng_trace_reset();
    }
    free(gr);
    free(id);
    free(t);
    return rc;
}

int eng_trace_rows(void) { return n_sites; }

int eng_trace_row_get(int i, eng_trace_row *out)
{
    if (i < 0 || i >= n_sites)
        return -1;
    const struct site *s = &sites[i];
    const unsigned u = s->site >> 16;
    out->unit = u < (unsigned)n_units ? units[u].name : "?";
    out->line = s->site & 0xffffu;
    out->grid = s->grid;
    out->per_step = steps_total ? (double)s->n / steps_total : 0.0;
    out->us_each = s->n ? 1e-3 * s->sum_ns / (double)s->n : 0.0;
    out->us_step = steps_total ? 1e-3 * s->sum_ns / steps_total : 0.0;
    out->max_us = 1e-3 * s->max_ns;
    return 0;
}

void eng_trace_print(FILE *f, const char *title)
{
    double tot = 0.0;
    for (int i = 0; i < n_sites; i++)
        tot += sites[i].sum_ns;
    fprintf(f, "trace (%s): %d steps, %.1f us a step between the first and last note; shortest gap %.0f ns%s\n",
            title, steps_total, steps_total ? 1e-3 * tot / steps_total : 0.0,
            min_dt == UINT64_MAX ? 0.0 : (double)min_dt, overflow ? "; notes were dropped (buffer or table full)" : "");
    fprintf(f, "  %-24s %6s %8s %10s %10s %10s\n", "site (unit:line)", "grid", "a step", "us each", "us a step",
            "max us");
    for (int i = 0; i < n_sites; i++) {
        eng_trace_row r;
        (void)eng_trace_row_get(i, &r);
        char name[64];
        snprintf(name, sizeof name, "%s:%u", r.unit, r.line);
        fprintf(f, "  %-24s %6u %8.2f %10.3f %10.2f %10.2f\n", name, r.grid, r.per_step, r.us_each, r.us_step,
                r.max_us);
    }
    n_sites = 0;
    steps_total = 0;
    overflow = 0;
    min_dt = UINT64_MAX;
}
