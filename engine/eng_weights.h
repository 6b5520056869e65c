/* The engine's host weight store: one contiguous blob per layer (what a streamed copy moves) plus the
 * vocab matrices, matrices in bf16 (default) or f32, norms and biases in f32. Filled from an rc_model
 * (fp32 -> bf16 round-to-nearest-even) or synthesized from a config (seeded, multithreaded, no fp32 copy). */
#ifndef ENG_WEIGHTS_H
#define ENG_WEIGHTS_H

#include <stdint.h>
#include <stdio.h>

#include "eng_qfmt.h"
#include "model.h"

#define ENG_ALIGN 256

/* Byte offsets inside a layer blob; -1 = absent. */
typedef struct eng_layer_layout {
    int64_t wqkv;      /* [qd + 2 kd, Hd] rows: q | k | v */
    int64_t wo;        /* [Hd, qd] */
    int64_t wgu;       /* [2 I, Hd] rows: gate | up */
    int64_t wdown;     /* [Hd, I] */
    int64_t attn_norm, mlp_norm;   /* f32 [Hd] */
    int64_t bqkv, bo, bgu, bdown;  /* f32 [qd + 2 kd], [Hd], [2 I], [Hd] */
    int64_t q_norm, k_norm;        /* f32 [D] */
    int64_t wgate, bgate;          /* out_gate: [qd, Hd] (the gate halves of q_proj's per-head rows), f32 [qd] */
    /* gated delta net (RC_MIXER_GDN layers; wqkv, wo, biases, q/k norms are then absent) */
    int64_t gin;                   /* [gnin, Hd] rows: qkv (gch) | z (gvd) | b (Hv) | a (Hv) */
    int64_t gout;                  /* [Hd, gvd] */
    int64_t gconv;                 /* f32 [gch, K] depthwise conv1d */
    int64_t galog, gdt;            /* f32 [Hv] A_log, dt_bias */
    int64_t gnorm;                 /* f32 [dv] gated RMSNorm weight */
    /* gemma4: sandwich norms f32 [Hd], layer scalar f32 [1], per-layer-embedding branch [P, Hd] | [Hd, P] | f32 [Hd] */
    int64_t post_attn_norm, post_mlp_norm, lscalar, ple_gate, ple_proj, ple_norm;
    /* quantized matrices (family != 0) in the packed layout of eng_qfmt.h, the rest in the store's bf16 / f32 */
    eng_qfmt qqkv, qo, qgu, qdown;
    int64_t bytes;
    int qd, kd, nqkv, inter;
    int gnin, gch, gkd, gvd;       /* Hk dk = gkd; C = 2 gkd + gvd = gch; gnin = gch + gvd + 2 Hv */
} eng_layer_layout;

typedef struct eng_weights {
    rc_config cfg;          /* own copy (layers array owned) */
    int f32;                /* matrix storage: 0 bf16, 1 f32 */
    int64_t elt;            /* bytes per matrix element */
    eng_layer_layout *lay;  /* [L] */
    void **layer;           /* [L] host blobs (whole pages; pinned in place by the engine when it streams) */
    void *embed;            /* [V, Hd] */
    void *lm_head;          /* [V, Hd]; == embed when tied; packed (eng_qfmt.h) when qlm.family */
    eng_qfmt qlm;           /* lm_head's format: family 0 = the store's bf16 / f32 (untied only otherwise) */
    int64_t lm_bytes;       /* lm_head's bytes (0 when tied: the embedding's) */
    float *final_norm;      /* [Hd] */
    /* per-layer embeddings (cfg.ple_dim = P > 0, else NULL): the token table stays on the host (one row gathered per
     * token), the model projection and its norm go to the device */
    void *ple_embed;        /* [V_p, L P] matrix storage */
    void *ple_mproj;        /* [L P, Hd] */
    float *ple_pnorm;       /* [P] */
    int64_t ple_mproj_bytes;
    int64_t layer_bytes_total, layer_bytes_max;
    int64_t vocab_bytes;    /* one [V, Hd] matrix */
    int quant;              /* some layer matrix is quantized (packed) */
    int quant_plain;        /* quantized checkpoint matrices the store keeps in bf16 / f32 (eng_weights_print_quant) */
    int64_t plain_layer_bytes; /* the layer blobs with every matrix in bf16 / f32 (the banner's comparison) */
    int64_t dq_max;         /* elements of the largest quantized matrix: the prefill dequant scratch */
} eng_weights;

/* What the engine runs: attention layers (GQA, biases, q/k/v norms of every kind, default / scaled / partial /
 * proportional RoPE, the sigmoid output gate, sliding windows over a ring KV cache: RC_STATE_KV_RING) and gated
 * delta net layers (RC_STATE_RECURRENT), mixed in one stack; the gemma4 extras (sandwich norms, layer scalar,
 * per-layer embeddings, embedding scale, final softcap, GELU-tanh). */
extern const rc_caps engine_caps;

/* Checks the description against what the engine implements (engine_caps, per-layer state kinds,
 * widths that the 8-element vector loads need). */
int eng_config_check(const rc_config *cfg, rc_err *e);

int eng_weights_from_model(eng_weights **out, const rc_model *m, int f32, int threads, rc_err *e);
/* Random weights for benchmarks: matrices uniform with std 0.02, norms 1, biases 0; same seed, same bits
 * whatever the thread count. */
int eng_weights_synth(eng_weights **out, const rc_config *cfg, int f32, uint64_t seed, int threads, rc_err *e);
/* The same with every layer matrix quantized to q (random packed codes, eng_qsynth_rows), and with lm_q an untied
 * lm_head too (the scheme's lm_head flag: RC_E_UNSUPPORTED for a tied one, or a width q's groups do not divide);
 * q NULL: eng_weights_synth. */
int eng_weights_synth_quant(eng_weights **out, const rc_config *cfg, int f32, const eng_qfmt *q, int lm_q,
                            uint64_t seed, int threads, rc_err *e);
/* The memory banner's quantization lines (which matrices are packed in which format, what stays full precision,
 * bytes against bf16 / f32 storage); nothing when no matrix is quantized. */
void eng_weights_print_quant(const eng_weights *w, FILE *f);
void eng_weights_free(eng_weights *w);

uint16_t eng_f32_to_bf16(float f);
float eng_bf16_to_f32(uint16_t h);

#endif
