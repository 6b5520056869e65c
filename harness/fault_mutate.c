/* Fault mutations of a bound model (see fault_mutate.h): each turns a correct model into the one a buggy
 * loader or config reader would have bound. */
#include "fault_mutate.h"

#include <stdlib.h>
#include <string.h>

#include "fault.h"

typedef struct mutation {
    const char *name, *stage;
    int (*apply)(rc_mutant *mu, rc_err *e);
} mutation;

static int own(rc_mutant *mu, float *p)
{
    float **o = realloc(mu->owned, (size_t)(mu->n_owned + 1) * sizeof *o);
    if (!o) {
        free(p);
        return RC_E_NOMEM;
    }
    mu->owned = o;
    mu->owned[mu->n_owned++] = p;
    return RC_OK;
}

/* A loader that transposes: every square projection [N, N] bound as its transpose (lookup tables excepted). */
static int visit_transpose(void *user, const char *name, int ndim, const int64_t *shape, const float **slot,
                           int required)
{
    (void)required;
    rc_mutant *mu = user;
    if (ndim != 2 || shape[0] != shape[1] || !*slot || strstr(name, "embed_tokens"))
        return RC_OK;
    const int64_t n = shape[0];
    float *t = malloc((size_t)(n * n) * sizeof *t);
    if (!t || own(mu, t))
        return RC_E_NOMEM;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < n; c++)
            t[c * n + r] = (*slot)[r * n + c];
    *slot = t;
    return RC_OK;
}

static int weight_transposed(rc_mutant *mu, rc_err *e)
{
    int rc = rc_weights_visit(&mu->m.cfg, &mu->m.w, visit_transpose, mu);
    return rc ? rc_fail(e, rc, "fault weight_transposed: out of host memory") : RC_OK;
}

/* A loader that assumes tied embeddings: lm_head bound to embed_tokens although lm_head.weight exists. */
static int lm_head_untied(rc_mutant *mu, rc_err *e)
{
    (void)e;
    mu->m.w.lm_head = mu->m.w.embed;
    return RC_OK;
}

/* A config reader that reads the norm kind `from` as `to` (block and q/k norms). */
static void norm_read_as(rc_config *c, rc_norm_kind from, rc_norm_kind to)
{
    c->norm = c->norm == from ? to : c->norm;
    c->qk_norm = c->qk_norm == from ? to : c->qk_norm;
}

/* One family's norm convention leaking into another: plain w read as (1 + w) ... */
static int norm_spurious_offset(rc_mutant *mu, rc_err *e)
{
    (void)e;
    norm_read_as(&mu->m.cfg, RC_NORM_W, RC_NORM_1PW);
    return RC_OK;
}

/* ... or the (1 + w) offset of qwen3_5 / gemma3 norms dropped. */
static int norm_no_offset(rc_mutant *mu, rc_err *e)
{
    (void)e;
    norm_read_as(&mu->m.cfg, RC_NORM_1PW, RC_NORM_W);
    return RC_OK;
}

static const mutation mutations[] = {
    {"weight_transposed", "ref", weight_transposed},
    {"lm_head_untied", "ref", lm_head_untied},
    {"norm_spurious_offset", "ref", norm_spurious_offset},
    {"norm_no_offset", "ref", norm_no_offset},
};

static const mutation *find(const char *name)
{
    for (size_t i = 0; name && i < sizeof mutations / sizeof mutations[0]; i++)
        if (!strcmp(mutations[i].name, name))
            return &mutations[i];
    return NULL;
}

int rc_fault_is_mutation(const char *name) { return find(name) != NULL; }

int rc_mutant_open(const rc_model *m, const char *stage, rc_mutant **out, rc_err *e)
{
    *out = NULL;
    const mutation *mt = find(rc_fault_selected());
    if (!mt || strcmp(mt->stage, stage))
        return RC_OK;
    rc_mutant *mu = calloc(1, sizeof *mu);
    const size_t nl = (size_t)(m->cfg.n_layers > 0 ? m->cfg.n_layers : 1);
    if (!mu || !(mu->layers = malloc(nl * sizeof *mu->layers))) {
        free(mu);
        return rc_fail(e, RC_E_NOMEM, "fault %s: out of host memory", mt->name);
    }
    mu->m = *m;
    memcpy(mu->layers, m->w.layers, (size_t)m->cfg.n_layers * sizeof *mu->layers);
    mu->m.w.layers = mu->layers;
    int rc = mt->apply(mu, e);
    if (rc) {
        rc_mutant_free(mu);
        return rc;
    }
    *out = mu;
    return RC_OK;
}

void rc_mutant_free(rc_mutant *mu)
{
    if (!mu)
        return;
    for (int i = 0; i < mu->n_owned; i++)
        free(mu->owned[i]);
    free(mu->owned);
    free(mu->layers);
    free(mu);
}
