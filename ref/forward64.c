/* The double-precision forward (see forward64.h): ref/forward.c and ref/ops.c with every value in
 * double, the same loops, the same probe names. Weights stay fp32 in memory and widen on read. */
#include "forward64.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const rc_caps ref64_caps = {
    .stage = "ref64",
    .max_head_dim = 0,
    .head_dim_multiple = 2,
    .mixers = 1u << RC_MIXER_ATTN,
    .sliding_window = 1,
};

/* ---- ops ---- */
static void matmul(double *y, const double *x, const float *W, const float *b, int64_t T, int64_t N, int64_t K)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            const double *xr = x + t * K;
            const float *wr = W + n * K;
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++)
                acc += xr[k] * (double)wr[k];
            y[t * N + n] = b ? acc + (double)b[n] : acc;
        }
}

static void rmsnorm(double *y, const double *x, const float *w, int64_t rows, int64_t n, double eps,
                    rc_norm_kind kind)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * n;
        double *yr = y + r * n;
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++)
            ss += xr[i] * xr[i];
        double inv = 1.0 / sqrt(ss / (double)n + eps);
        for (int64_t i = 0; i < n; i++) {
            double h = xr[i] * inv;
            switch (kind) {
            case RC_NORM_W: yr[i] = h * w[i]; break;
            case RC_NORM_1PW: yr[i] = h * (1.0 + w[i]); break;
            case RC_NORM_POW_W: yr[i] = h * w[i]; break;
            case RC_NORM_POW: yr[i] = h; break;
            }
        }
    }
}

static void rope_inv_freq(double *inv, const rc_rope_desc *r)
{
    for (int i = 0; i < r->rot_dim / 2; i++)
        inv[i] = i >= r->n_freq ? 0.0 : 1.0 / pow(r->theta, (double)(2 * i) / (double)r->exp_den) / r->factor;
}

static void rope_table(double *cos_t, double *sin_t, const double *inv, int64_t T, int rot_dim)
{
    const int half = rot_dim / 2;
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            double a = (double)t * inv[i];
            cos_t[t * rot_dim + i] = cos_t[t * rot_dim + i + half] = cos(a);
            sin_t[t * rot_dim + i] = sin_t[t * rot_dim + i + half] = sin(a);
        }
}

static void rope_apply(double *x, const double *cos_t, const double *sin_t, int64_t T, int n_heads, int head_dim,
                       int rot_dim)
{
    const int half = rot_dim / 2;
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < n_heads; h++) {
            double *v = x + (t * n_heads + h) * head_dim;
            const double *c = cos_t + t * rot_dim, *s = sin_t + t * rot_dim;
            for (int i = 0; i < half; i++) {
                double x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c[i] - x2 * s[i];
                v[i + half] = x2 * c[i + half] + x1 * s[i + half];
            }
        }
}

static void softmax(double *x, int64_t n)
{
    double mx = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    for (int64_t i = 0; i < n; i++) {
        x[i] = exp(x[i] - mx);
        sum += x[i];
    }
    for (int64_t i = 0; i < n; i++)
        x[i] /= sum;
}

static void attention(double *ctx, const double *q, const double *k, const double *v, int64_t T, int H, int Hkv,
                      int D, double scale, int window, double *p)
{
    const int G = H / Hkv;
    for (int64_t t = 0; t < T; t++) {
        const int64_t lo = window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
        for (int h = 0; h < H; h++) {
            const double *qv = q + (t * H + h) * D;
            const int kvh = h / G;
            int64_t n = 0;
            for (int64_t j = lo; j <= t; j++, n++) {
                const double *kv = k + (j * Hkv + kvh) * D;
                double acc = 0.0;
                for (int d = 0; d < D; d++)
                    acc += qv[d] * kv[d];
                p[n] = acc * scale;
            }
            softmax(p, n);
            double *out = ctx + (t * H + h) * D;
            for (int d = 0; d < D; d++) {
                double acc = 0.0;
                for (int64_t j = lo, i = 0; j <= t; j++, i++)
                    acc += p[i] * v[(j * Hkv + kvh) * D + d];
                out[d] = acc;
            }
        }
    }
}

static double act(double x, rc_act a)
{
    switch (a) {
    case RC_ACT_SILU: return x / (1.0 + exp(-x));
    case RC_ACT_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    }
    return x;
}

