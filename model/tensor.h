/* A named fp32 tensor and a store of them (weights by HF name, golden probes). */
#ifndef RC_TENSOR_H
#define RC_TENSOR_H

#include <stdint.h>

#include "err.h"

#define RC_MAX_DIMS 4

typedef struct rc_tensor {
    char *name;
    int ndim;
    int64_t shape[RC_MAX_DIMS];
    int64_t numel;
    float *data; /* owned, fp32, row-major */
    int is_i32;  /* data holds int32 values, not floats (a GPTQ checkpoint's packed codes; model/gptq_layout.h) */
} rc_tensor;

typedef struct rc_tensors {
    rc_tensor *t;
    int n, cap;
    int *slot;  /* open-addressing name index: 1 + position in t, 0 = empty; nslot a power of two */
    int nslot;
} rc_tensors;

/* Adds a tensor taking ownership of data (freed on error too). Refuses duplicate names. Adding and finding
 * are O(1) on average (a hashed name index), so a hostile file with 300k names costs no quadratic time. */
int rc_tensors_add(rc_tensors *s, const char *name, int ndim, const int64_t *shape, float *data, rc_err *e);
const rc_tensor *rc_tensors_find(const rc_tensors *s, const char *name);
/* Rebuilds the name index after names were changed in place. */
int rc_tensors_reindex(rc_tensors *s, rc_err *e);
void rc_tensors_free(rc_tensors *s);

/* "[2, 3, 4]" into buf. */
const char *rc_shape_str(int ndim, const int64_t *shape, char *buf, int cap);

/* Probe callback: a stage reports each named intermediate tensor through it (row-major fp32).
 * Returning non-zero aborts the forward with that code. want() may be NULL (= all). */
typedef struct rc_probe_sink {
    int (*emit)(void *user, const char *name, const float *data, int ndim, const int64_t *shape);
    int (*want)(void *user, const char *name);
    void *user;
} rc_probe_sink;

static inline int rc_probe_wanted(const rc_probe_sink *s, const char *name)
{
    return s && s->emit && (!s->want || s->want(s->user, name));
}

#endif
