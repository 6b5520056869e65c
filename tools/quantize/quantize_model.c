/* Layer-by-layer quantization of a model: the linear layers by input, Hessians from ref's probes, in-place
 * dequantized weights so later layers calibrate on the quantized earlier ones. */
#include "quantize_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "forward.h"
#include "gguf.h"
#include "io.h"
#include "quant.h"

/* The linear inputs of a layer and the probe that carries each; IN_HEAD: lm_head's, the final norm's output (the
 * "layer" after the last, its probe named without a layer prefix). */
enum { IN_ATTN, IN_CTX, IN_GDN, IN_MLP, IN_ACT, IN_HEAD, N_IN };
static const char *const in_probe[N_IN] = {"attn_norm", "attn.ctx", "gdn.normed", "mlp_norm", "mlp.act", "final_norm"};

typedef struct lin_ref {
    char name[160];
    int layer, input; /* IN_* */
    float *data;      /* the store's fp32 [rows, cols] */
    int64_t rows, cols;
} lin_ref;

typedef struct find_ctx {
    const rc_model *m;
    const rc_quant_scheme *s; /* model/quant's policy decides which matrices are quantized */
    const char *only;         /* rcq_opts.only */
    lin_ref *out;
    int n, cap;
} find_ctx;

/* 1 when name holds one of the comma-separated substrings of only (or only is NULL). */
static int only_has(const char *only, const char *name)
{
    for (const char *p = only; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        const size_t n = strchr(p, ',') ? (size_t)(strchr(p, ',') - p) : strlen(p);
        for (const char *h = name; n && *h; h++)
            if (!strncmp(h, p, n))
                return 1;
    }
    return !only;
}

static int find_visit(void *user, const char *name, int ndim, const int64_t *shape, const float **slot, int required)
{
    (void)required;
    find_ctx *f = user;
    if (!*slot || ndim != 2)
        return 0;
    for (int l = 0; l < f->m->cfg.n_layers; l++) {
        const rc_layer_weights *w = &f->m->w.layers[l];
        const float *const *slots[] = {&w->q,       &w->k,      &w->v,       &w->o,    &w->gate,
                                       &w->up,      &w->down,   &w->gdn_qkv, &w->gdn_z, &w->gdn_out};
        static const int input[] = {IN_ATTN, IN_ATTN, IN_ATTN, IN_CTX, IN_MLP, IN_MLP, IN_ACT, IN_ATTN, IN_ATTN, IN_GDN};
        for (int i = 0; i < (int)(sizeof input / sizeof input[0]); i++) {
            if ((const float *const *)slot != slots[i] || f->n >= f->cap || !rc_quant_policy_quantizes(name, f->s) ||
                !only_has(f->only, name))
                continue;
            const rc_tensor *t = rc_tensors_find(&f->m->store, name);
            if (!t || t->data != *slot) /* shared or derived: left alone */
                return 0;
            lin_ref *r = &f->out[f->n++];
            *r = (lin_ref){.layer = l, .input = input[i], .data = t->data, .rows = shape[0], .cols = shape[1]};
            snprintf(r->name, sizeof r->name, "%s", name);
        }
    }
    return 0;
}

/* ---- Hessians from ref's probes ---- */
#define STOP 1 /* the sink's code for "layer done, end the forward" */

typedef struct hess_sink {
    int layer, out_gate; /* out_gate: o_proj reads attn.ctx_gated */
    int head;            /* layer is n_layers: lm_head's input (IN_HEAD) only */
    double *H[N_IN];
    int64_t K[N_IN];
    int done;
    rc_err *e;
} hess_sink;

static int probe_input(const hess_sink *h, const char *name)
{
    if (h->head)
        return strcmp(name, in_probe[IN_HEAD]) ? -1 : IN_HEAD;
    char want[64];
    for (int i = 0; i < IN_HEAD; i++) {
        snprintf(want, sizeof want, "L%d.%s", h->layer, i == IN_CTX && h->out_gate ? "attn.ctx_gated" : in_probe[i]);
        if (!strcmp(name, want))
            return i;
    }
    return -1;
}

static int hess_want(void *user, const char *name)
{
    return probe_input(user, name) >= 0;
}

static int hess_emit(void *user, const char *name, const float *data, int ndim, const int64_t *shape)
{
    hess_sink *h = user;
    const int i = probe_input(h, name);
    if (i < 0)
        return 0;
    if (ndim != 2)
        return rc_fail(h->e, RC_E_SHAPE, "quantize: probe %s has rank %d, expected [T, K]", name, ndim);
    const int64_t K = shape[1];
    if (!h->H[i]) {
        h->K[i] = K;
        if (!(h->H[i] = rc_calloc(K * K, sizeof(double), h->e, "a calibration Hessian")))
            return h->e->code;
    } else if (h->K[i] != K)
        return rc_fail(h->e, RC_E_SHAPE, "quantize: probe %s width %lld, then %lld", name, (long long)h->K[i],
                       (long long)K);
    rc_gq_hessian_add(h->H[i], data, shape[0], K);
    if (i == IN_ACT || i == IN_HEAD) { /* the layer's last input */
        h->done = 1;
        return STOP;
    }
    return 0;
}

