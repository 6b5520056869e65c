/* Engine host weight store (see eng_weights.h). */
#include "eng_weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_pool.h"
#include "eng_qpack.h"

const rc_caps engine_caps = {
    .stage = "engine",
    .max_head_dim = 512,
    .head_dim_multiple = 8,
    .mixers = (1u << RC_MIXER_ATTN) | (1u << RC_MIXER_GDN),
    .sliding_window = 1,
    /* the RoPE rows come from model/rope.c (scaled, partial and proportional alike); the pow(ms + eps, -0.5) norms
     * are the rsqrt norms' kernels (the same math, rounded once) */
    .features = RC_FEAT_ROPE_SCALING | RC_FEAT_PARTIAL_ROPE | RC_FEAT_NORM_1PW | RC_FEAT_OUT_GATE |
                RC_FEAT_MIXED_LAYERS | RC_FEAT_NORM_POW | RC_FEAT_V_NORM | RC_FEAT_POST_NORMS | RC_FEAT_EMB_SCALE |
                RC_FEAT_SOFTCAP | RC_FEAT_PLE | RC_FEAT_LAYER_SCALAR | RC_FEAT_GELU_TANH,
};

/* The delta-rule kernel keeps a state column in one warp, dk / 32 values per lane (eng_gdn.cu). */
#define ENG_GDN_MAX_DK 256

uint16_t eng_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float eng_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

int eng_config_check(const rc_config *c, rc_err *e)
{
    int rc = rc_config_check(c, &engine_caps, e);
    if (rc)
        return rc;
    if (c->n_layers < 1 || c->vocab < 1 || c->hidden < 1)
        return rc_fail(e, RC_E_UNSUPPORTED, "engine: empty model description");
    if (c->hidden % 8)
        return rc_fail(e, RC_E_UNSUPPORTED, "engine: hidden_size %lld is not a multiple of 8 (vector loads)",
                       (long long)c->hidden);
    if (c->ple_dim && (c->ple_dim % 8 || c->ple_vocab < c->vocab))
        return rc_fail(e, RC_E_UNSUPPORTED, "engine: per-layer embeddings of width %d over %lld tokens (needs a multiple "
                       "of 8 and a table covering the vocabulary of %lld)", c->ple_dim, (long long)c->ple_vocab,
                       (long long)c->vocab);
    for (int i = 0; i < c->n_layers; i++) {
        const rc_layer_desc *d = &c->layers[i];
        switch (d->state) {
        case RC_STATE_KV:
            if (d->mixer != RC_MIXER_ATTN)
                return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: a KV cache for mixer kind %d", i, (int)d->mixer);
            break;
        case RC_STATE_KV_RING:
            if (d->mixer != RC_MIXER_ATTN || d->window < 1)
                return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: a ring KV cache needs an attention layer with a "
                               "sliding window (window %d)", i, d->window);
            break;
        case RC_STATE_RECURRENT:
            if (d->mixer != RC_MIXER_GDN)
                return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: a recurrent state for mixer kind %d", i,
                               (int)d->mixer);
            break;
        default:
            return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d has unknown state kind %d", i, (int)d->state);
        }
        if (d->intermediate % 8)
            return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: intermediate_size %d is not a multiple of 8", i,
                           d->intermediate);
        if (d->mixer == RC_MIXER_GDN) {
            if (d->gdn_k_heads < 1 || d->gdn_v_heads < 1 || d->gdn_v_heads % d->gdn_k_heads || d->gdn_k_dim < 1 ||
                d->gdn_v_dim < 1 || d->gdn_conv_kernel < 2)
                return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: malformed gated delta net shape", i);
            if (d->gdn_k_dim > ENG_GDN_MAX_DK)
                return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: linear_key_head_dim %d exceeds the kernel's "
                               "limit %d", i, d->gdn_k_dim, ENG_GDN_MAX_DK);
            if ((int64_t)d->gdn_v_heads * d->gdn_v_dim % 8)
                return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: linear value width %d is not a multiple of 8 "
                               "(vector loads)", i, d->gdn_v_heads * d->gdn_v_dim);
            if (c->act != RC_ACT_SILU)
                return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: gated delta net conv with an activation "
                               "other than silu", i);
            continue;
        }
        if (d->n_kv_heads < 1 || d->n_heads % d->n_kv_heads)
            return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: %d heads not a multiple of %d kv heads", i,
                           d->n_heads, d->n_kv_heads);
        if (d->v_norm && c->v_norm != RC_NORM_POW)
            return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: a V norm with a weight (norm kind %d)", i,
                           (int)c->v_norm);
        if (d->rope < 0 || d->rope >= c->n_ropes || c->ropes[d->rope].rot_dim > d->head_dim ||
            c->ropes[d->rope].rot_dim % 2)
            return rc_fail(e, RC_E_UNSUPPORTED, "engine: layer %d: RoPE width does not fit head_dim %d", i,
                           d->head_dim);
    }
    return RC_OK;
}

/* ---- layout ---- */
static int64_t align_up(int64_t x) { return (x + ENG_ALIGN - 1) / ENG_ALIGN * ENG_ALIGN; }

/* Bytes of a matrix [N, K]: packed when q is quantized, else N K elt. */
static int64_t mat_bytes(int64_t N, int64_t K, const eng_qfmt *q, int64_t elt)
{
    return q && q->family ? eng_qmat_bytes(N, K, q) : N * K * elt;
}

