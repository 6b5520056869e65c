/* Reference forward pass, in sections: buffers, probes, attention block, MLP block, forward. */
#include "forward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

const rc_caps ref_caps = {
    .stage = "ref",
    .max_head_dim = 0,
    .head_dim_multiple = 2,
    .mixers = 1u << RC_MIXER_ATTN,
    .sliding_window = 1,
};

/* ---- buffers: every activation, allocated once per call ---- */
typedef struct ref_buf {
    float *x;          /* [T, Hd] residual stream */
    float *a;          /* [T, Hd] normed input of a block */
    float *q, *k, *v;  /* [T, H*D], [T, Hkv*D], [T, Hkv*D] */
    float *ctx;        /* [T, H*D] */
    float *o;          /* [T, Hd] block output */
    float *gate, *up;  /* [T, I] */
    float *scores;     /* [T] */
    float *inv[RC_MAX_ROPES], *cos[RC_MAX_ROPES], *sin[RC_MAX_ROPES];
} ref_buf;

static void buf_free(ref_buf *b)
{
    free(b->x); free(b->a); free(b->q); free(b->k); free(b->v); free(b->ctx); free(b->o);
    free(b->gate); free(b->up); free(b->scores);
    for (int i = 0; i < RC_MAX_ROPES; i++) {
        free(b->inv[i]); free(b->cos[i]); free(b->sin[i]);
    }
}

static int buf_alloc(ref_buf *b, const rc_config *c, int64_t T, rc_err *e)
{
    memset(b, 0, sizeof *b);
    int64_t qd = (int64_t)c->max_heads * c->max_head_dim, kd = (int64_t)c->max_kv_heads * c->max_head_dim;
    int64_t hd = c->hidden, I = c->max_intermediate;
#define A(p, n) if (!((p) = rc_calloc((n), sizeof(float), e, "ref activations"))) goto fail
    A(b->x, T * hd); A(b->a, T * hd); A(b->o, T * hd);
    A(b->q, T * qd); A(b->k, T * kd); A(b->v, T * kd); A(b->ctx, T * qd);
    A(b->gate, T * I); A(b->up, T * I); A(b->scores, T);
    for (int i = 0; i < c->n_ropes; i++) {
        A(b->inv[i], c->ropes[i].rot_dim / 2);
        A(b->cos[i], T * c->ropes[i].rot_dim);
        A(b->sin[i], T * c->ropes[i].rot_dim);
    }
#undef A
    return RC_OK;
fail:
    buf_free(b);
    return e->code;
}

/* ---- probes ---- */
typedef struct probe_ctx {
    const rc_probe_sink *sink;
    int layer; /* -1 = global */
} probe_ctx;

static int probe(const probe_ctx *p, const char *name, const float *data, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    char full[96];
    if (p->layer >= 0)
        snprintf(full, sizeof full, "L%d.%s", p->layer, name);
    else
        snprintf(full, sizeof full, "%s", name);
    if (!rc_probe_wanted(p->sink, full))
        return RC_OK;
    const int64_t shape[3] = {d0, d1, d2};
    return p->sink->emit(p->sink->user, full, data, ndim, shape);
}

#define PROBE(...) do { int prc_ = probe(__VA_ARGS__); if (prc_) return prc_; } while (0)

/* ---- attention block: b->a -> b->o ---- */
static int attention_block(const rc_config *c, const rc_layer_desc *d, const rc_layer_weights *w, ref_buf *b,
                           int64_t T, const probe_ctx *p)
{
    const int H = d->n_heads, Hkv = d->n_kv_heads, D = d->head_dim;
    const int64_t qd = (int64_t)H * D, kd = (int64_t)Hkv * D, hd = c->hidden;
    const rc_rope_desc *r = &c->ropes[d->rope];
    ref_matmul(b->q, b->a, w->q, w->q_b, T, qd, hd);
    ref_matmul(b->k, b->a, w->k, w->k_b, T, kd, hd);
    ref_matmul(b->v, b->a, w->v, w->v_b, T, kd, hd);
    PROBE(p, "attn.q", b->q, 3, T, H, D);
    PROBE(p, "attn.k", b->k, 3, T, Hkv, D);
    PROBE(p, "attn.v", b->v, 3, T, Hkv, D);
    if (w->q_norm) {
        ref_rmsnorm(b->q, b->q, w->q_norm, T * H, D, c->eps, c->qk_norm);
        PROBE(p, "attn.q_norm", b->q, 3, T, H, D);
    }
    if (w->k_norm) {
        ref_rmsnorm(b->k, b->k, w->k_norm, T * Hkv, D, c->eps, c->qk_norm);
        PROBE(p, "attn.k_norm", b->k, 3, T, Hkv, D);
    }
    ref_rope_apply(b->q, b->cos[d->rope], b->sin[d->rope], T, H, D, r->rot_dim);
    ref_rope_apply(b->k, b->cos[d->rope], b->sin[d->rope], T, Hkv, D, r->rot_dim);
    PROBE(p, "attn.q_rope", b->q, 3, T, H, D);
    PROBE(p, "attn.k_rope", b->k, 3, T, Hkv, D);
    ref_attention(b->ctx, b->q, b->k, b->v, T, T, 0, H, Hkv, D, d->attn_scale, d->window, b->scores);
    PROBE(p, "attn.ctx", b->ctx, 2, T, qd, 0);
    ref_matmul(b->o, b->ctx, w->o, w->o_b, T, hd, qd);
    PROBE(p, "attn.out", b->o, 2, T, hd, 0);
    return RC_OK;
}

