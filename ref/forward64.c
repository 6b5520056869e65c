/* The double-precision forward (see forward64.h): ref/forward.c and ref/ops.c with every value in
 * double, the same loops, the same probe names. Weights stay fp32 in memory and widen on read, and so
 * do the model's own fp32 constants: embedding and attention scales, and the RoPE inverse frequencies
 * and angles, which HF forms in fp32 (docs/architectures.md §3, §10); cos/sin and all after are double. */
#include "forward64.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "rope.h"

const rc_caps ref64_caps = {
    .stage = "ref64",
    .max_head_dim = 0,
    .head_dim_multiple = 2,
    .mixers = (1u << RC_MIXER_ATTN) | (1u << RC_MIXER_GDN),
    .sliding_window = 1,
    .features = RC_FEAT_ALL,
};

#define GDN_CHUNK 64 /* HF torch_chunk_gated_delta_rule's chunk_size, as ref */

/* ---- ops ---- */
static void matmul(double *y, const double *x, const float *W, const float *b, int64_t T, int64_t N, int64_t K)
{
#ifdef _OPENMP
#pragma omp parallel for collapse(2) schedule(static) if (T * N * K > REF_OMP_MIN_MACS)
#endif
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

/* w may be NULL only for RC_NORM_POW */
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

/* The model's fp32 inverse frequencies (rc_rope_inv_freq, HF's buffer bit for bit), widened. */
static void rope_inv_freq(double *inv, const rc_rope_desc *r)
{
    float f[RC_ROPE_MAX_HALF];
    rc_rope_inv_freq(f, r);
    for (int i = 0; i < r->rot_dim / 2; i++)
        inv[i] = f[i];
}

/* angle = fl32(fl32(t) * inv_freq) as HF rounds it; its cos and sin in double, times the model's fp32 attention
 * factor (yarn; 1 otherwise) */
static void rope_table(double *cos_t, double *sin_t, const double *inv, const rc_rope_desc *r, int64_t T)
{
    const int rot_dim = r->rot_dim, half = rot_dim / 2;
    const double m = rc_rope_attn_factor(r);
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            float a = (float)t * (float)inv[i];
            cos_t[t * rot_dim + i] = cos_t[t * rot_dim + i + half] = cos((double)a) * m;
            sin_t[t * rot_dim + i] = sin_t[t * rot_dim + i + half] = sin((double)a) * m;
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

/* ctx[T, H*D] over keys j in [t-window+1, t] (window 0: [0, t]); p holds T doubles */
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

static double sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

/* torch softplus (beta 1, threshold 20) */
static double softplus(double x)
{
    return x > 20.0 ? x : log1p(exp(x));
}

/* x * rsqrt(SUM of squares + eps) */
static void l2norm(double *y, const double *x, int64_t n, double eps)
{
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    const double inv = 1.0 / sqrt(ss + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * inv;
}

/* y[T,C] = causal depthwise conv of x[T,C] with w[C,K], zeros before row 0; tap K-1 is the current row */
static void conv1d_causal(double *y, const double *x, const float *w, int64_t T, int64_t C, int K)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) {
            double acc = 0.0;
            for (int j = 0; j < K; j++) {
                int64_t src = t - (K - 1) + j;
                if (src >= 0)
                    acc += (double)w[c * K + j] * x[src * C + c];
            }
            y[t * C + c] = acc;
        }
}

/* One token of the gated delta rule on S[dk,dv]: S *= exp(g); S += k (beta (v - S^T k))^T; out = S^T q. */
static void delta_rule_step(double *S, double *out, const double *q, const double *k, const double *v, double g,
                            double beta, int dk, int dv)
{
    const double decay = exp(g);
    for (int i = 0; i < dk * dv; i++)
        S[i] *= decay;
    for (int e = 0; e < dv; e++) {
        double mem = 0.0; /* (S^T k)[e] */
        for (int d = 0; d < dk; d++)
            mem += S[d * dv + e] * k[d];
        const double delta = (v[e] - mem) * beta;
        for (int d = 0; d < dk; d++)
            S[d * dv + e] += k[d] * delta;
    }
    for (int e = 0; e < dv; e++) {
        double acc = 0.0;
        for (int d = 0; d < dk; d++)
            acc += S[d * dv + e] * q[d];
        out[e] = acc;
    }
}

static int64_t delta_rule_chunked_scratch(int dk, int dv)
{
    const int64_t L = GDN_CHUNK;
    return L * (6 * (int64_t)dk + 3 * (int64_t)dv + 3 * L + 4);
}

static double dot(const double *a, const double *b, int n)
{
    double acc = 0.0;
    for (int i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

/* The same map over T rows in HF's chunked form (ref_delta_rule_chunked's loops): q,k [T,dk], v/out
 * [T,dv], g/beta [T] of one head; S [dk,dv] in/out; scratch of delta_rule_chunked_scratch() doubles. */
static void delta_rule_chunked(double *out, double *S, const double *q, const double *k, const double *v,
                               const double *g, const double *beta, int64_t T, int dk, int dv, double *scratch)
{
    const int L = GDN_CHUNK;
    double *qc = scratch, *kc = qc + L * dk, *kb = kc + L * dk, *kcd = kb + L * dk, *q2 = kcd + L * dk,
           *k2 = q2 + L * dk;                                      /* [L, dk] each */
    double *vb = k2 + L * dk, *nv = vb + L * dv, *vn = nv + L * dv; /* [L, dv] each */
    double *pd = vn + L * dv, *ut = pd + L * L, *at = ut + L * L;   /* [L, L] each */
    double *cum = at + L * L, *ecum = cum + L, *gc = ecum + L, *bc = gc + L;
    for (int64_t c0 = 0; c0 < T; c0 += L) {
        const int n = T - c0 < L ? (int)(T - c0) : L; /* real rows; the rest is zero padding */
        for (int r = 0; r < L; r++) {
            const int real = r < n;
            gc[r] = real ? g[c0 + r] : 0.0;
            bc[r] = real ? beta[c0 + r] : 0.0;
            for (int d = 0; d < dk; d++) {
                qc[r * dk + d] = real ? q[(c0 + r) * dk + d] : 0.0;
                kc[r * dk + d] = real ? k[(c0 + r) * dk + d] : 0.0;
                kb[r * dk + d] = kc[r * dk + d] * bc[r];
            }
            for (int e = 0; e < dv; e++)
                vb[r * dv + e] = (real ? v[(c0 + r) * dv + e] : 0.0) * bc[r];
        }
        double run = 0.0;
        for (int r = 0; r < L; r++) {
            run += gc[r];
            cum[r] = run;
            ecum[r] = exp(cum[r]);
        }
        for (int r = 0; r < L; r++)
            for (int s = 0; s < L; s++) {
                pd[r * L + s] = s <= r ? exp(cum[r] - cum[s]) : 0.0;
                ut[r * L + s] = dot(kb + r * dk, kc + s * dk, dk) * pd[r * L + s];
                at[r * L + s] = dot(qc + r * dk, kc + s * dk, dk) * pd[r * L + s];
            }
        /* unit lower-triangular solves (strictly lower part of ut): nv = M^-1 vb, kcd = M^-1 (kb * exp(cum)) */
        for (int r = 0; r < L; r++) {
            for (int e = 0; e < dv; e++) {
                double acc = vb[r * dv + e];
                for (int s = 0; s < r; s++)
                    acc -= ut[r * L + s] * nv[s * dv + e];
                nv[r * dv + e] = acc;
            }
            for (int d = 0; d < dk; d++) {
                double acc = kb[r * dk + d] * ecum[r];
                for (int s = 0; s < r; s++)
                    acc -= ut[r * L + s] * kcd[s * dk + d];
                kcd[r * dk + d] = acc;
            }
        }
        const double last = cum[L - 1], cdecay = exp(last);
        for (int r = 0; r < L; r++) {
            const double kdec = exp(last - cum[r]);
            for (int d = 0; d < dk; d++) {
                q2[r * dk + d] = qc[r * dk + d] * ecum[r];
                k2[r * dk + d] = kc[r * dk + d] * kdec;
            }
        }
        for (int r = 0; r < L; r++)
            for (int e = 0; e < dv; e++) {
                double acc = 0.0;
                for (int d = 0; d < dk; d++)
                    acc += kcd[r * dk + d] * S[d * dv + e];
                vn[r * dv + e] = nv[r * dv + e] - acc;
            }
        for (int r = 0; r < n; r++)
            for (int e = 0; e < dv; e++) {
                double inter = 0.0, intra = 0.0;
                for (int d = 0; d < dk; d++)
                    inter += q2[r * dk + d] * S[d * dv + e];
                for (int s = 0; s < L; s++)
                    intra += at[r * L + s] * vn[s * dv + e];
                out[(c0 + r) * dv + e] = inter + intra;
            }
        for (int d = 0; d < dk; d++)
            for (int e = 0; e < dv; e++) {
                double acc = 0.0;
                for (int r = 0; r < L; r++)
                    acc += k2[r * dk + d] * vn[r * dv + e];
                S[d * dv + e] = S[d * dv + e] * cdecay + acc;
            }
    }
}

static void add_inplace(double *x, const double *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] += y[i];
}

/* ---- buffers: as ref_buf, in double ---- */
typedef struct buf64 {
    double *x, *a;              /* [T, Hd] residual stream, normed input of a block */
    double *q, *k, *v;          /* [T, H*D], [T, Hkv*D], [T, Hkv*D] */
    double *qg, *ogate;         /* out_gate layers: q_proj output [T, 2*H*D], gate [T, H*D] */
    double *ctx, *o;            /* [T, H*D], [T, Hd] */
    double *gate, *up, *scores; /* [T, I], [T, I], [T] */
    double *inv[RC_MAX_ROPES], *cos[RC_MAX_ROPES], *sin[RC_MAX_ROPES];
    /* gated delta net, sized for the largest GDN layer */
    double *qkv, *conv;         /* [T, C] */
    double *z, *core, *normed;  /* [T, Hv*dv] */
    double *gb, *ga, *beta, *g; /* [T, Hv] */
    double *gq, *gk, *gv;       /* [T, Hv, dk], [T, Hv, dk], [T, Hv, dv] */
    double *state, *conv_state; /* [Hv, dk, dv], [K-1, C] */
    double *hq, *hk, *hv, *hg, *hb, *hout, *chunk; /* one head: [T, dk] x2, [T, dv], [T] x2, [T, dv], scratch */
    /* per-layer embeddings */
    double *ple_tok, *ple_mproj, *ple_in; /* [T, L*P] */
    double *ple_g;                        /* [T, P] */
} buf64;

static void buf_free(buf64 *b)
{
    double **all[] = {&b->x, &b->a, &b->q, &b->k, &b->v, &b->qg, &b->ogate, &b->ctx, &b->o, &b->gate, &b->up,
                      &b->scores, &b->qkv, &b->conv, &b->z, &b->core, &b->normed, &b->gb, &b->ga, &b->beta, &b->g,
                      &b->gq, &b->gk, &b->gv, &b->state, &b->conv_state, &b->hq, &b->hk, &b->hv, &b->hg, &b->hb,
                      &b->hout, &b->chunk, &b->ple_tok, &b->ple_mproj, &b->ple_in, &b->ple_g};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(*all[i]);
    for (int i = 0; i < RC_MAX_ROPES; i++) {
        free(b->inv[i]); free(b->cos[i]); free(b->sin[i]);
    }
}

static int buf_alloc(buf64 *b, const rc_config *c, int64_t T, rc_err *e)
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
        int64_t hv = l->gdn_v_heads, vd = hv * l->gdn_v_dim, kd2 = hv * l->gdn_k_dim;
        int64_t ch = 2 * (int64_t)l->gdn_k_heads * l->gdn_k_dim + vd;
        int64_t sc = delta_rule_chunked_scratch(l->gdn_k_dim, l->gdn_v_dim);
#define MAX(m, v) if ((v) > (m)) (m) = (v)
        MAX(C, ch); MAX(Vd, vd); MAX(Hv, hv); MAX(Kd, kd2); MAX(dk, l->gdn_k_dim); MAX(dv, l->gdn_v_dim);
        MAX(S, kd2 * l->gdn_v_dim); MAX(K1, ((int64_t)l->gdn_conv_kernel - 1) * ch); MAX(scratch, sc);
#undef MAX
    }
#define A(p, n) if (!((p) = rc_calloc((n), sizeof(double), e, "ref64 activations"))) goto fail
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
    const ref64_sink *sink;
    int layer; /* -1 = global */
} probe_ctx;

