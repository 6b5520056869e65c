/* Quantized matrices on the device, packed as the checkpoint's codes are (never widened on the host), and the one
 * dequant kernel per family (model/quant.h's rules, bit for bit) that the stage runs before each matmul. */
#ifndef CUDA_DEQUANT_H
#define CUDA_DEQUANT_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "quant.h"

/* W [n, k] on the device. Codes of b bits (4 or 8), per = 32 / b of them in a word along k, low bits first:
 * code c of row r is bits [b * (c % per), b * (c % per) + b) of words[r * (k / per) + c / per], two's complement
 * in the scale family (sign-extended on load), unsigned in the affine one (the GPTQ qweight word order, with a
 * row's words contiguous). scale [n, k / group]; affine: zero [n, k / group] (integer zeros, m = -(s * z)) or,
 * without integer zeros (GGUF Q4_1), offset [n, k / group]. */
typedef struct cuda_qmat {
    const char *name; /* the HF name of the fp32 weight (the rc_qtensor's) */
    rc_qfamily family;
    int bits;
    int64_t n, k, group;
    uint32_t *words;  /* [n, k / per] */
    float *scale;     /* [n, k / group] */
    int16_t *zero;    /* [n, k / group] or NULL */
    float *offset;    /* [n, k / group] when affine without zeros, else NULL */
} cuda_qmat;

/* Packs t's codes into the words above and uploads them with its scales and zeros (or offsets). The device buffers
 * come from alloc (the caller's owner list); RC_E_UNSUPPORTED naming the tensor when k or the group is not a
 * multiple of a word's codes. */
typedef void *(*cuda_qalloc_fn)(void *owner, int64_t n, int64_t size, rc_err *e, const char *what);
int cuda_qmat_upload(cuda_qmat *d, const rc_qtensor *t, cuda_qalloc_fn alloc, void *owner, rc_err *e);

/* w[n, k] (fp32, device) = the family's rule over q, one thread per packed word: scale w = s * q, affine
 * w = (s * q) + m, each operation rounded on its own (__fmul_rn, __fadd_rn: equal to rc_qtensor_dequant's bits). */
cudaError_t cuda_k_dequant(float *w, const cuda_qmat *q);

#ifdef __cplusplus
}
#endif

#endif
