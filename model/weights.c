/* Name -> slot binding of HF tensors, driven by the model description. */
#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define V(name, slot, req, ...)                                                                                     \
    do {                                                                                                            \
        const int64_t shp_[] = {__VA_ARGS__};                                                                       \
        int rc_ = fn(user, (name), (int)(sizeof shp_ / sizeof shp_[0]), shp_, (slot), (req));                       \
        if (rc_)                                                                                                    \
            return rc_;                                                                                             \
    } while (0)

int rc_weights_visit(const rc_config *c, rc_weights *w, rc_weight_visit_fn fn, void *user)
{
    const int64_t Hd = c->hidden, Vv = c->vocab, Pd = c->ple_dim, LP = (int64_t)c->n_layers * c->ple_dim;
    const char *pre = c->weight_prefix[0] ? c->weight_prefix : "model.";
    char n[192];
#define G(suffix) (snprintf(n, sizeof n, "%s%s", pre, suffix), n)
    V(G("embed_tokens.weight"), &w->embed, 1, Vv, Hd);
    if (Pd) {
        V(G("embed_tokens_per_layer.weight"), &w->ple_embed, 1, c->ple_vocab, LP);
        V(G("per_layer_model_projection.weight"), &w->ple_model_proj, 1, LP, Hd);
        V(G("per_layer_projection_norm.weight"), &w->ple_proj_norm, 1, Pd);
    }
    for (int i = 0; i < c->n_layers; i++) {
        const rc_layer_desc *d = &c->layers[i];
        rc_layer_weights *l = &w->layers[i];
        const int64_t qd = (int64_t)d->n_heads * d->head_dim, kd = (int64_t)d->n_kv_heads * d->head_dim;
        const int64_t I = d->intermediate;
#define P(suffix) (snprintf(n, sizeof n, "%slayers.%d.%s", pre, i, suffix), n)
        V(P("input_layernorm.weight"), &l->attn_norm, 1, Hd);
        if (d->mixer == RC_MIXER_GDN) {
            const int64_t Hv = d->gdn_v_heads, Vd = Hv * d->gdn_v_dim;
            const int64_t C = 2 * (int64_t)d->gdn_k_heads * d->gdn_k_dim + Vd;
            V(P("linear_attn.in_proj_qkv.weight"), &l->gdn_qkv, 1, C, Hd);
            V(P("linear_attn.in_proj_z.weight"), &l->gdn_z, 1, Vd, Hd);
            V(P("linear_attn.in_proj_b.weight"), &l->gdn_b, 1, Hv, Hd);
            V(P("linear_attn.in_proj_a.weight"), &l->gdn_a, 1, Hv, Hd);
            V(P("linear_attn.conv1d.weight"), &l->gdn_conv, 1, C, 1, d->gdn_conv_kernel);
            V(P("linear_attn.dt_bias"), &l->gdn_dt_bias, 1, Hv);
            V(P("linear_attn.A_log"), &l->gdn_A_log, 1, Hv);
            V(P("linear_attn.norm.weight"), &l->gdn_norm, 1, d->gdn_v_dim);
            V(P("linear_attn.out_proj.weight"), &l->gdn_out, 1, Hd, Vd);
        }
        if (d->mixer == RC_MIXER_ATTN) {
            V(P("self_attn.q_proj.weight"), &l->q, 1, qd * (d->out_gate ? 2 : 1), Hd);
            V(P("self_attn.k_proj.weight"), &l->k, 1, kd, Hd);
            V(P("self_attn.v_proj.weight"), &l->v, 1, kd, Hd);
            V(P("self_attn.o_proj.weight"), &l->o, 1, Hd, qd);
            if (c->attn_bias) {
                V(P("self_attn.q_proj.bias"), &l->q_b, 1, qd * (d->out_gate ? 2 : 1));
                V(P("self_attn.k_proj.bias"), &l->k_b, 1, kd);
                V(P("self_attn.v_proj.bias"), &l->v_b, 1, kd);
                V(P("self_attn.o_proj.bias"), &l->o_b, 1, Hd);
            }
            if (d->q_norm)
                V(P("self_attn.q_norm.weight"), &l->q_norm, 1, d->head_dim);
            if (d->k_norm)
                V(P("self_attn.k_norm.weight"), &l->k_norm, 1, d->head_dim);
        }
        if (c->post_norms) { /* gemma naming: post_attention_layernorm norms the attention output */
            V(P("post_attention_layernorm.weight"), &l->attn_post_norm, 1, Hd);
            V(P("pre_feedforward_layernorm.weight"), &l->mlp_norm, 1, Hd);
            V(P("post_feedforward_layernorm.weight"), &l->mlp_post_norm, 1, Hd);
        } else
            V(P("post_attention_layernorm.weight"), &l->mlp_norm, 1, Hd);
        V(P("mlp.gate_proj.weight"), &l->gate, 1, I, Hd);
        V(P("mlp.up_proj.weight"), &l->up, 1, I, Hd);
        V(P("mlp.down_proj.weight"), &l->down, 1, Hd, I);
        if (c->mlp_bias) {
            V(P("mlp.gate_proj.bias"), &l->gate_b, 1, I);
            V(P("mlp.up_proj.bias"), &l->up_b, 1, I);
            V(P("mlp.down_proj.bias"), &l->down_b, 1, Hd);
        }
        if (Pd) {
            V(P("per_layer_input_gate.weight"), &l->ple_gate, 1, Pd, Hd);
            V(P("per_layer_projection.weight"), &l->ple_proj, 1, Hd, Pd);
            V(P("post_per_layer_input_norm.weight"), &l->ple_norm, 1, Hd);
        }
        if (c->layer_scalar)
            V(P("layer_scalar"), &l->layer_scalar, 1, 1);
#undef P
    }
    V(G("norm.weight"), &w->final_norm, 1, Hd);
#undef G
    if (!c->tie_embeddings)
        V("lm_head.weight", &w->lm_head, 1, Vv, Hd);
    return RC_OK;
}
#undef V

