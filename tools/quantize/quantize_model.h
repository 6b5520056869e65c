/* Quantizes a loaded model's attention and MLP projections in place, layer by layer; GPTQ's Hessians come from
 * the ref forward over a calibration token set, each layer's from the activations of the already-quantized
 * layers before it. */
#ifndef RCQ_QUANTIZE_MODEL_H
#define RCQ_QUANTIZE_MODEL_H

#include "gptq.h"
#include "model.h"
#include "quant.h"

typedef struct rcq_opts {
    rc_gq_scheme scheme;
    int gptq;      /* 0: round to nearest (no calibration) */
    rc_gq_opts gq; /* damping, block */
    int progress;  /* "layer i/L" lines on stderr */
    const char *only; /* NULL, or comma-separated substrings: only the policy's matrices whose HF name holds one
                       * of them are quantized, the others stay fp32 (a sensitivity bisection) */
    int lm_head;   /* lm_head quantized too, after the layers (GPTQ's lm_head flag; GPTQ: its Hessian from the final
                    * norm's output through the quantized layers); an untied lm_head only */
} rcq_opts;

typedef struct rcq_linear {
    char name[160]; /* HF weight name, "model.layers.3.mlp.down_proj.weight" */
    int layer;
    rc_gq_tensor q;
} rcq_linear;

typedef struct rcq_model {
    rcq_linear *lin; /* in layer order */
    int n;
    double seconds;
} rcq_model;

/* model/quant's scheme for s (gptq_v2 zeros; lm_head kept unless lm_head). */
rc_quant_scheme rcq_quant_scheme(const rc_gq_scheme *s, int lm_head);

/* Replaces every matrix model/quant's policy quantizes (attention, MLP and gated-delta-net projections, and lm_head
 * with o->lm_head) by its dequantized quantization (the tensors in out); the other tensors (embeddings, lm_head
 * unless asked, norms, biases, the small gate projections) stay fp32. calib[T] is needed for GPTQ only. */
int rcq_quantize(rc_model *m, const rcq_opts *o, const int32_t *calib, int64_t T, rcq_model *out, rc_err *e);
void rcq_model_free(rcq_model *q);

/* A model to quantize from a golden .h5, an HF folder or a GGUF file; *config_json (malloc'd) its HF config
 * text (NULL for GGUF), *ids[*n] a golden's prompt (NULL otherwise). */
typedef struct rcq_source {
    rc_model m;
    char *config_json;
    int32_t *ids;
    int64_t n_ids;
} rcq_source;
int rcq_source_load(rcq_source *s, const char *path, rc_err *e);
void rcq_source_free(rcq_source *s);

/* Token ids from a text file of whitespace-separated integers, each in [0, vocab). */
int rcq_read_ids(const char *path, int64_t vocab, int32_t **ids, int64_t *n, rc_err *e);

#endif