/* qf: the formats of q|k|v, o, gate|up, down (NULL: none quantized). */
static void layout(const rc_config *c, int i, int64_t elt, int bqkv, int bo, int bgu, int bdown, const eng_qfmt *qf,
                   eng_layer_layout *L)
{
    const rc_layer_desc *d = &c->layers[i];
    const int64_t Hd = c->hidden, D = d->head_dim, qd = (int64_t)d->n_heads * D, kd = (int64_t)d->n_kv_heads * D;
    const int64_t I = d->intermediate, nqkv = qd + 2 * kd;
    const int gdn = d->mixer == RC_MIXER_GDN;
    const int64_t Hv = d->gdn_v_heads, gkd = (int64_t)d->gdn_k_heads * d->gdn_k_dim, gvd = Hv * d->gdn_v_dim;
    const int64_t gch = 2 * gkd + gvd, gnin = gch + gvd + 2 * Hv;
    int64_t off = 0;
    const eng_qfmt none = {0, 0, 0};
    L->qqkv = qf ? qf[0] : none;
    L->qo = qf ? qf[1] : none;
    L->qgu = qf ? qf[2] : none;
    L->qdown = qf ? qf[3] : none;
    L->wqkv = L->wo = L->bqkv = L->bo = L->bgu = L->bdown = L->q_norm = L->k_norm = L->wgate = L->bgate = -1;
    L->gin = L->gout = L->gconv = L->galog = L->gdt = L->gnorm = -1;
    L->post_attn_norm = L->post_mlp_norm = L->lscalar = L->ple_gate = L->ple_proj = L->ple_norm = -1;
#define PUT(field, bytes) do { L->field = off; off = align_up(off + (bytes)); } while (0)
    if (gdn) {
        PUT(gin, gnin * Hd * elt);
        PUT(gout, Hd * gvd * elt);
    } else {
        PUT(wqkv, mat_bytes(nqkv, Hd, &L->qqkv, elt));
        PUT(wo, mat_bytes(Hd, qd, &L->qo, elt));
        if (d->out_gate) PUT(wgate, qd * Hd * elt);
    }
    PUT(wgu, mat_bytes(2 * I, Hd, &L->qgu, elt));
    PUT(wdown, mat_bytes(Hd, I, &L->qdown, elt));
    PUT(attn_norm, Hd * 4);
    PUT(mlp_norm, Hd * 4);
    if (gdn) {
        PUT(gconv, gch * d->gdn_conv_kernel * 4);
        PUT(galog, Hv * 4);
        PUT(gdt, Hv * 4);
        PUT(gnorm, (int64_t)d->gdn_v_dim * 4);
    } else {
        if (bqkv) PUT(bqkv, nqkv * 4);
        if (bo) PUT(bo, Hd * 4);
        if (bqkv && d->out_gate) PUT(bgate, qd * 4);
        if (d->q_norm) PUT(q_norm, D * 4);
        if (d->k_norm) PUT(k_norm, D * 4);
    }
    if (bgu) PUT(bgu, 2 * I * 4);
    if (bdown) PUT(bdown, Hd * 4);
    if (c->post_norms) {
        PUT(post_attn_norm, Hd * 4);
        PUT(post_mlp_norm, Hd * 4);
    }
    if (c->layer_scalar) PUT(lscalar, 4);
    if (c->ple_dim) {
        PUT(ple_gate, (int64_t)c->ple_dim * Hd * elt);
        PUT(ple_proj, Hd * c->ple_dim * elt);
        PUT(ple_norm, Hd * 4);
    }
#undef PUT
    L->bytes = off;
    L->qd = gdn ? 0 : (int)qd;
    L->kd = gdn ? 0 : (int)kd;
    L->nqkv = gdn ? 0 : (int)nqkv;
    L->inter = (int)I;
    L->gnin = gdn ? (int)gnin : 0;
    L->gch = gdn ? (int)gch : 0;
    L->gkd = gdn ? (int)gkd : 0;
    L->gvd = gdn ? (int)gvd : 0;
}

/* Page-aligned and a whole number of pages, so the engine can pin it in place (cudaHostRegister). */
static void *alloc_blob(int64_t bytes, rc_err *e, const char *what)
{
    void *p = NULL;
    bytes = (bytes + 4095) / 4096 * 4096;
    if (bytes <= 0 || (uint64_t)bytes > SIZE_MAX || posix_memalign(&p, 4096, (size_t)bytes) != 0) {
        rc_fail(e, RC_E_NOMEM, "engine: out of host memory for %s (%lld bytes)", what, (long long)bytes);
        return NULL;
    }
    memset(p, 0, (size_t)bytes);
    return p;
}

void eng_weights_free(eng_weights *w)
{
    if (!w)
        return;
    if (w->layer)
        for (int i = 0; i < w->cfg.n_layers; i++)
            free(w->layer[i]);
    free(w->layer);
    if (w->lm_head != w->embed)
        free(w->lm_head);
    free(w->embed);
    free(w->final_norm);
    free(w->ple_embed);
    free(w->ple_mproj);
    free(w->ple_pnorm);
    free(w->lay);
    free(w->cfg.layers);
    free(w);
}

/* Allocates the store for cfg with the given bias presence (blobs zeroed); qf: [L][4] matrix formats or NULL; qlm:
 * an untied lm_head's packed format, or NULL / family 0 (the store's bf16 / f32). */
