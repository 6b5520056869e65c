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
static char err_msg[256];   /* the failed CUDA call, where, and CUDA's message */

/* call, checked: on failure err_msg names it and the function returns -1 */
#define TR(call)                                                                                                   \
    do {                                                                                                           \
        const cudaError_t err_ = (call);                                                                           \
        if (err_ != cudaSuccess) {                                                                                 \
            snprintf(err_msg, sizeof err_msg, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__,                 \
                     cudaGetErrorString(err_));                                                                    \
            return -1;                                                                                             \
        }                                                                                                          \
    } while (0)

const char *eng_trace_error(void) { return err_msg; }

struct site {
    unsigned site, grid, prev; /* prev: the site noted just before (ENG_TRACE_NONE: a run's first note) */
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
        eng_trace_buf *b = NULL;
        TR(cudaMalloc((void **)&b, sizeof *b));
        dbuf = b;
        for (int u = 0; u < n_units; u++)
            TR(units[u].attach(dbuf, (unsigned)u));
    }
    TR(cudaDeviceSynchronize());
    TR(cudaMemset(dbuf, 0, sizeof(unsigned)));
    TR(cudaDeviceSynchronize());
    return 0;
}

static struct site *site_of(unsigned id, unsigned grid, unsigned prev)
{
    for (int i = 0; i < n_sites; i++)
        if (sites[i].site == id && sites[i].grid == grid && sites[i].prev == prev)
            return &sites[i];
    if (n_sites >= MAX_SITES)
        return NULL;
    struct site *s = &sites[n_sites++];
    memset(s, 0, sizeof *s);
    s->site = id;
    s->grid = grid;
    s->prev = prev;
    return s;
}

int eng_trace_add(const uint64_t *t, const uint32_t *site, const uint32_t *grid, uint32_t n, int steps)
{
    int rc = 0;
    for (uint32_t i = 0; i + 1 < n; i++) { /* in the counter's order: each kernel waited for the one before */
        const uint64_t dt = t[i + 1] >= t[i] ? t[i + 1] - t[i] : 0;
        struct site *s = site_of(site[i], grid[i], i ? site[i - 1] : ENG_TRACE_NONE);
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

static int fetch(int steps, uint64_t *t, uint32_t *id, uint32_t *gr)
{
    unsigned n = 0;
    TR(cudaDeviceSynchronize());
    TR(cudaMemcpy(&n, dbuf, sizeof n, cudaMemcpyDeviceToHost));
    overflow |= n > ENG_TRACE_CAP;
    n = n < ENG_TRACE_CAP ? n : ENG_TRACE_CAP;
    if (n) {
        TR(cudaMemcpy(t, dbuf->t, n * sizeof *t, cudaMemcpyDeviceToHost));
        TR(cudaMemcpy(id, dbuf->site, n * sizeof *id, cudaMemcpyDeviceToHost));
        TR(cudaMemcpy(gr, dbuf->grid, n * sizeof *gr, cudaMemcpyDeviceToHost));
    }
    overflow |= eng_trace_add(t, id, gr, n, steps) != 0;
    return eng_trace_reset();
}

int eng_trace_collect(int steps)
{
    if (!dbuf) {
        snprintf(err_msg, sizeof err_msg, "eng_trace_collect before eng_trace_reset");
        return -1;
    }
    uint64_t *t = malloc(ENG_TRACE_CAP * sizeof *t);
    uint32_t *id = malloc(ENG_TRACE_CAP * sizeof *id), *gr = malloc(ENG_TRACE_CAP * sizeof *gr);
    int rc = -1;
    if (t && id && gr)
        rc = fetch(steps, t, id, gr);
    else
        snprintf(err_msg, sizeof err_msg, "out of host memory for %u notes", ENG_TRACE_CAP);
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
    const unsigned pu = s->prev >> 16;
    out->prev_unit = s->prev == ENG_TRACE_NONE ? NULL : pu < (unsigned)n_units ? units[pu].name : "?";
    out->prev_line = s->prev == ENG_TRACE_NONE ? 0 : s->prev & 0xffffu;
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
    fprintf(f, "  %-24s %6s %-24s %8s %10s %10s %10s\n", "site (unit:line)", "grid", "after (unit:line)", "a step",
            "us each", "us a step", "max us");
    for (int i = 0; i < n_sites; i++) {
        eng_trace_row r;
        (void)eng_trace_row_get(i, &r);
        char name[64], after[64];
        snprintf(name, sizeof name, "%s:%u", r.unit, r.line);
        if (r.prev_unit)
            snprintf(after, sizeof after, "%s:%u", r.prev_unit, r.prev_line);
        else
            snprintf(after, sizeof after, "-");
        fprintf(f, "  %-24s %6u %-24s %8.2f %10.3f %10.2f %10.2f\n", name, r.grid, after, r.per_step, r.us_each,
                r.us_step, r.max_us);
    }
    n_sites = 0;
    steps_total = 0;
    overflow = 0;
    min_dt = UINT64_MAX;
}