static int wanted(const ref64_sink *s, const char *name)
{
    return s && s->emit && (!s->want || s->want(s->user, name));
}

static int probe(const probe_ctx *p, const char *name, const double *data, int ndim, int64_t d0, int64_t d1,
                 int64_t d2)
{
    char full[96];
    if (p->layer >= 0)
        snprintf(full, sizeof full, "L%d.%s", p->layer, name);
    else
        snprintf(full, sizeof full, "%s", name);
    if (!wanted(p->sink, full))
        return RC_OK;
    const int64_t shape[3] = {d0, d1, d2};
    return p->sink->emit(p->sink->user, full, data, ndim, shape);
}

#define PROBE(...) do { int prc_ = probe(__VA_ARGS__); if (prc_) return prc_; } while (0)

/* ---- attention block: b->a -> b->o ---- */
static int attention_block(const rc_config *c, const rc_layer_desc *d, const rc_layer_weights *w, buf64 *b,
                           int64_t T, const probe_ctx *p)
{
    const int H = d->n_heads, Hkv = d->n_kv_heads, D = d->head_dim;
    const int64_t qd = (int64_t)H * D, kd = (int64_t)Hkv * D, hd = c->hidden;
    const int R = c->ropes[d->rope].rot_dim;
    if (d->out_gate) { /* q_proj rows per head: [query (D) | gate (D)] */
        matmul(b->qg, b->a, w->q, w->q_b, T, 2 * qd, hd);
        for (int64_t t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < D; i++) {
                    b->q[(t * H + h) * D + i] = b->qg[(t * H + h) * 2 * D + i];
                    b->ogate[(t * H + h) * D + i] = b->qg[(t * H + h) * 2 * D + D + i];
                }
    } else
        matmul(b->q, b->a, w->q, w->q_b, T, qd, hd);
    matmul(b->k, b->a, w->k, w->k_b, T, kd, hd);
    matmul(b->v, b->a, w->v, w->v_b, T, kd, hd);
    PROBE(p, "attn.q", b->q, 3, T, H, D);
    if (d->out_gate)
        PROBE(p, "attn.gate", b->ogate, 2, T, qd, 0);
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
    if (d->v_norm) {
        rmsnorm(b->v, b->v, NULL, T * Hkv, D, c->eps, c->v_norm);
        PROBE(p, "attn.v_norm", b->v, 3, T, Hkv, D);
    }
    rope_apply(b->q, b->cos[d->rope], b->sin[d->rope], T, H, D, R);
    rope_apply(b->k, b->cos[d->rope], b->sin[d->rope], T, Hkv, D, R);
    PROBE(p, "attn.q_rope", b->q, 3, T, H, D);
    PROBE(p, "attn.k_rope", b->k, 3, T, Hkv, D);
    attention(b->ctx, b->q, b->k, b->v, T, H, Hkv, D, d->attn_scale, d->window, b->scores);
    PROBE(p, "attn.ctx", b->ctx, 2, T, qd, 0);
    if (d->out_gate) {
        for (int64_t i = 0; i < T * qd; i++)
            b->ctx[i] *= sigmoid(b->ogate[i]);
        PROBE(p, "attn.ctx_gated", b->ctx, 2, T, qd, 0);
    }
    matmul(b->o, b->ctx, w->o, w->o_b, T, hd, qd);
    PROBE(p, "attn.out", b->o, 2, T, hd, 0);
    return RC_OK;
}

