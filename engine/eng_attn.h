/* The engine's attention kernels, behind C launchers: split-KV decode (tile partials merged in a fixed order)
 * and tiled online-softmax prefill (bf16 tensor cores on sm_80+, fp32 CUDA cores otherwise). Each launcher
 * enqueues on stream s and returns cudaGetLastError(). K/V rows are bf16 (raw uint16) or, with f32 set, fp32,
 * laid out [position][Hkv][D]; q and ctx are fp32 [rows][H][D]. Numerics: engine/README.md, "determinism". */
#ifndef ENG_ATTN_H
#define ENG_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* prefill flags: ENGK_INIT starts from (m, l, acc) = (-inf, 0, 0), else loads them from st_*; ENGK_FINAL writes
 * ctx = acc / l, else stores the state. ENGK_CUDA_CORES forces the fp32 CUDA-core kernel (tests). */
enum { ENGK_INIT = 1, ENGK_FINAL = 2, ENGK_CUDA_CORES = 4 };
/* Instead of the choice by chunk length, force the tensor-core kernel's 16 rows per warp in blocks of 64 / 128 rows
 * (ENGK_MMA_ROWS64 / ENGK_MMA_ROWS128, the latter D <= 128) or its 32 rows per warp in blocks of 128 rows
 * (ENGK_MMA_WARP32, D <= 128) or of 256 rows (ENGK_MMA_WARP32X8, 8 warps, D <= 128); instead of the engine's
 * sub-block loop, force the previous one (ENGK_MMA_OLD) or the lean one (ENGK_MMA_LEAN): the same bits every way
 * (tests, bench). */
enum { ENGK_MMA_ROWS64 = 8, ENGK_MMA_ROWS128 = 16, ENGK_MMA_WARP32 = 32, ENGK_MMA_WARP32X8 = 64, ENGK_MMA_OLD = 128,
       ENGK_MMA_LEAN = 512 };
/* ENGK_MMA_PIPE: the 8-warp blocks of 32 rows per warp with the pipelined sub-block loop (four K/V buffers behind
 * shared-memory barriers, no block-wide barrier a sub-block; D <= 128, else ignored), the engine's form for long
 * chunks; forced here even where the engine would take smaller blocks. The same bits (tests, bench). */
enum { ENGK_MMA_PIPE = 65536 };
/* The wgmma variant (Hopper warpgroup MMA): blocks of 128 rows (2 warpgroups), or of 64 rows (1 warpgroup) with
 * ENGK_MMA_ROWS64; the other ENGK_MMA_* bits are ignored. Only where engk_attn_prefill_wgmma(D, f32) holds, else
 * cudaErrorInvalidValue. The same bits for every launch form and chunking, and k_attn_mma's bits (the checker
 * fails on any difference; engine/README.md, "The engine's prefill attention on sm_90a"). The engine runs its
 * warp-specialized TMA form (below) where it runs. */
enum { ENGK_MMA_WGMMA = 2048 };
/* Diagnostics of the wgmma variant (tests, when its output leaves the bound): its Q and K descriptors, or its V
 * descriptor, with their leading and stride byte offsets exchanged (eng_attn.cu, k_attn_wg; and the swizzled K and V
 * descriptors of k_attn_wgs with ENGK_WGS_TMA). */
enum { ENGK_WGMMA_SWAP_QK = 4096, ENGK_WGMMA_SWAP_V = 8192 };
/* With ENGK_MMA_WGMMA: the warp-specialized block (k_attn_wgs: one copier warpgroup, two of 64 rows, K/V stages behind
 * shared-memory barriers, no block-wide barrier a sub-block): k_attn_wg's bits. */
enum { ENGK_WGMMA_WS = 131072 };
/* Variants of it (the same bits; tests, bench): Q as register fragments with setmaxnreg; S of the next sub-block and
 * P V of this one in flight together, the softmax between. */
enum { ENGK_WGS_QREG = 262144, ENGK_WGS_OVERLAP = 524288 };
/* ... and K/V by TMA into 128-byte-swizzled stages (implies ENGK_WGS_QREG). */
enum { ENGK_WGS_TMA = 1048576 };
/* ... and, with ENGK_WGS_TMA (without ENGK_WGS_OVERLAP), the two row warpgroups taking turns on the tensor cores
 * (ping-pong, named barriers): the same bits, slower (tests, bench). */
