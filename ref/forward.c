/* Reference forward pass, in sections: buffers, probes, attention block, gated delta net block, MLP block,
 * per-layer embeddings, forward. */
#include "forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "ops.h"
#include "rope.h"
#include "softcap.h"

const rc_caps ref_caps = {
    .stage = "ref",
    .max_head_dim = 0,
    .head_dim_multiple = 2,
    .mixers = (1u << RC_MIXER_ATTN) | (1u << RC_MIXER_GDN),
    .sliding_window = 1,
    .features = RC_FEAT_ALL,
};

#define GDN_CHUNK 64 /* HF torch_chunk_gated_delta_rule's chunk_size */

/* ---- buffers: every activation, allocated once per call ---- */
typedef struct ref_buf {
    float *x;          /* [T, Hd] residual stream */
    float *a;          /* [T, Hd] normed input of a block */
    float *q, *k, *v;  /* [T, H*D], [T, Hkv*D], [T, Hkv*D] */
    float *qg, *ogate; /* out_gate layers: q_proj output [T, 2*H*D], gate [T, H*D] */
    float *ctx;        /* [T, H*D] */
    float *o;          /* [T, Hd] block output */
    float *gate, *up;  /* [T, I] */
    float *scores;     /* [T] */
    float *inv[RC_MAX_ROPES], *cos[RC_MAX_ROPES], *sin[RC_MAX_ROPES];
    /* gated delta net, sized for the largest GDN layer */
    float *qkv, *conv;           /* [T, C] before / after conv + act */
    float *z, *core, *normed;    /* [T, Hv*dv] */
    float *gb, *ga, *beta, *g;   /* [T, Hv] */
    float *gq, *gk, *gv;         /* [T, Hv, dk], [T, Hv, dk], [T, Hv, dv] */
    float *state, *conv_state;   /* [Hv, dk, dv], [K-1, C] */
    float *hq, *hk, *hv, *hg, *hb, *hout, *chunk; /* one head: [T, dk] x2, [T, dv], [T] x2, [T, dv], scratch */
    /* per-layer embeddings */
    float *ple_tok, *ple_mproj, *ple_in; /* [T, L*P] */
    float *ple_g;                        /* [T, P] */
} ref_buf;

static void buf_free(ref_buf *b)
{
    float **all[] = {&b->x, &b->a, &b->q, &b->k, &b->v, &b->qg, &b->ogate, &b->ctx, &b->o, &b->gate, &b->up,
                     &b->scores, &b->qkv, &b->conv, &b->z, &b->core, &b->normed, &b->gb, &b->ga, &b->beta, &b->g,
                     &b->gq, &b->gk, &b->gv, &b->state, &b->conv_state, &b->hq, &b->hk, &b->hv, &b->hg, &b->hb,
                     &b->hout, &b->chunk, &b->ple_tok, &b->ple_mproj, &b->ple_in, &b->ple_g};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(*all[i]);
    for (int i = 0; i < RC_MAX_ROPES; i++) {
        free(b->inv[i]); free(b->cos[i]); free(b->sin[i]);
    }
}