/* ---- gated delta net block: b->a -> b->o (the state starts at zero: a full-sequence call) ---- */
static int gdn_block(const rc_config *c, const rc_layer_desc *d, const rc_layer_weights *w, buf64 *b, int64_t T,
                     const probe_ctx *p, int recurrent)
{
    const int Hk = d->gdn_k_heads, Hv = d->gdn_v_heads, dk = d->gdn_k_dim, dv = d->gdn_v_dim, K = d->gdn_conv_kernel;
    const int64_t Kd = (int64_t)Hk * dk, Vd = (int64_t)Hv * dv, C = 2 * Kd + Vd, hd = c->hidden;
    const int rep = Hv / Hk; /* value head j reads key head j / rep */
    matmul(b->qkv, b->a, w->gdn_qkv, NULL, T, C, hd);
    matmul(b->z, b->a, w->gdn_z, NULL, T, Vd, hd);
    matmul(b->gb, b->a, w->gdn_b, NULL, T, Hv, hd);
    matmul(b->ga, b->a, w->gdn_a, NULL, T, Hv, hd);
    PROBE(p, "gdn.qkv", b->qkv, 2, T, C, 0);
    PROBE(p, "gdn.z", b->z, 3, T, Hv, dv);
    PROBE(p, "gdn.b", b->gb, 2, T, Hv, 0);
    PROBE(p, "gdn.a", b->ga, 2, T, Hv, 0);
    conv1d_causal(b->conv, b->qkv, w->gdn_conv, T, C, K);
    for (int64_t i = 0; i < T * C; i++)
        b->conv[i] = act(b->conv[i], c->act);
    PROBE(p, "gdn.conv", b->conv, 2, T, C, 0);
    for (int j = 0; j < K - 1; j++) { /* the last K-1 pre-conv rows, zero rows first when T < K-1 */
        int64_t t = T - (K - 1) + j;
        for (int64_t ch = 0; ch < C; ch++)
            b->conv_state[j * C + ch] = t >= 0 ? b->qkv[t * C + ch] : 0.0;
    }
    /* q, k: l2-normed per head, expanded to the Hv value heads; q scaled by dk^-1/2 */
    const double qscale = 1.0 / sqrt((double)dk);
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < Hv; h++) {
            const double *row = b->conv + t * C;
            double *qo = b->gq + (t * Hv + h) * dk, *ko = b->gk + (t * Hv + h) * dk;
            l2norm(qo, row + (int64_t)(h / rep) * dk, dk, 1e-6f);
            l2norm(ko, row + Kd + (int64_t)(h / rep) * dk, dk, 1e-6f);
            for (int i = 0; i < dk; i++)
                qo[i] *= qscale;
            memcpy(b->gv + (t * Hv + h) * dv, row + 2 * Kd + (int64_t)h * dv, (size_t)dv * sizeof(double));
            const int64_t i = t * Hv + h;
            b->beta[i] = sigmoid(b->gb[i]);
            b->g[i] = -exp((double)w->gdn_A_log[h]) * softplus(b->ga[i] + (double)w->gdn_dt_bias[h]);
        }
    PROBE(p, "gdn.q", b->gq, 3, T, Hv, dk);
    PROBE(p, "gdn.k", b->gk, 3, T, Hv, dk);
    PROBE(p, "gdn.v", b->gv, 3, T, Hv, dv);
    PROBE(p, "gdn.beta", b->beta, 2, T, Hv, 0);
    PROBE(p, "gdn.g", b->g, 2, T, Hv, 0);
    for (int h = 0; h < Hv; h++) {
        double *S = b->state + (int64_t)h * dk * dv;
        memset(S, 0, (size_t)dk * dv * sizeof *S);
        for (int64_t t = 0; t < T; t++) {
            memcpy(b->hq + t * dk, b->gq + (t * Hv + h) * dk, (size_t)dk * sizeof(double));
            memcpy(b->hk + t * dk, b->gk + (t * Hv + h) * dk, (size_t)dk * sizeof(double));
            memcpy(b->hv + t * dv, b->gv + (t * Hv + h) * dv, (size_t)dv * sizeof(double));
            b->hg[t] = b->g[t * Hv + h];
            b->hb[t] = b->beta[t * Hv + h];
        }
        if (recurrent)
            for (int64_t t = 0; t < T; t++)
                delta_rule_step(S, b->hout + t * dv, b->hq + t * dk, b->hk + t * dk, b->hv + t * dv, b->hg[t],
                                b->hb[t], dk, dv);
        else
            delta_rule_chunked(b->hout, S, b->hq, b->hk, b->hv, b->hg, b->hb, T, dk, dv, b->chunk);
        for (int64_t t = 0; t < T; t++)
            memcpy(b->core + (t * Hv + h) * dv, b->hout + t * dv, (size_t)dv * sizeof(double));
    }
    PROBE(p, "gdn.core", b->core, 3, T, Hv, dv);
    /* gated RMSNorm: norm first, then the silu(z) gate */
    rmsnorm(b->normed, b->core, w->gdn_norm, T * Hv, dv, c->eps, RC_NORM_W);
    for (int64_t i = 0; i < T * Vd; i++)
        b->normed[i] *= act(b->z[i], RC_ACT_SILU);
    PROBE(p, "gdn.normed", b->normed, 2, T, Vd, 0);
    matmul(b->o, b->normed, w->gdn_out, NULL, T, hd, Vd);
    PROBE(p, "gdn.out", b->o, 2, T, hd, 0);
    PROBE(p, "gdn.state", b->state, 3, Hv, dk, dv);
    PROBE(p, "gdn.conv_state", b->conv_state, 2, K - 1, C, 0);
    return RC_OK;
}

