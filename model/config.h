/* The one model description: an HF config parsed into per-layer data every stage builds from,
 * and the capability gate that refuses math a stage does not implement. */
#ifndef RC_CONFIG_H
#define RC_CONFIG_H

#include <stdint.h>

#include "err.h"

typedef enum {
    RC_NORM_W,     /* x * rsqrt(ms + eps) * w            (llama, qwen3) */
    RC_NORM_1PW,   /* x * rsqrt(ms + eps) * (1 + w)      (qwen3_5 block norms, gemma3) */
    RC_NORM_POW_W, /* x * pow(ms + eps, -0.5) * w        (gemma4) */
    RC_NORM_POW,   /* x * pow(ms + eps, -0.5), no weight (gemma4 v_norm) */
} rc_norm_kind;

typedef enum { RC_ACT_SILU, RC_ACT_GELU_TANH } rc_act;

/* What mixes tokens in a layer, and what state an incremental stage keeps for it. */
typedef enum { RC_MIXER_ATTN, RC_MIXER_GDN } rc_mixer_kind;
typedef enum { RC_STATE_KV, RC_STATE_KV_RING, RC_STATE_RECURRENT } rc_state_kind;

typedef enum { RC_ROPE_DEFAULT, RC_ROPE_PROPORTIONAL } rc_rope_type;

#define RC_MAX_ROPES 2

typedef struct rc_rope_desc {
    char kind[16];      /* probe scope: "all", "full", "sliding" */
    rc_rope_type type;
    double theta;
    double factor;      /* proportional: inv_freq /= factor */
    int head_dim;       /* D of the heads it rotates */
    int rot_dim;        /* R: width of the cos/sin rows; rotated pairs are (i, i + R/2) */
    int n_freq;         /* non-zero inverse frequencies, <= R/2 */
    int exp_den;        /* exponent denominator: inv_freq[i] = theta^-(2i/exp_den) */
} rc_rope_desc;

typedef struct rc_layer_desc {
    rc_mixer_kind mixer;
    rc_state_kind state;
    /* attention */
    int n_heads, n_kv_heads, head_dim;
    int window;        /* sliding window W (keys j in [i-W+1, i]); 0 = full causal */
    int rope;          /* index into rc_config.ropes */
    float attn_scale;
    int q_norm, k_norm; /* per-head RMSNorm before RoPE (weights present) */
    int out_gate;      /* sigmoid gate from a second half of q_proj (qwen3_5) */
    /* gated delta net (qwen3_5 linear layers) */
    int gdn_k_heads, gdn_v_heads, gdn_k_dim, gdn_v_dim, gdn_conv_kernel;
    /* MLP */
    int intermediate;
} rc_layer_desc;

typedef struct rc_config {
    char model_type[32];
    int64_t vocab, hidden;
    int n_layers;
    float eps;
    rc_norm_kind norm;        /* block norms: input, pre-MLP, final */
    rc_norm_kind qk_norm;     /* per-head q/k norms */
    rc_act act;
    int attn_bias, mlp_bias, tie_embeddings;
    float emb_scale;          /* multiply the gathered embedding (0 = none) */
    float final_softcap;      /* logits = c * tanh(logits / c) (0 = none) */
    int n_ropes;
    rc_rope_desc ropes[RC_MAX_ROPES];
    rc_layer_desc *layers;    /* [n_layers] */
    /* derived maxima, for buffer sizing */
    int max_heads, max_kv_heads, max_head_dim, max_intermediate;
} rc_config;

/* Parses an HF config.json text (model/ owns every model_type special case). Refuses any field
 * whose math we do not implement, naming it and its value. */
int rc_config_parse(const char *json, rc_config *cfg, rc_err *e);
int rc_config_load_file(const char *path, rc_config *cfg, rc_err *e);
void rc_config_free(rc_config *cfg);

/* What a stage can run; checked at load time so a kernel never meets a shape it cannot do. */
typedef struct rc_caps {
    const char *stage;
    int max_head_dim;        /* 0 = any */
    int head_dim_multiple;   /* head_dim % this == 0 (0/1 = any) */
    unsigned mixers;         /* bit (1u << rc_mixer_kind) per supported mixer */
    int sliding_window;      /* supports window > 0 */
} rc_caps;

int rc_config_check(const rc_config *cfg, const rc_caps *caps, rc_err *e);

/* Counts (overflow-safe): number of parameters the description implies. */
int rc_config_param_count(const rc_config *cfg, int64_t *out);

#endif