static int buf_alloc(ref_buf *b, const rc_config *c, int64_t T, rc_err *e)
{
    memset(b, 0, sizeof *b);
    int64_t qd = (int64_t)c->max_heads * c->max_head_dim, kd = (int64_t)c->max_kv_heads * c->max_head_dim;
    int64_t hd = c->hidden, I = c->max_intermediate, LP = (int64_t)c->n_layers * c->ple_dim;
    int64_t C = 0, Vd = 0, Hv = 0, Kd = 0, dk = 0, dv = 0, S = 0, K1 = 0, scratch = 0;
    int gated = 0;
    for (int i = 0; i < c->n_layers; i++) {
        const rc_layer_desc *l = &c->layers[i];
        gated |= l->out_gate;
        if (l->mixer != RC_MIXER_GDN)
            continue;
        int64_t hv = l->gdn_v_heads, vd = hv * l->gdn_v_dim, kd2 = (int64_t)l->gdn_v_heads * l->gdn_k_dim;
        int64_t ch = 2 * (int64_t)l->gdn_k_heads * l->gdn_k_dim + vd, sc = ref_delta_rule_chunked_scratch(
                                                                          l->gdn_k_dim, l->gdn_v_dim, GDN_CHUNK);
#define MAX(m, v) if ((v) > (m)) (m) = (v)
        MAX(C, ch); MAX(Vd, vd); MAX(Hv, hv); MAX(Kd, kd2); MAX(dk, l->gdn_k_dim); MAX(dv, l->gdn_v_dim);
        MAX(S, kd2 * l->gdn_v_dim); MAX(K1, ((int64_t)l->gdn_conv_kernel - 1) * ch); MAX(scratch, sc);
#undef MAX
    }
#define A(p, n) if (!((p) = rc_calloc((n), sizeof(float), e, "ref activations"))) goto fail
    A(b->x, T * hd); A(b->a, T * hd); A(b->o, T * hd);
    A(b->q, T * qd); A(b->k, T * kd); A(b->v, T * kd); A(b->ctx, T * qd);
    A(b->gate, T * I); A(b->up, T * I); A(b->scores, T);
    if (gated) {
        A(b->qg, T * 2 * qd); A(b->ogate, T * qd);
    }
    if (C) {
        A(b->qkv, T * C); A(b->conv, T * C); A(b->z, T * Vd); A(b->core, T * Vd); A(b->normed, T * Vd);
        A(b->gb, T * Hv); A(b->ga, T * Hv); A(b->beta, T * Hv); A(b->g, T * Hv);
        A(b->gq, T * Kd); A(b->gk, T * Kd); A(b->gv, T * Vd); A(b->state, S); A(b->conv_state, K1);
        A(b->hq, T * dk); A(b->hk, T * dk); A(b->hv, T * dv); A(b->hg, T); A(b->hb, T); A(b->hout, T * dv);
        A(b->chunk, scratch);
    }
    if (LP) {
        A(b->ple_tok, T * LP); A(b->ple_mproj, T * LP); A(b->ple_in, T * LP); A(b->ple_g, T * c->ple_dim);
    }
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
    if (d->out_gate) { /* q_proj rows per head: [query (D) | gate (D)] */
        ref_matmul(b->qg, b->a, w->q, w->q_b, T, 2 * qd, hd);
        for (int64_t t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < D; i++) {
                    b->q[(t * H + h) * D + i] = b->qg[(t * H + h) * 2 * D + i];
                    b->ogate[(t * H + h) * D + i] = b->qg[(t * H + h) * 2 * D + D + i];
                }
    } else
        ref_matmul(b->q, b->a, w->q, w->q_b, T, qd, hd);
    ref_matmul(b->k, b->a, w->k, w->k_b, T, kd, hd);
    ref_matmul(b->v, b->a, w->v, w->v_b, T, kd, hd);
    PROBE(p, "attn.q", b->q, 3, T, H, D);
    if (d->out_gate)
        PROBE(p, "attn.gate", b->ogate, 2, T, qd, 0);
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
    if (d->v_norm) {
        ref_rmsnorm(b->v, b->v, NULL, T * Hkv, D, c->eps, c->v_norm);
        PROBE(p, "attn.v_norm", b->v, 3, T, Hkv, D);
    }
    ref_rope_apply(b->q, b->cos[d->rope], b->sin[d->rope], T, H, D, r->rot_dim);
    ref_rope_apply(b->k, b->cos[d->rope], b->sin[d->rope], T, Hkv, D, r->rot_dim);
    PROBE(p, "attn.q_rope", b->q, 3, T, H, D);
    PROBE(p, "attn.k_rope", b->k, 3, T, Hkv, D);
    ref_attention(b->ctx, b->q, b->k, b->v, T, T, 0, H, Hkv, D, d->attn_scale, d->window, b->scores);
    PROBE(p, "attn.ctx", b->ctx, 2, T, qd, 0);
    if (d->out_gate) {
        for (int64_t i = 0; i < T * qd; i++)
            b->ctx[i] = b->ctx[i] * ref_sigmoid(b->ogate[i]);
        PROBE(p, "attn.ctx_gated", b->ctx, 2, T, qd, 0);
    }
    ref_matmul(b->o, b->ctx, w->o, w->o_b, T, hd, qd);
    PROBE(p, "attn.out", b->o, 2, T, hd, 0);
    return RC_OK;
}