static int store_alloc(eng_weights **out, const rc_config *cfg, int f32, int bqkv, int bo, int bgu, int bdown,
                       const eng_qfmt *qf, const eng_qfmt *qlm, rc_err *e)
{
    *out = NULL;
    int rc = eng_config_check(cfg, e);
    if (rc)
        return rc;
    eng_weights *w = rc_calloc(1, sizeof *w, e, "engine weights");
    if (!w)
        return e->code;
    w->cfg = *cfg;
    w->cfg.layers = rc_calloc(cfg->n_layers, sizeof *cfg->layers, e, "layer descriptions");
    w->lay = rc_calloc(cfg->n_layers, sizeof *w->lay, e, "layer layouts");
    w->layer = rc_calloc(cfg->n_layers, sizeof *w->layer, e, "layer blobs");
    if (!w->cfg.layers || !w->lay || !w->layer) {
        eng_weights_free(w);
        return e->code;
    }
    memcpy(w->cfg.layers, cfg->layers, (size_t)cfg->n_layers * sizeof *cfg->layers);
    w->f32 = f32;
    w->elt = f32 ? 4 : 2;
    for (int i = 0; i < cfg->n_layers; i++) {
        eng_layer_layout plain;
        layout(cfg, i, w->elt, bqkv, bo, bgu, bdown, NULL, &plain);
        w->plain_layer_bytes += plain.bytes;
        layout(cfg, i, w->elt, bqkv, bo, bgu, bdown, qf ? qf + 4 * i : NULL, &w->lay[i]);
        const eng_layer_layout *Ly = &w->lay[i];
        const int64_t dims[4][2] = {{Ly->nqkv, cfg->hidden}, {cfg->hidden, Ly->qd}, {2 * (int64_t)Ly->inter, cfg->hidden},
                                    {cfg->hidden, Ly->inter}};
        const eng_qfmt *fm[4] = {&Ly->qqkv, &Ly->qo, &Ly->qgu, &Ly->qdown};
        for (int k = 0; k < 4; k++)
            if (fm[k]->family) {
                w->quant = 1;
                if (dims[k][0] * dims[k][1] > w->dq_max)
                    w->dq_max = dims[k][0] * dims[k][1];
            }
        w->layer_bytes_total += w->lay[i].bytes;
        if (w->lay[i].bytes > w->layer_bytes_max)
            w->layer_bytes_max = w->lay[i].bytes;
        if (!(w->layer[i] = alloc_blob(w->lay[i].bytes, e, "a layer"))) {
            eng_weights_free(w);
            return e->code;
        }
    }
    w->vocab_bytes = cfg->vocab * cfg->hidden * w->elt;
    if (qlm && qlm->family && !cfg->tie_embeddings)
        w->qlm = *qlm;
    w->lm_bytes = cfg->tie_embeddings ? 0 : w->qlm.family ? eng_qmat_bytes(cfg->vocab, cfg->hidden, &w->qlm)
                                                            : w->vocab_bytes;
    w->embed = alloc_blob(w->vocab_bytes, e, "the embedding");
    w->lm_head = cfg->tie_embeddings ? w->embed : alloc_blob(w->lm_bytes, e, "lm_head");
    w->final_norm = rc_calloc(cfg->hidden, sizeof(float), e, "final norm");
    if (!w->embed || !w->lm_head || !w->final_norm) {
        if (!w->lm_head)
            w->lm_head = w->embed;
        eng_weights_free(w);
        return e->code;
    }
    if (cfg->ple_dim) {
        const int64_t LP = (int64_t)cfg->n_layers * cfg->ple_dim;
        w->ple_mproj_bytes = LP * cfg->hidden * w->elt;
        w->ple_embed = alloc_blob(cfg->ple_vocab * LP * w->elt, e, "the per-layer embedding table");
        w->ple_mproj = alloc_blob(w->ple_mproj_bytes, e, "the per-layer model projection");
        w->ple_pnorm = rc_calloc(cfg->ple_dim, sizeof(float), e, "the per-layer projection norm");
        if (!w->ple_embed || !w->ple_mproj || !w->ple_pnorm) {
            eng_weights_free(w);
            return e->code;
        }
    }
    *out = w;
    return RC_OK;
}

/* ---- from an rc_model ---- */
static void put_rows(void *dst, int64_t elt, const float *src, int64_t n)
{
    if (elt == 4) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++)
        d[i] = eng_f32_to_bf16(src[i]);
}

static void put_f32(void *blob, int64_t off, const float *src, int64_t n)
{
    if (off >= 0 && src)
        memcpy((char *)blob + off, src, (size_t)n * sizeof(float));
}

/* Rows [row0, row0 + n) of the matrix [N, K] at blob + off: packed from rows trow0.. of t when q is quantized, else
 * from rows trow0.. of the fp32 src. */
static void put_mat(char *blob, int64_t off, const eng_qfmt *q, int64_t N, int64_t K, int64_t elt, int64_t row0,
                    const float *src, const rc_qtensor *t, int64_t trow0, int64_t n)
{
    if (q->family)
        eng_qpack_rows(blob + off, N, K, q, row0, t, trow0, n);
    else
        put_rows(blob + off + row0 * K * elt, elt, src + trow0 * K, n * K);
}

/* The quantized tensors of a layer's q, k, v, o, gate, up, down (NULL: full precision). */
enum { QT_Q, QT_K, QT_V, QT_O, QT_GATE, QT_UP, QT_DOWN, QT_N };

typedef struct conv_ctx {
    eng_weights *w;
    const rc_model *m;
    const rc_qtensor *(*qt)[QT_N]; /* [L] */
} conv_ctx;

/* The linear-attention tensors of a GDN layer: in_proj_qkv | z | b | a as one matrix (one pass over the input),
 * out_proj in matrix storage; conv1d, A_log, dt_bias and the gated norm stay fp32 (small, and read by the
 * recurrence every step). */
