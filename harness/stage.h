/* A stage of the chain (ref, cuda, engine) as the harness drives it. */
#ifndef HARNESS_STAGE_H
#define HARNESS_STAGE_H

#include <stddef.h>

#include "model.h"

typedef struct rc_stage_opts {
    int device; /* GPU ordinal for GPU stages */
} rc_stage_opts;

typedef struct rc_stage {
    const char *name;
    const char *link;        /* what is wrong when this stage is the first to disagree with HF */
    int reports_all_probes;  /* a golden probe it does not report is a failure, not a skip */
    /* 1 if it can run here; else 0 with the reason in why */
    int (*available)(const rc_stage_opts *o, char *why, size_t cap);
    int (*open)(void **st, const rc_model *m, const rc_stage_opts *o, rc_err *e);
    /* Full forward over ids[T]: logits [T, V] if not NULL; probes through sink. */
    int (*forward)(void *st, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink, rc_err *e);
    /* Optional incremental path (engine): prefill prompt[T], then n decode steps teacher-forced with
     * forced[0..n-2]; step_logits[s] ([n, V]) are the logits whose argmax would be token s (step 0 from
     * the prefill's last row). NULL: the harness reruns forward() on each growing prefix. */
    int (*greedy)(void *st, const int32_t *prompt, int64_t T, const int32_t *forced, int64_t n, float *step_logits,
                  rc_err *e);
    void (*close)(void *st);
} rc_stage;

const rc_stage *rc_stage_find(const char *name);
/* "ref, cuda" */
const char *rc_stage_names(void);

#endif