/* ---- gated delta net block: b->a -> b->o (the state starts at zero: a full-sequence call) ---- */
static int gdn_block(const rc_config *c, const rc_layer_desc *d, const rc_layer_weights *w, ref_buf *b, int64_t T,
                     const probe_ctx *p, int recurrent)
{
    const int Hk = d->gdn_k_heads, Hv = d->gdn_v_heads, dk = d->gdn_k_dim, dv = d->gdn_v_dim, K = d->gdn_conv_kernel;
    const int64_t Kd = (int64_t)Hk * dk, Vd = (int64_t)Hv * dv, C = 2 * Kd + Vd, hd = c->hidden;
    const int rep = Hv / Hk; /* value head j reads key head j / rep */
    ref_matmul(b->qkv, b->a, w->gdn_qkv, NULL, T, C, hd);
    ref_matmul(b->z, b->a, w->gdn_z, NULL, T, Vd, hd);
    ref_matmul(b->gb, b->a, w->gdn_b, NULL, T, Hv, hd);
    ref_matmul(b->ga, b->a, w->gdn_a, NULL, T, Hv, hd);
    PROBE(p, "gdn.qkv", b->qkv, 2, T, C, 0);
    PROBE(p, "gdn.z", b->z, 3, T, Hv, dv);
    PROBE(p, "gdn.b", b->gb, 2, T, Hv, 0);
    PROBE(p, "gdn.a", b->ga, 2, T, Hv, 0);
    ref_conv1d_causal(b->conv, b->qkv, w->gdn_conv, NULL, T, C, K);
    for (int64_t i = 0; i < T * C; i++)
        b->conv[i] = ref_act(b->conv[i], c->act);
    PROBE(p, "gdn.conv", b->conv, 2, T, C, 0);
    for (int j = 0; j < K - 1; j++) { /* the last K-1 pre-conv rows, zero rows first when T < K-1 */
        int64_t t = T - (K - 1) + j;
        for (int64_t ch = 0; ch < C; ch++)
            b->conv_state[j * C + ch] = t >= 0 ? b->qkv[t * C + ch] : 0.0f;
    }
    /* q, k: l2-normed per head, expanded to the Hv value heads; q scaled by dk^-1/2 as the form does it */
    const float qmul = (float)pow((double)dk, -0.5), qdiv = (float)sqrt((double)dk); /* chunked, recurrent */
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < Hv; h++) {
            const float *row = b->conv + t * C;
            float *qo = b->gq + (t * Hv + h) * dk, *ko = b->gk + (t * Hv + h) * dk;
            ref_l2norm(qo, row + (int64_t)(h / rep) * dk, 1, dk, 1e-6f);
            ref_l2norm(ko, row + Kd + (int64_t)(h / rep) * dk, 1, dk, 1e-6f);
            for (int i = 0; i < dk; i++)
                qo[i] = recurrent ? qo[i] / qdiv : qo[i] * qmul;
            memcpy(b->gv + (t * Hv + h) * dv, row + 2 * Kd + (int64_t)h * dv, (size_t)dv * sizeof(float));
            const int64_t i = t * Hv + h;
            b->beta[i] = ref_sigmoid(b->gb[i]);
            b->g[i] = -(float)exp((double)w->gdn_A_log[h]) * ref_softplus(b->ga[i] + w->gdn_dt_bias[h]);
        }
    PROBE(p, "gdn.q", b->gq, 3, T, Hv, dk);
    PROBE(p, "gdn.k", b->gk, 3, T, Hv, dk);
    PROBE(p, "gdn.v", b->gv, 3, T, Hv, dv);
    PROBE(p, "gdn.beta", b->beta, 2, T, Hv, 0);
    PROBE(p, "gdn.g", b->g, 2, T, Hv, 0);
    for (int h = 0; h < Hv; h++) {
        float *S = b->state + (int64_t)h * dk * dv;
        memset(S, 0, (size_t)dk * dv * sizeof *S);
        for (int64_t t = 0; t < T; t++) {
            memcpy(b->hq + t * dk, b->gq + (t * Hv + h) * dk, (size_t)dk * sizeof(float));
            memcpy(b->hk + t * dk, b->gk + (t * Hv + h) * dk, (size_t)dk * sizeof(float));
            memcpy(b->hv + t * dv, b->gv + (t * Hv + h) * dv, (size_t)dv * sizeof(float));
            b->hg[t] = b->g[t * Hv + h];
            b->hb[t] = b->beta[t * Hv + h];
        }
        if (recurrent)
            for (int64_t t = 0; t < T; t++)
                ref_delta_rule_step(S, b->hout + t * dv, b->hq + t * dk, b->hk + t * dk, b->hv + t * dv, b->hg[t],
                                    b->hb[t], dk, dv);
        else
            ref_delta_rule_chunked(b->hout, S, b->hq, b->hk, b->hv, b->hg, b->hb, T, dk, dv, GDN_CHUNK, b->chunk);
        for (int64_t t = 0; t < T; t++)
            memcpy(b->core + (t * Hv + h) * dv, b->hout + t * dv, (size_t)dv * sizeof(float));
    }
    PROBE(p, "gdn.core", b->core, 3, T, Hv, dv);
    ref_rmsnorm_gated(b->normed, b->core, b->z, w->gdn_norm, T * Hv, dv, c->eps);
    PROBE(p, "gdn.normed", b->normed, 2, T, Vd, 0);
    ref_matmul(b->o, b->normed, w->gdn_out, NULL, T, hd, Vd);
    PROBE(p, "gdn.out", b->o, 2, T, hd, 0);
    PROBE(p, "gdn.state", b->state, 3, Hv, dk, dv);
    PROBE(p, "gdn.conv_state", b->conv_state, 2, K - 1, C, 0);
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

