/* The stage table: ref always, cuda when built with CUDA. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "stage.h"
#ifdef RC_HAVE_CUDA
#include "cuda_forward.h"
#endif

static int ref_available(const rc_stage_opts *o, char *why, size_t cap)
{
    (void)o; (void)why; (void)cap;
    return 1;
}

static int ref_open(void **st, const rc_model *m, const rc_stage_opts *o, rc_err *e)
{
    (void)o;
    *st = (void *)m;
    return rc_config_check(&m->cfg, &ref_caps, e);
}

static int ref_run(void *st, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink, rc_err *e)
{
    return ref_forward(st, ids, T, logits, sink, e);
}

static void ref_close(void *st) { (void)st; }

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
#endif

static const rc_stage stages[] = {
    {"ref", "architecture", 1, ref_available, ref_open, ref_run, NULL, ref_close},
#ifdef RC_HAVE_CUDA
    {"cuda", "kernel", 1, cuda_available, cuda_open, cuda_run, NULL, cuda_close},
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