static void conv_gdn(const rc_layer_weights *s, const rc_layer_desc *d, const eng_layer_layout *L, int64_t Hd,
                     int64_t elt, char *blob)
{
    const int64_t Hv = d->gdn_v_heads, gch = L->gch, gvd = L->gvd;
    char *in = blob + L->gin;
    put_rows(in, elt, s->gdn_qkv, gch * Hd);
    put_rows(in + gch * Hd * elt, elt, s->gdn_z, gvd * Hd);
    put_rows(in + (gch + gvd) * Hd * elt, elt, s->gdn_b, Hv * Hd);
    put_rows(in + (gch + gvd + Hv) * Hd * elt, elt, s->gdn_a, Hv * Hd);
    put_rows(blob + L->gout, elt, s->gdn_out, Hd * gvd);
    put_f32(blob, L->gconv, s->gdn_conv, gch * d->gdn_conv_kernel);
    put_f32(blob, L->galog, s->gdn_A_log, Hv);
    put_f32(blob, L->gdt, s->gdn_dt_bias, Hv);
    put_f32(blob, L->gnorm, s->gdn_norm, d->gdn_v_dim);
}

static void conv_layers(void *ctx, int64_t b, int64_t end, int worker)
{
    (void)worker;
    conv_ctx *c = ctx;
    eng_weights *w = c->w;
    const int64_t Hd = w->cfg.hidden, elt = w->elt;
    for (int64_t i = b; i < end; i++) {
        const rc_layer_weights *s = &c->m->w.layers[i];
        const eng_layer_layout *L = &w->lay[i];
        const rc_layer_desc *d = &w->cfg.layers[i];
        char *blob = w->layer[i];
        const int64_t qd = L->qd, kd = L->kd, I = L->inter, D = d->head_dim, nqkv = L->nqkv;
        const rc_qtensor *const *qt = c->qt[i];
        if (d->mixer == RC_MIXER_GDN)
            conv_gdn(s, d, L, Hd, elt, blob);
        else if (d->out_gate) /* q_proj rows per head: [query (D) | gate (D)]; queries to wqkv, gates to wgate */
            for (int h = 0; h < d->n_heads; h++) {
                put_rows(blob + L->wqkv + h * D * Hd * elt, elt, s->q + 2 * h * D * Hd, D * Hd);
                put_rows(blob + L->wgate + h * D * Hd * elt, elt, s->q + (2 * h + 1) * D * Hd, D * Hd);
                if (L->bqkv >= 0 && s->q_b) {
                    put_f32(blob, L->bqkv + h * D * 4, s->q_b + 2 * h * D, D);
                    put_f32(blob, L->bgate + h * D * 4, s->q_b + (2 * h + 1) * D, D);
                }
            }
        else {
            put_mat(blob, L->wqkv, &L->qqkv, nqkv, Hd, elt, 0, s->q, qt[QT_Q], 0, qd);
            if (L->bqkv >= 0)
                put_f32(blob, L->bqkv, s->q_b, qd);
        }
        if (d->mixer == RC_MIXER_ATTN) {
            put_mat(blob, L->wqkv, &L->qqkv, nqkv, Hd, elt, qd, s->k, qt[QT_K], 0, kd);
            put_mat(blob, L->wqkv, &L->qqkv, nqkv, Hd, elt, qd + kd, s->v, qt[QT_V], 0, kd);
            put_mat(blob, L->wo, &L->qo, Hd, qd, elt, 0, s->o, qt[QT_O], 0, Hd);
            if (L->bqkv >= 0) {
                put_f32(blob, L->bqkv + qd * 4, s->k_b, kd);
                put_f32(blob, L->bqkv + (qd + kd) * 4, s->v_b, kd);
            }
            put_f32(blob, L->bo, s->o_b, Hd);
            put_f32(blob, L->q_norm, s->q_norm, d->head_dim);
            put_f32(blob, L->k_norm, s->k_norm, d->head_dim);
        }
        put_mat(blob, L->wgu, &L->qgu, 2 * I, Hd, elt, 0, s->gate, qt[QT_GATE], 0, I);
        put_mat(blob, L->wgu, &L->qgu, 2 * I, Hd, elt, I, s->up, qt[QT_UP], 0, I);
        put_mat(blob, L->wdown, &L->qdown, Hd, I, elt, 0, s->down, qt[QT_DOWN], 0, Hd);
        put_f32(blob, L->attn_norm, s->attn_norm, Hd);
        put_f32(blob, L->mlp_norm, s->mlp_norm, Hd);
        if (L->bgu >= 0) {
            put_f32(blob, L->bgu, s->gate_b, I);
            put_f32(blob, L->bgu + I * 4, s->up_b, I);
        }
        put_f32(blob, L->bdown, s->down_b, Hd);
        put_f32(blob, L->post_attn_norm, s->attn_post_norm, Hd);
        put_f32(blob, L->post_mlp_norm, s->mlp_post_norm, Hd);
        put_f32(blob, L->lscalar, s->layer_scalar, 1);
        if (L->ple_gate >= 0) {
            const int64_t P = w->cfg.ple_dim;
            put_rows(blob + L->ple_gate, elt, s->ple_gate, P * Hd);
            put_rows(blob + L->ple_proj, elt, s->ple_proj, Hd * P);
            put_f32(blob, L->ple_norm, s->ple_norm, Hd);
        }
    }
}

typedef struct rows_ctx {
    void *dst;
    const float *src;
    int64_t elt, width;
} rows_ctx;

