/* Reference ops: fp32 tensors, plain loops; every reduction accumulates in double and rounds once,
 * so each op's output is (nearly) the correctly rounded fp32 result of its fp32 inputs. */
#ifndef REF_OPS_H
#define REF_OPS_H

#include <stdint.h>

#include "config.h"

/* Matmuls of at least this many multiply-adds use OpenMP threads (when built with it) over the output elements. */
#define REF_OMP_MIN_MACS ((int64_t)1 << 20)

/* y[T,N] = x[T,K] W[N,K]^T (+ b[N]) */
void ref_matmul(float *y, const float *x, const float *W, const float *b, int64_t T, int64_t N, int64_t K);
/* Row-wise RMSNorm over n; w may be NULL only for RC_NORM_POW. */
void ref_rmsnorm(float *y, const float *x, const float *w, int64_t rows, int64_t n, float eps, rc_norm_kind kind);
/* In place on x[T, n_heads, head_dim]: rotate pairs (i, i + R/2), i < R/2, in the first R dims. */
void ref_rope_apply(float *x, const float *cos_t, const float *sin_t, int64_t T, int n_heads, int head_dim,
                    int rot_dim);
void ref_softmax(float *x, int64_t n);
/* ctx[T, H*D] = softmax(q k^T * scale + mask) v over S keys at positions 0..S-1; query t sits at
 * position q_pos0 + t; key j visible iff j <= pos and (window == 0 or j > pos - window).
 * q [T,H,D], k/v [S,Hkv,D]; query head h reads kv head h / (H / Hkv). scratch holds S floats. */
void ref_attention(float *ctx, const float *q, const float *k, const float *v, int64_t T, int64_t S, int64_t q_pos0,
                   int H, int Hkv, int D, float scale, int window, float *scratch);
float ref_act(float x, rc_act act);
/* out[i] = act(gate[i]) * up[i] */
void ref_glu(float *out, const float *gate, const float *up, int64_t n, rc_act act);

/* ---- gated delta net (linear-attention layers) ---- */
float ref_sigmoid(float x);
/* torch softplus (beta 1, threshold 20): x if x > 20 else log(1 + exp(x)) */
float ref_softplus(float x);
/* Row-wise x * rsqrt(sum x^2 + eps): SUM of squares, not mean. */
void ref_l2norm(float *y, const float *x, int64_t rows, int64_t n, float eps);
/* Row-wise N_w(x; w) * silu(z): norm first, then gate. */
void ref_rmsnorm_gated(float *y, const float *x, const float *z, const float *w, int64_t rows, int64_t n, float eps);
/* y[T,C] = causal depthwise conv of x[T,C] with w[C,K] (tap K-1 multiplies the current row); the K-1 rows
 * before row 0 come from state[K-1,C], or are zeros when state is NULL. No activation. */
void ref_conv1d_causal(float *y, const float *x, const float *w, const float *state, int64_t T, int64_t C, int K);
/* One token of the gated delta rule on S[dk,dv] (HF torch_recurrent_gated_delta_rule order):
 * S *= exp(g); S += k (beta (v - S^T k))^T; out[dv] = S^T q. q is already scaled. */
void ref_delta_rule_step(float *S, float *out, const float *q, const float *k, const float *v, float g, float beta,
                         int dk, int dv);
/* The same map over T rows, in HF's chunked form (torch_chunk_gated_delta_rule, chunk rows per chunk);
 * q,k [T,dk], v/out [T,dv], g/beta [T] of one head; S [dk,dv] in/out; scratch of
 * ref_delta_rule_chunked_scratch() floats. */
void ref_delta_rule_chunked(float *out, float *S, const float *q, const float *k, const float *v, const float *g,
                            const float *beta, int64_t T, int dk, int dv, int chunk, float *scratch);
int64_t ref_delta_rule_chunked_scratch(int dk, int dv, int chunk);

#endif