static int layer_hessians(const rc_model *m, int l, const int32_t *ids, int64_t T, hess_sink *h, rc_err *e)
{
    memset(h, 0, sizeof *h);
    h->layer = l;
    h->head = l == m->cfg.n_layers;
    h->out_gate = h->head ? 0 : m->cfg.layers[l].out_gate;
    h->e = e;
    const rc_probe_sink sink = {.emit = hess_emit, .want = hess_want, .user = h};
    int rc = ref_forward(m, ids, T, NULL, &sink, e);
    if (rc == STOP && h->done) {
        e->code = RC_OK;
        return RC_OK;
    }
    if (!rc && !h->done)
        return rc_fail(e, RC_E_UNSUPPORTED, "quantize: layer %d reported no %s probe", l,
                       in_probe[h->head ? IN_HEAD : IN_ACT]);
    return rc;
}

/* ---- the model ---- */
rc_quant_scheme rcq_quant_scheme(const rc_gq_scheme *s, int lm_head)
{
    return (rc_quant_scheme){.family = s->sym ? RC_QF_SCALE : RC_QF_AFFINE, .bits = s->bits, .group = s->group,
                             .gptq_v1 = 0, .lm_head = lm_head != 0};
}

/* lm_head.weight quantized into *q and dequantized in place; GPTQ calibrates on the final norm's output over calib
 * (the layers already quantized). */