static void conv_rows(void *ctx, int64_t b, int64_t end, int worker)
{
    (void)worker;
    rows_ctx *c = ctx;
    put_rows((char *)c->dst + b * c->width * c->elt, c->elt, c->src + b * c->width, (end - b) * c->width);
}

/* The quantized tensor whose HF name ends in ".layers.<i>.<what>" (or is "layers.<i>.<what>"), or NULL. */
static const rc_qtensor *find_layer_q(const rc_quant *q, int i, const char *what)
{
    char suf[160];
    const int ns = snprintf(suf, sizeof suf, "layers.%d.%s", i, what);
    for (int k = 0; k < q->n; k++) {
        const char *n = q->t[k].name;
        const size_t nl = strlen(n);
        if (nl >= (size_t)ns && !strcmp(n + nl - ns, suf) && (nl == (size_t)ns || n[nl - ns - 1] == '.'))
            return &q->t[k];
    }
    return NULL;
}

/* One packed matrix from parts qt[0..np): all quantized in one format the kernels run, else full precision (format
 * none: the store's bf16 / f32 of the weights model/ dequantized at load); *plain counts the quantized parts so kept. */
static void part_format(const rc_qtensor *const *qt, int np, eng_qfmt *f, int *plain)
{
    int packed = 1;
    for (int k = 0; k < np && packed; k++) {
        rc_err e = {0};
        eng_qfmt g;
        packed = qt[k] && !eng_qfmt_of(qt[k], &g, &e) &&
                 (!k || (g.family == f->family && g.bits == f->bits && g.group == f->group));
        if (!k && packed)
            *f = g;
    }
    if (!packed) {
        *f = (eng_qfmt){0, 0, 0};
        for (int k = 0; k < np; k++)
            *plain += qt[k] != NULL;
    }
}

/* qt[L][QT_N] and qf[L][4] of a quantized model: which matrices the store packs, in which format. Gated delta net
 * and gated-attention layers keep full precision (their kernels read plain matrices); so do parts in a format the
 * kernels do not run, or concatenated with parts of another format (a GGUF mixing types). */
static void quant_formats(const rc_model *m, const rc_qtensor *(*qt)[QT_N], eng_qfmt *qf, int *plain)
{
    static const char *const names[QT_N] = {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                            "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                            "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};
    *plain = 0;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        const rc_layer_desc *d = &m->cfg.layers[i];
        if (d->mixer != RC_MIXER_ATTN || d->out_gate) {
            char pre[32];
            snprintf(pre, sizeof pre, "layers.%d.", i);
            for (int k = 0; k < m->quant.n; k++)
                *plain += strstr(m->quant.t[k].name, pre) != NULL;
            continue; /* qt[i] stays NULL, qf[4 i ..] none */
        }
        for (int k = 0; k < QT_N; k++)
            qt[i][k] = find_layer_q(&m->quant, i, names[k]);
        part_format(qt[i], 3, &qf[4 * i], plain);
        part_format(qt[i] + QT_O, 1, &qf[4 * i + 1], plain);
        part_format(qt[i] + QT_GATE, 2, &qf[4 * i + 2], plain);
        part_format(qt[i] + QT_DOWN, 1, &qf[4 * i + 3], plain);
        /* a part kept in full precision is read from the fp32 copy */
        const int first[4] = {QT_Q, QT_O, QT_GATE, QT_DOWN}, cnt[4] = {3, 1, 2, 1};
        for (int j = 0; j < 4; j++)
            if (!qf[4 * i + j].family)
                for (int k = 0; k < cnt[j]; k++)
                    qt[i][first[j] + k] = NULL;
    }
}

int eng_weights_from_model(eng_weights **out, const rc_model *m, int f32, int threads, rc_err *e)
{
    int bqkv = 0, bo = 0, bgu = 0, bdown = 0;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        const rc_layer_weights *s = &m->w.layers[i];
        bqkv |= s->q_b || s->k_b || s->v_b;
        bo |= s->o_b != NULL;
        bgu |= s->gate_b || s->up_b;
        bdown |= s->down_b != NULL;
    }
    const int L = m->cfg.n_layers;
    const rc_qtensor *(*qt)[QT_N] = rc_calloc(L, sizeof *qt, e, "quantized tensor table");
    eng_qfmt *qf = rc_calloc(4 * (int64_t)L, sizeof *qf, e, "quantized formats");
    int rc = !qt || !qf ? e->code : RC_OK, plain = 0;
    if (!rc && m->quant.on)
        quant_formats(m, qt, qf, &plain);
    eng_weights *w = NULL;
    /* an untied lm_head quantized in a format the kernels run at its width (the checkpoint's lm_head flag) is packed */
    const rc_qtensor *qlm_t = m->quant.on && !m->cfg.tie_embeddings ? rc_quant_find(&m->quant, "lm_head.weight") : NULL;
    eng_qfmt qlm = {0, 0, 0};
    if (qlm_t) {
        rc_err qe = {0};
        if (eng_qfmt_of(qlm_t, &qlm, &qe) || !eng_qfmt_ok(&qlm, m->cfg.hidden)) {
            qlm = (eng_qfmt){0, 0, 0};
            plain++;
        }
    }
    if (!rc)
        rc = store_alloc(&w, &m->cfg, f32, bqkv, bo, bgu, bdown, m->quant.on ? qf : NULL, &qlm, e);
    if (!rc)
        w->quant_plain = plain;
    free(qf);
    if (rc) {
        free(qt);
        return rc;
    }
    eng_pool *pool;
    if ((rc = eng_pool_create(&pool, threads, e))) {
        free(qt);
        eng_weights_free(w);
        return rc;
    }
    conv_ctx cc = {.w = w, .m = m, .qt = qt};
    eng_pool_run(pool, m->cfg.n_layers, conv_layers, &cc);
    rows_ctx rcx = {.dst = w->embed, .src = m->w.embed, .elt = w->elt, .width = m->cfg.hidden};
    eng_pool_run(pool, m->cfg.vocab, conv_rows, &rcx);
    if (w->qlm.family)
        eng_qpack_rows(w->lm_head, m->cfg.vocab, m->cfg.hidden, &w->qlm, 0, qlm_t, 0, m->cfg.vocab);
    else if (w->lm_head != w->embed) {
        rows_ctx r2 = {.dst = w->lm_head, .src = m->w.lm_head, .elt = w->elt, .width = m->cfg.hidden};
        eng_pool_run(pool, m->cfg.vocab, conv_rows, &r2);
    }
    memcpy(w->final_norm, m->w.final_norm, (size_t)m->cfg.hidden * sizeof(float));
    if (m->cfg.ple_dim) {
        const int64_t LP = (int64_t)m->cfg.n_layers * m->cfg.ple_dim;
        rows_ctx r3 = {.dst = w->ple_embed, .src = m->w.ple_embed, .elt = w->elt, .width = LP};
        eng_pool_run(pool, m->cfg.ple_vocab, conv_rows, &r3);
        rows_ctx r4 = {.dst = w->ple_mproj, .src = m->w.ple_model_proj, .elt = w->elt, .width = m->cfg.hidden};
        eng_pool_run(pool, LP, conv_rows, &r4);
        memcpy(w->ple_pnorm, m->w.ple_proj_norm, (size_t)m->cfg.ple_dim * sizeof(float));
    }
    eng_pool_free(pool);
    free(qt);
    *out = w;
    return RC_OK;
}

