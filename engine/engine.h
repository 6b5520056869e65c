/* engine: the production incremental engine on one GPU. Prefill fills the KV cache (post-RoPE K, V), then
 * one token per decode step. Memory modes (combinable): all layers resident (default), layer streaming
 * through N weight slots (N = 0: kernels read the weights from pinned host memory), KV offload to pinned
 * host memory walked in tiles, vocab (embedding + lm_head) on the CPU, and a device-memory budget that
 * picks among them. Output is bit-identical across every mode and run to run (README, "determinism"). */
#ifndef ENGINE_H
#define ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "eng_plan.h"
#include "eng_weights.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ENG_AUTO (-2)          /* resident_layers / kv_offload / vocab_on_cpu: not set by the user */
#define ENG_DEFAULT_TILE 64
#define ENG_DEFAULT_CTX 4096
#define ENG_DEFAULT_CHUNK 256
/* The decode attention's form when neither eng_opts.decode_fusion nor $REFCHAIN_DECODE_FUSION says: 0 = qkv_post,
 * split-KV partials, merge kernel; 1 = the merge folded into the partial kernel. The same bits in either form. */
#define ENG_DECODE_FUSION 1
/* 1: at decode steps that run the fused form with one live tile per layer (the default ENG_FUSE_MAX_TILES), qkv_post
 * (q/k norms, RoPE, the new K/V row) runs inside the attention kernel instead of a launch of its own
 * (engk_attn_decode_fused_post). The same bits. $REFCHAIN_DECODE_POST=0|1 overrides. */
#define ENG_DECODE_POST 1
/* 1: at decode steps of llama-style attention layers (bf16 weights and KV resident on the device, full rotary, no
 * q/k/v norms, no output gate), the norm + q|k|v GEMV does qkv_post's work in its epilogue (engk_gemv_norm_qkv_rope:
 * each warp's two outputs are a RoPE pair), and the attention reads the roped q and the caches; this replaces both
 * the qkv_post kernel and the post folded into the fused attention (ENG_DECODE_POST). The same bits. Off: measured
 * slower on the H200 (engine/README.md, "qkv_post in the q|k|v GEMV's epilogue"). $REFCHAIN_QKV_ROPE=0|1 overrides. */
#define ENG_QKV_ROPE 0
/* A decode step's end and start: ENG_STEP_SPLIT = the argmax in two launches, its token copied back to the host by a
 * copy node, then the next step's feed and embedding in two launches; ENG_STEP_COPY = the argmax in one launch
 * (engk_argmax_one), the copy node, the feed and embedding in one (engk_embed_next); ENG_STEP_FUSED = that, with the
 * argmax writing the token into the step's pinned set itself (no copy node). The same tokens and logits in every
 * form. Fused since session 41: llama3-8b int4 g128 + packed lm_head 12-16 us a step faster than split, bf16 12 us
 * (H100; engine/README.md, "The step's end and start"). $REFCHAIN_STEP_END=split|copy|fused overrides. */
#define ENG_STEP_SPLIT 0
#define ENG_STEP_COPY 1
#define ENG_STEP_FUSED 2
#define ENG_STEP_END ENG_STEP_FUSED
/* 1: a prefill chunk's gate|up GEMM writes bf16 (its own pinned algorithm) and the GLU reads that, half the bytes of
 * the fp32 path; one more rounding (gate and up to bf16, as HF's bf16 models), so a change of numerics: off until its
 * bounds are measured on the GPU (engine/README.md). $REFCHAIN_GLU_BF16=0|1 overrides. */
#define ENG_GLU_BF16 0
/* The fused forms run only at decode steps where every such layer has at most this many live KV tiles (one: the
 * computing block merges; more: one block per KV head merges them all, slower than the merge kernel at many tiles);
 * other steps run the unfused form (its own graph), the same bits. */
#define ENG_FUSE_MAX_TILES 1

typedef struct eng_opts {
    int device;
    int resident_layers;  /* ENG_AUTO, ENG_ALL_LAYERS, 0 (zero-copy from pinned host memory) or N slots */
    int kv_offload;       /* ENG_AUTO, 0, 1 */
    int vocab_on_cpu;     /* ENG_AUTO, 0, 1 */
    int kv_tile;          /* P: attention walks the KV in tiles of P positions in every mode */
    int64_t vram_budget;  /* device bytes for weights + KV + workspace; 0 = none. ENG_AUTO fields are chosen */
    int max_ctx;          /* positions the cache holds */
    int prefill_chunk;    /* prompt rows per forward pass (the result does not depend on it) */
    int threads;          /* host threads for the vocab on CPU (0 = every CPU) */
    int no_graph;         /* 1: decode steps launch their kernels directly (same kernels, same bits) */
    int no_pipeline;      /* 1: eng_decode_greedy_n waits for each step's token before the next (same tokens) */
    int decode_fusion;    /* ENG_AUTO ($REFCHAIN_DECODE_FUSION, else ENG_DECODE_FUSION), 0 or 1: ENG_DECODE_FUSION */
    int fuse_max_tiles;   /* 0 = ENG_FUSE_MAX_TILES, else that many: the fused forms' live-tile limit */
    FILE *log;            /* plan and memory lines; NULL = quiet */
} eng_opts;