/* ---- per-layer embeddings: the per-token inputs [T, L, P] from the ids and the scaled embedding b->x ---- */
static int ple_inputs(const rc_model *m, const int32_t *ids, int64_t T, ref_buf *b, const probe_ctx *p)
{
    const rc_config *c = &m->cfg;
    const int P = c->ple_dim, L = c->n_layers;
    const int64_t LP = (int64_t)L * P, hd = c->hidden;
    const float tok_scale = (float)sqrt((double)P), proj_scale = (float)pow((double)hd, -0.5),
                in_scale = (float)pow(2.0, -0.5);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < LP; i++)
            b->ple_tok[t * LP + i] = m->w.ple_embed[(int64_t)ids[t] * LP + i] * tok_scale;
    PROBE(p, "ple.tok", b->ple_tok, 2, T, LP, 0);
    ref_matmul(b->ple_mproj, b->x, m->w.ple_model_proj, NULL, T, LP, hd);
    PROBE(p, "ple.mproj", b->ple_mproj, 2, T, LP, 0);
    for (int64_t i = 0; i < T * LP; i++)
        b->ple_in[i] = b->ple_mproj[i] * proj_scale;
    ref_rmsnorm(b->ple_in, b->ple_in, m->w.ple_proj_norm, T * L, P, c->eps, c->norm);
    PROBE(p, "ple.mproj_norm", b->ple_in, 3, T, L, P);
    for (int64_t i = 0; i < T * LP; i++)
        b->ple_in[i] = (b->ple_in[i] + b->ple_tok[i]) * in_scale;
    PROBE(p, "ple.in", b->ple_in, 3, T, L, P);
    return RC_OK;
}

/* The gated per-layer branch at the end of layer l: b->x += norm(((act(x Wg^T) * ple_in[:, l]) Wp^T)). */
static int ple_block(const rc_config *c, const rc_layer_weights *w, ref_buf *b, int64_t T, int l, const probe_ctx *p)
{
    const int P = c->ple_dim;
    const int64_t LP = (int64_t)c->n_layers * P, hd = c->hidden;
    ref_matmul(b->ple_g, b->x, w->ple_gate, NULL, T, P, hd);
    PROBE(p, "ple.gate", b->ple_g, 2, T, P, 0);
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < P; i++)
            b->ple_g[t * P + i] = ref_act(b->ple_g[t * P + i], c->act) * b->ple_in[t * LP + (int64_t)l * P + i];
    PROBE(p, "ple.act", b->ple_g, 2, T, P, 0);
    ref_matmul(b->o, b->ple_g, w->ple_proj, NULL, T, hd, P);
    PROBE(p, "ple.proj", b->o, 2, T, hd, 0);
    ref_rmsnorm(b->o, b->o, w->ple_norm, T, hd, c->eps, c->norm);
    PROBE(p, "ple.norm", b->o, 2, T, hd, 0);
    for (int64_t i = 0; i < T * hd; i++)
        b->x[i] += b->o[i];
    return RC_OK;
}