/* ---- synthesized ---- */
static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

#define SYN_BLOCK 65536

/* One job: n elements of a matrix, filled in blocks of SYN_BLOCK seeded by (seed, id, block). */
typedef struct syn_job {
    void *dst;
    int64_t n;
    uint64_t id;
} syn_job;

typedef struct syn_ctx {
    syn_job *jobs;
    int64_t *first_block; /* [njobs + 1] prefix sums of blocks */
    int njobs;
    int64_t elt;
    uint64_t seed;
} syn_ctx;

static void syn_blocks(void *ctx, int64_t b, int64_t end, int worker)
{
    (void)worker;
    syn_ctx *c = ctx;
    const float amp = 0.02f * 1.7320508f; /* uniform [-a, a] has std a / sqrt(3) */
    int j = 0;
    for (int64_t blk = b; blk < end; blk++) {
        while (c->first_block[j + 1] <= blk)
            j++;
        const syn_job *job = &c->jobs[j];
        const int64_t k = blk - c->first_block[j], i0 = k * SYN_BLOCK;
        const int64_t i1 = i0 + SYN_BLOCK < job->n ? i0 + SYN_BLOCK : job->n;
        uint64_t s = splitmix64(c->seed ^ splitmix64(job->id * 0x100000001B3ull + (uint64_t)k));
        for (int64_t i = i0; i < i1; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17; /* xorshift64 */
            float u = (float)(s >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
            float v = (2.0f * u - 1.0f) * amp;
            if (c->elt == 4)
                ((float *)job->dst)[i] = v;
            else
                ((uint16_t *)job->dst)[i] = eng_f32_to_bf16(v);
        }
    }
}

/* The fp32 tensors of a synthetic GDN layer: conv taps uniform in [-0.5, 0.5), A = exp(A_log) in [0.37, 0.78)
 * and dt_bias -1 (decays exp(g) of about 0.8-0.9, so the state carries many tokens), gated-norm weight 1. */
static void synth_gdn_small(const rc_layer_desc *d, const eng_layer_layout *Ly, char *blob, uint64_t seed)
{
    float *cw = (float *)(blob + Ly->gconv), *al = (float *)(blob + Ly->galog), *dt = (float *)(blob + Ly->gdt);
    float *nw = (float *)(blob + Ly->gnorm);
    const int64_t n = (int64_t)Ly->gch * d->gdn_conv_kernel;
    for (int64_t k = 0; k < n; k++)
        cw[k] = (float)(splitmix64(seed * 0x2545F4914F6CDD1Dull + (uint64_t)k) >> 40) * (1.0f / 16777216.0f) - 0.5f;
    for (int h = 0; h < d->gdn_v_heads; h++) {
        al[h] = -1.0f + 0.25f * (float)(h % 4);
        dt[h] = -1.0f;
    }
    for (int k = 0; k < d->gdn_v_dim; k++)
        nw[k] = 1.0f;
}

static void add_job(syn_job *jobs, int *nj, void *dst, int64_t n)
{
    jobs[*nj] = (syn_job){dst, n, (uint64_t)*nj};
    (*nj)++;
}

/* One random packed matrix a pool item. */
typedef struct qsyn_job {
    void *mat;
    int64_t N, K;
    eng_qfmt q;
} qsyn_job;

typedef struct qsyn_ctx {
    qsyn_job *jobs;
    uint64_t seed;
} qsyn_ctx;

static void qsyn_mats(void *ctx, int64_t b, int64_t end, int worker)
{
    (void)worker;
    qsyn_ctx *c = ctx;
    for (int64_t i = b; i < end; i++) {
        const qsyn_job *j = &c->jobs[i];
        eng_qsynth_rows(j->mat, j->N, j->K, &j->q, c->seed ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull), 0, j->N);
    }
}

