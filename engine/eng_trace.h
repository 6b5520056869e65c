/* The kernel trace (meson -Dtrace=kernels or marks; a timing-only diagnostic, off in every other build): where a decode
 * step's time goes inside its graph. Each engine kernel's block (0, 0, 0) notes the global timer once its
 * dependency wait returns (dep_wait, eng_kdev.cuh), with its unit and the source line of that wait, in one device
 * buffer whose counter orders the notes; consecutive notes give each kernel's share of the critical path: from
 * the moment its inputs were ready to the moment the next kernel's were. No value computed by any kernel changes.
 * Host side, single-threaded. */
#ifndef ENG_TRACE_H
#define ENG_TRACE_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ENG_TRACE_CAP (1u << 17) /* notes the buffer holds between collections */

/* The device buffer: n counts the notes asked for (those past ENG_TRACE_CAP are dropped). */
typedef struct {
    unsigned n, pad;
    unsigned long long t[ENG_TRACE_CAP];
    unsigned site[ENG_TRACE_CAP]; /* unit << 16 | line */
    unsigned grid[ENG_TRACE_CAP]; /* gridDim.x of the noting launch */
} eng_trace_buf;

/* a traced unit points its device symbol at buf with its index; returns its cudaError_t (0: success) */
typedef int (*eng_trace_attach_fn)(eng_trace_buf *buf, unsigned unit);

/* called by each traced unit's static initializer; returns its index */
int eng_trace_register(const char *unit, eng_trace_attach_fn attach);

/* 1 if this build notes anything (some unit registered) */
int eng_trace_built(void);
/* empty the buffer (allocated and attached on the first call) before the timed region; 0, or -1 with
 * eng_trace_error() naming the failed CUDA call */
int eng_trace_reset(void);
/* add the notes since the last reset to the table (a run of `steps` decode steps), then reset; 0 or -1 (as reset) */
int eng_trace_collect(int steps);
/* the last failure of reset or collect: the CUDA call, file:line and CUDA's message */
const char *eng_trace_error(void);
/* print the table (per noting site and the site before it: launches a step, mean and total us a step) and forget
 * it */
void eng_trace_print(FILE *f, const char *title);

/* The table itself (no CUDA; what collect and print use). add: n notes in the counter's order (t ns, site = unit
 * << 16 | line, grid), a run of `steps` decode steps: the time from each note to the next goes to the first one's
 * (site, grid, the site noted before it) row, so one launch site in two places of a step (the o and down GEMVs:
 * after the attention, after gate|up) gets two rows; 0, or -1 when the table is full (those notes' time is
 * dropped). */
#define ENG_TRACE_NONE 0xffffffffu /* no note before (a run's first) */
int eng_trace_add(const uint64_t *t, const uint32_t *site, const uint32_t *grid, uint32_t n, int steps);
typedef struct {
    const char *unit; /* the registered unit's file name, or "?" */
    unsigned line, grid;
    const char *prev_unit; /* the site noted just before: its unit ("?" unregistered), NULL for a run's first */
    unsigned prev_line;
    double per_step;  /* notes a step */
    double us_each;   /* mean time to the next note */
    double us_step;   /* their sum a step */
    double max_us;
} eng_trace_row;
/* rows in order of first appearance; 0 or -1 past the last */
int eng_trace_rows(void);
int eng_trace_row_get(int i, eng_trace_row *out);

#ifdef __cplusplus
}
#endif

#endif