enum { ENGK_WGS_PP = 2097152 };

/* ---- decode: one row at the position held in the device scalar *pos_dev (graph-capturable) ---- */

#ifdef __CUDACC__
#define ENGK_HOST_DEVICE __host__ __device__
#else
#define ENGK_HOST_DEVICE
#endif
/* The first position a row at pos attends to: pos - window + 1 with a window (window > 0), else 0. */
static inline ENGK_HOST_DEVICE int64_t engk_window_lo(int64_t pos, int window)
{
    return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}
/* The decode's live tiles at pos are engk_dec_tlo .. engk_dec_thi (the kernels' items and merge order; the engine
 * picks the step's form from their count, engk_dec_live_tiles). */
static inline ENGK_HOST_DEVICE int engk_dec_tlo(int64_t pos, int window, int P)
{
    return (int)(engk_window_lo(pos, window) / P);
}
static inline ENGK_HOST_DEVICE int engk_dec_thi(int64_t pos, int P) { return (int)(pos / P); }
static inline ENGK_HOST_DEVICE int engk_dec_live_tiles(int64_t pos, int window, int P)
{
    return engk_dec_thi(pos, P) - engk_dec_tlo(pos, window, P) + 1;
}

/* Tiles of P positions covering max_ctx positions; the partials workspace holds that many tiles. */
int engk_attn_max_tiles(int64_t max_ctx, int P);
/* Floats of the partials workspace: per (tile, head) m and l, and acc[D]. */
int64_t engk_attn_part_floats(int max_tiles, int H, int D);
/* ctx[H*D] of q[H, D] over K/V positions [lo, pos] (lo = pos - window + 1 with a window, else 0): each (tile, kv
 * head) of the live tiles lo/P .. pos/P writes the tile's partial (m, l, acc) into part, on a fixed grid of blocks
 * that loop over those items; then the live tiles are merged in an order fixed by lo/P, pos/P. The grid never
 * depends on pos (graph-capturable); no tile's bits depend on the grid. */
cudaError_t engk_attn_decode(const float *q, float *ctx, float *part, const void *K, const void *V, int f32,
                             const int64_t *pos_dev, int max_tiles, int P, int H, int Hkv, int D, float scale,
                             int window, cudaStream_t s);
/* engk_attn_decode in one launch, the same bits: the merge is folded into the partial kernel. A single live tile
 * is merged by the block that computes it; with several, each block arrives (after a device fence) on cnt[kv head]
 * and the one that arrives last merges the group's heads from the partials in k_dec_merge's fixed order and
 * arithmetic, then resets cnt[kv head] to 0. cnt: Hkv counters, zero before the first launch (cudaMemset) and left
 * zero by every completed launch; launches sharing cnt must not run concurrently. */
cudaError_t engk_attn_decode_fused(const float *q, float *ctx, float *part, unsigned *cnt, const void *K,
                                   const void *V, int f32, const int64_t *pos_dev, int max_tiles, int P, int H,
                                   int Hkv, int D, float scale, int window, cudaStream_t s);
/* engk_qkv_post_dev (bf16 caches) + engk_attn_decode_fused in one launch, the same bits (ctx and both caches): each
 * block posts the q heads of its items' KV groups (norm, RoPE: k_qkv_post_rows' arithmetic) straight into the
 * attention's bf16 q, and the group's new K and V rows into the caches at *pos_dev - back, before its loads of the
 * tile. Only for a step whose every launch has one live tile at *pos_dev (the kernel traps otherwise: the caller
 * checks engk_dec_live_tiles), bf16 KV on tensor cores (engk_attn_decode_post_ok). */
int engk_attn_decode_post_ok(int H, int Hkv, int D, int f32);
cudaError_t engk_attn_decode_fused_post(const float *qkv, const float *qn, const float *kn, int norm_kind, float eps,
                                        const float *cos_t, const float *sin_t, int rot, int back, float *ctx,
                                        float *part, unsigned *cnt, void *K, void *V, const int64_t *pos_dev,
                                        int max_tiles, int P, int H, int Hkv, int D, float scale, int window,
                                        cudaStream_t s);