typedef struct bind_ctx {
    const rc_tensors *store;
    unsigned char *used;
    rc_err *e;
} bind_ctx;

static int bind_one(void *user, const char *name, int ndim, const int64_t *shape, const float **slot, int required)
{
    bind_ctx *b = user;
    const rc_tensor *t = rc_tensors_find(b->store, name);
    if (!t) {
        if (!required)
            return RC_OK;
        char qn[256];
        const size_t len = strlen(name);
        if (len > 7 && len < 200 && !strcmp(name + len - 7, ".weight")) {
            snprintf(qn, sizeof qn, "%.*s.qweight", (int)(len - 7), name);
            if (rc_tensors_find(b->store, qn))
                return rc_fail(b->e, RC_E_MISSING, "weights: tensor '%s' is missing; the checkpoint has '%s' (a GPTQ "
                               "checkpoint without its quantization_config?)", name, qn);
        }
        return rc_fail(b->e, RC_E_MISSING, "weights: tensor '%s' is missing", name);
    }
    if (t->is_i32)
        return rc_fail(b->e, RC_E_FORMAT, "weights: tensor '%s' holds int32 values, not weights (a GPTQ checkpoint "
                       "without its quantization_config?)", name);
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == shape[i];
    if (!ok) {
        char want[64], got[64];
        return rc_fail(b->e, RC_E_SHAPE, "weights: tensor '%s' has shape %s, the config implies %s", name,
                       rc_shape_str(t->ndim, t->shape, got, sizeof got), rc_shape_str(ndim, shape, want, sizeof want));
    }
    b->used[t - b->store->t] = 1;
    *slot = t->data;
    return RC_OK;
}

int rc_weights_bind(const rc_config *cfg, const rc_tensors *store, rc_weights *w, rc_err *e)
{
    memset(w, 0, sizeof *w);
    w->layers = rc_calloc(cfg->n_layers, sizeof *w->layers, e, "layer weights");
    unsigned char *used = rc_calloc(store->n ? store->n : 1, 1, e, "weights");
    if (!w->layers || !used) {
        free(used);
        rc_weights_free(w);
        return e->code;
    }
    bind_ctx b = {.store = store, .used = used, .e = e};
    int rc = rc_weights_visit(cfg, w, bind_one, &b);
    if (!rc && cfg->tie_embeddings) {
        const rc_tensor *lm = rc_tensors_find(store, "lm_head.weight");
        if (lm) { /* a tied checkpoint may still carry the shared matrix; it must be the same */
            char en[64];
            snprintf(en, sizeof en, "%sembed_tokens.weight", cfg->weight_prefix[0] ? cfg->weight_prefix : "model.");
            const rc_tensor *em = rc_tensors_find(store, en);
            if (lm->numel != em->numel || memcmp(lm->data, em->data, (size_t)em->numel * sizeof(float)) != 0)
                rc = rc_fail(e, RC_E_MISSING,
                             "weights: tie_word_embeddings is true but 'lm_head.weight' differs from the embedding");
            used[lm - store->t] = 1;
        }
        w->lm_head = w->embed;
    }
    for (int i = 0; !rc && i < store->n; i++)
        for (int k = 0; k < RC_N_WEIGHT_SKIP && cfg->weight_skip[k] && !used[i]; k++) /* what HF ignores on load */
            used[i] = strncmp(store->t[i].name, cfg->weight_skip[k], strlen(cfg->weight_skip[k])) == 0;
    for (int i = 0; !rc && i < store->n; i++)
        if (!used[i])
            rc = rc_fail(e, RC_E_MISSING, "weights: unexpected tensor '%s' (the config does not use it)",
                         store->t[i].name);
    free(used);
    if (rc)
        rc_weights_free(w);
    return rc;
}

void rc_weights_free(rc_weights *w)
{
    free(w->layers);
    memset(w, 0, sizeof *w);
}
