/* The cuda stage's forward pass, in sections mirroring ref/forward.c: device lists, weights (quantized ones packed,
 * dequantized on use), buffers, probes, attention block, gated delta net block, MLP block, per-layer embeddings,
 * forward. */
#include "cuda_forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dequant.h"
#include "kernels.h"
#include "rope.h"

const rc_caps cuda_fwd_caps = {
    .stage = "cuda",
    .max_head_dim = 0, /* the attention kernel keeps q and the scores in dynamic shared memory, sized per call */
    .head_dim_multiple = 2,
    .mixers = (1u << RC_MIXER_ATTN) | (1u << RC_MIXER_GDN),
    .sliding_window = 1,
    .features = RC_FEAT_NORM_1PW | RC_FEAT_NORM_POW | RC_FEAT_PARTIAL_ROPE | RC_FEAT_OUT_GATE | RC_FEAT_V_NORM |
                RC_FEAT_POST_NORMS | RC_FEAT_EMB_SCALE | RC_FEAT_SOFTCAP | RC_FEAT_PLE | RC_FEAT_LAYER_SCALAR |
                RC_FEAT_GELU_TANH | RC_FEAT_MIXED_LAYERS | RC_FEAT_ROPE_SCALING,
};

#define GDN_CHUNK 64 /* HF torch_chunk_gated_delta_rule's chunk_size, as ref uses for a prompt */

/* Device allocations freed together. */
typedef struct dev_list {
    void **p;
    int n, cap;
} dev_list;

static void *dev_new(dev_list *l, int64_t n, int64_t size, rc_err *e, const char *what)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        void **np = realloc(l->p, (size_t)cap * sizeof *np);
        if (!np) {
            rc_fail(e, RC_E_NOMEM, "cuda: out of host memory tracking device buffers");
            return NULL;
        }
        l->p = np;
        l->cap = cap;
    }
    void *d;
    if (cuda_alloc(&d, n, size, e, what))
        return NULL;
    l->p[l->n++] = d;
    return d;
}

/* Errors are dropped here: this is cleanup, often after a failure that was already reported. */
static void dev_list_free(dev_list *l)
{
    for (int i = 0; i < l->n; i++)
        cudaFree(l->p[i]);
    (void)cudaGetLastError();
    free(l->p);
    memset(l, 0, sizeof *l);
}

/* Returns from the enclosing function (which has rc_err *e) when a CUDA call or launch fails. */
#define CK(call) do { int ck_ = CUDA_CHECK(e, call); if (ck_) return ck_; } while (0)

/* ---- the handle: device weights, uploaded once ---- */
struct cuda_fwd {
    const rc_model *m;
    int device;
    int smem_optin;   /* bytes of shared memory one block may use */
    rc_weights w;     /* device pointers; w.layers itself is a host array. A quantized matrix's slot holds its
                       * packed words (the key into qm), dequantized into wq before each use */
    dev_list weights; /* owns the device copies */
    cuda_qmat *qm;    /* the quantized matrices, packed [nq] */
    int nq;
    float *wq;        /* [max n*k of qm] fp32 dequant of the matrix in use */
    float *host;      /* probe staging [host_cap] */
    int64_t host_cap;
};

typedef struct upload_ctx {
    cuda_fwd *f;
    rc_err *e;
} upload_ctx;

static void *qalloc(void *owner, int64_t n, int64_t size, rc_err *e, const char *what)
{
    return dev_new(owner, n, size, e, what);
}

/* A matrix the checkpoint stores quantized: its codes, scales and zeros go up packed, not its fp32 dequant. */
static int upload_quant(cuda_fwd *f, const rc_qtensor *t, int ndim, const int64_t *shape, const float **slot, rc_err *e)
{
    if (ndim != 2 || shape[0] != t->n || shape[1] != t->k)
        return rc_fail(e, RC_E_SHAPE, "cuda: quantized '%s' is [%lld, %lld], the model binds it as %d-d [%lld, ...]",
                       t->name, (long long)t->n, (long long)t->k, ndim, (long long)shape[0]);
    cuda_qmat *d = &f->qm[f->nq];
    int rc = cuda_qmat_upload(d, t, qalloc, &f->weights, e);
    if (rc)
        return rc;
    f->nq++;
    *slot = (const float *)(const void *)d->words;
    return RC_OK;
}