/* The partial of tile k alone, with K/V[j - k*P] holding position j (an uploaded tile buffer): the same kernel
 * and slot as engk_attn_decode's, so per-tile launches + engk_attn_decode_merge give the same bits. */
cudaError_t engk_attn_decode_tile(const float *q, float *part, const void *Kt, const void *Vt, int f32,
                                  const int64_t *pos_dev, int k, int max_tiles, int P, int H, int Hkv, int D,
                                  float scale, int window, cudaStream_t s);
cudaError_t engk_attn_decode_merge(const float *part, float *ctx, const int64_t *pos_dev, int max_tiles, int P,
                                   int H, int D, int window, cudaStream_t s);
/* Tests: at most n blocks for the decode partials (0: as many as the device holds at once). */
void engk_attn_decode_blocks(int n);
/* 1 if the decode partials of this shape run on tensor cores on the current device (bf16 KV, sm_80+, D a power of
 * two in 16 .. 256, at most 8 query heads per KV head), else 0: the fp32 CUDA-core kernel (engine/README.md,
 * "Attention"). */
int engk_attn_decode_mma(int H, int Hkv, int D, int f32);
/* Which decode partials run (tests and benchmarks; the engine keeps ENGK_DEC_AUTO): AUTO = tensor cores where
 * engk_attn_decode_mma says, with q and p each split into two bf16 terms (hi + rest: ~16 significant bits);
 * CUDA_CORES = the fp32 CUDA-core kernel everywhere (the previous one, for comparison); MMA_BF16 = tensor cores with
 * q and p rounded to bf16 once (one MMA each, 2^-9 relative). */
enum { ENGK_DEC_AUTO = 0, ENGK_DEC_CUDA_CORES = 1, ENGK_DEC_MMA_BF16 = 2 };
void engk_attn_decode_kernel(int kernel);

/* ---- prefill: T rows at positions pos0 .. pos0 + T - 1 ---- */

/* 1 if the bf16 prefill of head_dim D runs on tensor cores on the current device (sm_80+, D in
 * {16, 32, 64, 128, 256}, shared memory fits), else 0 (the fp32 CUDA-core kernel runs). */
int engk_attn_prefill_mma(int D, int f32);
/* 1 if the ENGK_MMA_WGMMA prefill runs here: built for sm_90a (engine/meson.build) with CUDA 12.5 or later (the
 * TMA form's tensor maps), a device of compute capability 9.0, bf16 KV, D = 128 and its shared memory fits; else 0. */
int engk_attn_prefill_wgmma(int D, int f32);
/* Online-softmax attention of q[T, H, D] over the KV tiles [tile_lo, tile_hi) of P positions; K/V[j - kv_pos0]
 * hold position j for j <= kv_last (rows past kv_last are never read). Causal, and a sliding window when
 * window > 0. State st_m, st_l [T, H], st_acc [T, H, D] (only without ENGK_INIT / ENGK_FINAL). */
cudaError_t engk_attn_prefill(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const void *K,
                              const void *V, int f32, int64_t kv_pos0, int64_t kv_last, int tile_lo, int tile_hi,
                              int P, int T, int64_t pos0, int H, int Hkv, int D, float scale, int window, int flags,
                              cudaStream_t s);
/* The tensor-core prefill with ENGK_FINAL writing ctx in bf16 (ctxb [T, H, D], 4-byte aligned): each value rounded to
 * nearest even from the fp32 ctx engk_attn_prefill would write, so the bits engk_to_bf16 gives from it, without the
 * fp32 store and that pass (the o GEMM's input, eng_gemm_run_bf16). Only where engk_attn_prefill_mma(D, f32) holds
 * (else cudaErrorInvalidValue); flags as engk_attn_prefill's, ENGK_FINAL required. */
cudaError_t engk_attn_prefill_bf16(const float *q, uint16_t *ctxb, float *st_m, float *st_l, float *st_acc,
                                   const void *K, const void *V, int f32, int64_t kv_pos0, int64_t kv_last,
                                   int tile_lo, int tile_hi, int P, int T, int64_t pos0, int H, int Hkv, int D,
                                   float scale, int window, int flags, cudaStream_t s);
/* Shared memory of the decode and CUDA-core prefill kernels at G query heads per KV head (the tile limit). */
size_t engk_attn_smem(int G, int D, int P);

#ifdef __cplusplus
}
#endif

#endif