void eng_opts_default(eng_opts *o);

typedef struct eng eng;

/* 1 if device can run the engine; else 0 and the reason in why. */
int eng_available(int device, char *why, size_t cap);
/* Plans memory, allocates and uploads. w must outlive the engine (streaming and zero-copy read it; the
 * engine pins its layer blobs in place and unpins them on close). */
int eng_open(eng **out, const eng_weights *w, const eng_opts *o, rc_err *e);
void eng_close(eng *E);
/* Empties the cache (position 0). */
void eng_reset(eng *E);
int64_t eng_pos(const eng *E);
const eng_plan *eng_get_plan(const eng *E);
/* Appends ids[T] at the current position. logits (if not NULL): [V] of the last row. Probes (sink may be
 * NULL): emb, L<i>.in, attn_norm, attn.q, attn.k, attn.v, attn.q_rope, attn.k_rope (as stored in the cache),
 * attn.ctx, mid, mlp_norm, mlp.gate, mlp.up, mlp.act, out, final_norm, logits over these T rows; computing
 * them never changes the result. On error the cache position is undefined: eng_reset before reuse. */
int eng_prefill(eng *E, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink, rc_err *e);
/* One decode step: token id at the current position; logits [V]. */
int eng_decode(eng *E, int32_t id, float *logits, rc_err *e);
/* One greedy decode step: *next = eng_argmax of this step's logits, chosen on the device (the same total
 * order; a final softcap applied on the device first, with rc_softcap's bits), on the host with the vocabulary on
 * the CPU; logits [V] copied out only if not NULL.
 * RC_E_RANGE if every logit is NaN. */
int eng_decode_greedy(eng *E, int32_t id, int32_t *next, float *logits, rc_err *e);
/* Seconds on the monotonic clock (the engine's timestamps, and its command's). */
double eng_now(void);
/* n greedy steps: out[0] follows id, out[k] follows out[k - 1], the tokens of n calls of eng_decode_greedy, bit for
 * bit; t (NULL or n entries) gets eng_now() when each token reached the host. Where no step needs its token on the
 * host (the decode graph applies; no per-layer embeddings) and eng_opts.no_pipeline is 0, the steps are pipelined:
 * step k is queued before step k - 1's token is read, fed that token on the device, so the GPU does not wait for the
 * host between steps. RC_E_RANGE if a step's logits are all NaN (a pipelined run then has started one step more:
 * eng_reset before reuse, as after any error). */
int eng_decode_greedy_n(eng *E, int32_t id, int n, int32_t *out, double *t, rc_err *e);
/* 1 if the last decode step replayed the captured CUDA graph (all resident, vocab and KV on the GPU). */
int eng_decode_graphed(const eng *E);
/* The decode attention's form (ENG_DECODE_FUSION's 0, 1): with 1 a resident cache's attention (every layer but KV
 * offload's) runs with the merge folded into its partial kernel, at the steps where every such layer has at most
 * eng_opts.fuse_max_tiles live KV tiles (the unfused form at the others). */
int eng_decode_fused(const eng *E);
/* 1 if a layer's prefill attention runs the wgmma kernel with K/V by TMA (head dim 128, bf16, an sm_90a build on a
 * compute capability 9.0 device, $REFCHAIN_PREFILL_ATTN not mma); the mma.sync kernel's bits either way. */
int eng_prefill_wgmma(const eng *E);

/* Device bytes held (weights, KV / state, workspace) and pinned host bytes. */
typedef struct eng_mem {
    int64_t weights, kv, workspace, host_pinned, host_vocab;
} eng_mem;
void eng_memory(const eng *E, eng_mem *m);

/* Measured bandwidths (bytes/s) for the benchmark rooflines: device-to-device copy (read + write counted)
 * and pinned host-to-device. */
int eng_measure_bandwidth(int device, double *d2d, double *h2d, rc_err *e);

/* ---- harness stage adapter ("engine", pipeline link) ---- */
int eng_stage_open(void **st, const rc_model *m, int f32, const eng_opts *o, rc_err *e);
/* Prefill of ids[T] from an empty cache, probes through sink; logits [T, V] if not NULL. */
int eng_stage_forward(void *st, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink, rc_err *e);
/* Prefill prompt[T], then n - 1 decode steps teacher-forced with forced[0..n-2]; step_logits [n, V]. */
int eng_stage_greedy(void *st, const int32_t *prompt, int64_t T, const int32_t *forced, int64_t n,
                     float *step_logits, rc_err *e);
void eng_stage_close(void *st);

#ifdef __cplusplus
}
#endif

#endif
