/* The engine's gated delta net kernels (the linear-attention layers of Qwen3.5) and the attention output gate,
 * behind C launchers on stream s returning cudaGetLastError(). Everything here is fp32 and has one fixed
 * arithmetic order per output, independent of how many rows a launch carries (see README, "determinism"). */
#ifndef ENG_GDN_H
#define ENG_GDN_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* u[T, C] = silu(causal depthwise conv of x over K taps), x rows of stride xs (the first C columns are read);
 * w [C, K] (tap K-1 multiplies the current row). The K-1 rows before row 0 come from state [K-1, C] (zeros when
 * fresh); state is then replaced by the last K-1 rows of (state, x) before the conv. */
cudaError_t engk_gdn_conv(float *u, float *state, const float *x, int64_t xs, const float *w, int T, int C, int K,
                          int fresh, cudaStream_t s);
/* From u[T, C] (q | k | v, C = 2 Hk dk + Vd) and the b, a columns of gin (rows of stride xs, b at column boff,
 * a at boff + Hv): qn, kn [T, Hk, dk] = l2norm (sum of squares + 1e-6) of the q, k heads, qn times qmul;
 * beta, g [T, Hv] = sigmoid(b), -exp(A_log) * softplus(a + dt_bias). */
cudaError_t engk_gdn_prep(float *qn, float *kn, float *beta, float *g, const float *u, const float *gin, int64_t xs,
                          int64_t boff, const float *A_log, const float *dt_bias, int T, int Hk, int Hv, int dk,
                          int dv, float qmul, cudaStream_t s);
/* The gated delta rule over T rows, token by token: per value head h (key head h / (Hv / Hk)) and column e,
 * S[h][e][:] (state [Hv, dv, dk], zeros when fresh) decays by exp(g), takes k (beta (v - S k)), and
 * core[t, h, e] = S q. v[t, h, e] = u[t, 2 Hk dk + h dv + e] (u rows of C). dk <= 256. */
cudaError_t engk_gdn_delta(float *core, float *state, const float *qn, const float *kn, const float *u,
                           const float *beta, const float *g, int T, int C, int Hk, int Hv, int dk, int dv, int fresh,
                           cudaStream_t s);
/* The chunked gated delta rule (prefill). Chunks of ENG_GDN_CHUNK positions are aligned to absolute positions:
 * state holds S at the base position b (zeros when fresh), pend [engk_gdn_pend_floats] the rows b .. pos-1 of
 * b's chunk that an earlier call brought (np of them: k, v, beta, g), and `first` is that chunk's full length
 * (the next multiple of ENG_GDN_CHUNK after b, minus b). This call appends T rows (qn, kn, u, beta, g as for
 * engk_gdn_delta) and writes core for them only. Row t's output depends on S(b) and the rows of its chunk up
 * to t alone, each reduction in one fixed order, so it is the same bits however the rows were split into calls.
 * S advances only over complete chunks (and, with settle, T = 0, over the pending rows: the state at pos for a
 * decode step); pend then holds the rows of the last incomplete chunk. ws: engk_gdn_chunk_ws_floats(T, Hv). */
#define ENG_GDN_CHUNK 64
int64_t engk_gdn_chunk_ws_floats(int64_t rows, int Hv);
int64_t engk_gdn_pend_floats(int Hk, int Hv, int dk, int dv);
/* The base after the rows up to position end are in, from base b: b while b's chunk is incomplete, else the
 * start of the chunk that holds end (end itself when it closes one). */
int64_t engk_gdn_next_base(int64_t b, int64_t end);
cudaError_t engk_gdn_chunked(float *core, float *state, float *pend, float *ws, const float *qn, const float *kn,
                             const float *u, const float *beta, const float *g, int T, int C, int Hk, int Hv, int dk,
                             int dv, int np, int first, int fresh, int settle, cudaStream_t s);
/* The fused decode step (T = 1) of one linear layer: conv (state shifted) + silu, q/k norms and gates, the delta
 * rule on state and the gated norm into y [Hv, dv], in one launch (thread block clusters, sm_90) with the bits of
 * engk_gdn_conv, _prep, _delta and _norm_gate run in a row. gin is the in-projection row (q | k | v, C channels;
 * z [Hv, dv]; b, a [Hv]). engk_gdn_step_fits says whether the device and shape take it (else cudaErrorNotSupported:
 * run the four kernels). */
