/* GGUF (v2, v3) reader: metadata, tensors memory-mapped and dequantized to fp32, a GGUF as a model. */
#ifndef RC_GGUF_H
#define RC_GGUF_H

#include <stdint.h>

#include "config.h"
#include "quant.h"
#include "tensor.h"

/* GGUF metadata value types */
enum {
    RC_GGUF_U8 = 0, RC_GGUF_I8, RC_GGUF_U16, RC_GGUF_I16, RC_GGUF_U32, RC_GGUF_I32, RC_GGUF_F32, RC_GGUF_BOOL,
    RC_GGUF_STRING, RC_GGUF_ARRAY, RC_GGUF_U64, RC_GGUF_I64, RC_GGUF_F64,
};

/* ggml tensor types this reader dequantizes (the others are named in messages and refused) */
enum {
    RC_GGML_F32 = 0,
    RC_GGML_F16 = 1,
    RC_GGML_Q4_0 = 2,
    RC_GGML_Q4_1 = 3,
    RC_GGML_Q5_0 = 6,
    RC_GGML_Q5_1 = 7,
    RC_GGML_Q8_0 = 8,
    RC_GGML_Q2_K = 10,
    RC_GGML_Q3_K = 11,
    RC_GGML_Q4_K = 12,
    RC_GGML_Q5_K = 13,
    RC_GGML_Q6_K = 14,
    RC_GGML_BF16 = 30
};

typedef struct rc_gguf_kv {
    char *key;
    uint32_t type;                /* RC_GGUF_* */
    uint32_t arr_type;            /* element type when type == RC_GGUF_ARRAY */
    uint64_t arr_n;               /* element count when type == RC_GGUF_ARRAY */
    const unsigned char *val;     /* the value (or the array's first element) inside the mapping */
} rc_gguf_kv;

typedef struct rc_gguf_tensor {
    char *name;
    int ndim;
    int64_t ne[RC_MAX_DIMS];      /* GGUF order: ne[0] is the innermost (contiguous) dimension */
    int64_t numel, nbytes;
    uint32_t type;                /* ggml type */
    const unsigned char *data;    /* inside the mapping */
} rc_gguf_tensor;

typedef struct rc_gguf {
    char *path;
    unsigned char *map;
    uint64_t size;
    uint32_t version;
    uint64_t alignment;
    rc_gguf_kv *kv;
    int64_t n_kv;
    rc_gguf_tensor *t;
    int64_t n_t;
} rc_gguf;

/* A string inside the mapping (not NUL-terminated). */
typedef struct rc_gguf_str {
    const char *s;
    uint64_t len;
} rc_gguf_str;

/* Maps and validates a whole file: header, every key/value, every tensor's type, shape, offset and extent.
 * Truncated or inconsistent files fail with one line naming the problem. */
int rc_gguf_open(rc_gguf *g, const char *path, rc_err *e);
void rc_gguf_close(rc_gguf *g);
/* 1 when the file at path starts with the GGUF magic. */
int rc_gguf_is_gguf(const char *path);

const rc_gguf_kv *rc_gguf_find(const rc_gguf *g, const char *key);
const rc_gguf_tensor *rc_gguf_find_tensor(const rc_gguf *g, const char *name);
/* Scalar integer / float / string values of any width; RC_E_FORMAT naming the key when the type differs. */
int rc_gguf_get_int(const rc_gguf *g, const rc_gguf_kv *kv, int64_t *out, rc_err *e);
int rc_gguf_get_float(const rc_gguf *g, const rc_gguf_kv *kv, double *out, rc_err *e);
int rc_gguf_get_str(const rc_gguf *g, const rc_gguf_kv *kv, rc_gguf_str *out, rc_err *e);
/* The strings of a string array, out[kv->arr_n]. */
int rc_gguf_get_strs(const rc_gguf *g, const rc_gguf_kv *kv, rc_gguf_str *out, rc_err *e);

/* "Q4_1", or NULL for a type id ggml does not define. */
const char *rc_ggml_type_name(uint32_t type);
/* Dequantizes n values of a supported type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K; n a multiple of its
 * block) into dst, bit-identical to the gguf Python package's dequantize. Every block goes through one of the two
 * family rules of model/quant.h: Q5_0 the scale family (q = five bits - 16, 32 values a scale), Q4_K the affine
 * family (eight sub-blocks of 32, s = d * scale, m = -(dmin * min)), Q6_K the scale family (sixteen groups of 16,
 * s = d * scale, q = six bits - 32). Only Q8_0, Q4_0 and Q4_1 are kept as quantized matrices (below). */
int rc_ggml_dequant(uint32_t type, const unsigned char *src, int64_t n, float *dst, rc_err *e);
/* A 2-d Q8_0, Q4_0 or Q4_1 tensor as a quantized matrix named name (model/quant.h): rows ne[1], columns ne[0],
 * group 32; Q8_0 and Q4_0 the scale family (Q4_0's codes nibble - 8), Q4_1 the affine family (its offsets m, no
 * integer zeros). rc_qtensor_dequant of it equals rc_gguf_tensor_f32 bit for bit. */
int rc_gguf_tensor_qtensor(const rc_gguf_tensor *t, const char *name, rc_qtensor *out, rc_err *e);
/* A tensor dequantized to a malloc'd fp32 array of numel values. */
int rc_gguf_tensor_f32(const rc_gguf *g, const rc_gguf_tensor *t, float **out, rc_err *e);

/* A llama, gemma3 or qwen3 GGUF as a model: the description HF's GGUF loader builds (through a config.json that
 * rc_config_parse reads), and every tensor dequantized under its HF name (llama: q/k rows un-permuted, gemma3: norm
 * weights minus 1, as transformers does). Other architectures are refused by name. quant (may be NULL) gets every 2-d Q8_0/Q4_0/Q4_1
 * matrix as a qtensor (rows un-permuted alike; each carries its own family, bits and group; quant->scheme stays
 * zero: a GGUF mixes types). */
int rc_gguf_load_model(const char *path, rc_config *cfg, rc_tensors *store, rc_quant *quant, rc_err *e);

#endif