static void add_inplace(float *x, const float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] += y[i];
}

/* ---- the forward pass ---- */
static int run(const rc_model *m, const int32_t *ids, int64_t T, float *logits, ref_buf *b, const rc_probe_sink *sink,
               const ref_opts *o)
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
    if (c->ple_dim) {
        int rc = ple_inputs(m, ids, T, b, &p);
        if (rc)
            return rc;
    }

    for (int r = 0; r < c->n_ropes; r++) {
        const rc_rope_desc *rd = &c->ropes[r];
        char n[48];
        rc_rope_inv_freq(b->inv[r], rd);
        rc_rope_table(b->cos[r], b->sin[r], b->inv[r], rd, 0, T);
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
        int rc = d->mixer == RC_MIXER_GDN ? gdn_block(c, d, w, b, T, &p, o->gdn_recurrent)
                                          : attention_block(c, d, w, b, T, &p);
        if (rc)
            return rc;
        if (c->post_norms) {
            ref_rmsnorm(b->o, b->o, w->attn_post_norm, T, hd, c->eps, c->norm);
            PROBE(&p, "attn.post_norm", b->o, 2, T, hd, 0);
        }
        if (rc_fault_active("residual_dropped")) /* fault: x = attn(x), the skip connection lost */
            memcpy(b->x, b->o, (size_t)(T * hd) * sizeof *b->x);
        else
            add_inplace(b->x, b->o, T * hd);
        PROBE(&p, "mid", b->x, 2, T, hd, 0);
        ref_rmsnorm(b->a, b->x, w->mlp_norm, T, hd, c->eps, c->norm);
        PROBE(&p, "mlp_norm", b->a, 2, T, hd, 0);
        if ((rc = mlp_block(c, d, w, b, T, &p)))
            return rc;
        if (c->post_norms) {
            ref_rmsnorm(b->o, b->o, w->mlp_post_norm, T, hd, c->eps, c->norm);
            PROBE(&p, "mlp.post_norm", b->o, 2, T, hd, 0);
        }
        add_inplace(b->x, b->o, T * hd);
        if (c->ple_dim && (rc = ple_block(c, w, b, T, l, &p)))
            return rc;
        if (c->layer_scalar)
            for (int64_t i = 0; i < T * hd; i++)
                b->x[i] *= w->layer_scalar[0];
        PROBE(&p, "out", b->x, 2, T, hd, 0);
    }
    p.layer = -1;
    ref_rmsnorm(b->a, b->x, m->w.final_norm, T, hd, c->eps, c->norm);
    if (rc_fault_active("final_norm_skipped")) /* fault */
        memcpy(b->a, b->x, (size_t)(T * hd) * sizeof *b->a);
    PROBE(&p, "final_norm", b->a, 2, T, hd, 0);
    if (!logits && !rc_probe_wanted(sink, "logits") && !rc_probe_wanted(sink, "logits_raw"))
        return RC_OK;
    float *lg = logits;
    if (!lg && !(lg = malloc((size_t)(T * V) * sizeof *lg)))
        return RC_E_NOMEM;
    ref_matmul(lg, b->a, m->w.lm_head, NULL, T, V, hd);
    int rc = RC_OK;
    if (c->final_softcap != 0.0f) {
        rc = probe(&p, "logits_raw", lg, 2, T, V, 0);
        rc_softcap(lg, T * V, c->final_softcap);
    }
    if (!rc)
        rc = probe(&p, "logits", lg, 2, T, V, 0);
    if (lg != logits)
        free(lg);
    return rc;
}

int ref_forward_ex(const rc_model *m, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink,
                   const ref_opts *o, rc_err *e)
{
    static const ref_opts defaults = {0};
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
    rc = run(m, ids, T, logits, &b, sink, o ? o : &defaults);
    buf_free(&b);
    if (rc == RC_E_NOMEM)
        return rc_fail(e, rc, "ref: out of host memory for logits");
    if (rc && e->code == RC_OK)
        return rc_fail(e, rc, "ref: probe consumer stopped the forward (%s)", rc_code_name(rc));
    return rc;
}

int ref_forward(const rc_model *m, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink,
                rc_err *e)
{
    return ref_forward_ex(m, ids, T, logits, sink, NULL, e);
}