static int quantize_head(rc_model *m, const rcq_opts *o, const int32_t *calib, int64_t T, rcq_linear *q, rc_err *e)
{
    if (m->cfg.tie_embeddings)
        return rc_fail(e, RC_E_UNSUPPORTED, "quantize: --lm-head: this model ties lm_head to the embedding (a row "
                       "gather, kept in full precision); only an untied lm_head is quantized");
    rc_tensor *t = (rc_tensor *)rc_tensors_find(&m->store, "lm_head.weight");
    if (!t || t->data != m->w.lm_head || t->ndim != 2)
        return rc_fail(e, RC_E_UNSUPPORTED, "quantize: --lm-head: no lm_head.weight [vocab, hidden] of its own");
    const int64_t V = t->shape[0], K = t->shape[1];
    snprintf(q->name, sizeof q->name, "lm_head.weight");
    q->layer = m->cfg.n_layers;
    int rc;
    if (o->gptq) { /* the Hessian of the "layer" after the last: the final norm's output */
        hess_sink h;
        rc = layer_hessians(m, m->cfg.n_layers, calib, T, &h, e);
        if (!rc && h.K[IN_HEAD] != K)
            rc = rc_fail(e, RC_E_SHAPE, "quantize: lm_head.weight has %lld inputs but probe %s gave %lld",
                         (long long)K, in_probe[IN_HEAD], (long long)h.K[IN_HEAD]);
        if (!rc)
            rc = rc_gq_gptq(t->data, V, K, h.H[IN_HEAD], &o->scheme, &o->gq, q->name, &q->q, e);
        for (int i = 0; i < N_IN; i++)
            free(h.H[i]);
    } else
        rc = rc_gq_rtn(t->data, V, K, &o->scheme, q->name, &q->q, e);
    if (!rc)
        rc_gq_dequant(&q->q, t->data);
    return rc;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int rcq_quantize(rc_model *m, const rcq_opts *o, const int32_t *calib, int64_t T, rcq_model *out, rc_err *e)
{
    memset(out, 0, sizeof *out);
    const int L = m->cfg.n_layers;
    const rc_quant_scheme qs = rcq_quant_scheme(&o->scheme, 0); /* the layers' matrices; lm_head after them */
    find_ctx f = {.m = m, .s = &qs, .only = o->only, .cap = 10 * L};
    f.out = rc_calloc(f.cap, sizeof *f.out, e, "the linear layers");
    out->lin = f.out ? rc_calloc(f.cap + 1, sizeof *out->lin, e, "the quantized layers") : NULL;
    if (!out->lin) {
        free(f.out);
        return e->code;
    }
    rc_weights_visit(&m->cfg, &m->w, find_visit, &f);
    if (o->only && f.n == 0) {
        free(f.out);
        return rc_fail(e, RC_E_USAGE, "quantize: '%s' names no matrix the policy quantizes", o->only);
    }
    if (o->gptq && (!calib || T < 1)) {
        free(f.out);
        return rc_fail(e, RC_E_USAGE, "quantize: GPTQ needs calibration tokens");
    }
    const double t0 = now();
    int rc = RC_OK;
    for (int l = 0; l < L && !rc; l++) {
        const double tl = now();
        hess_sink h = {0};
        if (o->gptq)
            rc = layer_hessians(m, l, calib, T, &h, e);
        int nl = 0;
        for (int i = 0; i < f.n && !rc; i++) {
            const lin_ref *r = &f.out[i];
            if (r->layer != l)
                continue;
            rcq_linear *q = &out->lin[out->n];
            snprintf(q->name, sizeof q->name, "%s", r->name);
            q->layer = l;
            if (o->gptq) {
                if (!h.H[r->input] || h.K[r->input] != r->cols) {
                    rc = rc_fail(e, RC_E_SHAPE, "quantize: %s has %lld inputs but probe L%d.%s gave %lld", r->name,
                                 (long long)r->cols, l, in_probe[r->input], (long long)h.K[r->input]);
                    break;
                }
                rc = rc_gq_gptq(r->data, r->rows, r->cols, h.H[r->input], &o->scheme, &o->gq, r->name, &q->q, e);
            } else
                rc = rc_gq_rtn(r->data, r->rows, r->cols, &o->scheme, r->name, &q->q, e);
            if (rc)
                break;
            out->n++;
            nl++;
            rc_gq_dequant(&q->q, r->data); /* later layers see this layer quantized */
        }
        for (int i = 0; i < N_IN; i++)
            free(h.H[i]);
        if (!rc && o->progress)
            fprintf(stderr, "quantize: layer %d/%d: %d matrices, %.2f s (%.1f s total)\n", l + 1, L, nl,
                    now() - tl, now() - t0);
    }
    free(f.out);
    if (!rc && o->lm_head) {
        const double th = now();
        if (!(rc = quantize_head(m, o, calib, T, &out->lin[out->n], e)))
            out->n++;
        if (!rc && o->progress)
            fprintf(stderr, "quantize: lm_head: %.2f s (%.1f s total)\n", now() - th, now() - t0);
    }
    out->seconds = now() - t0;
    if (rc)
        rcq_model_free(out);
    return rc;
}

void rcq_model_free(rcq_model *q)
{
    for (int i = 0; i < q->n; i++)
        rc_gq_free(&q->lin[i].q);
    free(q->lin);
    memset(q, 0, sizeof *q);
}

int rcq_read_ids(const char *path, int64_t vocab, int32_t **ids, int64_t *n, rc_err *e)
{
    *ids = NULL;
    *n = 0;
    char *text = rc_read_text(path, "calibration ids", 0, e);
    if (!text)
        return e->code;
    int64_t cap = 0;
    int rc = RC_OK;
    for (char *p = text;;) {
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        const long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v >= vocab) {
            rc = rc_fail(e, RC_E_FORMAT, "%s: token %lld is not an id in [0, %lld)", path, (long long)*n + 1,
                         (long long)vocab);
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            int32_t *grown = realloc(*ids, (size_t)cap * sizeof **ids);
            if (!grown) {
                rc = rc_fail(e, RC_E_NOMEM, "%s: out of memory for the ids", path);
                break;
            }
            *ids = grown;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
    if (!rc && !*n)
        rc = rc_fail(e, RC_E_FORMAT, "%s: no token ids", path);
    free(text);
    if (rc) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}

int rcq_source_load(rcq_source *s, const char *path, rc_err *e)
{
    memset(s, 0, sizeof *s);
    struct stat st;
    if (stat(path, &st) != 0)
        return rc_fail(e, RC_E_IO, "%s: no such file or folder", path);
    int rc;
    if (S_ISDIR(st.st_mode)) {
        char cfg[4200];
        snprintf(cfg, sizeof cfg, "%s/config.json", path);
        if (!(s->config_json = rc_read_text(cfg, "config", 0, e)))
            return e->code;
        rc = rc_model_load_dir(&s->m, path, e);
    } else if (rc_gguf_is_gguf(path))
        rc = rc_model_load_gguf(&s->m, path, e);
    else {
        rc_golden g;
        if ((rc = rc_golden_load(path, RC_GOLDEN_WEIGHTS, &g, e)))
            return rc;
        s->config_json = strdup(g.config_json ? g.config_json : "{}");
        s->ids = g.n_ids > 0 ? malloc((size_t)g.n_ids * sizeof *s->ids) : NULL;
        if (!s->config_json || (g.n_ids > 0 && !s->ids))
            rc = rc_fail(e, RC_E_NOMEM, "%s: out of memory", path);
        else {
            if (g.n_ids > 0)
                memcpy(s->ids, g.ids, (size_t)g.n_ids * sizeof *s->ids);
            s->n_ids = g.n_ids;
            rc = rc_model_from_golden(&s->m, &g, e);
        }
        rc_golden_free(&g);
        if (rc) {
            free(s->config_json);
            free(s->ids);
            memset(s, 0, sizeof *s);
            return rc;
        }
        return RC_OK;
    }
    if (rc) {
        free(s->config_json);
        memset(s, 0, sizeof *s);
    }
    return rc;
}

void rcq_source_free(rcq_source *s)
{
    rc_model_free(&s->m);
    free(s->config_json);
    free(s->ids);
    memset(s, 0, sizeof *s);
}
