/* The engine's kernels for the gemma4 extras, behind C launchers (enqueue on s, return cudaGetLastError()): the
 * per-head V norm, sandwich norms added to the residual, the layer scalar, the final logit softcap, the
 * per-layer-embedding (PLE) inputs and gate, and the ring KV cache's row moves. Activations fp32; KV rows bf16 or
 * fp32 (moved as bytes). */
#ifndef ENG_GEMMA_H
#define ENG_GEMMA_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* In place: each of the nh heads of D values at x + t * stride + h * D (t < T) = rmsnorm (w NULL for RC_NORM_POW). */
cudaError_t engk_head_norm(float *x, int64_t stride, int T, int nh, int D, const float *w, float eps, int kind,
                           cudaStream_t s);
/* x[T, n] += rmsnorm(o[T, n]) (kind: rc_norm_kind, weight w). */
cudaError_t engk_norm_add(float *x, const float *o, const float *w, int T, int n, float eps, int kind, cudaStream_t s);
/* x[n] *= *scale (a device scalar). */
cudaError_t engk_scale_dev(float *x, const float *scale, int64_t n, cudaStream_t s);
/* In place: x[i] = c tanh(x[i] / c) for i < n, rc_softcap's bits (model/softcap.h): the final logit softcap. */
cudaError_t engk_softcap(float *x, int64_t n, float c, cudaStream_t s);
/* PLE inputs, rows (t, l) of P: in = (rmsnorm(mproj * proj_scale) + tok) * in_scale; mproj, tok, in [T, L P]. */
cudaError_t engk_ple_inputs(float *in, const float *mproj, const float *tok, const float *w, int T, int L, int P,
                            float eps, int kind, float proj_scale, float in_scale, cudaStream_t s);
/* PLE gate of layer l: g[t, i] = act(g[t, i]) * in[t, l P + i] (act: rc_act). */
cudaError_t engk_ple_gate(float *g, const float *in, int T, int L, int P, int l, int act, cudaStream_t s);
/* Ring KV rows of rowbytes (a multiple of 16) for positions p0 .. p0 + n - 1: the ring holds position p in row
 * p % W, the linear buffer in row p - base. to_ring = 0 gathers ring -> linear, 1 scatters linear -> ring. */
cudaError_t engk_ring_move(void *ring, void *lin, int64_t rowbytes, int64_t p0, int64_t n, int64_t base, int W,
                           int to_ring, cudaStream_t s);
/* The same moves for a decode step, with the position and rel = pos - base in device memory (a captured CUDA graph
 * replays them at every position): to_ring = 0 gathers positions [base, pos) (rel <= max_rows of them), 1 writes
 * position pos from linear row rel. ring2/lin2 (both or neither): a second pair (V's beside K's) moved by the same
 * launch. */
cudaError_t engk_ring_move_dev(void *ring, void *lin, void *ring2, void *lin2, int64_t rowbytes, const int64_t *pos_dev,
                               const int64_t *rel_dev, int W, int max_rows, int to_ring, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