static int upload_one(void *user, const char *name, int ndim, const int64_t *shape, const float **slot, int required)
{
    upload_ctx *u = user;
    rc_err *e = u->e;
    int64_t n;
    (void)required;
    if (!*slot)
        return RC_OK;
    const rc_qtensor *qt = rc_quant_find(&u->f->m->quant, name);
    if (qt)
        return upload_quant(u->f, qt, ndim, shape, slot, e);
    if (!rc_numel(ndim, shape, &n))
        return rc_fail(e, RC_E_RANGE, "cuda: weight '%s': size overflows", name);
    float *d = dev_new(&u->f->weights, n, sizeof(float), e, name);
    if (!d)
        return e->code;
    CK(cudaMemcpy(d, *slot, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    *slot = d;
    return RC_OK;
}

int cuda_fwd_available(int device, char *why, size_t cap)
{
    char dummy[8];
    if (!why || !cap) {
        why = dummy;
        cap = sizeof dummy;
    }
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, cap, "cudaGetDeviceCount failed: %s", cudaGetErrorString(err));
        return 0;
    }
    if (n == 0) {
        snprintf(why, cap, "no CUDA device");
        return 0;
    }
    if (device < 0 || device >= n) {
        snprintf(why, cap, "CUDA device %d requested, %d present", device, n);
        return 0;
    }
    return 1;
}

void cuda_fwd_close(cuda_fwd *f)
{
    if (!f)
        return;
    (void)cudaSetDevice(f->device);
    dev_list_free(&f->weights);
    free(f->qm);
    free(f->w.layers);
    free(f->host);
    free(f);
}

/* What rc_config_check does not gate: each layer's rope must fit its heads; GDN value heads group key heads. */
static int check_model(const rc_config *c, rc_err *e)
{
    for (int i = 0; i < c->n_layers; i++) {
        const rc_layer_desc *d = &c->layers[i];
        if (d->mixer == RC_MIXER_GDN && (d->gdn_k_heads < 1 || d->gdn_v_heads % d->gdn_k_heads ||
                                         d->gdn_k_dim < 1 || d->gdn_v_dim < 1 || d->gdn_conv_kernel < 1))
            return rc_fail(e, RC_E_UNSUPPORTED, "stage cuda: layer %d: gated delta net heads %d/%d of %d/%d, kernel %d",
                           i, d->gdn_k_heads, d->gdn_v_heads, d->gdn_k_dim, d->gdn_v_dim, d->gdn_conv_kernel);
        if (d->mixer == RC_MIXER_ATTN && (d->rope < 0 || d->rope >= c->n_ropes || c->ropes[d->rope].rot_dim % 2 ||
                                          c->ropes[d->rope].rot_dim > d->head_dim || c->ropes[d->rope].exp_den <= 0))
            return rc_fail(e, RC_E_UNSUPPORTED, "stage cuda: layer %d: rope %d does not fit head_dim %d", i, d->rope,
                           d->head_dim);
    }
    return RC_OK;
}

int cuda_fwd_open(cuda_fwd **out, const rc_model *m, int device, rc_err *e)
{
    const rc_config *c = &m->cfg;
    *out = NULL;
    e->code = RC_OK;
    int rc = rc_config_check(c, &cuda_fwd_caps, e);
    if (rc || (rc = check_model(c, e)))
        return rc;
    char why[256];
    if (!cuda_fwd_available(device, why, sizeof why))
        return rc_fail(e, RC_E_DEVICE, "cuda: %s", why);
    cuda_fwd *f = calloc(1, sizeof *f);
    if (!f)
        return rc_fail(e, RC_E_NOMEM, "cuda: out of host memory");
    f->m = m;
    f->device = device;
    if ((rc = CUDA_CHECK(e, cudaSetDevice(device))) ||
        (rc = CUDA_CHECK(e, cudaDeviceGetAttribute(&f->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device))))
        goto fail;
    f->w = m->w;
    if (!(f->w.layers = rc_calloc(c->n_layers, sizeof *f->w.layers, e, "cuda layer weights"))) {
        rc = e->code;
        goto fail;
    }
    memcpy(f->w.layers, m->w.layers, (size_t)c->n_layers * sizeof *f->w.layers);
    upload_ctx u = {.f = f, .e = e};
    if (m->quant.n && !(f->qm = rc_calloc(m->quant.n, sizeof *f->qm, e, "cuda quantized matrices"))) {
        rc = e->code;
        goto fail;
    }
    if ((rc = rc_weights_visit(c, &f->w, upload_one, &u)))
        goto fail;
    int64_t wq = 0;
    for (int i = 0; i < f->nq; i++)
        wq = f->qm[i].n * f->qm[i].k > wq ? f->qm[i].n * f->qm[i].k : wq;
    if (wq && !(f->wq = dev_new(&f->weights, wq, sizeof(float), e, "dequantized matrix"))) {
        rc = e->code;
        goto fail;
    }
    if (c->tie_embeddings)
        f->w.lm_head = f->w.embed;
    *out = f;
    return RC_OK;
fail:
    cuda_fwd_close(f);
    return rc;
}

