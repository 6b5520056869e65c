/* Quantized weights: the two families every stage reads, one dequant rule each, the per-tensor policy, and
 * the HF GPTQ checkpoint layout (reader and writer). Format and rules: docs/quantization.md. */
#ifndef RC_QUANT_H
#define RC_QUANT_H

#include <stdint.h>
#include <stdio.h>

#include "tensor.h"

/* The dequant rules, each operation rounded to fp32 on its own (never fused into an fma):
 *   RC_QF_SCALE:  w = s * q                   q signed   (W8A16; GPTQ sym; GGUF Q8_0, Q4_0 with q = nibble - 8)
 *   RC_QF_AFFINE: w = (s * q) + m             q unsigned (W4A16; GPTQ asym with m = -(s * z); GGUF Q4_1)
 * The affine rule is GGUF Q4_1's (ggml and the gguf package compute d*q, then + m); an integer zero z maps
 * onto it as m = -(s * z), so q == z gives exactly 0. */
typedef enum rc_qfamily { RC_QF_NONE = 0, RC_QF_SCALE, RC_QF_AFFINE } rc_qfamily;

static inline float rc_qf_scale(float s, int q)
{
    return s * (float)q;
}

static inline float rc_qf_affine(float s, int q, float m)
{
    const float sq = s * (float)q; /* rounded here: a separate statement is never contracted into an fma */
    return sq + m;
}

/* The offset an integer zero z stands for: m = -(s * z). */
static inline float rc_qf_offset(float s, int z)
{
    const float sz = s * (float)z;
    return -sz;
}

/* One quantized matrix W [n, k] (out, in) by the HF name of the fp32 weight it stands for. Groups run along k:
 * group j of row r covers columns [j*group, (j+1)*group); group == k is one scale per row. */
typedef struct rc_qtensor {
    char *name;           /* "model.layers.0.mlp.up_proj.weight" */
    rc_qfamily family;
    int bits;             /* 4 or 8 */
    int64_t n, k, group;
    int8_t *q;            /* [n, k] codes, one per byte: scale family signed, affine 0 .. 2^bits - 1 */
    float *scale;         /* [n, k/group] */
    float *offset;        /* affine: [n, k/group] m; NULL for the scale family */
    int16_t *zero;        /* affine with an integer zero (GPTQ): [n, k/group] z, offset = rc_qf_offset(s, z);
                           * NULL when the offsets are not integer zeros (GGUF Q4_1) */
} rc_qtensor;

/* Allocates q, scale (and offset, zero when zero is set, affine only) for the shape; checks bits, group and
 * family. Codes start at 0, scales at 0. */
int rc_qtensor_alloc(rc_qtensor *t, const char *name, rc_qfamily family, int bits, int64_t n, int64_t k,
                     int64_t group, int with_zero, rc_err *e);
void rc_qtensor_free(rc_qtensor *t);
/* offset = rc_qf_offset(scale, zero) for every group (after the zeros and scales are set). */
void rc_qtensor_set_offsets(rc_qtensor *t);
/* Every code within its family's range for bits, every zero in [0, 2^bits] (GPTQ v1 can store 2^bits), every
 * scale and offset finite: RC_E_FORMAT naming the tensor and the first bad element otherwise. */
int rc_qtensor_check(const rc_qtensor *t, rc_err *e);
/* out[n*k] = the family's rule, exactly, in fp32. */
void rc_qtensor_dequant(const rc_qtensor *t, float *out);
/* The same rule over one group of codes (the GGUF blocks use it). */
void rc_qf_dequant_group(rc_qfamily family, float s, float m, const int8_t *q, int64_t n, float *out);

/* A quantization scheme: what the writer produces and what a checkpoint's quantization_config says. */
typedef struct rc_quant_scheme {
    rc_qfamily family;    /* RC_QF_SCALE: symmetric (GPTQ sym true); RC_QF_AFFINE: asymmetric */
    int bits;             /* 4 or 8 (8 only symmetric) */
    int64_t group;        /* group size along k; 0 = one group per row (GPTQ group_size -1) */
    int gptq_v1;          /* GPTQ zeros as AutoGPTQ v1 stores them (z - 1, checkpoint_format "gptq"); 0: gptq_v2 */
    int lm_head;          /* lm_head quantized too (GPTQ's lm_head flag) */
} rc_quant_scheme;

/* The named schemes: "int8" (W8A16, per row, symmetric), "int4-g32" / "int4-g64" / "int4-g128" (W4A16,
 * asymmetric), with "-sym" for symmetric int4 ("int4-g128-sym"), and "+lm_head" after any of them for lm_head
 * quantized in the same format (the lm_head flag: "int4-g128+lm_head"). RC_E_USAGE naming the known ones otherwise. */
int rc_quant_scheme_parse(const char *name, rc_quant_scheme *s, rc_err *e);
/* "int4-g128 (asymmetric, gptq_v2)" into buf. */
const char *rc_quant_scheme_str(const rc_quant_scheme *s, char *buf, int cap);

/* ---- per-tensor policy: which tensors are quantized (model/quant.c's table, docs/quantization.md) ---- */
typedef enum rc_qpolicy {
    RC_QP_QUANT = 1, /* a large matmul weight: quantized by the writer */
    RC_QP_KEEP,      /* kept in full precision by the writer; a checkpoint may still carry it quantized */
    RC_QP_LM_HEAD,   /* quantized only when the scheme's lm_head flag is set */
    RC_QP_FULL,      /* never quantized (norms, biases, gates' small tensors): a quantized one is refused */
} rc_qpolicy;

/* The class of the weight named name (an HF name) and, in *why, the table's reason. */
rc_qpolicy rc_quant_policy(const char *name, const char **why);
/* 1 when the writer quantizes name under scheme s. */
int rc_quant_policy_quantizes(const char *name, const rc_quant_scheme *s);
/* The table, one line a row, for banners and docs. */
void rc_quant_policy_print(FILE *f);

/* ---- quantized tensors of a loaded model ---- */
typedef struct rc_quant {
    int on;               /* the weights came from a quantized checkpoint */
    rc_quant_scheme scheme;
    rc_qtensor *t;        /* every quantized matrix, in checkpoint order */
    int n;
} rc_quant;

void rc_quant_free(rc_quant *q);
const rc_qtensor *rc_quant_find(const rc_quant *q, const char *name);

#endif
