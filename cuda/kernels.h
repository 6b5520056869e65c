/* The cuda stage's kernels as host calls on device pointers, each the GPU twin of one ref/ops.h op. */
#ifndef CUDA_KERNELS_H
#define CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "config.h"
#include "err.h"

/* A failed CUDA call becomes rc_fail(e, RC_E_DEVICE, "<call> failed at file:line: <reason>"); RC_OK on success.
 * Clears the runtime's last-error state so a later launch check does not report it again. */
int cuda_check_at(cudaError_t err, const char *call, const char *file, int line, rc_err *e);
#define CUDA_CHECK(e, call) cuda_check_at((call), #call, __FILE__, __LINE__, (e))

/* cudaMalloc of n * size bytes: RC_E_RANGE on overflow, RC_E_NOMEM naming the size and what, else CUDA_CHECK. */
int cuda_alloc(void **p, int64_t n, int64_t size, rc_err *e, const char *what);

/* Every launch below returns cudaGetLastError() after it (cudaSuccess and no launch for empty sizes), or
 * cudaErrorInvalidValue for sizes a launch cannot cover. Shapes and semantics are ref/ops.h's. */

/* x[T, hd] = embed[ids[t], :] (* scale unless scale == 0); ids on the device, already range-checked */
cudaError_t cuda_k_embed(float *x, const float *embed, const int32_t *ids, int64_t T, int64_t hd, float scale);
/* y[T,N] = x[T,K] W[N,K]^T (+ b[N]); 16x16 shared-memory tiles, fp32 accumulation in k order; y != x */
cudaError_t cuda_k_matmul(float *y, const float *x, const float *W, const float *b, int64_t T, int64_t N, int64_t K);
/* Row-wise RMSNorm over n, one block per row (fp32 block reduction); y may equal x; w NULL only for RC_NORM_POW */
cudaError_t cuda_k_rmsnorm(float *y, const float *x, const float *w, int64_t rows, int64_t n, float eps,
                           rc_norm_kind kind);
/* cos/sin [T, rot_dim] for positions pos0..pos0+T-1 from inv[rot_dim/2] (rc_rope_inv_freq, uploaded), emb = [a, a],
 * each times attn_factor (rc_rope_attn_factor) */
cudaError_t cuda_k_rope_table(float *cos_t, float *sin_t, const float *inv, float attn_factor, int64_t pos0, int64_t T,
                              int rot_dim);
/* In place on x[T, n_heads, head_dim]: rotate pairs (i, i + R/2), i < R/2; rot_dim even and <= head_dim */
cudaError_t cuda_k_rope_apply(float *x, const float *cos_t, const float *sin_t, int64_t T, int n_heads, int head_dim,
                              int rot_dim);
/* ref_attention on the device: one block per (query t, head h), the q row and the row of visible scores in
 * dynamic shared memory (cuda_k_attention_smem bytes; the launch fails if the device cannot give that). */
cudaError_t cuda_k_attention(float *ctx, const float *q, const float *k, const float *v, int64_t T, int64_t S,
                             int64_t q_pos0, int H, int Hkv, int D, float scale, int window);
size_t cuda_k_attention_smem(int64_t S, int window, int D);
/* out[i] = act(gate[i]) * up[i]; out may equal gate */
cudaError_t cuda_k_glu(float *out, const float *gate, const float *up, int64_t n, rc_act act);
/* x[i] += y[i] */
cudaError_t cuda_k_add(float *x, const float *y, int64_t n);
/* x = c * tanh(x / c) */
cudaError_t cuda_k_softcap(float *x, int64_t n, float c);

/* a[rows, D] = src[r, 0:D], b[rows, D] = src[r, D:2D] of src [rows, 2D] (q_proj's per-head [query | gate]) */
cudaError_t cuda_k_split_halves(float *a, float *b, const float *src, int64_t rows, int D);
/* x[i] *= sigmoid(g[i]) */
cudaError_t cuda_k_sigmoid_mul(float *x, const float *g, int64_t n);
/* x[i] = act(x[i]) */
cudaError_t cuda_k_act(float *x, int64_t n, rc_act a);
/* g[t, i] = act(g[t, i]) * up[t * ld + i] for g [T, n] (a column slice of a wider up) */
cudaError_t cuda_k_glu_rows(float *g, const float *up, int64_t T, int n, int64_t ld, rc_act a);
/* y[i] = x[i] * s; y may equal x */
cudaError_t cuda_k_scale(float *y, const float *x, int64_t n, float s);
/* x[i] = (x[i] + y[i]) * s */
cudaError_t cuda_k_add_scale(float *x, const float *y, int64_t n, float s);

/* ---- gated delta net ---- */
/* ref_conv1d_causal: y[T,C] = causal depthwise conv of x with w[C,K]; state [K-1,C] or NULL (zeros); y != x */
cudaError_t cuda_k_conv1d_causal(float *y, const float *x, const float *w, const float *state, int64_t T, int64_t C,
                                 int K);
/* From conv [T, C] (q [Hk*dk] | k [Hk*dk] | ...): q, k [T, Hv, dk] = l2norm (ref_l2norm, eps) of key head
 * h / (Hv / Hk)'s slices, q then multiplied by qmul; one block per (t, h) */
cudaError_t cuda_k_gdn_qk(float *q, float *k, const float *conv, int64_t T, int64_t C, int Hk, int Hv, int dk,
                          float qmul, float eps);
/* beta = sigmoid(b), g = -exp(A_log[h]) * softplus(a + dt_bias[h]) over [T, Hv] */
cudaError_t cuda_k_gdn_gates(float *beta, float *g, const float *b, const float *a, const float *A_log,
                             const float *dt_bias, int64_t T, int Hv);
/* ref_delta_rule_chunked for every value head from a zero state: q, k [T, Hv, dk], v and out [T, Hv, dv],
 * g, beta [T, Hv]; S [Hv, dk, dv] gets the final state; scratch holds Hv * cuda_k_delta_rule_scratch() floats.
 * One block per head. */
cudaError_t cuda_k_delta_rule_chunked(float *out, float *S, const float *q, const float *k, const float *v,
                                      const float *g, const float *beta, int64_t T, int Hv, int dk, int dv, int chunk,
                                      float *scratch);
int64_t cuda_k_delta_rule_scratch(int dk, int dv, int chunk);
/* ref_rmsnorm_gated: y = N_w(x; w) * silu(z) row-wise over n, one block per row; y may equal x */
cudaError_t cuda_k_rmsnorm_gated(float *y, const float *x, const float *z, const float *w, int64_t rows, int64_t n,
                                 float eps);

#ifdef __cplusplus
}
#endif

#endif
