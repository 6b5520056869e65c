/* The engine's CUDA kernels, behind C launchers. Each launcher enqueues on stream s and returns
 * cudaGetLastError() (the caller names the launcher in its error). Matrices and KV rows are bf16 (raw
 * uint16) or, with f32 set, fp32; activations are fp32. Every reduction has one fixed order (see README). */
#ifndef ENG_KERNELS_H
#define ENG_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x[T, Hd] = E[ids[t]] (* scale when scale != 0) */
cudaError_t engk_embed(float *x, const void *E, int f32, const int32_t *ids, int T, int Hd, float scale,
                       cudaStream_t s);
/* ids[0] = *next if it is a token id (0 <= *next < V), else 0: a decode step fed the token the step before chose on
 * the device (an all-NaN step's -1 becomes a harmless row 0; the caller reports that step's -1). */
cudaError_t engk_feed_token(int32_t *ids, const int32_t *next, int64_t V, cudaStream_t s);
/* x[Hd] = E[t] (* scale when scale != 0) for t = *next fed as engk_feed_token feeds it: the feed and the gather of a
 * decode step in one launch, which lets the launch after it (programmatic) start while it runs. */
cudaError_t engk_embed_next(float *x, const void *E, int f32, const int32_t *next, int64_t V, int Hd, float scale,
                            cudaStream_t s);
/* y[rows, n] = rmsnorm(x) (kind: rc_norm_kind; w may be NULL only for RC_NORM_POW); y may alias x. */
cudaError_t engk_rmsnorm(float *y, const float *x, const float *w, int rows, int n, float eps, int kind,
                         cudaStream_t s);
/* The same norm, its values rounded to bf16 (nearest even) into yb[rows, n] (the prefill GEMM's input) and, if y
 * is not NULL, also stored fp32 as engk_rmsnorm's (bit-identical: the same arithmetic, then one rounding). */
cudaError_t engk_rmsnorm_bf16(uint16_t *yb, float *y, const float *x, const float *w, int rows, int n, float eps,
                              int kind, cudaStream_t s);
/* y[T, N] = x[T, K] W[N, K]^T (+ b[N]) (+ res[T, N], which may alias y); K % 8 == 0. */
cudaError_t engk_matmul(float *y, const float *x, const void *W, int f32, const float *b, const float *res, int T,
                        int N, int K, cudaStream_t s);
/* From qkv[T, (H + 2 Hkv) D]: per-head q/k RMSNorm (qn/kn NULL = none), RoPE on the first rot dims with
 * cos/sin rows [T, rot/2]; q -> q[T, H, D] (fp32), k, v -> kdst/vdst[T, Hkv, D] (storage type). D % 8 == 0
 * (16-byte loads and stores: qkv, q, kdst, vdst 16-byte aligned). */
cudaError_t engk_qkv_post(const float *qkv, float *q, void *kdst, void *vdst, int f32, const float *qn,
                          const float *kn, int norm_kind, float eps, const float *cos_t, const float *sin_t, int T,
                          int H, int Hkv, int D, int rot, cudaStream_t s);
/* Tests and benchmarks: engk_qkv_post's and engk_qkv_post_dev's kernel: 1 = k_qkv_post_rows (loads issued up front), 0 = k_qkv_post (the
 * previous one), -1 = the engine's choice (QKV_POST_ROWS in eng_kernels.cu); the same bits. */
void engk_qkv_post_kernel(int rows);
/* Decode (one row) with the position in device memory (*pos_dev, read by the kernel, so a captured CUDA graph
 * replays every step): engk_qkv_post writing K/V at kbase/vbase + (*pos_dev - back) rows of Hkv*D (pos_dev
 * NULL: at kbase/vbase; back = 1 only for the kv_stale_slot fault). Attention: eng_attn.h. */
cudaError_t engk_qkv_post_dev(const float *qkv, float *q, void *kbase, void *vbase, const int64_t *pos_dev, int back,
                              int f32, const float *qn, const float *kn, int norm_kind, float eps, const float *cos_t,
                              const float *sin_t, int H, int Hkv, int D, int rot, cudaStream_t s);
/* out[T, I] = act(gu[:, :I]) * gu[:, I:] (act: rc_act), gu [T, 2I] */
cudaError_t engk_glu(float *out, const float *gu, int T, int I, int act, cudaStream_t s);
/* The same GLU, rounded to bf16 into outb[T, I] (the down GEMM's input) and, if out is not NULL, also stored fp32
 * bit-identical to engk_glu's; one pass over gu. */
cudaError_t engk_glu_bf16(uint16_t *outb, float *out, const float *gu, int T, int I, int act, cudaStream_t s);
/* The same from gu in bf16 (16-byte aligned; the bf16-output gate|up GEMM): each element widened exactly, then
 * engk_glu_bf16's arithmetic; so the bits engk_glu_bf16 gives on gu's values as floats. */
cudaError_t engk_glu_bf16in(uint16_t *outb, float *out, const uint16_t *gu, int T, int I, int act, cudaStream_t s);
/* Busy-waits about 'cycles' SM clocks on s (fault builds: makes a missing stream dependency deterministic). */
cudaError_t engk_spin(long long cycles, cudaStream_t s);
/* The same as the decode step launches its short kernels (programmatic inside a captured graph on sm_90+): it waits
 * for the kernel before, lets the next one start, then spins (test_engk_gemv --bench: the decode attention's
 * stand-in between the q|k|v and o GEMVs). */
cudaError_t engk_spin_dep(long long cycles, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
