/* The GPU GEMV's exact summation order, on the host (vocab on CPU). On the GPU a warp computes
 * y[n] = sum_k W[n,k] x[k]: lane l (of 32) walks chunks c = l, l+32, l+64, ... of 8 consecutive k and
 * accumulates each element in order with fmaf from 0.0f; then the lanes are summed by an xor butterfly
 * (offsets 16, 8, 4, 2, 1). The host keeps a lane-major copy of W so the 32 lane accumulators become
 * vector registers (AVX-512 / AVX2+FMA, runtime dispatch; scalar fmaf otherwise) and runs the same order. */
#ifndef ENG_HGEMV_H
#define ENG_HGEMV_H

#include <stdint.h>

#include "eng_pool.h"
#include "err.h"

#define ENG_LANES 32
#define ENG_CHUNK 8

/* The literal model of one warp's dot product (K % 8 == 0). w_row: K elements, bf16 (f32 == 0) or f32. */
float eng_dot_model(const void *w_row, int f32, const float *x, int64_t K);

typedef struct eng_hgemv eng_hgemv;

/* Builds the lane-major copy of W [N, K] (K % 8 == 0); runs on pool (not owned; must outlive g). */
int eng_hgemv_create(eng_hgemv **out, const void *W, int f32, int64_t N, int64_t K, eng_pool *pool, rc_err *e);
/* y[N] = W x, bit-identical to the GPU kernel. */
void eng_hgemv_run(eng_hgemv *g, const float *x, float *y);
void eng_hgemv_free(eng_hgemv *g);
/* "avx512", "avx2" or "scalar": the path eng_hgemv_run takes. */
const char *eng_hgemv_isa(const eng_hgemv *g);
/* Selects a path by name (tests); 0 if this CPU cannot run it (the path is then unchanged). */
int eng_hgemv_set_isa(eng_hgemv *g, const char *isa);
int64_t eng_hgemv_bytes(const eng_hgemv *g);

#endif