/* ---- buffers ---- */
typedef struct buf64 {
    double *x, *a, *q, *k, *v, *ctx, *o, *gate, *up, *scores;
    double *inv[RC_MAX_ROPES], *cos[RC_MAX_ROPES], *sin[RC_MAX_ROPES];
} buf64;

static void buf_free(buf64 *b)
{
    free(b->x); free(b->a); free(b->q); free(b->k); free(b->v); free(b->ctx); free(b->o);
    free(b->gate); free(b->up); free(b->scores);
    for (int i = 0; i < RC_MAX_ROPES; i++) {
        free(b->inv[i]); free(b->cos[i]); free(b->sin[i]);
    }
}

static int buf_alloc(buf64 *b, const rc_config *c, int64_t T, rc_err *e)
{
    memset(b, 0, sizeof *b);
    int64_t qd = (int64_t)c->max_heads * c->max_head_dim, kd = (int64_t)c->max_kv_heads * c->max_head_dim;
    int64_t hd = c->hidden, I = c->max_intermediate;
#define A(p, n) if (!((p) = rc_calloc((n), sizeof(double), e, "ref64 activations"))) goto fail
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
    const ref64_sink *sink;
    int layer;
} probe_ctx;

static int probe(const probe_ctx *p, const char *name, const double *data, int ndim, int64_t d0, int64_t d1,
                 int64_t d2)
{
    char full[96];
    if (!p->sink || !p->sink->emit)
        return RC_OK;
    if (p->layer >= 0)
        snprintf(full, sizeof full, "L%d.%s", p->layer, name);
    else
        snprintf(full, sizeof full, "%s", name);
    if (p->sink->want && !p->sink->want(p->sink->user, full))
        return RC_OK;
    const int64_t shape[3] = {d0, d1, d2};
    return p->sink->emit(p->sink->user, full, data, ndim, shape);
}

#define PROBE(...) do { int prc_ = probe(__VA_ARGS__); if (prc_) return prc_; } while (0)

static void add_inplace(double *x, const double *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] += y[i];
}

static int attention_block(const rc_config *c, const rc_layer_desc *d, const rc_layer_weights *w, buf64 *b,
                           int64_t T, const probe_ctx *p)
{
    const int H = d->n_heads, Hkv = d->n_kv_heads, D = d->head_dim;
    const int64_t qd = (int64_t)H * D, kd = (int64_t)Hkv * D, hd = c->hidden;
    const int R = c->ropes[d->rope].rot_dim;
    matmul(b->q, b->a, w->q, w->q_b, T, qd, hd);
    matmul(b->k, b->a, w->k, w->k_b, T, kd, hd);
    matmul(b->v, b->a, w->v, w->v_b, T, kd, hd);
    PROBE(p, "attn.q", b->q, 3, T, H, D);
    PROBE(p, "attn.k", b->k, 3, T, Hkv, D);
    PROBE(p, "attn.v", b->v, 3, T, Hkv, D);
    if (w->q_norm) {
        rmsnorm(b->q, b->q, w->q_norm, T * H, D, c->eps, c->qk_norm);
        PROBE(p, "attn.q_norm", b->q, 3, T, H, D);
    }
    if (w->k_norm) {
        rmsnorm(b->k, b->k, w->k_norm, T * Hkv, D, c->eps, c->qk_norm);
        PROBE(p, "attn.k_norm", b->k, 3, T, Hkv, D);
    }
    rope_apply(b->q, b->cos[d->rope], b->sin[d->rope], T, H, D, R);
    rope_apply(b->k, b->cos[d->rope], b->sin[d->rope], T, Hkv, D, R);
    PROBE(p, "attn.q_rope", b->q, 3, T, H, D);
    PROBE(p, "attn.k_rope", b->k, 3, T, Hkv, D);
    attention(b->ctx, b->q, b->k, b->v, T, H, Hkv, D, d->attn_scale, d->window, b->scores);
    PROBE(p, "attn.ctx", b->ctx, 2, T, qd, 0);
    matmul(b->o, b->ctx, w->o, w->o_b, T, hd, qd);
    PROBE(p, "attn.out", b->o, 2, T, hd, 0);
    return RC_OK;
}

