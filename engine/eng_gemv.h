/* Decode kernels for one row (E->decoding): GEMV at the bandwidth limit, RMSNorm fused into the first GEMV of
 * a block, the GLU fused into the gate|up GEMV, and the greedy argmax over the logits on the device. Every
 * output row keeps engk_matmul's order exactly (lane l: chunks l, l+32, ... of 8 k's, fmaf in order from 0,
 * then the xor butterfly; eng_dot_model is its host model), so decode rows equal prefill rows and the CPU
 * lm_head (eng_hgemv) stays bit-identical. Matrices bf16 (raw uint16) or f32 (f32 set), K % 8 == 0.
 * Into a stream being captured as a graph on sm_90+, the GEMVs launch as programmatic dependents: they start
 * loading W while the kernel before them still runs (touching nothing else until it has completed), so W must
 * not be written by the stream's previous kernel. Direct launches keep plain stream order; the bits are equal. */
#ifndef ENG_GEMV_H
#define ENG_GEMV_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The matrix a stream reads next, handed to the GEMV before it (a hint: no value changes): its warps, once their
 * rows are done, ask L2 for it (sm_90 bulk prefetch; nothing before), so DRAM keeps busy through the GEMV's tail
 * and the small kernels between. p 16-byte aligned (NULL: none), bytes >= 0; skipped while *pos > pos_max (pos a
 * device scalar, NULL: always), e.g. when an attention between would stream enough KV to push it out of L2. */
typedef struct engk_warm {
    const void *p;
    int64_t bytes;
    const int64_t *pos;
    int64_t pos_max;
} engk_warm;

#define ENGK_ARGMAX_BLOCKS 256
/* Bytes of device scratch engk_argmax and engk_argmax_one need: the blocks' bests, then engk_argmax_one's arrival
 * counter (zero before its first launch; every launch leaves it zero). */
#define ENGK_ARGMAX_SCRATCH (ENGK_ARGMAX_BLOCKS * 8 + 16)

/* y[N] = W[N, K] x[K] (+ b[N]) (+ res[N], which may alias y). */
cudaError_t engk_gemv(float *y, const float *x, const void *W, int f32, const float *b, const float *res, int N,
                      int K, cudaStream_t s);
/* engk_gemv, then warm (may be NULL). */
cudaError_t engk_gemv_w(float *y, const float *x, const void *W, int f32, const float *b, const float *res, int N,
                        int K, const engk_warm *warm, cudaStream_t s);
/* 1 if the fused norm fits (the row in shared memory: K * 4 + 64 <= 48 KiB, i.e. K <= 12272). */
int engk_gemv_norm_fits(int K);
/* y[N] = W rmsnorm(x) (+ b): each block normalizes x[K] exactly as engk_rmsnorm (same block sum, inv_rms and
 * weight) into shared memory; xn (if not NULL) receives the normed row, bit-identical to engk_rmsnorm's. */
cudaError_t engk_gemv_norm(float *y, float *xn, const float *x, const float *nw, float eps, int kind, const void *W,
                           int f32, const float *b, int N, int K, cudaStream_t s);
/* engk_gemv_norm, then warm (may be NULL). */
cudaError_t engk_gemv_norm_w(float *y, float *xn, const float *x, const float *nw, float eps, int kind,
                             const void *W, int f32, const float *b, int N, int K, const engk_warm *warm,
                             cudaStream_t s);
/* out[I] = act(Wgu[0:I] h + bgu[0:I]) * (Wgu[I:2I] h + bgu[I:2I]), h = rmsnorm(x) as engk_gemv_norm (kind < 0:
 * h = x, no norm; xn ignored): one warp computes gate row n and up row I + n, then engk_glu's arithmetic. */
cudaError_t engk_gemv_glu(float *out, float *xn, const float *x, const float *nw, float eps, int kind,
                          const void *Wgu, int f32, const float *bgu, int I, int K, int act, cudaStream_t s);
/* *out (device) = the first index of the largest of x[V], NaN never winning (eng_argmax's total order:
 * larger value, then smaller index); -1 if every x is NaN. scratch: ENGK_ARGMAX_SCRATCH device bytes. */
cudaError_t engk_argmax(int32_t *out, const float *x, int64_t V, void *scratch, cudaStream_t s);
/* The same token in one launch (the block that arrives last picks among the blocks' bests), also written into
 * *out_host if not NULL: pinned host memory (its device mapping: the same pointer under unified addressing), so a
 * decode step needs no copy of its token back. Launched as a programmatic dependent of the kernel before it (the
 * decode graph): the logits are read after its wait. scratch's counter must be zero (ENGK_ARGMAX_SCRATCH). */
cudaError_t engk_argmax_one(int32_t *out, int32_t *out_host, const float *x, int64_t V, void *scratch, cudaStream_t s);

/* Launch shapes (outputs per warp, ring depth per row, warps per block) for the test and the micro-benchmark.
 * Every shape computes each output in the same order, hence the same bits; the entry points above launch
 * engk_gemv_pick(fuse, N, K). fuse: ENGK_FUSE_NONE (engk_gemv: b, res), ENGK_FUSE_NORM (engk_gemv_norm: xn, nw,
 * eps, kind, b), ENGK_FUSE_GLU (engk_gemv_glu, N = I: xn, nw, eps, kind (< 0: no norm), b, act). */
#define ENGK_FUSE_NONE 0
#define ENGK_FUSE_NORM 1
#define ENGK_FUSE_GLU 2
int engk_gemv_variants(void);
const char *engk_gemv_variant_name(int v);
int engk_gemv_pick(int fuse, int N, int K);
int engk_gemv_pick_prev(int fuse, int N, int K); /* the previous picks, for the benchmark's old-vs-new rows */
/* The shape of a mixer's output projection in a decode step (o after the decode attention, the DeltaNet out_proj
 * after the DeltaNet step; plain, no fusion). */
int engk_gemv_pick_o(int N, int K);
cudaError_t engk_gemv_variant(int v, int fuse, float *y, float *xn, const float *x, const float *nw, float eps,
                              int kind, const void *W, int f32, const float *b, const float *res, int N, int K,
                              int act, const engk_warm *warm, cudaStream_t s);

/* The decode q|k|v GEMV with qkv_post's work in its epilogue, for llama-style heads (bf16 weights and KV, full
 * rotary, no q/k norm): rows [H q heads | Hkv k heads | Hkv v heads] x D of W (bf16) times rmsnorm(x) (the normed
 * row into xn if not NULL), + b, on shape ENGK_QKV_ROPE_SHAPE with each warp's two outputs the RoPE pair (i, i +
 * D / 2) of one head; then as engk_qkv_post_dev: q and K roped by cos_t/sin_t ([D / 2], the decode row), q into q
 * (fp32 [H][D]), K and V rounded to bf16 into row *pos_dev - back of the caches kc, vc ([Hkv][D] a row). The same
 * bits as engk_gemv_variant(ENGK_QKV_ROPE_SHAPE, ENGK_FUSE_NORM, ...) followed by engk_qkv_post_dev; the q|k|v row
 * itself is not stored. cos_t, sin_t and *pos_dev are read before the kernel's dependency wait: no kernel launched
 * before it in the stream may write them (the decode graph's memcpy nodes do). */
#define ENGK_QKV_ROPE_SHAPE 1
cudaError_t engk_gemv_norm_qkv_rope(float *xn, const float *x, const float *nw, float eps, int kind, const void *W,
                                    const float *b, int K, int H, int Hkv, int D, const float *cos_t,
                                    const float *sin_t, float *q, void *kc, void *vc, const int64_t *pos_dev, int back,
                                    cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