/* ---- MLP block: b->a -> b->o ---- */
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

/* ---- per-layer embeddings: the per-token inputs [T, L, P] from the ids and the scaled embedding b->x ---- */
static int ple_inputs(const rc_model *m, const int32_t *ids, int64_t T, buf64 *b, const probe_ctx *p)
{
    const rc_config *c = &m->cfg;
    const int P = c->ple_dim, L = c->n_layers;
    const int64_t LP = (int64_t)L * P, hd = c->hidden;
    /* the model's fp32 scale factors, as ref takes them */
    const double tok_scale = (float)sqrt((double)P), proj_scale = (float)pow((double)hd, -0.5),
                 in_scale = (float)pow(2.0, -0.5);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < LP; i++)
            b->ple_tok[t * LP + i] = m->w.ple_embed[(int64_t)ids[t] * LP + i] * tok_scale;
    PROBE(p, "ple.tok", b->ple_tok, 2, T, LP, 0);
    matmul(b->ple_mproj, b->x, m->w.ple_model_proj, NULL, T, LP, hd);
    PROBE(p, "ple.mproj", b->ple_mproj, 2, T, LP, 0);
    for (int64_t i = 0; i < T * LP; i++)
        b->ple_in[i] = b->ple_mproj[i] * proj_scale;
    rmsnorm(b->ple_in, b->ple_in, m->w.ple_proj_norm, T * L, P, c->eps, c->norm);
    PROBE(p, "ple.mproj_norm", b->ple_in, 3, T, L, P);
    for (int64_t i = 0; i < T * LP; i++)
        b->ple_in[i] = (b->ple_in[i] + b->ple_tok[i]) * in_scale;
    PROBE(p, "ple.in", b->ple_in, 3, T, L, P);
    return RC_OK;
}