/* ---- MLP block: b->a -> b->o ---- */
static int mlp_block(const rc_config *c, const rc_layer_desc *d, const rc_layer_weights *w, ref_buf *b, int64_t T,
                     const probe_ctx *p)
{
    const int64_t I = d->intermediate, hd = c->hidden;
    ref_matmul(b->gate, b->a, w->gate, w->gate_b, T, I, hd);
    ref_matmul(b->up, b->a, w->up, w->up_b, T, I, hd);
    PROBE(p, "mlp.gate", b->gate, 2, T, I, 0);
    PROBE(p, "mlp.up", b->up, 2, T, I, 0);
    ref_glu(b->gate, b->gate, b->up, T * I, c->act);
    PROBE(p, "mlp.act", b->gate, 2, T, I, 0);
    ref_matmul(b->o, b->gate, w->down, w->down_b, T, hd, I);
    PROBE(p, "mlp.out", b->o, 2, T, hd, 0);
    return RC_OK;
}

static void add_inplace(float *x, const float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] += y[i];
}

/* ---- the forward pass ---- */
static int run(const rc_model *m, const int32_t *ids, int64_t T, float *logits, ref_buf *b, const rc_probe_sink *sink)
{
    const rc_config *c = &m->cfg;
    const int64_t hd = c->hidden, V = c->vocab;
    probe_ctx p = {.sink = sink, .layer = -1};

    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < hd; i++) {
            float v = m->w.embed[(int64_t)ids[t] * hd + i];
            b->x[t * hd + i] = c->emb_scale != 0.0f ? v * c->emb_scale : v;
        }
    PROBE(&p, "emb", b->x, 2, T, hd, 0);

    for (int r = 0; r < c->n_ropes; r++) {
        const rc_rope_desc *rd = &c->ropes[r];
        char n[48];
        ref_rope_inv_freq(b->inv[r], rd);
        ref_rope_table(b->cos[r], b->sin[r], b->inv[r], 0, T, rd->rot_dim);
        snprintf(n, sizeof n, "rope.%s.inv_freq", rd->kind);
        PROBE(&p, n, b->inv[r], 1, rd->rot_dim / 2, 0, 0);
        snprintf(n, sizeof n, "rope.%s.cos", rd->kind);
        PROBE(&p, n, b->cos[r], 2, T, rd->rot_dim, 0);
        snprintf(n, sizeof n, "rope.%s.sin", rd->kind);
        PROBE(&p, n, b->sin[r], 2, T, rd->rot_dim, 0);
    }

    for (int l = 0; l < c->n_layers; l++) {
        const rc_layer_desc *d = &c->layers[l];
        const rc_layer_weights *w = &m->w.layers[l];
        p.layer = l;
        PROBE(&p, "in", b->x, 2, T, hd, 0);
        ref_rmsnorm(b->a, b->x, w->attn_norm, T, hd, c->eps, c->norm);
        PROBE(&p, "attn_norm", b->a, 2, T, hd, 0);
        int rc = attention_block(c, d, w, b, T, &p);
        if (rc)
            return rc;
        add_inplace(b->x, b->o, T * hd);
        PROBE(&p, "mid", b->x, 2, T, hd, 0);
        ref_rmsnorm(b->a, b->x, w->mlp_norm, T, hd, c->eps, c->norm);
        PROBE(&p, "mlp_norm", b->a, 2, T, hd, 0);
        if ((rc = mlp_block(c, d, w, b, T, &p)))
            return rc;
        add_inplace(b->x, b->o, T * hd);
        PROBE(&p, "out", b->x, 2, T, hd, 0);
    }
    p.layer = -1;
    ref_rmsnorm(b->a, b->x, m->w.final_norm, T, hd, c->eps, c->norm);
    PROBE(&p, "final_norm", b->a, 2, T, hd, 0);
    if (!logits && !rc_probe_wanted(sink, "logits"))
        return RC_OK;
    float *lg = logits;
    if (!lg && !(lg = malloc((size_t)(T * V) * sizeof *lg)))
        return RC_E_NOMEM;
    ref_matmul(lg, b->a, m->w.lm_head, NULL, T, V, hd);
    if (c->final_softcap != 0.0f)
        ref_softcap(lg, T * V, c->final_softcap);
    int rc = probe(&p, "logits", lg, 2, T, V, 0);
    if (lg != logits)
        free(lg);
    return rc;
}

int ref_forward(const rc_model *m, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink,
                rc_err *e)
{
    e->code = RC_OK;
    int rc = rc_config_check(&m->cfg, &ref_caps, e);
    if (rc)
        return rc;
    if (T < 1)
        return rc_fail(e, RC_E_USAGE, "ref: empty prompt");
    if ((rc = rc_model_check_ids(m, ids, T, e)))
        return rc;
    int64_t tv;
    if (!rc_mul_i64(T, m->cfg.vocab, &tv))
        return rc_fail(e, RC_E_RANGE, "ref: T x vocab overflows");
    ref_buf b;
    if ((rc = buf_alloc(&b, &m->cfg, T, e)))
        return rc;
    rc = run(m, ids, T, logits, &b, sink);
    buf_free(&b);
    if (rc == RC_E_NOMEM)
        return rc_fail(e, rc, "ref: out of host memory for logits");
    if (rc && e->code == RC_OK)
        return rc_fail(e, rc, "ref: probe consumer stopped the forward (%s)", rc_code_name(rc));
    return rc;
}