/* ---- weights in use: a quantized matrix dequantized into f->wq (one at a time: the stream orders the uses) ---- */
static int weight(cuda_fwd *f, const float *W, const float **out, rc_err *e)
{
    *out = W;
    for (int i = 0; i < f->nq; i++)
        if ((const void *)f->qm[i].words == (const void *)W) {
            CK(cuda_k_dequant(f->wq, &f->qm[i]));
            *out = f->wq;
            break;
        }
    return RC_OK;
}

/* y[T,N] = x[T,K] W[N,K]^T (+ b), W dequantized first when quantized */
static int matmul(cuda_fwd *f, float *y, const float *x, const float *W, const float *bias, int64_t T, int64_t N,
                  int64_t K, rc_err *e)
{
    const float *Wd;
    int rc = weight(f, W, &Wd, e);
    if (rc)
        return rc;
    CK(cuda_k_matmul(y, x, Wd, bias, T, N, K));
    return RC_OK;
}

#define MM(f, ...) do { int mm_ = matmul((f), __VA_ARGS__, e); if (mm_) return mm_; } while (0)
/* dst = the device fp32 table W stands for (dequantized when quantized) */
#define WT(f, dst, W) do { int wt_ = weight((f), (W), &(dst), e); if (wt_) return wt_; } while (0)

/* ---- buffers: every activation of one call, on the device ---- */
typedef struct cuda_buf {
    int32_t *ids;      /* [T] */
    float *x;          /* [T, Hd] residual stream */
    float *a;          /* [T, Hd] normed input of a block */
    float *q, *k, *v;  /* [T, H*D], [T, Hkv*D], [T, Hkv*D] */
    float *ctx;        /* [T, H*D] */
    float *o;          /* [T, Hd] block output */
    float *qg, *ogate; /* out_gate layers: q_proj output [T, 2*H*D], gate [T, H*D] */
    float *gate, *up;  /* [T, I] */
    float *logits;     /* [T, V], only when wanted */
    float *inv[RC_MAX_ROPES], *cos[RC_MAX_ROPES], *sin[RC_MAX_ROPES];
    /* gated delta net, sized for the largest GDN layer */
    float *qkv, *conv;          /* [T, C] before / after conv + act */
    float *z, *core, *normed;   /* [T, Hv*dv] */
    float *gb, *ga, *beta, *g;  /* [T, Hv] */
    float *gq, *gk, *gv;        /* [T, Hv, dk], [T, Hv, dk], [T, Hv, dv] */
    float *state, *conv_state;  /* [Hv, dk, dv], [K-1, C] */
    float *chunk;               /* [Hv, cuda_k_delta_rule_scratch] */
    /* per-layer embeddings */
    float *ple_tok, *ple_mproj, *ple_in; /* [T, L*P] */
    float *ple_g;                        /* [T, P] */
    dev_list l;
} cuda_buf;