static int mlp_block(const rc_config *c, const rc_layer_desc *d, const rc_layer_weights *w, buf64 *b, int64_t T,
                     const probe_ctx *p)
{
    const int64_t I = d->intermediate, hd = c->hidden;
    matmul(b->gate, b->a, w->gate, w->gate_b, T, I, hd);
    matmul(b->up, b->a, w->up, w->up_b, T, I, hd);
    PROBE(p, "mlp.gate", b->gate, 2, T, I, 0);
    PROBE(p, "mlp.up", b->up, 2, T, I, 0);
    for (int64_t i = 0; i < T * I; i++)
        b->gate[i] = act(b->gate[i], c->act) * b->up[i];
    PROBE(p, "mlp.act", b->gate, 2, T, I, 0);
    matmul(b->o, b->gate, w->down, w->down_b, T, hd, I);
    PROBE(p, "mlp.out", b->o, 2, T, hd, 0);
    return RC_OK;
}

static int run(const rc_model *m, const int32_t *ids, int64_t T, double *logits, buf64 *b, const ref64_sink *sink)
{
    const rc_config *c = &m->cfg;
    const int64_t hd = c->hidden, V = c->vocab;
    probe_ctx p = {.sink = sink, .layer = -1};

    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < hd; i++) {
            double v = m->w.embed[(int64_t)ids[t] * hd + i];
            b->x[t * hd + i] = c->emb_scale != 0.0f ? v * c->emb_scale : v;
        }
    PROBE(&p, "emb", b->x, 2, T, hd, 0);

    for (int r = 0; r < c->n_ropes; r++) {
        const rc_rope_desc *rd = &c->ropes[r];
        char n[48];
        rope_inv_freq(b->inv[r], rd);
        rope_table(b->cos[r], b->sin[r], b->inv[r], T, rd->rot_dim);
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
        rmsnorm(b->a, b->x, w->attn_norm, T, hd, c->eps, c->norm);
        PROBE(&p, "attn_norm", b->a, 2, T, hd, 0);
        int rc = attention_block(c, d, w, b, T, &p);
        if (rc)
            return rc;
        add_inplace(b->x, b->o, T * hd);
        PROBE(&p, "mid", b->x, 2, T, hd, 0);
        rmsnorm(b->a, b->x, w->mlp_norm, T, hd, c->eps, c->norm);
        PROBE(&p, "mlp_norm", b->a, 2, T, hd, 0);
        if ((rc = mlp_block(c, d, w, b, T, &p)))
            return rc;
        add_inplace(b->x, b->o, T * hd);
        PROBE(&p, "out", b->x, 2, T, hd, 0);
    }
    p.layer = -1;
    rmsnorm(b->a, b->x, m->w.final_norm, T, hd, c->eps, c->norm);
    PROBE(&p, "final_norm", b->a, 2, T, hd, 0);
    double *lg = logits;
    if (!lg && !(lg = malloc((size_t)(T * V) * sizeof *lg)))
        return RC_E_NOMEM;
    matmul(lg, b->a, m->w.lm_head, NULL, T, V, hd);
    if (c->final_softcap != 0.0f)
        for (int64_t i = 0; i < T * V; i++)
            lg[i] = c->final_softcap * tanh(lg[i] / c->final_softcap);
    int rc = probe(&p, "logits", lg, 2, T, V, 0);
    if (lg != logits)
        free(lg);
    return rc;
}

int ref64_check(const rc_model *m, rc_err *e)
{
    int rc = rc_config_check(&m->cfg, &ref64_caps, e);
    if (rc)
        return rc;
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (m->cfg.layers[l].out_gate)
            return rc_fail(e, RC_E_UNSUPPORTED, "stage ref64: layer %d attention output gate not implemented", l);
    return RC_OK;
}

int ref64_forward(const rc_model *m, const int32_t *ids, int64_t T, double *logits, const ref64_sink *sink,
                  rc_err *e)
{
    e->code = RC_OK;
    int rc = ref64_check(m, e);
    if (rc)
        return rc;
    if (T < 1)
        return rc_fail(e, RC_E_USAGE, "ref64: empty prompt");
    if ((rc = rc_model_check_ids(m, ids, T, e)))
        return rc;
    int64_t tv;
    if (!rc_mul_i64(T, m->cfg.vocab, &tv))
        return rc_fail(e, RC_E_RANGE, "ref64: T x vocab overflows");
    buf64 b;
    if ((rc = buf_alloc(&b, &m->cfg, T, e)))
        return rc;
    rc = run(m, ids, T, logits, &b, sink);
    buf_free(&b);
    if (rc == RC_E_NOMEM)
        return rc_fail(e, rc, "ref64: out of host memory for logits");
    if (rc && e->code == RC_OK)
        return rc_fail(e, rc, "ref64: probe consumer stopped the forward (%s)", rc_code_name(rc));
    return rc;
}
