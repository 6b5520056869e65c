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

/* How inv_freq is formed (model/rope.c has each formula): default theta^-(2i/E); proportional and linear divide
 * it by factor; llama3 divides the low frequencies by factor and blends the middle band; yarn blends
 * interpolated and extrapolated frequencies over a ramp and scales cos/sin by attn_factor. */
typedef enum { RC_ROPE_DEFAULT, RC_ROPE_PROPORTIONAL, RC_ROPE_LINEAR, RC_ROPE_LLAMA3, RC_ROPE_YARN } rc_rope_type;

#define RC_MAX_ROPES 2

typedef struct rc_rope_desc {
    char kind[16];      /* probe scope: "all", "full", "sliding" */
    rc_rope_type type;
    double theta;
    double factor;      /* proportional, linear: inv_freq /= factor; llama3, yarn: the context extension factor */
    double low_freq_factor, high_freq_factor; /* llama3 */
    double beta_fast, beta_slow;              /* yarn: ramp bounds in rotations */
    int truncate;                             /* yarn: floor/ceil the ramp bounds */
    double original_max_pos;                  /* llama3, yarn: original_max_position_embeddings */
    double attn_factor;                       /* yarn: cos/sin multiplier (1 for every other type) */
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
    int v_norm;        /* per-head weightless RMSNorm of V (kind rc_config.v_norm) */
    int out_gate;      /* sigmoid gate from a second half of q_proj, per head [query | gate] */
    /* gated delta net (linear-attention layers): Hk q/k heads of dk, Hv v heads of dv, conv kernel K */
    int gdn_k_heads, gdn_v_heads, gdn_k_dim, gdn_v_dim, gdn_conv_kernel;
    /* MLP */
    int intermediate;
} rc_layer_desc;

#define RC_N_WEIGHT_SKIP 6

typedef struct rc_config {
    char model_type[32];
    int64_t vocab, hidden;
    int n_layers;
    float eps;
    rc_norm_kind norm;        /* block norms: input, pre-MLP, final */
    rc_norm_kind qk_norm;     /* per-head q/k norms */
    rc_act act;
    int attn_bias, mlp_bias, tie_embeddings;
    rc_norm_kind v_norm;      /* per-head V norm of layers with v_norm */
    float emb_scale;          /* multiply the gathered embedding (0 = none) */
    float final_softcap;      /* logits = c * tanh(logits / c) (0 = none) */
    int post_norms;           /* sandwich: norm the attention and MLP outputs before each residual add */
    int layer_scalar;         /* a per-layer [1] scalar multiplies the layer output (residual included) */
    /* per-layer embeddings (PLE, 0 = none): a [ple_vocab, n_layers * ple_dim] table plus a projection of
     * the scaled embedding feed a gated branch at the end of every layer */
    int ple_dim;
    int64_t ple_vocab;
    char weight_prefix[32];   /* HF name prefix of the decoder: "model." or "model.language_model." */
    const char *weight_skip[RC_N_WEIGHT_SKIP]; /* name prefixes HF ignores on load (NULL-terminated) */
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
    unsigned features;       /* RC_FEAT_* bits it implements beyond the llama/qwen3 core (0 = none) */
} rc_caps;

/* Math beyond the llama/qwen3 core, one row per feature: X(ID, "name"). A stage runs a model only if its caps list
 * every bit the model uses; the bits, RC_FEAT_ALL and rc_feature_name all come from this one table. */
#define RC_FEATURES(X)                                                                            \
    X(NORM_1PW, "(1 + w) RMSNorm")                                                                \
    X(NORM_POW, "pow(ms + eps, -0.5) RMSNorm")         /* with and without weight */              \
    X(PARTIAL_ROPE, "partial / proportional RoPE")     /* rot_dim < head_dim, zero tails, factor */ \
    X(OUT_GATE, "attention output gate")               /* sigmoid gate of attention */            \
    X(V_NORM, "V norm")                                                                           \
    X(POST_NORMS, "post-attention / post-MLP norms")   /* sandwich norms */                       \
    X(EMB_SCALE, "embedding scale")                                                               \
    X(SOFTCAP, "final logit softcapping")                                                         \
    X(PLE, "per-layer embeddings")                                                                \
    X(LAYER_SCALAR, "layer_scalar")                                                               \
    X(GELU_TANH, "gelu_pytorch_tanh activation")                                                  \
    X(MIXED_LAYERS, "layers of different shapes or mixers") /* head_dim / kv heads / mixer */     \
    X(ROPE_SCALING, "RoPE scaling (linear, llama3, yarn)")

enum {
#define RC_FEAT_INDEX(id, name) RC_FEAT_INDEX_##id,
    RC_FEATURES(RC_FEAT_INDEX)
#undef RC_FEAT_INDEX
    RC_FEAT_COUNT
};
enum {
#define RC_FEAT_BIT(id, name) RC_FEAT_##id = 1u << RC_FEAT_INDEX_##id,
    RC_FEATURES(RC_FEAT_BIT)
#undef RC_FEAT_BIT
};
#define RC_FEAT_ALL ((1u << RC_FEAT_COUNT) - 1)
/* The RC_FEAT_* bits a description uses; name of one bit. */
unsigned rc_config_features(const rc_config *cfg);
const char *rc_feature_name(unsigned bit);

/* The model_types rc_config_parse implements, comma-separated (from its one table). */
const char *rc_config_model_types(void);

int rc_config_check(const rc_config *cfg, const rc_caps *caps, rc_err *e);

/* Counts (overflow-safe): number of parameters the description implies. */
int rc_config_param_count(const rc_config *cfg, int64_t *out);

#endif
