/* Weight quantization of one linear layer: round-to-nearest and GPTQ (Frantar et al.) with GSL Cholesky. */
#ifndef RC_GPTQ_H
#define RC_GPTQ_H

#include <stdint.h>

#include "err.h"

/* What a quantized matrix holds: bits-wide unsigned codes, one (scale, zero) per group of input columns. */
typedef struct rc_gq_scheme {
    int bits;  /* 8 or 4 */
    int group; /* input columns per (scale, zero); 0 = one group per row */
    int sym;   /* 1: zero fixed at 2^(bits-1); 0: zero from the group's min and max */
} rc_gq_scheme;

/* A quantized W [rows, cols] (rows = outputs): w[r][c] = scale[r][g] * (q[r][c] - zero[r][g]), g = c / group.
 * The minimal form the quantize command turns into the GPTQ checkpoint layout (model/quant.h's writer). */
typedef struct rc_gq_tensor {
    int64_t rows, cols;
    int bits, group, sym; /* group: cols when one group per row */
    int64_t n_groups;     /* cols / group */
    uint8_t *q;           /* [rows, cols] codes in [0, 2^bits - 1] */
    float *scale;         /* [rows, n_groups], each exactly representable in fp16 */
    uint8_t *zero;        /* [rows, n_groups] integer zero points in [0, 2^bits - 1] */
} rc_gq_tensor;

/* "int8" (8 bits, one group per row, symmetric), "int4-g128", "int4-g64", "int4-g32" (4 bits, asymmetric
 * unless sym). Refuses any other name. */
int rc_gq_scheme_parse(const char *name, int sym, rc_gq_scheme *s, rc_err *e);
/* "int8-row-sym", "int4-g128-asym", ... */
const char *rc_gq_scheme_str(const rc_gq_scheme *s, char *buf, int cap);

/* Round-to-nearest. int8: scale = max|w| / 127 per row; int4 asymmetric: scale = (max - min) / 15 over the
 * group (the range widened to hold 0), zero = round(-min / scale); int4 symmetric: scale = max|w| / 7.5, zero 8.
 * Scales are rounded up to the next fp16 value. name labels errors. Refuses a cols not divisible by group. */
int rc_gq_rtn(const float *W, int64_t rows, int64_t cols, const rc_gq_scheme *s, const char *name,
              rc_gq_tensor *out, rc_err *e);

typedef struct rc_gq_opts {
    double damp; /* lambda = damp * mean(diag H); 0.01 */
    int block;   /* columns per lazy batch update; 128 (a multiple or a divisor of the group) */
} rc_gq_opts;

/* GPTQ with the input Hessian H = X^T X [cols, cols] (double; only its upper triangle is read): dead columns (diag 0) are zeroed,
 * H is damped, factorised (GSL Cholesky, inverse, Cholesky of the inverse), and columns are quantized in
 * order with error feedback; a group's scale and zero come from the already-updated weights when the group
 * starts. No act-order. Refuses a non-positive-definite H by name (RC_E_RANGE). Deterministic. */
int rc_gq_gptq(const float *W, int64_t rows, int64_t cols, const double *H, const rc_gq_scheme *s,
               const rc_gq_opts *o, const char *name, rc_gq_tensor *out, rc_err *e);

/* W [rows, cols] = the dequantized t (fp32). */
void rc_gq_dequant(const rc_gq_tensor *t, float *W);
void rc_gq_free(rc_gq_tensor *t);

/* The upper triangle of H [K, K] += X^T X for X [T, K] (fp32 rows, double sums, fixed order). */
void rc_gq_hessian_add(double *H, const float *X, int64_t T, int64_t K);

#endif
