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

enum { ENGK_INIT = 1, ENGK_FINAL = 2 };

/* x[T, Hd] = E[ids[t]] (* scale when scale != 0) */
cudaError_t engk_embed(float *x, const void *E, int f32, const int32_t *ids, int T, int Hd, float scale,
                       cudaStream_t s);
/* y[rows, n] = rmsnorm(x) (kind: rc_norm_kind; w may be NULL only for RC_NORM_POW); y may alias x. */
cudaError_t engk_rmsnorm(float *y, const float *x, const float *w, int rows, int n, float eps, int kind,
                         cudaStream_t s);
/* y[T, N] = x[T, K] W[N, K]^T (+ b[N]) (+ res[T, N], which may alias y); K % 8 == 0. */
cudaError_t engk_matmul(float *y, const float *x, const void *W, int f32, const float *b, const float *res, int T,
                        int N, int K, cudaStream_t s);
/* From qkv[T, (H + 2 Hkv) D]: per-head q/k RMSNorm (qn/kn NULL = none), RoPE on the first rot dims with
 * cos/sin rows [T, rot/2]; q -> q[T, H, D] (fp32), k, v -> kdst/vdst[T, Hkv, D] (storage type). */
cudaError_t engk_qkv_post(const float *qkv, float *q, void *kdst, void *vdst, int f32, const float *qn,
                          const float *kn, int norm_kind, float eps, const float *cos_t, const float *sin_t, int T,
                          int H, int Hkv, int D, int rot, cudaStream_t s);
/* Online-softmax attention of q[T, H, D] (row t at position pos0 + t) over the KV rows of tiles
 * [tile_lo, tile_hi) of P positions; K/V[j - kv_pos0] hold position j ([., Hkv, D]). flags: ENGK_INIT
 * starts from (m, l, acc) = (-inf, 0, 0), else loads them from st_*; ENGK_FINAL writes ctx[T, H*D] = acc / l,
 * else stores the state ([T, H], [T, H], [T, H, D]). */
cudaError_t engk_attention(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const void *K,
                           const void *V, int f32, int64_t kv_pos0, int tile_lo, int tile_hi, int P, int T,
                           int64_t pos0, int H, int Hkv, int D, float scale, int window, int flags, cudaStream_t s);
size_t engk_attention_smem(int G, int D, int P);
/* Decode (one row) with the position in device memory (*pos_dev, read by the kernel, so a captured CUDA graph
 * replays every step): engk_qkv_post writing K/V at kbase/vbase + (*pos_dev - back) rows of Hkv*D (pos_dev
 * NULL: at kbase/vbase; back = 1 only for the kv_stale_slot fault), and engk_attention over the resident cache
 * with the tile range [lo / P, pos / P] derived in the kernel as attention() derives it on the host. */
cudaError_t engk_qkv_post_dev(const float *qkv, float *q, void *kbase, void *vbase, const int64_t *pos_dev, int back,
                              int f32, const float *qn, const float *kn, int norm_kind, float eps, const float *cos_t,
                              const float *sin_t, int H, int Hkv, int D, int rot, cudaStream_t s);
cudaError_t engk_attention_dev(const float *q, float *ctx, const void *K, const void *V, int f32,
                               const int64_t *pos_dev, int P, int H, int Hkv, int D, float scale, int window,
                               cudaStream_t s);
/* out[T, I] = act(gu[:, :I]) * gu[:, I:] (act: rc_act), gu [T, 2I] */
cudaError_t engk_glu(float *out, const float *gu, int T, int I, int act, cudaStream_t s);
/* Busy-waits about 'cycles' SM clocks on s (fault builds: makes a missing stream dependency deterministic). */
cudaError_t engk_spin(long long cycles, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