static int buf_alloc(cuda_buf *b, const rc_config *c, int64_t T, rc_err *e)
{
    memset(b, 0, sizeof *b);
    int64_t qd = (int64_t)c->max_heads * c->max_head_dim, kd = (int64_t)c->max_kv_heads * c->max_head_dim;
    int64_t hd = c->hidden, I = c->max_intermediate, LP = (int64_t)c->n_layers * c->ple_dim;
    int64_t C = 0, Vd = 0, Hv = 0, Kd = 0, S = 0, K1 = 0, scratch = 0;
    int gated = 0;
    for (int i = 0; i < c->n_layers; i++) {
        const rc_layer_desc *l = &c->layers[i];
        gated |= l->out_gate;
        if (l->mixer != RC_MIXER_GDN)
            continue;
        int64_t hv = l->gdn_v_heads, vd = hv * l->gdn_v_dim, kd2 = hv * l->gdn_k_dim;
        int64_t ch = 2 * (int64_t)l->gdn_k_heads * l->gdn_k_dim + vd;
        int64_t sc = hv * cuda_k_delta_rule_scratch(l->gdn_k_dim, l->gdn_v_dim, GDN_CHUNK);
#define MAX(m, v) if ((v) > (m)) (m) = (v)
        MAX(C, ch); MAX(Vd, vd); MAX(Hv, hv); MAX(Kd, kd2); MAX(S, kd2 * l->gdn_v_dim);
        MAX(K1, ((int64_t)l->gdn_conv_kernel - 1) * ch); MAX(scratch, sc);
#undef MAX
    }
#define A(p, n, what) if (!((p) = dev_new(&b->l, (n), sizeof *(p), e, what))) goto fail
    A(b->ids, T, "token ids");
    A(b->x, T * hd, "activations"); A(b->a, T * hd, "activations"); A(b->o, T * hd, "activations");
    A(b->q, T * qd, "activations"); A(b->k, T * kd, "activations"); A(b->v, T * kd, "activations");
    A(b->ctx, T * qd, "activations"); A(b->gate, T * I, "activations"); A(b->up, T * I, "activations");
    if (gated) {
        A(b->qg, T * 2 * qd, "activations"); A(b->ogate, T * qd, "activations");
    }
    if (C) {
        A(b->qkv, T * C, "gdn activations"); A(b->conv, T * C, "gdn activations");
        A(b->z, T * Vd, "gdn activations"); A(b->core, T * Vd, "gdn activations");
        A(b->normed, T * Vd, "gdn activations"); A(b->gb, T * Hv, "gdn activations");
        A(b->ga, T * Hv, "gdn activations"); A(b->beta, T * Hv, "gdn activations"); A(b->g, T * Hv, "gdn activations");
        A(b->gq, T * Kd, "gdn activations"); A(b->gk, T * Kd, "gdn activations"); A(b->gv, T * Vd, "gdn activations");
        A(b->state, S, "gdn state"); A(b->conv_state, K1 > 0 ? K1 : 1, "gdn conv state");
        A(b->chunk, scratch, "delta rule scratch");
    }
    if (LP) {
        A(b->ple_tok, T * LP, "per-layer embeddings"); A(b->ple_mproj, T * LP, "per-layer embeddings");
        A(b->ple_in, T * LP, "per-layer embeddings"); A(b->ple_g, T * c->ple_dim, "per-layer embeddings");
    }
    for (int i = 0; i < c->n_ropes; i++) {
        A(b->inv[i], c->ropes[i].rot_dim / 2, "rope tables");
        A(b->cos[i], T * c->ropes[i].rot_dim, "rope tables");
        A(b->sin[i], T * c->ropes[i].rot_dim, "rope tables");
    }
#undef A
    return RC_OK;
fail:
    dev_list_free(&b->l);
    return e->code;
}

/* ---- probes: copied to the host only when the sink wants them ---- */
typedef struct probe_ctx {
    cuda_fwd *f;
    const rc_probe_sink *sink;
    int layer; /* -1 = global */
    rc_err *e;
} probe_ctx;