/* q at width K into *g (group <= 0: one group per row); RC_E_UNSUPPORTED naming what when its groups do not fit. */
static int synth_fmt(const eng_qfmt *q, int64_t K, const char *what, eng_qfmt *g, rc_err *e)
{
    *g = *q;
    if (g->group <= 0)
        g->group = (int)K; /* per row */
    if (!eng_qfmt_ok(g, K))
        return rc_fail(e, RC_E_UNSUPPORTED, "engine: int%d groups of %d do not fit %s of width %lld", g->bits, g->group,
                       what, (long long)K);
    return RC_OK;
}

/* Plain attention layers' matrices in format q (the layers from_model would pack); others none. */
static int synth_formats(const rc_config *cfg, const eng_qfmt *q, eng_qfmt **out, rc_err *e)
{
    *out = NULL;
    if (!q)
        return RC_OK;
    eng_qfmt *qf = rc_calloc(4 * (int64_t)cfg->n_layers, sizeof *qf, e, "quantized formats");
    if (!qf)
        return e->code;
    for (int i = 0; i < cfg->n_layers; i++) {
        const rc_layer_desc *d = &cfg->layers[i];
        if (d->mixer != RC_MIXER_ATTN || d->out_gate)
            continue;
        const int64_t Ks[4] = {cfg->hidden, (int64_t)d->n_heads * d->head_dim, cfg->hidden, d->intermediate};
        char what[32];
        snprintf(what, sizeof what, "a layer %d matrix", i);
        for (int k = 0; k < 4; k++)
            if (synth_fmt(q, Ks[k], what, &qf[4 * i + k], e)) {
                free(qf);
                return e->code;
            }
    }
    *out = qf;
    return RC_OK;
}

int eng_weights_synth(eng_weights **out, const rc_config *cfg, int f32, uint64_t seed, int threads, rc_err *e)
{
    return eng_weights_synth_quant(out, cfg, f32, NULL, 0, seed, threads, e);
}

int eng_weights_synth_quant(eng_weights **out, const rc_config *cfg, int f32, const eng_qfmt *q, int lm_q,
                            uint64_t seed, int threads, rc_err *e)
{
    eng_weights *w;
    eng_qfmt *qf, qlm = {0, 0, 0};
    if (q && lm_q) {
        if (cfg->tie_embeddings)
            return rc_fail(e, RC_E_UNSUPPORTED, "engine: a packed lm_head needs an untied one (this model ties lm_head "
                           "to the embedding, a row gather kept in %s)", f32 ? "f32" : "bf16");
        if (synth_fmt(q, cfg->hidden, "lm_head", &qlm, e))
            return e->code;
    }
    int rc = synth_formats(cfg, q, &qf, e);
    if (rc)
        return rc;
    rc = store_alloc(&w, cfg, f32, cfg->attn_bias, cfg->attn_bias, cfg->mlp_bias, cfg->mlp_bias, qf, &qlm, e);
    free(qf);
    if (rc)
        return rc;
    const int L = cfg->n_layers;
    qsyn_job *qj = rc_calloc(4 * (int64_t)L + 2, sizeof *qj, e, "synth jobs");
    if (!qj) {
        eng_weights_free(w);
        return e->code;
    }
    int nq = 0;
    const int njobs = 7 * L + 4;
    syn_job *jobs = rc_calloc(njobs, sizeof *jobs, e, "synth jobs");
    int64_t *first = rc_calloc(njobs + 1, sizeof *first, e, "synth jobs");
    eng_pool *pool = NULL;
    if (!jobs || !first || (rc = eng_pool_create(&pool, threads, e))) {
        rc = e->code;
        free(qj);
        free(jobs);
        free(first);
        eng_weights_free(w);
        return rc;
    }
    int nj = 0;
    const int64_t Hd = cfg->hidden;
    /* unit norms: w = 1, or w = 0 for the (1 + w) kind */
    const float one = cfg->norm == RC_NORM_1PW ? 0.0f : 1.0f, qk_one = cfg->qk_norm == RC_NORM_1PW ? 0.0f : 1.0f;
    for (int i = 0; i < L; i++) {
        const eng_layer_layout *Ly = &w->lay[i];
        const rc_layer_desc *d = &cfg->layers[i];
        char *blob = w->layer[i];
        if (d->mixer == RC_MIXER_GDN) {
            add_job(jobs, &nj, blob + Ly->gin, (int64_t)Ly->gnin * Hd);
            add_job(jobs, &nj, blob + Ly->gout, Hd * Ly->gvd);
            synth_gdn_small(d, Ly, blob, seed ^ (uint64_t)i);
        } else if (Ly->qqkv.family) {
            qj[nq++] = (qsyn_job){blob + Ly->wqkv, Ly->nqkv, Hd, Ly->qqkv};
            qj[nq++] = (qsyn_job){blob + Ly->wo, Hd, Ly->qd, Ly->qo};
        } else {
            add_job(jobs, &nj, blob + Ly->wqkv, (int64_t)Ly->nqkv * Hd);
            add_job(jobs, &nj, blob + Ly->wo, Hd * Ly->qd);
            if (Ly->wgate >= 0)
                add_job(jobs, &nj, blob + Ly->wgate, Hd * Ly->qd);
        }
        if (Ly->qgu.family) {
            qj[nq++] = (qsyn_job){blob + Ly->wgu, 2 * (int64_t)Ly->inter, Hd, Ly->qgu};
            qj[nq++] = (qsyn_job){blob + Ly->wdown, Hd, Ly->inter, Ly->qdown};
        } else {
            add_job(jobs, &nj, blob + Ly->wgu, 2 * (int64_t)Ly->inter * Hd);
            add_job(jobs, &nj, blob + Ly->wdown, Hd * Ly->inter);
        }
        float *an = (float *)(blob + Ly->attn_norm), *mn = (float *)(blob + Ly->mlp_norm);
        for (int64_t k = 0; k < Hd; k++)
            an[k] = mn[k] = one;
        if (Ly->post_attn_norm >= 0)
            for (int64_t k = 0; k < Hd; k++)
                ((float *)(blob + Ly->post_attn_norm))[k] = ((float *)(blob + Ly->post_mlp_norm))[k] = one;
        if (Ly->lscalar >= 0)
            *(float *)(blob + Ly->lscalar) = 1.0f;
        if (Ly->ple_gate >= 0) {
            add_job(jobs, &nj, blob + Ly->ple_gate, (int64_t)cfg->ple_dim * Hd);
            add_job(jobs, &nj, blob + Ly->ple_proj, Hd * cfg->ple_dim);
            for (int64_t k = 0; k < Hd; k++)
                ((float *)(blob + Ly->ple_norm))[k] = one;
        }
        const int D = d->head_dim;
        for (int k = 0; k < D; k++) {
            if (Ly->q_norm >= 0) ((float *)(blob + Ly->q_norm))[k] = qk_one;
            if (Ly->k_norm >= 0) ((float *)(blob + Ly->k_norm))[k] = qk_one;
        }
    }
    add_job(jobs, &nj, w->embed, cfg->vocab * Hd);
    if (w->qlm.family)
        qj[nq++] = (qsyn_job){w->lm_head, cfg->vocab, Hd, w->qlm};
    else if (w->lm_head != w->embed)
        add_job(jobs, &nj, w->lm_head, cfg->vocab * Hd);
    if (cfg->ple_dim) {
        const int64_t LP = (int64_t)L * cfg->ple_dim;
        add_job(jobs, &nj, w->ple_embed, cfg->ple_vocab * LP);
        add_job(jobs, &nj, w->ple_mproj, LP * Hd);
        for (int k = 0; k < cfg->ple_dim; k++)
            w->ple_pnorm[k] = one;
    }
    for (int j = 0; j < nj; j++)
        first[j + 1] = first[j] + (jobs[j].n + SYN_BLOCK - 1) / SYN_BLOCK;
    for (int64_t k = 0; k < Hd; k++)
        w->final_norm[k] = one;
    syn_ctx sc = {.jobs = jobs, .first_block = first, .njobs = nj, .elt = w->elt, .seed = seed};
    eng_pool_run(pool, first[nj], syn_blocks, &sc);
    qsyn_ctx qc = {.jobs = qj, .seed = seed};
    eng_pool_run(pool, nq, qsyn_mats, &qc);
    eng_pool_free(pool);
    free(qj);
    free(jobs);
    free(first);
    *out = w;
    return RC_OK;
}

