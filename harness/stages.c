/* The stage table: ref always, cuda when built with CUDA. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_mutate.h"
#include "forward.h"
#include "stage.h"
#ifdef RC_HAVE_CUDA
#include "cuda_forward.h"
#include "engine.h"
#endif

static int ref_available(const rc_stage_opts *o, char *why, size_t cap)
{
    (void)o; (void)why; (void)cap;
    return 1;
}

/* ref runs the bound model, or the harness's mutated copy of it when a model-mutation fault is selected */
typedef struct ref_stage {
    const rc_model *m;
    rc_mutant *mutant;
} ref_stage;

static int ref_open(void **st, const rc_model *m, const rc_stage_opts *o, rc_err *e)
{
    (void)o;
    ref_stage *s = calloc(1, sizeof *s);
    if (!s)
        return rc_fail(e, RC_E_NOMEM, "ref: out of host memory");
    int rc = rc_mutant_open(m, "ref", &s->mutant, e);
    s->m = s->mutant ? &s->mutant->m : m;
    if (!rc)
        rc = rc_config_check(&s->m->cfg, &ref_caps, e);
    if (rc) {
        rc_mutant_free(s->mutant);
        free(s);
        return rc;
    }
    *st = s;
    return RC_OK;
}

static int ref_run(void *st, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink, rc_err *e)
{
    return ref_forward(((ref_stage *)st)->m, ids, T, logits, sink, e);
}

static void ref_close(void *st)
{
    ref_stage *s = st;
    if (s)
        rc_mutant_free(s->mutant);
    free(s);
}

/* ref with the gated delta net run token by token (the recurrence HF's cached decode uses) */
static int ref_recurrent_run(void *st, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink,
                             rc_err *e)
{
    const ref_opts o = {.gdn_recurrent = 1};
    return ref_forward_ex(((ref_stage *)st)->m, ids, T, logits, sink, &o, e);
}

#ifdef RC_HAVE_CUDA
static int cuda_available(const rc_stage_opts *o, char *why, size_t cap)
{
    return cuda_fwd_available(o->device, why, cap);
}

static int cuda_open(void **st, const rc_model *m, const rc_stage_opts *o, rc_err *e)
{
    return cuda_fwd_open((cuda_fwd **)st, m, o->device, e);
}

static int cuda_run(void *st, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink, rc_err *e)
{
    return cuda_fwd_forward(st, ids, T, logits, sink, e);
}

static void cuda_close(void *st) { cuda_fwd_close(st); }

static int engine_available(const rc_stage_opts *o, char *why, size_t cap)
{
    return eng_available(o->device, why, cap);
}

static int engine_open(void **st, const rc_model *m, const rc_stage_opts *o, rc_err *e)
{
    eng_opts eo;
    eng_opts_default(&eo);
    eo.device = o->device;
    if (o->resident_layers_set)
        eo.resident_layers = o->resident_layers;
    if (o->kv_offload)
        eo.kv_offload = 1;
    if (o->kv_tile > 0)
        eo.kv_tile = o->kv_tile;
    if (o->vocab_on_cpu)
        eo.vocab_on_cpu = 1;
    return eng_stage_open(st, m, o->f32, &eo, e);
}
#endif

static const rc_stage stages[] = {
    {"ref", "architecture", 1, ref_available, ref_open, ref_run, NULL, ref_close, 0, "fp32"},
    {"ref-recurrent", "architecture", 1, ref_available, ref_open, ref_recurrent_run, NULL, ref_close, 1, "fp32"},
#ifdef RC_HAVE_CUDA
    {"cuda", "kernel", 1, cuda_available, cuda_open, cuda_run, NULL, cuda_close, 0, "fp32"},
    {"engine", "pipeline", 0, engine_available, engine_open, eng_stage_forward, eng_stage_greedy, eng_stage_close, 0, "bf16"},
#endif
};

const rc_stage *rc_stage_find(const char *name)
{
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++)
        if (strcmp(stages[i].name, name) == 0)
            return &stages[i];
    return NULL;
}

const char *rc_stage_names(void)
{
    static char buf[128];
    buf[0] = 0;
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? ", " : "", stages[i].name);
    return buf;
}

int rc_stage_opt_parse(int argc, char **argv, int *i, rc_stage_opts *o)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--kv-offload"))
        return o->kv_offload = 1;
    if (!strcmp(a, "--vocab-on-cpu"))
        return o->vocab_on_cpu = 1;
    if (!strcmp(a, "--f32"))
        return o->f32 = 1;
    const int is_rl = !strcmp(a, "--resident-layers"), is_tile = !strcmp(a, "--kv-tile");
    if ((!is_rl && !is_tile) || *i + 1 >= argc)
        return 0;
    const char *v = argv[++*i];
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || end == v || n < (is_tile ? 1 : 0) || n > (1 << 16)) {
        fprintf(stderr, "harness: %s needs %s, got '%s' (see harness --help)\n", a,
                is_tile ? "a tile size in [1, 65536]" : "a layer count >= 0", v);
        return -1;
    }
    if (is_tile)
        o->kv_tile = (int)n;
    else {
        o->resident_layers = (int)n;
        o->resident_layers_set = 1;
    }
    return 1;
}