static int probe(const probe_ctx *p, const char *name, const float *dev, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    rc_err *e = p->e;
    cuda_fwd *f = p->f;
    char full[96];
    if (p->layer >= 0)
        snprintf(full, sizeof full, "L%d.%s", p->layer, name);
    else
        snprintf(full, sizeof full, "%s", name);
    if (!rc_probe_wanted(p->sink, full))
        return RC_OK;
    const int64_t shape[3] = {d0, d1, d2};
    int64_t n;
    if (!rc_numel(ndim, shape, &n))
        return rc_fail(e, RC_E_RANGE, "cuda: probe '%s': size overflows", full);
    if (n > f->host_cap) {
        float *h = realloc(f->host, (size_t)n * sizeof *h);
        if (!h)
            return rc_fail(e, RC_E_NOMEM, "cuda: out of host memory allocating %lld bytes for probe '%s'",
                           (long long)n * (long long)sizeof *h, full);
        f->host = h;
        f->host_cap = n;
    }
    CK(cudaMemcpy(f->host, dev, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
    return p->sink->emit(p->sink->user, full, f->host, ndim, shape);
}

#define PROBE(...) do { int prc_ = probe(__VA_ARGS__); if (prc_) return prc_; } while (0)

/* ---- attention block: b->a -> b->o ---- */
static int attention_block(const rc_config *c, const rc_layer_desc *d, const rc_layer_weights *w, cuda_buf *b,
                           int64_t T, const probe_ctx *p, rc_err *e)
{
    const int H = d->n_heads, Hkv = d->n_kv_heads, D = d->head_dim;
    const int64_t qd = (int64_t)H * D, kd = (int64_t)Hkv * D, hd = c->hidden;
    const rc_rope_desc *r = &c->ropes[d->rope];
    if (d->out_gate) { /* q_proj rows per head: [query (D) | gate (D)] */
        MM(p->f, b->qg, b->a, w->q, w->q_b, T, 2 * qd, hd);
        CK(cuda_k_split_halves(b->q, b->ogate, b->qg, T * H, D));
    } else
        MM(p->f, b->q, b->a, w->q, w->q_b, T, qd, hd);
    MM(p->f, b->k, b->a, w->k, w->k_b, T, kd, hd);
    MM(p->f, b->v, b->a, w->v, w->v_b, T, kd, hd);
    PROBE(p, "attn.q", b->q, 3, T, H, D);
    if (d->out_gate)
        PROBE(p, "attn.gate", b->ogate, 2, T, qd, 0);
    PROBE(p, "attn.k", b->k, 3, T, Hkv, D);
    PROBE(p, "attn.v", b->v, 3, T, Hkv, D);
    if (w->q_norm) {
        CK(cuda_k_rmsnorm(b->q, b->q, w->q_norm, T * H, D, c->eps, c->qk_norm));
        PROBE(p, "attn.q_norm", b->q, 3, T, H, D);
    }
    if (w->k_norm) {
        CK(cuda_k_rmsnorm(b->k, b->k, w->k_norm, T * Hkv, D, c->eps, c->qk_norm));
        PROBE(p, "attn.k_norm", b->k, 3, T, Hkv, D);
    }
    if (d->v_norm) {
        CK(cuda_k_rmsnorm(b->v, b->v, NULL, T * Hkv, D, c->eps, c->v_norm));
        PROBE(p, "attn.v_norm", b->v, 3, T, Hkv, D);
    }
    CK(cuda_k_rope_apply(b->q, b->cos[d->rope], b->sin[d->rope], T, H, D, r->rot_dim));
    CK(cuda_k_rope_apply(b->k, b->cos[d->rope], b->sin[d->rope], T, Hkv, D, r->rot_dim));
    PROBE(p, "attn.q_rope", b->q, 3, T, H, D);
    PROBE(p, "attn.k_rope", b->k, 3, T, Hkv, D);
    CK(cuda_k_attention(b->ctx, b->q, b->k, b->v, T, T, 0, H, Hkv, D, d->attn_scale, d->window));
    PROBE(p, "attn.ctx", b->ctx, 2, T, qd, 0);
    if (d->out_gate) {
        CK(cuda_k_sigmoid_mul(b->ctx, b->ogate, T * qd));
        PROBE(p, "attn.ctx_gated", b->ctx, 2, T, qd, 0);
    }
    MM(p->f, b->o, b->ctx, w->o, w->o_b, T, hd, qd);
    PROBE(p, "attn.out", b->o, 2, T, hd, 0);
    return RC_OK;
}

/* ---- gated delta net block: b->a -> b->o (the state starts at zero: a full-sequence call) ---- */
static int gdn_block(const rc_config *c, const rc_layer_desc *d, const rc_layer_weights *w, cuda_buf *b, int64_t T,
                     const probe_ctx *p, rc_err *e)
{
    const int Hk = d->gdn_k_heads, Hv = d->gdn_v_heads, dk = d->gdn_k_dim, dv = d->gdn_v_dim, K = d->gdn_conv_kernel;
    const int64_t Kd = (int64_t)Hk * dk, Vd = (int64_t)Hv * dv, C = 2 * Kd + Vd, hd = c->hidden;
    MM(p->f, b->qkv, b->a, w->gdn_qkv, NULL, T, C, hd);
    MM(p->f, b->z, b->a, w->gdn_z, NULL, T, Vd, hd);
    MM(p->f, b->gb, b->a, w->gdn_b, NULL, T, Hv, hd);
    MM(p->f, b->ga, b->a, w->gdn_a, NULL, T, Hv, hd);
    PROBE(p, "gdn.qkv", b->qkv, 2, T, C, 0);
    PROBE(p, "gdn.z", b->z, 3, T, Hv, dv);
    PROBE(p, "gdn.b", b->gb, 2, T, Hv, 0);
    PROBE(p, "gdn.a", b->ga, 2, T, Hv, 0);
    CK(cuda_k_conv1d_causal(b->conv, b->qkv, w->gdn_conv, NULL, T, C, K));
    CK(cuda_k_act(b->conv, T * C, c->act));
    PROBE(p, "gdn.conv", b->conv, 2, T, C, 0);
    /* the last K-1 pre-conv rows, zero rows first when T < K-1 */
    const int64_t zrows = K - 1 > T ? K - 1 - T : 0, crow = K - 1 - zrows;
    if (zrows)
        CK(cudaMemset(b->conv_state, 0, (size_t)(zrows * C) * sizeof(float)));
    if (crow)
        CK(cudaMemcpy(b->conv_state + zrows * C, b->qkv + (T - crow) * C, (size_t)(crow * C) * sizeof(float),
                      cudaMemcpyDeviceToDevice));
    /* q, k: l2-normed per head, expanded to the Hv value heads, q scaled by dk^-1/2 as the chunked form does */
    const float qmul = (float)pow((double)dk, -0.5);
    CK(cuda_k_gdn_qk(b->gq, b->gk, b->conv, T, C, Hk, Hv, dk, qmul, 1e-6f));
    CK(cudaMemcpy2D(b->gv, (size_t)Vd * sizeof(float), b->conv + 2 * Kd, (size_t)C * sizeof(float),
                    (size_t)Vd * sizeof(float), (size_t)T, cudaMemcpyDeviceToDevice));
    CK(cuda_k_gdn_gates(b->beta, b->g, b->gb, b->ga, w->gdn_A_log, w->gdn_dt_bias, T, Hv));
    PROBE(p, "gdn.q", b->gq, 3, T, Hv, dk);
    PROBE(p, "gdn.k", b->gk, 3, T, Hv, dk);
    PROBE(p, "gdn.v", b->gv, 3, T, Hv, dv);
    PROBE(p, "gdn.beta", b->beta, 2, T, Hv, 0);
    PROBE(p, "gdn.g", b->g, 2, T, Hv, 0);
    CK(cuda_k_delta_rule_chunked(b->core, b->state, b->gq, b->gk, b->gv, b->g, b->beta, T, Hv, dk, dv, GDN_CHUNK,
                                 b->chunk));
    PROBE(p, "gdn.core", b->core, 3, T, Hv, dv);
    CK(cuda_k_rmsnorm_gated(b->normed, b->core, b->z, w->gdn_norm, T * Hv, dv, c->eps));
    PROBE(p, "gdn.normed", b->normed, 2, T, Vd, 0);
    MM(p->f, b->o, b->normed, w->gdn_out, NULL, T, hd, Vd);
    PROBE(p, "gdn.out", b->o, 2, T, hd, 0);
    PROBE(p, "gdn.state", b->state, 3, Hv, dk, dv);
    PROBE(p, "gdn.conv_state", b->conv_state, 2, K - 1, C, 0);
    return RC_OK;
}

/* ---- MLP block: b->a -> b->o ---- */
static int mlp_block(const rc_config *c, const rc_layer_desc *d, const rc_layer_weights *w, cuda_buf *b, int64_t T,
                     const probe_ctx *p, rc_err *e)
{
    const int64_t I = d->intermediate, hd = c->hidden;
    MM(p->f, b->gate, b->a, w->gate, w->gate_b, T, I, hd);
    MM(p->f, b->up, b->a, w->up, w->up_b, T, I, hd);
    PROBE(p, "mlp.gate", b->gate, 2, T, I, 0);
    PROBE(p, "mlp.up", b->up, 2, T, I, 0);
    CK(cuda_k_glu(b->gate, b->gate, b->up, T * I, c->act));
    PROBE(p, "mlp.act", b->gate, 2, T, I, 0);
    MM(p->f, b->o, b->gate, w->down, w->down_b, T, hd, I);
    PROBE(p, "mlp.out", b->o, 2, T, hd, 0);
    return RC_OK;
}

/* ---- per-layer embeddings: the per-token inputs [T, L, P] from the ids and the scaled embedding b->x ---- */
static int ple_inputs(cuda_fwd *f, int64_t T, cuda_buf *b, const probe_ctx *p, rc_err *e)
{
    const rc_config *c = &f->m->cfg;
    const int P = c->ple_dim, L = c->n_layers;
    const int64_t LP = (int64_t)L * P, hd = c->hidden;
    const float tok_scale = (float)sqrt((double)P), proj_scale = (float)pow((double)hd, -0.5),
                in_scale = (float)pow(2.0, -0.5);
    const float *table;
    WT(f, table, f->w.ple_embed);
    CK(cuda_k_embed(b->ple_tok, table, b->ids, T, LP, tok_scale));
    PROBE(p, "ple.tok", b->ple_tok, 2, T, LP, 0);
    MM(f, b->ple_mproj, b->x, f->w.ple_model_proj, NULL, T, LP, hd);
    PROBE(p, "ple.mproj", b->ple_mproj, 2, T, LP, 0);
    CK(cuda_k_scale(b->ple_in, b->ple_mproj, T * LP, proj_scale));
    CK(cuda_k_rmsnorm(b->ple_in, b->ple_in, f->w.ple_proj_norm, T * L, P, c->eps, c->norm));
    PROBE(p, "ple.mproj_norm", b->ple_in, 3, T, L, P);
    CK(cuda_k_add_scale(b->ple_in, b->ple_tok, T * LP, in_scale));
    PROBE(p, "ple.in", b->ple_in, 3, T, L, P);
    return RC_OK;
}

/* The gated per-layer branch at the end of layer l: b->x += norm(((act(x Wg^T) * ple_in[:, l]) Wp^T)). */
static int ple_block(const rc_config *c, const rc_layer_weights *w, cuda_buf *b, int64_t T, int l, const probe_ctx *p,
                     rc_err *e)
{
    const int P = c->ple_dim;
    const int64_t LP = (int64_t)c->n_layers * P, hd = c->hidden;
    MM(p->f, b->ple_g, b->x, w->ple_gate, NULL, T, P, hd);
    PROBE(p, "ple.gate", b->ple_g, 2, T, P, 0);
    CK(cuda_k_glu_rows(b->ple_g, b->ple_in + (int64_t)l * P, T, P, LP, c->act));
    PROBE(p, "ple.act", b->ple_g, 2, T, P, 0);
    MM(p->f, b->o, b->ple_g, w->ple_proj, NULL, T, hd, P);
    PROBE(p, "ple.proj", b->o, 2, T, hd, 0);
    CK(cuda_k_rmsnorm(b->o, b->o, w->ple_norm, T, hd, c->eps, c->norm));
    PROBE(p, "ple.norm", b->o, 2, T, hd, 0);
    CK(cuda_k_add(b->x, b->o, T * hd));
    return RC_OK;
}

/* ---- the forward pass ---- */
static int run(cuda_fwd *f, const int32_t *ids, int64_t T, float *logits, cuda_buf *b, const rc_probe_sink *sink,
               rc_err *e)
{
    const rc_config *c = &f->m->cfg;
    const rc_weights *W = &f->w;
    const int64_t hd = c->hidden, V = c->vocab;
    probe_ctx p = {.f = f, .sink = sink, .layer = -1, .e = e};

    CK(cudaMemcpy(b->ids, ids, (size_t)T * sizeof *ids, cudaMemcpyHostToDevice));
    const float *embed;
    WT(f, embed, W->embed);
    CK(cuda_k_embed(b->x, embed, b->ids, T, hd, c->emb_scale));
    PROBE(&p, "emb", b->x, 2, T, hd, 0);
    if (c->ple_dim) {
        int rc = ple_inputs(f, T, b, &p, e);
        if (rc)
            return rc;
    }

    for (int r = 0; r < c->n_ropes; r++) {
        const rc_rope_desc *rd = &c->ropes[r];
        char n[48];
        float inv[RC_ROPE_MAX_HALF];
        rc_rope_inv_freq(inv, rd);
        CK(cudaMemcpy(b->inv[r], inv, (size_t)(rd->rot_dim / 2) * sizeof *inv, cudaMemcpyHostToDevice));
        CK(cuda_k_rope_table(b->cos[r], b->sin[r], b->inv[r], rc_rope_attn_factor(rd), 0, T, rd->rot_dim));
        snprintf(n, sizeof n, "rope.%s.inv_freq", rd->kind);
        PROBE(&p, n, b->inv[r], 1, rd->rot_dim / 2, 0, 0);
        snprintf(n, sizeof n, "rope.%s.cos", rd->kind);
        PROBE(&p, n, b->cos[r], 2, T, rd->rot_dim, 0);
        snprintf(n, sizeof n, "rope.%s.sin", rd->kind);
        PROBE(&p, n, b->sin[r], 2, T, rd->rot_dim, 0);
    }

    for (int l = 0; l < c->n_layers; l++) {
        const rc_layer_desc *d = &c->layers[l];
        const rc_layer_weights *w = &W->layers[l];
        p.layer = l;
        PROBE(&p, "in", b->x, 2, T, hd, 0);
        CK(cuda_k_rmsnorm(b->a, b->x, w->attn_norm, T, hd, c->eps, c->norm));
        PROBE(&p, "attn_norm", b->a, 2, T, hd, 0);
        int rc = d->mixer == RC_MIXER_GDN ? gdn_block(c, d, w, b, T, &p, e) : attention_block(c, d, w, b, T, &p, e);
        if (rc)
            return rc;
        if (c->post_norms) {
            CK(cuda_k_rmsnorm(b->o, b->o, w->attn_post_norm, T, hd, c->eps, c->norm));
            PROBE(&p, "attn.post_norm", b->o, 2, T, hd, 0);
        }
        CK(cuda_k_add(b->x, b->o, T * hd));
        PROBE(&p, "mid", b->x, 2, T, hd, 0);
        CK(cuda_k_rmsnorm(b->a, b->x, w->mlp_norm, T, hd, c->eps, c->norm));
        PROBE(&p, "mlp_norm", b->a, 2, T, hd, 0);
        if ((rc = mlp_block(c, d, w, b, T, &p, e)))
            return rc;
        if (c->post_norms) {
            CK(cuda_k_rmsnorm(b->o, b->o, w->mlp_post_norm, T, hd, c->eps, c->norm));
            PROBE(&p, "mlp.post_norm", b->o, 2, T, hd, 0);
        }
        CK(cuda_k_add(b->x, b->o, T * hd));
        if (c->ple_dim && (rc = ple_block(c, w, b, T, l, &p, e)))
            return rc;
        if (c->layer_scalar) /* the host copy of the [1] weight */
            CK(cuda_k_scale(b->x, b->x, T * hd, f->m->w.layers[l].layer_scalar[0]));
        PROBE(&p, "out", b->x, 2, T, hd, 0);
    }
    p.layer = -1;
    CK(cuda_k_rmsnorm(b->a, b->x, W->final_norm, T, hd, c->eps, c->norm));
    PROBE(&p, "final_norm", b->a, 2, T, hd, 0);
    if (logits || rc_probe_wanted(sink, "logits") || rc_probe_wanted(sink, "logits_raw")) {
        if (!(b->logits = dev_new(&b->l, T * V, sizeof(float), e, "logits")))
            return e->code;
        MM(f, b->logits, b->a, W->lm_head, NULL, T, V, hd);
        if (c->final_softcap != 0.0f) {
            PROBE(&p, "logits_raw", b->logits, 2, T, V, 0);
            CK(cuda_k_softcap(b->logits, T * V, c->final_softcap));
        }
        if (logits)
            CK(cudaMemcpy(logits, b->logits, (size_t)(T * V) * sizeof *logits, cudaMemcpyDeviceToHost));
        PROBE(&p, "logits", b->logits, 2, T, V, 0);
    }
    CK(cudaDeviceSynchronize());
    return RC_OK;
}

int cuda_fwd_forward(cuda_fwd *f, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink,
                     rc_err *e)
{
    const rc_config *c = &f->m->cfg;
    e->code = RC_OK;
    if (T < 1)
        return rc_fail(e, RC_E_USAGE, "cuda: empty prompt");
    int rc = rc_model_check_ids(f->m, ids, T, e);
    if (rc)
        return rc;
    int64_t tv;
    if (!rc_mul_i64(T, c->vocab, &tv))
        return rc_fail(e, RC_E_RANGE, "cuda: T x vocab overflows");
    for (int l = 0; l < c->n_layers; l++) {
        if (c->layers[l].mixer != RC_MIXER_ATTN)
            continue;
        size_t need = cuda_k_attention_smem(T, c->layers[l].window, c->layers[l].head_dim);
        if (need > (size_t)f->smem_optin)
            return rc_fail(e, RC_E_UNSUPPORTED,
                           "cuda: layer %d: %lld tokens need %zu bytes of shared memory per attention block, the "
                           "device allows %d (the cuda stage keeps a whole score row on chip)",
                           l, (long long)T, need, f->smem_optin);
    }
    if ((rc = CUDA_CHECK(e, cudaSetDevice(f->device))))
        return rc;
    cuda_buf b;
    if ((rc = buf_alloc(&b, c, T, e)))
        return rc;
    rc = run(f, ids, T, logits, &b, sink, e);
    dev_list_free(&b.l);
    if (rc && e->code == RC_OK)
        return rc_fail(e, rc, "cuda: probe consumer stopped the forward (%s)", rc_code_name(rc));
    return rc;
}