int engk_gdn_step_fits(int Hk, int Hv, int dk, int dv, int K);
/* The forms of the fused step, one contract and the same bits (eng_gdn.cu says how each runs): V1 a warp per state
 * column, outputs pulled from the peers (kept to hold the others to); V2 a column over 8 threads, outputs pushed,
 * one cluster barrier before the norm; V3 V2 launched programmatically inside a captured graph (weights loaded,
 * the next kernel let go, before dep_wait); V4 V3 with the outputs sent by st.async to an mbarrier per block, so
 * the norm waits for its head alone. ENG_GDN_STEP_FORM, the switch, is the form the engine runs unless
 * $REFCHAIN_GDN_STEP_FORM names another (engk_gdn_step_form launches form `form`). (V5-V7 and V3's
 * ablations measured slower or served timing alone and were removed: engine/README.md, "Recurrent layers".) */
#define ENG_GDN_STEP_V1 1
#define ENG_GDN_STEP_V2 2
#define ENG_GDN_STEP_V3 3
#define ENG_GDN_STEP_V4 4
#define ENG_GDN_STEP_NFORMS 4
#define ENG_GDN_STEP_FORM ENG_GDN_STEP_V3
cudaError_t engk_gdn_step_form(int form, float *y, float *state, float *conv_state, const float *gin,
                               const float *conv_w, const float *A_log, const float *dt_bias, const float *norm_w,
                               int Hk, int Hv, int dk, int dv, int K, float qmul, float eps, int fresh, cudaStream_t s);
/* engine bench: device time of one decode step's DeltaNet kernels of a linear layer of this shape as the engine
 * runs them (the fused step where engk_gdn_step_fits says so: *fused = 1) and of the four unfused kernels (conv,
 * prep, delta, norm_gate at T = 1), no GEMVs; `layers` linear layers of their own states, one step of each in a CUDA
 * graph as in the engine's decode graph, replayed until at least 200 steps ran; mean in us a step. */
cudaError_t engk_gdn_step_bench(int Hk, int Hv, int dk, int dv, int K, int layers, double *step_us,
                                double *unfused_us, int *fused);
/* The same timing for us[0] the step as the engine runs it, us[f] form f (ENG_GDN_STEP_V1 .. V4; 0 where no fused
 * form applies), us[ENG_GDN_TIME_UNFUSED] the four unfused kernels, and the launch floor of the fused step's grid:
 * us[ENG_GDN_TIME_NOP] a kernel of its grid and clusters that only passes one cluster barrier, us[.._NOP_PDL] the
 * same launched as V3 is (0 where no fused form applies). layers = 1: one graph of 200 steps of a single layer (its
 * state stays in L2); layers > 1: as engk_gdn_step_bench. */
#define ENG_GDN_TIME_UNFUSED (ENG_GDN_STEP_NFORMS + 1)
#define ENG_GDN_TIME_NOP (ENG_GDN_STEP_NFORMS + 2)
#define ENG_GDN_TIME_NOP_PDL (ENG_GDN_STEP_NFORMS + 3)
#define ENG_GDN_STEP_NTIMES (ENG_GDN_TIME_NOP_PDL + 1)
cudaError_t engk_gdn_step_times(int Hk, int Hv, int dk, int dv, int K, int layers, double us[ENG_GDN_STEP_NTIMES],
                                int *fused);
/* y[T, Hv, dv] = rmsnorm_w(x[T, Hv, dv]; w [dv], eps) * silu(z), z rows of stride zs (z[t, h, i] at
 * z[t * zs + h * dv + i]); y may alias x. */
cudaError_t engk_gdn_norm_gate(float *y, const float *x, const float *z, int64_t zs, const float *w, int T, int Hv,
                               int dv, float eps, cudaStream_t s);
/* ctx[T, n] *= sigmoid(gate[T, n]) (the attention output gate). */
cudaError_t engk_sigmoid_gate(float *ctx, const float *gate, int T, int n, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