void eng_weights_print_quant(const eng_weights *w, FILE *f)
{
    if (w->quant_plain)
        fprintf(f, "engine: %d quantized matri%s kept in %s (dequantized at load: a gated delta net / gated-attention "
                "layer, a format the kernels do not run, or parts of one matrix in different formats)\n",
                w->quant_plain, w->quant_plain == 1 ? "x" : "ces", w->f32 ? "f32" : "bf16");
    if (!w->quant && !w->qlm.family)
        return;
    const rc_config *c = &w->cfg;
    char lm[48];
    if (w->qlm.family)
        fprintf(f, "engine: lm_head quantized (the scheme's lm_head flag): %s, %.2f MiB packed against %.2f MiB in %s; "
                "it runs on the device only (no --vocab-on-cpu)\n", eng_qfmt_str(&w->qlm, c->hidden, lm, 48),
                (double)w->lm_bytes / 1048576.0, (double)w->vocab_bytes / 1048576.0, w->f32 ? "f32" : "bf16");
    if (!w->quant)
        return;
    char fm[4][48];
    int first = -1, uniform = 1;
    for (int i = 0; i < c->n_layers; i++) {
        const eng_layer_layout *Ly = &w->lay[i];
        if (!Ly->qqkv.family && !Ly->qo.family && !Ly->qgu.family && !Ly->qdown.family)
            continue;
        if (first < 0)
            first = i;
        else if (memcmp(&Ly->qqkv, &w->lay[first].qqkv, 4 * sizeof Ly->qqkv))
            uniform = 0;
    }
    const eng_layer_layout *F = &w->lay[first];
    const int64_t Hd = c->hidden;
    fprintf(f, "engine: quantized (packed on the device, dequantized in the kernels): q|k|v %s, o %s, gate|up %s, "
            "down %s%s\n", eng_qfmt_str(&F->qqkv, Hd, fm[0], 48), eng_qfmt_str(&F->qo, F->qd, fm[1], 48),
            eng_qfmt_str(&F->qgu, Hd, fm[2], 48), eng_qfmt_str(&F->qdown, F->inter, fm[3], 48),
            uniform ? "" : " (layer formats differ; first quantized layer shown)");
    fprintf(f, "engine: full precision: embedding%s (%s), norms, biases and every other tensor (f32); "
            "layers %.2f MiB packed against %.2f MiB in %s\n", w->qlm.family ? "" : " and lm_head", w->f32 ? "f32" : "bf16",
            (double)w->layer_bytes_total / 1048576.0, (double)w->plain_layer_bytes / 1048576.0, w->f32 ? "f32" : "bf16");
}