/* The gated per-layer branch at the end of layer l: b->x += norm(((act(x Wg^T) * ple_in[:, l]) Wp^T)). */
static int ple_block(const rc_config *c, const rc_layer_weights *w, buf64 *b, int64_t T, int l, const probe_ctx *p)
{
    const int P = c->ple_dim;
    const int64_t LP = (int64_t)c->n_layers * P, hd = c->hidden;
    matmul(b->ple_g, b->x, w->ple_gate, NULL, T, P, hd);
    PROBE(p, "ple.gate", b->ple_g, 2, T, P, 0);
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < P; i++)
            b->ple_g[t * P + i] = act(b->ple_g[t * P + i], c->act) * b->ple_in[t * LP + (int64_t)l * P + i];
    PROBE(p, "ple.act", b->ple_g, 2, T, P, 0);
    matmul(b->o, b->ple_g, w->ple_proj, NULL, T, hd, P);
    PROBE(p, "ple.proj", b->o, 2, T, hd, 0);
    rmsnorm(b->o, b->o, w->ple_norm, T, hd, c->eps, c->norm);
    PROBE(p, "ple.norm", b->o, 2, T, hd, 0);
    add_inplace(b->x, b->o, T * hd);
    return RC_OK;
}

/* ---- the forward pass ---- */
static int run(const rc_model *m, const int32_t *ids, int64_t T, double *logits, buf64 *b, const ref64_sink *sink,
               const ref_opts *o)
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
    if (c->ple_dim) {
        int rc = ple_inputs(m, ids, T, b, &p);
        if (rc)
            return rc;
    }

    for (int r = 0; r < c->n_ropes; r++) {
        const rc_rope_desc *rd = &c->ropes[r];
        char n[48];
        rope_inv_freq(b->inv[r], rd);
        rope_table(b->cos[r], b->sin[r], b->inv[r], rd, T);
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
        int rc = d->mixer == RC_MIXER_GDN ? gdn_block(c, d, w, b, T, &p, o->gdn_recurrent)
                                          : attention_block(c, d, w, b, T, &p);
        if (rc)
            return rc;
        if (c->post_norms) {
            rmsnorm(b->o, b->o, w->attn_post_norm, T, hd, c->eps, c->norm);
            PROBE(&p, "attn.post_norm", b->o, 2, T, hd, 0);
        }
        add_inplace(b->x, b->o, T * hd);
        PROBE(&p, "mid", b->x, 2, T, hd, 0);
        rmsnorm(b->a, b->x, w->mlp_norm, T, hd, c->eps, c->norm);
        PROBE(&p, "mlp_norm", b->a, 2, T, hd, 0);
        if ((rc = mlp_block(c, d, w, b, T, &p)))
            return rc;
        if (c->post_norms) {
            rmsnorm(b->o, b->o, w->mlp_post_norm, T, hd, c->eps, c->norm);
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
    rmsnorm(b->a, b->x, m->w.final_norm, T, hd, c->eps, c->norm);
    PROBE(&p, "final_norm", b->a, 2, T, hd, 0);
    if (!logits && !wanted(sink, "logits") && !wanted(sink, "logits_raw"))
        return RC_OK;
    double *lg = logits;
    if (!lg && !(lg = malloc((size_t)(T * V) * sizeof *lg)))
        return RC_E_NOMEM;
    matmul(lg, b->a, m->w.lm_head, NULL, T, V, hd);
    int rc = RC_OK;
    if (c->final_softcap != 0.0f) {
        rc = probe(&p, "logits_raw", lg, 2, T, V, 0);
        for (int64_t i = 0; i < T * V; i++)
            lg[i] = c->final_softcap * tanh(lg[i] / c->final_softcap);
    }
    if (!rc)
        rc = probe(&p, "logits", lg, 2, T, V, 0);
    if (lg != logits)
        free(lg);
    return rc;
}

int ref64_check(const rc_model *m, rc_err *e)
{
    return rc_config_check(&m->cfg, &ref64_caps, e);
}

int ref64_forward_ex(const rc_model *m, const int32_t *ids, int64_t T, double *logits, const ref64_sink *sink,
                     const ref_opts *o, rc_err *e)
{
    static const ref_opts defaults = {0};
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
    rc = run(m, ids, T, logits, &b, sink, o ? o : &defaults);
    buf_free(&b);
    if (rc == RC_E_NOMEM)
        return rc_fail(e, rc, "ref64: out of host memory for logits");
    if (rc && e->code == RC_OK)
        return rc_fail(e, rc, "ref64: probe consumer stopped the forward (%s)", rc_code_name(rc));
    return rc;
}

int ref64_forward(const rc_model *m, const int32_t *ids, int64_t T, double *logits, const ref64_sink *sink,
                  rc_err *e)
{
    return ref64_forward_ex(m, ids, T, logits, sink, NULL, e);
}
