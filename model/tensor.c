/* Named tensor store. */
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The index slot holding name, or the empty slot where it would go. */
static int *slot_of(const rc_tensors *s, const char *name)
{
    const uint32_t mask = (uint32_t)s->nslot - 1;
    for (uint32_t i = name_hash(name) & mask;; i = (i + 1) & mask)
        if (!s->slot[i] || !strcmp(s->t[s->slot[i] - 1].name, name))
            return &s->slot[i];
}

/* Rebuilds the index from t with room for n + extra names, at most half full. */
static int build_index(rc_tensors *s, int extra, rc_err *e)
{
    int ns = 128;
    while (ns < 2 * (s->n + extra))
        ns *= 2;
    int *slot = calloc((size_t)ns, sizeof *slot);
    if (!slot)
        return rc_fail(e, RC_E_NOMEM, "out of host memory growing tensor store");
    free(s->slot);
    s->slot = slot;
    s->nslot = ns;
    for (int i = 0; i < s->n; i++)
        *slot_of(s, s->t[i].name) = i + 1;
    return RC_OK;
}

int rc_tensors_reindex(rc_tensors *s, rc_err *e)
{
    return build_index(s, 0, e);
}

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
    if (s->n == INT32_MAX / 4 || (2 * (s->n + 1) > s->nslot && build_index(s, s->n + 1, e))) {
        free(data);
        return s->n == INT32_MAX / 4 ? rc_fail(e, RC_E_RANGE, "tensor '%s': too many tensors", name) : e->code;
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
    *slot_of(s, name) = s->n;
    return RC_OK;
}

const rc_tensor *rc_tensors_find(const rc_tensors *s, const char *name)
{
    if (!s->nslot)
        return NULL;
    const int k = *slot_of(s, name);
    return k && k <= s->n ? &s->t[k - 1] : NULL;
}

void rc_tensors_free(rc_tensors *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->t[i].name);
        free(s->t[i].data);
    }
    free(s->t);
    free(s->slot);
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
