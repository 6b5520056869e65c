/* Prefill GEMM on tensor cores: y[M, N] = bf16(x)[M, K] W[N, K]^T (+ b) (+ res) through cuBLASLt, fp32
 * accumulation and output, one algorithm pinned per (N, K) at open (no split-K, no workspace), so a row's bits
 * do not depend on how many rows share its chunk (README, "prefill GEMM"). */
#ifndef ENG_GEMM_H
#define ENG_GEMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The M each shape's algorithm is chosen at: a constant, so --prefill-chunk never changes the choice. */
#define ENG_GEMM_REF_ROWS 2048
/* Pointer alignment the pinned algorithms may assume (cuBLASLt's default preference); eng_gemm_run checks it. */
#define ENG_GEMM_ALIGN 256
/* cuBLASLt workspace: the H200's heuristic offers no workspace-free kernel for some wide shapes (q|k|v 6144 x 4096,
 * gate|up 28672 x 4096); split-K is still forced to 1 and the reduction scheme to none (engine.gemm proves the
 * bits independent of the row count). */
#define ENG_GEMM_WS ((size_t)32 << 20)

typedef struct eng_gemm eng_gemm;

typedef struct eng_gemm_shape {
    int N, K;  /* y [M, N], W [N, K]; K % 8 == 0 */
    int out16; /* 1: the bf16-output GEMM of (N, K) (eng_gemm_run_out16), pinned on its own; 0: fp32 output */
} eng_gemm_shape;

/* 1 if the device has bf16 tensor-core GEMMs (compute capability >= 8.0); else 0 and, if why, the reason. */
int eng_gemm_supported(int device, char *why, size_t cap);

/* Device bytes eng_gemm_open allocates: the bf16 copy of max_rows x max_k activations and, when scratch_n > 0,
 * an fp32 [max_rows, scratch_n] accumulator for shapes with both a bias and a residual. cuBLASLt gets no
 * workspace (an algorithm that wants one splits K, which this GEMM refuses). */
int64_t eng_gemm_device_bytes(int max_rows, int max_k, int scratch_n);

/* On the current device: a cuBLASLt handle and, per shape, the first algorithm of cuBLASLt's heuristic at
 * ENG_GEMM_REF_ROWS rows that runs with split-K 1, no reduction, no workspace and fp32 accumulation at 1 and
 * ENG_GEMM_REF_ROWS rows (other row counts: checked on first use, refused if rejected). A shape without one
 * runs on the CUDA-core engk_matmul for every chunk (decided here from constants, never per call or from
 * max_rows). log (may be NULL): one line per shape. Device bytes are added to *acct. */
int eng_gemm_open(eng_gemm **out, const eng_gemm_shape *shapes, int n_shapes, int max_rows, int scratch_n,
                  FILE *log, int64_t *acct, rc_err *e);
/* y[M, N] = bf16(x[M, K]) W^T, then v = acc + b[n] (b may be NULL), then y = res + v (res may be NULL or
 * alias y), on stream s. W: bf16 [N, K]; W, y, res aligned to ENG_GEMM_ALIGN; 1 <= M <= max_rows. */
int eng_gemm_run(eng_gemm *g, float *y, const float *x, const uint16_t *W, const float *b, const float *res, int M,
                 int N, int K, cudaStream_t s, rc_err *e);
/* The same GEMM on activations already in bf16 (xb [M, K], 16-byte aligned; e.g. eng_gemm_xbuf, written by
 * engk_rmsnorm_bf16 or engk_glu_bf16): the bits eng_gemm_run gives for x with bf16(x) == xb. Only for a pinned
 * (N, K) (eng_gemm_pinned == 1); else refused. */
int eng_gemm_run_bf16(eng_gemm *g, float *y, const uint16_t *xb, const uint16_t *W, const float *b, const float *res,
                      int M, int N, int K, cudaStream_t s, rc_err *e);
/* y[M, N] = bf16(xb W^T) in bf16 (round to nearest even of the fp32 accumulators), no bias or residual, on the
 * algorithm pinned for (N, K) with out16 = 1 (chosen as the fp32 one: split-K 1, fp32 accumulator, checked at 1 and
 * ENG_GEMM_REF_ROWS rows; batch invariant the same way). Refused (RC_E_UNSUPPORTED) where none was pinned:
 * eng_gemm_pinned16 says beforehand. */
int eng_gemm_run_out16(eng_gemm *g, uint16_t *y, const uint16_t *xb, const uint16_t *W, int M, int N, int K,
                       cudaStream_t s, rc_err *e);
int eng_gemm_pinned16(const eng_gemm *g, int N, int K);
/* The GEMM's own bf16 activation buffer [max_rows, max K of its shapes]; eng_gemm_run overwrites it. */
uint16_t *eng_gemm_xbuf(eng_gemm *g);
/* 1 if (N, K) runs on its pinned cuBLASLt algorithm, 0 if on engk_matmul, -1 if not a shape of g. */
int eng_gemm_pinned(const eng_gemm *g, int N, int K);
/* "algo 66 tile 20 stages 18 splitk 1 reduction 0 swizzle 0 custom 0 inner 0 cluster 0" of a pinned shape. */
const char *eng_gemm_describe(const eng_gemm *g, int N, int K, char *buf, size_t cap);
void eng_gemm_close(eng_gemm *g);

/* Kernels (eng_gemm.cu), each returning cudaGetLastError(): */
/* dst[n] = bf16(src[n]), round to nearest even (NaN stays a quiet NaN), as eng_f32_to_bf16; n % 8 == 0. */
cudaError_t engk_to_bf16(uint16_t *dst, const float *src, int64_t n, cudaStream_t s);
/* dst[n] = bf16(src[n] - bf16(src[n])), round to nearest even: the low half of a two-term split, so that
 * bf16(x) + lo equals x within 2^-17 of |x| (two GEMMs on the halves: fp32-like inputs on tensor cores). */
cudaError_t engk_to_bf16_lo(uint16_t *dst, const float *src, int64_t n, cudaStream_t s);
/* y[M, N] = (res ? res + v : v) with v = acc + b[n]; acc and res may alias y. */
cudaError_t engk_bias_res(float *y, const float *acc, const float *b, const float *res, int M, int N,
                          cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
