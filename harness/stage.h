/* A stage of the chain (ref, cuda, engine) as the harness drives it. */
#ifndef HARNESS_STAGE_H
#define HARNESS_STAGE_H

#include <stddef.h>

#include "model.h"

typedef struct rc_stage_opts {
    int device; /* GPU ordinal for GPU stages */
    /* engine stage pass-through (engine --help); zero = the engine's default */
    int resident_layers, resident_layers_set; /* --resident-layers N (0 = zero-copy from pinned host memory) */
    int kv_offload, kv_tile, vocab_on_cpu;    /* --kv-offload, --kv-tile P, --vocab-on-cpu */
    int f32;                                  /* --f32: fp32 weight/KV storage instead of bf16 */
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
    int gdn_recurrent;       /* runs the gated delta net token by token; its noise floor's double forward does too */
    const char *storage;     /* what it stores weights and KV in by default: "fp32" or "bf16" (--f32 makes it fp32) */
} rc_stage;

/* The precision stage s stores weights and KV in under o: its table's storage, fp32 with --f32. */
static inline const char *rc_stage_storage(const rc_stage *s, const rc_stage_opts *o)
{
    return o->f32 || !s->storage ? "fp32" : s->storage;
}

const rc_stage *rc_stage_find(const char *name);
/* Parses one stage option at argv[*i] (--resident-layers N, --kv-offload, --kv-tile P, --vocab-on-cpu, --f32),
 * advancing *i past its value: 1 if it was one, 0 if not, -1 on a bad value (message printed). */
int rc_stage_opt_parse(int argc, char **argv, int *i, rc_stage_opts *o);
/* "ref, cuda" */
const char *rc_stage_names(void);

#endif
