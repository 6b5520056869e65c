/* Named tensor store. */
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rc_tensors_add(rc_tensors *s, const char *name, int ndim, const int64_t *shape, float *data, rc_err *e)
{
    int64_t numel;
    if (ndim < 0 || ndim > RC_MAX_DIMS || !rc_numel(ndim, shape, &numel)) {
        free(data);
        return rc_fail(e, RC_E_SHAPE, "tensor '%s': unsupported rank %d or size overflow", name, ndim);
    }
    if (rc_tensors_find(s, name)) {
        free(data);
        return rc_fail(e, RC_E_MISSING, "tensor '%s' appears twice", name);
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        rc_tensor *t = realloc(s->t, (size_t)cap * sizeof *t);
        if (!t) {
            free(data);
            return rc_fail(e, RC_E_NOMEM, "out of host memory growing tensor store");
        }
        s->t = t;
        s->cap = cap;
    }
    rc_tensor *t = &s->t[s->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) {
        free(data);
        return rc_fail(e, RC_E_NOMEM, "out of host memory");
    }
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->numel = numel;
    t->data = data;
    s->n++;
    return RC_OK;
}

const rc_tensor *rc_tensors_find(const rc_tensors *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->t[i].name, name) == 0)
            return &s->t[i];
    return NULL;
}

void rc_tensors_free(rc_tensors *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->t[i].name);
        free(s->t[i].data);
    }
    free(s->t);
    memset(s, 0, sizeof *s);
}

const char *rc_shape_str(int ndim, const int64_t *shape, char *buf, int cap)
{
    int n = snprintf(buf, (size_t)cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += snprintf(buf + n, (size_t)(cap - n), "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap)
        snprintf(buf + n, (size_t)(cap - n), "]");
    return buf;
}
