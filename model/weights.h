/* Weights bound by HF name onto the model description, with shape checks. */
#ifndef RC_WEIGHTS_H
#define RC_WEIGHTS_H

#include "config.h"
#include "tensor.h"

typedef struct rc_layer_weights {
    const float *attn_norm;              /* [Hd] */
    const float *q, *k, *v, *o;          /* [H*D (x2 with out_gate), Hd], [Hkv*D, Hd], [Hkv*D, Hd], [Hd, H*D] */
    const float *q_b, *k_b, *v_b, *o_b;  /* optional biases */
    const float *q_norm, *k_norm;        /* [D] */
    const float *mlp_norm;               /* [Hd] */
    const float *gate, *up, *down;       /* [I, Hd], [I, Hd], [Hd, I] */
    const float *gate_b, *up_b, *down_b; /* optional biases */
    const float *attn_post_norm, *mlp_post_norm; /* [Hd] (post_norms) */
    /* gated delta net: C = 2*Hk*dk + Hv*dv conv channels, Vd = Hv*dv */
    const float *gdn_qkv, *gdn_z;        /* [C, Hd], [Vd, Hd] */
    const float *gdn_b, *gdn_a;          /* [Hv, Hd] */
    const float *gdn_conv;               /* [C, 1, K] depthwise */
    const float *gdn_dt_bias, *gdn_A_log;/* [Hv] */
    const float *gdn_norm;               /* [dv] gated RMSNorm weight */
    const float *gdn_out;                /* [Hd, Vd] */
    /* per-layer embedding branch */
    const float *ple_gate, *ple_proj;    /* [P, Hd], [Hd, P] */
    const float *ple_norm;               /* [Hd] */
    const float *layer_scalar;           /* [1] */
} rc_layer_weights;

typedef struct rc_weights {
    const float *embed;      /* [V, Hd] */
    const float *final_norm; /* [Hd] */
    const float *lm_head;    /* [V, Hd]; == embed when tied */
    const float *ple_embed;      /* [V_p, L*P] per-layer token table */
    const float *ple_model_proj; /* [L*P, Hd] */
    const float *ple_proj_norm;  /* [P] */
    rc_layer_weights *layers;
} rc_weights;

/* Binds every tensor the description needs; refuses missing, mis-shaped and unexpected tensors. */
int rc_weights_bind(const rc_config *cfg, const rc_tensors *store, rc_weights *w, rc_err *e);
void rc_weights_free(rc_weights *w);

/* Calls fn for every tensor the description expects (name, rank, shape). Used to bind and to size
 * streamed copies in later stages. */
typedef int (*rc_weight_visit_fn)(void *user, const char *name, int ndim, const int64_t *shape, const float **slot,
                                  int required);
int rc_weights_visit(const rc_config *cfg, rc_weights *w, rc_weight_visit_fn fn, void *user);

#endif
