/* Engine attention kernels (see eng_attn.h). Built with -fmad=false: the only fused multiply-adds are the
 * explicit fmaf() calls and the MMA instructions, so every reduction's order and rounding is fixed by the source. */
#include "eng_attn.h"

#include <math.h>
#include <string.h>

#include <cuda.h>         /* CUtensorMap (the TMA variant of k_attn_wgs); no driver library is linked */
#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled, fetched through the runtime */

#include "eng_kdev.cuh"
#include "fault.h"

namespace {

constexpr int FAULT_NO_RESCALE = 0x100; /* fault injection (kv_offload_no_rescale): corr = 1 */
constexpr int CTX_BF16 = 0x400;         /* engk_attn_prefill_bf16: ctx holds bf16 (k_attn_mma, with ENGK_FINAL) */
constexpr int DEC_THREADS = 256, ROW_THREADS = 256;
constexpr int MMA_WARPS = 4, MMA_ROWS = MMA_WARPS * 16, KB = 64; /* KB: keys per MMA sub-block of a tile */

__device__ __forceinline__ float kv1(const uint16_t *p) { return __uint_as_float((unsigned)__ldg(p) << 16); }
__device__ __forceinline__ float kv1(const float *p) { return __ldg(p); }

/* 8 consecutive K/V elements (16-byte aligned), held as loaded: the decode kernel issues all of a round's loads
 * before it converts any of them. */
template <typename KV> struct Chunk;
template <> struct Chunk<uint16_t> {
    uint4 u;
    __device__ __forceinline__ void load(const uint16_t *p) { u = __ldg(reinterpret_cast<const uint4 *>(p)); }
    __device__ __forceinline__ void zero() { u = make_uint4(0u, 0u, 0u, 0u); }
    __device__ __forceinline__ float at(int e) const
    {
        const unsigned w = e < 2 ? u.x : e < 4 ? u.y : e < 6 ? u.z : u.w;
        return __uint_as_float(e & 1 ? w & 0xffff0000u : w << 16);
    }
};
template <> struct Chunk<float> {
    float4 a, b;
    __device__ __forceinline__ void load(const float *p)
    {
        a = __ldg(reinterpret_cast<const float4 *>(p));
        b = __ldg(reinterpret_cast<const float4 *>(p) + 1);
    }
    __device__ __forceinline__ void zero() { a = b = make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
    __device__ __forceinline__ float at(int e) const
    {
        const float4 v = e < 4 ? a : b;
        const int i = e & 3;
        return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
    }
};


__device__ __forceinline__ int64_t window_lo(int64_t pos, int window) { return engk_window_lo(pos, window); }

/* One warp, one head over a tile's n scores sp (shared): mn = max(mo, max sp), sp <- expf(sp - mn); returns mn and
 * the lane-strided sum of the probabilities (butterfly) in *ls. */
__device__ __forceinline__ float tile_probs(float *sp, int n, float mo, float *ls, int lane)
{
    float mt = -INFINITY;
    for (int jj = lane; jj < n; jj += 32)
        mt = fmaxf(mt, sp[jj]);
    const float mn = fmaxf(mo, warp_max(mt));
    float sum = 0.0f;
    for (int jj = lane; jj < n; jj += 32) {
        const float p = expf(sp[jj] - mn);
        sp[jj] = p;
        sum += p;
    }
    *ls = warp_sum(sum);
    return mn;
}

/* sum_j p_j v_j[d] over a tile's n keys in order (vr: V of the first key at dim d, kvs: the row stride). */
template <typename KV>
__device__ __forceinline__ float tile_pv(const float *ph, const KV *vr, int n, int64_t kvs)
{
    float s = 0.0f;
#pragma unroll 4
    for (int jj = 0; jj < n; jj++)
        s = fmaf(ph[jj], kv1(vr + jj * kvs), s);
    return s;
}

/* ---------------- decode: tile partials ---------------- */

/* The decode geometry is a function of D alone. LK lanes share a key (the power of two >= D/8, at most 32); lane
 * sl holds the key's chunks sl, sl + LK, ... (CPL of them) of 8 dims; a warp covers KPW = 32/LK keys per step, the
 * block KS = DEC_WARPS x KPW; a round is U = DEC_LOADS/CPL steps (KB = U x KS keys), so every thread has DEC_LOADS
 * 16-byte K loads and as many V loads in flight (bf16, D = 128: a round is 64 keys, 32 KiB per block). */
constexpr int DEC_WARPS = DEC_THREADS / 32, DEC_LOADS = 4;
constexpr int MERGE_THREADS = 256, MERGE_DIMS = 32, MERGE_SLICES = MERGE_THREADS / (MERGE_DIMS / 4);

__host__ __device__ constexpr int dec_lanes(int D)
{
    return D > 128 ? 32 : D > 64 ? 16 : D > 32 ? 8 : D > 16 ? 4 : D > 8 ? 2 : 1;
}
constexpr int dec_cpl(int D) { return D <= 256 ? 1 : D <= 512 ? 2 : D <= 1024 ? 4 : 0; }
template <typename KV> constexpr int dec_resident() { return sizeof(KV) == 2 ? 3 : 2; } /* blocks per SM */

/* This thread's chunks of round r of a tile's n keys (key jj at base + jj * kvs; j0: the thread's key in a step),
 * zero past n. */
template <typename KV, int CPL, int LK>
__device__ __forceinline__ void dec_round(Chunk<KV> (&c)[DEC_LOADS / CPL][CPL], const KV *base, int64_t kvs, int r,
                                          int n, int j0, int sl, int nc)
{
    constexpr int U = DEC_LOADS / CPL, KS = DEC_WARPS * (32 / LK);
#pragma unroll
    for (int i = 0; i < U; i++) {
        const int jj = (r * U + i) * KS + j0;
#pragma unroll
        for (int cc = 0; cc < CPL; cc++) {
            const int ch = sl + cc * LK;
            if (jj < n && ch < nc)
                c[i][cc].load(base + jj * kvs + ch * 8);
            else
                c[i][cc].zero();
        }
    }
}

/* ---------------- decode: the merge folded into the partial kernels (engk_attn_decode_fused) ---------------- */

/* k_dec_merge's acc / l for one (head h, dim d) of the live tiles tlo..thi, in its arithmetic and order: slice ks <
 * MERGE_SLICES walks tiles tlo + ks, tlo + ks + MERGE_SLICES, ... with a = fmaf(acc_k, w_k, a) from 0, w_k =
 * expf(m_k - M) (wk(k, s): tile k, partial slot s); the slices summed 0, 1, ... in order (a slice without tiles adds
 * its 0.0f); / lt (the slices' l summed alike, merge_tail). Walked in rounds of MERGE_SLICES tiles, one per slice, so
 * a round's loads are independent (in flight together) while each slice still sees its tiles in order. The partials
 * come through L2 (__ldcg): other blocks wrote them in this launch. */
template <typename Wk>
__device__ __forceinline__ float merge_elem(const float *pa, int64_t h, int H, int D, int d, int tlo, int thi, float lt,
                                            Wk wk)
{
    float acc[MERGE_SLICES];
#pragma unroll
    for (int ks = 0; ks < MERGE_SLICES; ks++)
        acc[ks] = 0.0f;
    for (int k0 = tlo; k0 <= thi; k0 += MERGE_SLICES)
#pragma unroll
        for (int ks = 0; ks < MERGE_SLICES; ks++)
            if (k0 + ks <= thi) {
                const int64_t s = (int64_t)(k0 + ks) * H + h;
                acc[ks] = fmaf(__ldcg(pa + s * D + d), wk(k0 + ks, s), acc[ks]);
            }
    float v = acc[0];
#pragma unroll
    for (int ks = 1; ks < MERGE_SLICES; ks++)
        v += acc[ks];
    return v / lt;
}

/* merge_elem of a single live tile from its partial (a, m, l): k_dec_merge's M = fmaxf over -inf and m (-inf for a
 * NaN m), then one slice of one tile, the 31 empty slices' +0.0f, a / l. */
__device__ __forceinline__ float merge_one(float a, float m, float l)
{
    const float M = fmaxf(-INFINITY, m), w = expf(m - M);
    const float v = fmaf(a, w, 0.0f) + 0.0f, lt = fmaf(l, w, 0.0f) + 0.0f;
    return v / lt;
}

/* The fused kernels' tail after an item of kv head g when several tiles are live (thi > tlo): every thread fences
 * its partial stores and the block arrives on cnt[g]; the block that arrives last (all thi - tlo + 1 partials of g
 * written) resets cnt[g] to 0 for the next launch, fences (acquire) and merges the group's G heads into ctx: the
 * bits do not depend on which block is last. Per head one warp, lane ks the slice ks: M = max m_k (exact: any order
 * gives k_dec_merge's), the slice's l = fmaf(l_k, w_k, l) over its tiles in order, lt = the 32 lanes' l summed
 * 0, 1, ... in order; then each (head, dim) by merge_elem. Called by all NT threads of the block with the same
 * arguments; sM: cap floats of shared memory the item is done with (M, lt per head, then the flag; then, where the
 * G x live tiles fit, each head's w_k as computed for l, so merge_elem reads them instead of m_k and expf: the same
 * floats, one L2 load and one expf fewer per tile and output). */
template <int NT>
__device__ void merge_tail(const float *part, float *ctx, unsigned *cnt, int g, int G, int tlo, int thi,
                           int max_tiles, int H, int D, float *sM, int cap)
{
    volatile int *last = reinterpret_cast<volatile int *>(sM + 2 * G);
    __threadfence(); /* this thread's partial stores, visible on the device before the block's arrival */
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned nt = (unsigned)(thi - tlo + 1);
        __threadfence(); /* cumulative: the block's stores that the barrier ordered before this thread (release) */
        const int is_last = atomicAdd(cnt + g, 1u) == nt - 1u;
        if (is_last) {
            atomicExch(cnt + g, 0u); /* every arrival of this launch is counted: nobody else touches cnt[g] */
            __threadfence();         /* the other blocks' partials are read after their arrivals */
        }
        *last = is_last;
    }
    __syncthreads();
    if (!*last)
        return;
    const float *pa = part, *pm = pa + (int64_t)max_tiles * H * D, *pl = pm + (int64_t)max_tiles * H;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nt = thi - tlo + 1;
    float *sw = sM + 2 * G + 1; /* [G][nt] w_k, where it fits */
    const bool tab = (int64_t)G * nt <= (int64_t)cap - (2 * G + 1);
    static_assert(MERGE_SLICES == 32, "a lane per slice");
    for (int hh = warp; hh < G; hh += NT / 32) {
        const int64_t h = (int64_t)g * G + hh;
        float M = -INFINITY;
        for (int k = tlo + lane; k <= thi; k += MERGE_SLICES)
            M = fmaxf(M, __ldcg(pm + (int64_t)k * H + h));
        M = warp_max(M);
        float l = 0.0f;
        for (int k = tlo + lane; k <= thi; k += MERGE_SLICES) {
            const int64_t s = (int64_t)k * H + h;
            const float w = expf(__ldcg(pm + s) - M);
            l = fmaf(__ldcg(pl + s), w, l);
            if (tab)
                sw[hh * nt + (k - tlo)] = w;
        }
        float lt = __shfl_sync(FULL, l, 0);
        for (int j = 1; j < MERGE_SLICES; j++)
            lt += __shfl_sync(FULL, l, j);
        if (lane == 0) {
            sM[hh] = M;
            sM[G + hh] = lt;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * D; i += NT) {
        const int hh = i / D, d = i - hh * D;
        const int64_t h = (int64_t)g * G + hh;
        const float M = sM[hh], *w = sw + hh * nt;
        ctx[h * D + d] = tab ? merge_elem(pa, h, H, D, d, tlo, thi, sM[G + hh], [&](int k, int64_t) { return w[k - tlo]; })
                             : merge_elem(pa, h, H, D, d, tlo, thi, sM[G + hh],
                                          [&](int, int64_t s) { return expf(__ldcg(pm + s) - M); });
    }
}

/* Work items (tile k, kv head g) of the live tiles in [kmin, kmax], k-major, strided over a fixed grid (the grid
 * never depends on pos; a tile's arithmetic never depends on the grid). Per item, for the group's G heads:
 * s_j = scale * (q . k_j), each by LK lanes (chunk order, fmaf in order, xor butterfly over the LK lanes); then per
 * head m = max s_j, p_j = expf(s_j - m), l = tile_probs' lane-strided sum + butterfly; then acc[d] = sum_j p_j v_j[d]
 * in a fixed tree: per thread its keys in round and step order (fmaf), xor butterfly over its warp's KPW key
 * lanes, then warps 0..7 in order through shared memory. Partials: acc [max_tiles][H][D], m and l
 * [max_tiles][H]. FUSE (engk_attn_decode_fused; a template, so the partials-only kernel keeps its code): the merge
 * is folded in: a single live tile is merged by its block (merge_one), several by the block that writes a kv head's
 * last partial (merge_tail); ctx as k_dec_merge's. */
template <typename KV, int CPL, int LK, bool FUSE>
__global__ void __launch_bounds__(DEC_THREADS, dec_resident<KV>())
    k_dec_part(const float *q, float *part, float *ctx, unsigned *cnt, const KV *Kc, const KV *Vc,
               const int64_t *pos_dev, int64_t kv_pos0, int kmin, int kmax, int max_tiles, int P, int H, int Hkv,
               int D, float scale, int window)
{
    dep_wait(); /* q, the new K/V row and *pos_dev come from the kernels before: launch_dep */
    dep_launch();
    constexpr int U = DEC_LOADS / CPL, HG = DEC_LOADS / CPL; /* HG: heads per V pass (HG x CPL x 8 accumulators) */
    extern __shared__ float sd[];
    const int G = H / Hkv, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t pos = *pos_dev, lo = window_lo(pos, window);
    const int tl = engk_dec_tlo(pos, window, P), th = engk_dec_thi(pos, P);
    const int tlo = tl > kmin ? tl : kmin, thi = th < kmax ? th : kmax;
    const int64_t items = thi >= tlo ? (int64_t)(thi - tlo + 1) * Hkv : 0;
    constexpr int KPW = 32 / LK, KS = DEC_WARPS * KPW, KB = U * KS; /* LK: dec_lanes(D), a template for unrolling */
    const int nc = D >> 3, grp = lane / LK, sl = lane % LK, j0 = warp * KPW + grp;
    const int64_t kvs = (int64_t)Hkv * D;
    float *pa = part, *pm = pa + (int64_t)max_tiles * H * D, *pl = pm + (int64_t)max_tiles * H;
    const int region = G * D > DEC_WARPS * HG * D ? G * D : DEC_WARPS * HG * D;
    float *qs = sd, *red = sd, *sp = sd + region; /* red reuses qs once the scores are done */
    const bool one = FUSE && thi == tlo; /* fused, a single live tile: this item's block writes ctx */
    for (int64_t it = blockIdx.x; it < items; it += gridDim.x) {
        const int k = tlo + (int)(it / Hkv), g = (int)(it % Hkv);
        const int64_t t0 = (int64_t)k * P, a = t0 > lo ? t0 : lo, b = t0 + P - 1 < pos ? t0 + P - 1 : pos;
        const int n = (int)(b - a + 1);
        const KV *kb = Kc + (a - kv_pos0) * kvs + (int64_t)g * D, *vb = Vc + (a - kv_pos0) * kvs + (int64_t)g * D;
        Chunk<KV> kc[U][CPL], vc[U][CPL];
        dec_round<KV, CPL, LK>(kc, kb, kvs, 0, n, j0, sl, nc); /* K and V of round 0 in flight together */
        dec_round<KV, CPL, LK>(vc, vb, kvs, 0, n, j0, sl, nc);
        __syncthreads(); /* the previous item is done with qs / red / sp */
        for (int i = tid; i < G * D; i += DEC_THREADS)
            qs[i] = q[(int64_t)g * G * D + i];
        __syncthreads();
        for (int r = 0; r * KB < n; r++) {
            if (r)
                dec_round<KV, CPL, LK>(kc, kb, kvs, r, n, j0, sl, nc);
            float kf[U][CPL][8]; /* the round's keys converted once for all G heads */
#pragma unroll
            for (int i = 0; i < U; i++)
#pragma unroll
                for (int cc = 0; cc < CPL; cc++)
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        kf[i][cc][e] = kc[i][cc].at(e);
            for (int h = 0; h < G; h++) { /* the U keys' dots interleaved: U independent fmaf chains */
                float sc[U];
#pragma unroll
                for (int i = 0; i < U; i++)
                    sc[i] = 0.0f;
#pragma unroll
                for (int cc = 0; cc < CPL; cc++) {
                    const int ch = sl + cc * LK;
                    if (ch < nc) {
                        const float4 *q4 = reinterpret_cast<const float4 *>(qs + h * D + ch * 8);
                        const float4 qa = q4[0], qb = q4[1];
#pragma unroll
                        for (int i = 0; i < U; i++) {
                            sc[i] = fmaf(qa.x, kf[i][cc][0], sc[i]);
                            sc[i] = fmaf(qa.y, kf[i][cc][1], sc[i]);
                            sc[i] = fmaf(qa.z, kf[i][cc][2], sc[i]);
                            sc[i] = fmaf(qa.w, kf[i][cc][3], sc[i]);
                            sc[i] = fmaf(qb.x, kf[i][cc][4], sc[i]);
                            sc[i] = fmaf(qb.y, kf[i][cc][5], sc[i]);
                            sc[i] = fmaf(qb.z, kf[i][cc][6], sc[i]);
                            sc[i] = fmaf(qb.w, kf[i][cc][7], sc[i]);
                        }
                    }
                }
                /* The xor butterfly as a reduce-scatter: while a lane holds cnt > 1 keys, it keeps half and sends the
                 * other half to its partner, so each key's sum pairs the same lanes in the same order (bits as a
                 * full butterfly per key) with fewer shuffles; the lane then holds keys idx .. idx + cnt - 1. */
                int cnt = U, idx = 0, same = 0; /* same: the offsets after which lanes hold equal sums */
#pragma unroll
                for (int off = LK >> 1; off; off >>= 1) {
                    if (cnt > 1) {
                        const int half = cnt >> 1;
                        const bool up = (sl & off) != 0;
#pragma unroll
                        for (int i = 0; i < half; i++) {
                            const float keep = up ? sc[i + half] : sc[i], send = up ? sc[i] : sc[i + half];
                            sc[i] = keep + __shfl_xor_sync(FULL, send, off);
                        }
                        idx += up ? half : 0;
                        cnt = half;
                    } else {
                        sc[0] += __shfl_xor_sync(FULL, sc[0], off);
                        same |= off;
                    }
                }
                if ((sl & same) == 0)
#pragma unroll
                    for (int i = 0; i < cnt; i++) {
                        const int jj = (r * U + idx + i) * KS + j0;
                        if (jj < n)
                            sp[h * P + jj] = sc[i] * scale;
                    }
            }
        }
        __syncthreads();
        const int64_t slot = (int64_t)k * H + (int64_t)g * G; /* (tile, first head of the group) */
        for (int h = warp; h < G; h += DEC_WARPS) {
            float ls;
            const float mt = tile_probs(sp + h * P, n, -INFINITY, &ls, lane);
            if (lane == 0) {
                pm[slot + h] = mt;
                pl[slot + h] = ls;
            }
        }
        __syncthreads();
        for (int hg = 0; hg < G; hg += HG) {
            float acc[HG * CPL * 8]; /* [head][chunk][8] */
#pragma unroll
            for (int x = 0; x < HG * CPL * 8; x++)
                acc[x] = 0.0f;
            for (int r = 0; r * KB < n; r++) {
                if (hg || r)
                    dec_round<KV, CPL, LK>(vc, vb, kvs, r, n, j0, sl, nc);
#pragma unroll
                for (int i = 0; i < U; i++) {
                    const int jj = (r * U + i) * KS + j0;
                    if (jj >= n)
                        continue;
#pragma unroll
                    for (int hh = 0; hh < HG; hh++) {
                        const float p = hg + hh < G ? sp[(hg + hh) * P + jj] : 0.0f;
#pragma unroll
                        for (int cc = 0; cc < CPL; cc++) {
                            float *ac = acc + (hh * CPL + cc) * 8;
#pragma unroll
                            for (int e = 0; e < 8; e++)
                                ac[e] = fmaf(p, vc[i][cc].at(e), ac[e]);
                        }
                    }
                }
            }
#pragma unroll
            for (int off = LK; off < 32; off <<= 1)
#pragma unroll
                for (int x = 0; x < HG * CPL * 8; x++)
                    acc[x] += __shfl_xor_sync(FULL, acc[x], off);
            if (grp == 0)
#pragma unroll
                for (int hh = 0; hh < HG; hh++)
#pragma unroll
                    for (int cc = 0; cc < CPL; cc++) {
                        const int ch = sl + cc * LK;
                        if (ch < nc) {
                            const float *ac = acc + (hh * CPL + cc) * 8;
                            float4 *r4 = reinterpret_cast<float4 *>(red + (warp * HG + hh) * D + ch * 8);
                            r4[0] = make_float4(ac[0], ac[1], ac[2], ac[3]);
                            r4[1] = make_float4(ac[4], ac[5], ac[6], ac[7]);
                        }
                    }
            __syncthreads();
            for (int i = tid; i < HG * D; i += DEC_THREADS) {
                const int hh = i / D, d = i - hh * D;
                if (hg + hh < G) {
                    float v = red[hh * D + d];
                    for (int w = 1; w < DEC_WARPS; w++)
                        v += red[(w * HG + hh) * D + d];
                    pa[(slot + hg + hh) * D + d] = v;
                    if (one) /* m and l of this head: written by another warp before the barrier above */
                        ctx[((int64_t)g * G + hg + hh) * D + d] = merge_one(v, pm[slot + hg + hh], pl[slot + hg + hh]);
                }
            }
            __syncthreads();
        }
        if (FUSE && !one)
            merge_tail<DEC_THREADS>(part, ctx, cnt, g, G, tlo, thi, max_tiles, H, D, red, region + G * P);
    }
}

/* One block per (head, MERGE_DIMS dims): M = max of the live tiles' m; thread (slice ks, quad of dims) walks tiles
 * tlo + ks, tlo + ks + MERGE_SLICES, ... with w_k = expf(m_k - M), l = fmaf(l_k, w_k, l), acc = fmaf(acc_k, w_k,
 * acc); the slices are then summed 0, 1, ... in order through shared memory; ctx = acc / l. */
__global__ void __launch_bounds__(MERGE_THREADS) k_dec_merge(const float *part, float *ctx, const int64_t *pos_dev,
                                                             int max_tiles, int P, int H, int D, int window)
{
    dep_wait(); /* the partials come from the kernel before: launch_dep */
    dep_launch();
    __shared__ float red[MERGE_SLICES][MERGE_DIMS + 1], wm[MERGE_THREADS / 32], tot[MERGE_DIMS + 1];
    const int h = blockIdx.x, tid = threadIdx.x, lane = tid & 31;
    const int quad = tid % (MERGE_DIMS / 4), ks = tid / (MERGE_DIMS / 4), d = blockIdx.y * MERGE_DIMS + 4 * quad;
    const int64_t pos = *pos_dev;
    const int tlo = engk_dec_tlo(pos, window, P), thi = engk_dec_thi(pos, P);
    const float *pa = part, *pm = pa + (int64_t)max_tiles * H * D, *pl = pm + (int64_t)max_tiles * H;
    float M = -INFINITY;
    for (int k = tlo + tid; k <= thi; k += MERGE_THREADS)
        M = fmaxf(M, pm[(int64_t)k * H + h]);
    M = warp_max(M);
    if (lane == 0)
        wm[tid >> 5] = M;
    __syncthreads();
    M = wm[0];
    for (int w = 1; w < MERGE_THREADS / 32; w++)
        M = fmaxf(M, wm[w]);
    float l = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const bool dok = d < D;
#pragma unroll 4
    for (int k = tlo + ks; k <= thi; k += MERGE_SLICES) {
        const int64_t s = (int64_t)k * H + h;
        const float w = expf(pm[s] - M);
        l = fmaf(pl[s], w, l);
        if (dok) {
            const float4 v = *reinterpret_cast<const float4 *>(pa + s * D + d);
            acc.x = fmaf(v.x, w, acc.x);
            acc.y = fmaf(v.y, w, acc.y);
            acc.z = fmaf(v.z, w, acc.z);
            acc.w = fmaf(v.w, w, acc.w);
        }
    }
    red[ks][4 * quad] = acc.x;
    red[ks][4 * quad + 1] = acc.y;
    red[ks][4 * quad + 2] = acc.z;
    red[ks][4 * quad + 3] = acc.w;
    if (quad == 0)
        red[ks][MERGE_DIMS] = l;
    __syncthreads();
    if (tid <= MERGE_DIMS) {
        float v = red[0][tid];
        for (int j = 1; j < MERGE_SLICES; j++)
            v += red[j][tid];
        tot[tid] = v;
    }
    __syncthreads();
    if (tid < MERGE_DIMS && blockIdx.y * MERGE_DIMS + tid < D)
        ctx[(int64_t)h * D + blockIdx.y * MERGE_DIMS + tid] = tot[tid] / tot[MERGE_DIMS];
    trace_mark();
}

int dec_blocks_cap = 0; /* tests (engk_attn_decode_blocks) */
size_t dec_smem(int G, int D, int P);

/* The partials of the live tiles in [kmin, kmax] on a fixed grid: as many blocks as the device holds at once (at
 * most one per item, at most dec_blocks_cap). */
template <typename KV, int CPL, int LK, bool FUSE>
cudaError_t launch_dec_f(const float *q, float *part, float *ctx, unsigned *cnt, const KV *K, const KV *V,
                       const int64_t *pos_dev, int64_t kv_pos0, int kmin, int kmax, int max_tiles, int P, int H,
                       int Hkv, int D, float scale, int window, cudaStream_t s)
{
    static int dev_c = -1, sms = 0;
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess && dev != dev_c) {
        err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        dev_c = err == cudaSuccess ? dev : -1;
    }
    if (err != cudaSuccess)
        return err;
    int64_t blocks = (int64_t)sms * dec_resident<KV>();
    const int64_t items = (int64_t)(kmax - kmin + 1) * Hkv;
    blocks = blocks < items ? blocks : items;
    if (dec_blocks_cap > 0 && blocks > dec_blocks_cap)
        blocks = dec_blocks_cap;
    return launch_dep(k_dec_part<KV, CPL, LK, FUSE>, dim3((unsigned)blocks), dim3(DEC_THREADS), dec_smem(H / Hkv, D, P), s,
                      q, part, ctx, cnt, K, V, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window);
}

/* ctx, cnt: engk_attn_decode_fused's (the merge folded in), or NULL (the partials alone) */
template <typename KV, int CPL, int LK>
cudaError_t launch_dec(const float *q, float *part, float *ctx, unsigned *cnt, const KV *K, const KV *V,
                       const int64_t *pos_dev, int64_t kv_pos0, int kmin, int kmax, int max_tiles, int P, int H,
                       int Hkv, int D, float scale, int window, cudaStream_t s)
{
    if (cnt)
        return launch_dec_f<KV, CPL, LK, true>(q, part, ctx, cnt, K, V, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H,
                                               Hkv, D, scale, window, s);
    return launch_dec_f<KV, CPL, LK, false>(q, part, ctx, cnt, K, V, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H,
                                            Hkv, D, scale, window, s);
}

template <typename KV>
cudaError_t dec_part(const float *q, float *part, float *ctx, unsigned *cnt, const void *K, const void *V,
                     const int64_t *pos_dev, int64_t kv_pos0, int kmin, int kmax, int max_tiles, int P, int H, int Hkv,
                     int D, float scale, int window, cudaStream_t s)
{
    const KV *k = static_cast<const KV *>(K), *v = static_cast<const KV *>(V);
    const int cpl = dec_cpl(D), lanes = dec_lanes(D);
    if (cpl == 1)
        switch (lanes) {
        case 1: return launch_dec<KV, 1, 1>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
        case 2: return launch_dec<KV, 1, 2>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
        case 4: return launch_dec<KV, 1, 4>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
        case 8: return launch_dec<KV, 1, 8>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
        case 16: return launch_dec<KV, 1, 16>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
        default: return launch_dec<KV, 1, 32>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
        }
    switch (cpl) {
    case 2: return launch_dec<KV, 2, 32>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
    case 4: return launch_dec<KV, 4, 32>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
    default: return cudaErrorInvalidValue; /* head_dim > 1024 */
    }
}

/* ---------------- prefill on CUDA cores (fp32 KV, sm < 80, other head dims) ---------------- */

/* One block per (row t, kv head g) serving the G query heads of the group; the KV tile walk and the
 * (m, l, acc) update order are fixed by the tile size P alone. */
template <typename KV>
__global__ void __launch_bounds__(ROW_THREADS) k_attn_rows(const float *q, float *ctx, float *st_m, float *st_l,
                                                           float *st_acc, const KV *Kc, const KV *Vc, int64_t kv_pos0,
                                                           int tile_lo, int tile_hi, int P, int64_t pos0, int H,
                                                           int Hkv, int D, float scale, int window, int flags)
{
    extern __shared__ float sha[];
    const int G = H / Hkv;
    float *qs = sha, *acc = qs + G * D, *sp = acc + G * D, *sm = sp + G * P, *sl = sm + G, *sc = sl + G;
    const int t = blockIdx.x / Hkv, g = blockIdx.x % Hkv;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, nw = ROW_THREADS / 32;
    const int64_t pos = pos0 + t, lo = window_lo(pos, window);
    const int64_t hb = (int64_t)t * H + (int64_t)g * G; /* (t, first head of the group) in [T, H] */
    const int64_t kvs = (int64_t)Hkv * D;
    for (int i = tid; i < G * D; i += ROW_THREADS) {
        qs[i] = q[hb * D + i];
        acc[i] = (flags & ENGK_INIT) ? 0.0f : st_acc[hb * D + i];
    }
    for (int h = tid; h < G; h += ROW_THREADS) {
        sm[h] = (flags & ENGK_INIT) ? -INFINITY : st_m[hb + h];
        sl[h] = (flags & ENGK_INIT) ? 0.0f : st_l[hb + h];
    }
    __syncthreads();
    for (int k = tile_lo; k < tile_hi; k++) {
        const int64_t t0 = (int64_t)k * P;
        const int64_t a = t0 > lo ? t0 : lo, b = t0 + P - 1 < pos ? t0 + P - 1 : pos;
        if (a > b)
            continue;
        const int n = (int)(b - a + 1);
        /* scores: one warp per (key, head), lanes stride over D, butterfly */
        for (int idx = warp; idx < n * G; idx += nw) {
            const int jj = idx / G, h = idx % G;
            const KV *kr = Kc + (a + jj - kv_pos0) * kvs + (int64_t)g * D;
            const float *qh = qs + h * D;
            float part = 0.0f;
            for (int d = lane; d < D; d += 32)
                part = fmaf(qh[d], kv1(kr + d), part);
            part = warp_sum(part);
            if (lane == 0)
                sp[h * P + jj] = part * scale;
        }
        __syncthreads();
        /* per head: tile max, rescale factor, probabilities, tile sum */
        for (int h = warp; h < G; h += nw) {
            float ls;
            const float mo = sm[h], mn = tile_probs(sp + h * P, n, mo, &ls, lane);
            const float corr = RC_FAULTS_BUILT && (flags & FAULT_NO_RESCALE) ? 1.0f : expf(mo - mn);
            __syncwarp();
            if (lane == 0) {
                sl[h] = fmaf(sl[h], corr, ls);
                sm[h] = mn;
                sc[h] = corr;
            }
        }
        __syncthreads();
        /* acc = acc * corr + sum_j p_j v_j, one thread per (head, dim), keys in order */
        for (int i = tid; i < G * D; i += ROW_THREADS) {
            const int h = i / D, d = i % D;
            acc[i] = fmaf(acc[i], sc[h], tile_pv(sp + h * P, Vc + (a - kv_pos0) * kvs + (int64_t)g * D + d, n, kvs));
        }
        __syncthreads();
    }
    if (flags & ENGK_FINAL) {
        for (int i = tid; i < G * D; i += ROW_THREADS)
            ctx[hb * D + i] = acc[i] / sl[i / D];
    } else {
        for (int i = tid; i < G * D; i += ROW_THREADS)
            st_acc[hb * D + i] = acc[i];
        for (int h = tid; h < G; h += ROW_THREADS) {
            st_m[hb + h] = sm[h];
            st_l[hb + h] = sl[h];
        }
    }
}

/* ---------------- prefill on tensor cores (bf16 KV, sm_80+) ---------------- */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 /* the MMA kernel's helpers (sm_80+ only) */

__device__ __forceinline__ unsigned pack2(unsigned lo, unsigned hi) { return lo | (hi << 16); }

__device__ __forceinline__ void mma16816(float *c, const unsigned *a, unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four 8x8 b16 matrices: lanes 8q .. 8q + 7 give the row addresses of matrix q; register q of lane l gets row
 * l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 of matrix q (of its transpose with trans). */
template <bool trans> __device__ __forceinline__ void ldsm_x4(unsigned *r, const uint16_t *p)
{
    const unsigned addr = smem_u32(p);
    if (trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
}

/* 16 bytes global -> shared, or 16 zero bytes when !valid (src must still be a valid address); eng_cpasync.cuh */
__device__ __forceinline__ void cp16(uint16_t *dst, const uint16_t *src, bool valid)
{
    cpa_16_fill(smem_u32(dst), src, valid ? 16 : 0);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* shared-memory barriers (LOOP_PIPE): init (one thread, before a __syncthreads), arrive, the arrive of this thread's
 * copies once they land (counted in the init count: noinc), and the wait for the phase of the given parity */
__device__ __forceinline__ void mbar_init(uint64_t *b, unsigned n)
{
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b)
{
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared.b64 st, [%0];\n}\n" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void cp_mbar_arrive(uint64_t *b)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, unsigned parity)
{
    unsigned done;
    do
#if __CUDA_ARCH__ >= 900 /* try_wait suspends the thread for a while instead of spinning on the issue slots */
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_u32(b)), "r"(parity)
                     : "memory");
#else
        asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_u32(b)), "r"(parity)
                     : "memory");
#endif
    while (!done);
}
#endif

/* Keys of tile k: sub-blocks of KB starting at k*P + s*KB, the last one shorter when KB does not divide P. */
__device__ __forceinline__ void sub_block(int idx, int tile_lo, int nsub, int P, int64_t *kb0, int *nb)
{
    const int k = tile_lo + idx / nsub, s = idx % nsub;
    *kb0 = (int64_t)k * P + (int64_t)s * KB;
    *nb = P - s * KB < KB ? P - s * KB : KB;
}

/* The walk's sub-block at its first key kb0, with rem keys of its tile from there (the LEAN forms' cursor: the
 * same sub-blocks as sub_block, one step at a time, without a division). */
struct SubCur {
    int64_t kb0;
    int rem;
    __device__ __forceinline__ int nb() const { return rem < KB ? rem : KB; }
    __device__ __forceinline__ void next(int P)
    {
        if (rem > KB) {
            kb0 += KB;
            rem -= KB;
        } else {
            kb0 += rem;
            rem = P;
        }
    }
};

/* Sub-block index (relative to tile_lo) that holds position p. */
__device__ __forceinline__ int sub_of(int64_t p, int tile_lo, int nsub, int P)
{
    const int64_t k = p / P;
    return (int)((k - tile_lo) * nsub + (p - k * P) / KB);
}

/* A packed bf16 pair {lo, hi} rounded to nearest even: for finite values the bits of
 * pack2(bf16_rne(lo), bf16_rne(hi)), in one instruction. */
__device__ __forceinline__ unsigned cvt_bf16x2(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* 2^x on the special function unit (one instruction, the same bits every run; ex2(-inf) = 0). */
__device__ __forceinline__ float ex2(float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}

/* The prefill kernels' per-row steps on one m16 tile's fragments (k_attn_mma's and k_attn_wg's: the same arithmetic
 * in the same order). This thread holds rows qr and qr + 8 (i = 0, 1), columns 8 j + 2 qc + e of S (j < NJ) and of
 * acc (dims, j < NT). */

/* Packed row R of kv head g (position R / G, query head g G + R % G) -> its row of q / ctx (rows >= rows: row 0's). */
__device__ __forceinline__ int64_t prow_index(int R, int rows, int G, int H, int g)
{
    const int t = R < rows ? R / G : 0, h = R < rows ? R % G : 0;
    return (int64_t)t * H + (int64_t)g * G + h;
}

/* The keys of tiles [tile_lo, tile_hi) up to kv_last that packed rows r0 .. r1 see: [*lo, *hi] (empty: lo > hi). */
__device__ __forceinline__ void prow_keys(int r0, int r1, int G, int64_t pos0, int window, int tile_lo, int tile_hi,
                                          int P, int64_t kv_last, int64_t *lo, int64_t *hi)
{
    const int64_t cut_lo = (int64_t)tile_lo * P, cut_hi = (int64_t)tile_hi * P - 1 < kv_last ? (int64_t)tile_hi * P - 1 : kv_last;
    const int64_t blo = window_lo(pos0 + r0 / G, window), bhi = pos0 + r1 / G;
    *lo = blo > cut_lo ? blo : cut_lo;
    *hi = bhi < cut_hi ? bhi : cut_hi;
}

/* (m, l, acc) of rows R[0], R[1]: loaded from the state (ld[i]) or -inf, 0, 0 (k_attn_wg; k_attn_mma keeps its own
 * loop, the same steps: through this helper ptxas spilled its 256-row lean form, the engine's, 0 -> 112 bytes). */
template <int D>
__device__ __forceinline__ void prow_state_load(float (&o)[D / 8][4], float (&m)[2], float (&l)[2], const bool (&ld)[2],
                                                const int64_t (&ri)[2], const float *st_m, const float *st_l,
                                                const float *st_acc, int qc)
{
#pragma unroll
    for (int i = 0; i < 2; i++) {
        m[i] = ld[i] ? st_m[ri[i]] : -INFINITY;
        l[i] = ld[i] ? st_l[ri[i]] : 0.0f;
#pragma unroll
        for (int nt = 0; nt < D / 8; nt++) {
            float2 v = make_float2(0.0f, 0.0f);
            if (ld[i])
                v = *reinterpret_cast<const float2 *>(st_acc + ri[i] * D + nt * 8 + 2 * qc);
            o[nt][2 * i] = v.x;
            o[nt][2 * i + 1] = v.y;
        }
    }
}

/* Keys outside row R[i]'s [lo(p), p] to -inf: the sub-block of nb keys at kb0 = pos0 + kd. */
template <int NJ>
__device__ __forceinline__ void prow_mask(float (&s)[NJ][4], const int (&R)[2], int rows, int G, int64_t kd, int nb,
                                          int window, int qc)
{
#pragma unroll
    for (int i = 0; i < 2; i++) { /* keys [lo, hi] of the sub-block: dh = p - kb0, dl = lo(p) - kb0 */
        const int64_t dh = (R[i] < rows ? R[i] / G : 0) - kd, dl = dh - window + 1;
        const int hi = R[i] >= rows || dh < 0 ? -1 : dh < nb - 1 ? (int)dh : nb - 1;
        const int lo = window <= 0 || dl < 0 ? 0 : dl < KB ? (int)dl : KB;
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int jj = j * 8 + 2 * qc + e;
                if (jj < lo || jj > hi)
                    s[j][2 * i + e] = -INFINITY;
            }
    }
}

/* The online-softmax step over a sub-block's S (raw score units): m_new = max(m, max S) over the quad, corr = m_new
 * == m (or nrs) ? 1 : 2^((m - m_new) c), p = 2^(fmaf(S, c, -m_new c)) rounded to bf16 pairs in pb (P V's A
 * fragments), l = fmaf(l, corr, sum p) with the sum in a fixed per-quad order; then acc *= corr (skipped when every
 * corr of the warp is 1: acc * 1 = acc). */
template <int NJ, bool INPLACE = false> /* INPLACE: p stays in fp32 in s (pb untouched), packed later */
__device__ __forceinline__ void prow_softmax_p(float (&s)[NJ][4], unsigned (&pb)[NJ][2], float (&corr)[2],
                                               float (&m)[2], float (&l)[2], float scale_log2, int nrs)
{
#pragma unroll
    for (int i = 0; i < 2; i++) {
        float mx = m[i];
#pragma unroll
        for (int j = 0; j < NJ; j++)
            mx = fmaxf(mx, fmaxf(s[j][2 * i], s[j][2 * i + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 2));
        corr[i] = mx == m[i] || nrs ? 1.0f : ex2((m[i] - mx) * scale_log2);
        const float ms = mx == -INFINITY ? 0.0f : mx * scale_log2;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            const float p0 = ex2(fmaf(s[j][2 * i], scale_log2, -ms));
            const float p1 = ex2(fmaf(s[j][2 * i + 1], scale_log2, -ms));
            sum += p0;
            sum += p1;
            if (INPLACE) {
                s[j][2 * i] = p0;
                s[j][2 * i + 1] = p1;
            } else
                pb[j][i] = cvt_bf16x2(p0, p1);
        }
        sum += __shfl_xor_sync(FULL, sum, 1);
        sum += __shfl_xor_sync(FULL, sum, 2);
        l[i] = fmaf(l[i], corr[i], sum);
        m[i] = mx;
    }
}
/* acc *= corr (skipped when every corr of the warp is 1: acc * 1 = acc, no bit changes; ALWAYS: not skipped, no
 * branch) */
template <int NT, bool ALWAYS = false>
__device__ __forceinline__ void prow_rescale(float (&o)[NT][4], const float (&corr)[2])
{
    if (ALWAYS || !__all_sync(FULL, corr[0] == 1.0f && corr[1] == 1.0f))
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            o[nt][0] = o[nt][0] * corr[0];
            o[nt][1] = o[nt][1] * corr[0];
            o[nt][2] = o[nt][2] * corr[1];
            o[nt][3] = o[nt][3] * corr[1];
        }
}
template <int NJ, int NT>
__device__ __forceinline__ void prow_softmax(float (&s)[NJ][4], unsigned (&pb)[NJ][2], float (&o)[NT][4],
                                             float (&m)[2], float (&l)[2], float scale_log2, int nrs)
{
    float corr[2];
    prow_softmax_p(s, pb, corr, m, l, scale_log2, nrs);
    prow_rescale(o, corr);
}

/* Row i's end (its q / ctx row ro): with ENGK_FINAL ctx = acc / l (bf16 with CTX_BF16), else the state. */
template <int D>
__device__ __forceinline__ void prow_store(const float (&o)[D / 8][4], int i, float m, float l, int64_t ro, float *ctx,
                                           float *st_m, float *st_l, float *st_acc, int flags, int qc)
{
    constexpr int NT = D / 8;
    if ((flags & (ENGK_FINAL | CTX_BF16)) == (ENGK_FINAL | CTX_BF16)) {
        uint16_t *cb = reinterpret_cast<uint16_t *>(ctx) + ro * D + 2 * qc;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            *reinterpret_cast<unsigned *>(cb + nt * 8) = pack2(bf16_rne(o[nt][2 * i] / l), bf16_rne(o[nt][2 * i + 1] / l));
    } else if (flags & ENGK_FINAL) {
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            *reinterpret_cast<float2 *>(ctx + ro * D + nt * 8 + 2 * qc) = make_float2(o[nt][2 * i] / l, o[nt][2 * i + 1] / l);
    } else {
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            *reinterpret_cast<float2 *>(st_acc + ro * D + nt * 8 + 2 * qc) = make_float2(o[nt][2 * i], o[nt][2 * i + 1]);
        if (qc == 0) {
            st_m[ro] = m;
            st_l[ro] = l;
        }
    }
}
#endif

/* Blocks per SM the register budget is cut for. 16 rows per warp (WM = 1): three 64-row blocks (12 warps) at
 * D = 128, where one warp's chain of MMA, ex2 and shuffles leaves the issue slots idle unless other warps fill them.
 * 32 rows per warp (WM = 2): two 128-row blocks (255 registers; at D = 128 also the shared memory of two), or one
 * 256-row block of 8 warps. */
constexpr int mma_resident(int D, int NW, int WM)
{
    return WM == 2 ? (NW > MMA_WARPS ? 1 : 2) : D == 128 && NW == MMA_WARPS ? 3 : 1;
}

/* The prefill kernel's sub-block loop. OLD: session 4's (a division per sub-block for the walk and per copy,
 * predicated 64-bit addressing of every 16-byte copy); LEAN: sub-block cursors (SubCur), one 64-bit base per copied
 * sub-block, unpredicated copies of full sub-blocks. The same arithmetic in the same order per row: the same bits.
 * (Two more loops, P V and also Q K^T issued per m16 tile, measured slower on the H200 at every T and were removed;
 * engine/README.md, "Prefill attention forms".) */
enum { LOOP_OLD = 0, LOOP_LEAN = 1, LOOP_PIPE = 2 };
/* LOOP_PIPE (8 warps x 32 rows, ENGK_MMA_PIPE): LEAN's arithmetic with the warps no longer meeting at a barrier each
 * sub-block. Four K/V buffers, each with two shared-memory barriers (mbarrier): FULL completes when every thread's
 * copies of the sub-block landed (cp.async.mbarrier.arrive.noinc), EMPTY when every thread is done with it. At
 * sub-block u a thread copies its share of sub-block u + 2 into the buffer of u - 2 (after that buffer's EMPTY),
 * waits for FULL of u, runs S, mask, softmax and P V, and arrives on EMPTY of u. So warps may drift up to a
 * sub-block apart without waiting, and warps in different phases (S and P V on the tensor cores, the softmax on the
 * other pipes) can overlap. The same per-row order: the same bits. The engine's 8-warp form since session 11
 * (MMA_FORM_PIPE8): on the H200, causal H = 32/8, D = 128, one chunk, TFLOP/s LEAN8 -> PIPE: T = 2048 203.9 ->
 * 211.1, T = 8192 284.3 -> 315.0, T = 32768 316.4 -> 357.1 (one --bench run). Holding warps 4-7 half a step behind
 * warps 0-3 at the start (a named barrier) measured slower at every T (205.7, 309.5, 350.2) and was removed. */
/* The engine's prefill form for blocks of 32 rows per warp (long chunks): a loop, and whether long chunks (one
 * 256-row block per SM) run in blocks of 8 warps x 32 rows (half the K/V copies per MMA, one block per SM) instead
 * of 4 warps x 32 rows (two blocks per SM). MMA_LOOP16: the loop of blocks of 16 rows per warp (short chunks,
 * D = 256), where LEAN spills more than OLD at the 168 / 255 register caps. Flip after measuring
 * (tests/engine/test_engk_attn --bench prints each form); every form gives the same bits. Measured on the H200
 * (llama3-8b heads, causal, one chunk; TFLOP/s old / lean / 256-row lean): T = 2048 199.1 / 200.8 / 205.9, T = 8192
 * 281.7 / 280.7 / 283.7, T = 32768 313.3 / 309.2 / 313.5: LEAN8; then PIPE8 (LOOP_PIPE above, where its shared
 * memory fits; LEAN8 where it does not). */
enum {
    MMA_FORM_OLD = 0,
    MMA_FORM_LEAN = 1,
    MMA_FORM_LEAN8 = 4,
    MMA_FORM_PIPE8 = 5,
};
constexpr int MMA_FORM = MMA_FORM_PIPE8, MMA_LOOP16 = LOOP_OLD;
constexpr int MMA_FORM_LOOP = MMA_FORM == MMA_FORM_OLD ? LOOP_OLD : LOOP_LEAN;
constexpr bool MMA_FORM_8WARPS = MMA_FORM >= MMA_FORM_LEAN8, MMA_FORM_PIPE = MMA_FORM == MMA_FORM_PIPE8;

/* Block (kv head g) of NW warps of 16 WM packed rows r = t * G + h (the G heads of one position share the K/V
 * rows), the last rows of the chunk (the most keys) first, the KV heads of a row range next to each other in the
 * grid. WM = 1: the warp's Q fragments in registers; WM = 2: two m16 tiles per warp, so each K/V fragment feeds two
 * MMAs, with Q (rounded to bf16) in shared memory, loaded per k-step. K/V sub-blocks of KB keys (aligned to
 * absolute positions within the P tiles) go through shared memory with cp.async, double-buffered (one barrier per
 * sub-block; a short sub-block's missing keys are zero rows, masked). Per sub-block: S = Q K^T by m16n8k16 MMAs
 * over D in order (q rounded to bf16); only a sub-block that is not inside every row's key range [lo(p), p] of the
 * warp is masked (-inf), the others take the same arithmetic unmasked; per row (raw score units) m_new = max(m, max
 * S), corr = m_new == m ? 1 : 2^((m - m_new) c), p = 2^(fmaf(S, c, -m_new c)) (c = scale log2 e), l = fmaf(l, corr,
 * sum p) with the fp32 sum in a fixed per-quad order, acc = acc * corr (skipped when every corr of the warp is 1),
 * then acc += P V with p rounded to bf16, by MMAs over the keys in order. An MMA's row of output depends on that
 * row of A alone, and a sub-block a row shares no key with is an exact no-op for it (corr = 1, p = 0), so a row's
 * bits depend on its position, the KV and P only: not on the chunk, nor on which rows share its block, warp or m16
 * tile, nor on WM or NW. */
template <int D, int NW, int WM, int LOOP>
__global__ void __launch_bounds__(NW * 32, mma_resident(D, NW, WM))
    k_attn_mma(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const uint16_t *Kc,
               const uint16_t *Vc, int64_t kv_pos0, int64_t kv_last, int tile_lo, int tile_hi, int P, int T,
               int64_t pos0, int H, int Hkv, float scale_log2, int window, int flags)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int NTH = NW * 32, WR = 16 * WM, ROWS = NW * WR;
    constexpr int KS = D / 16, NT = D / 8, LD = D + 8, NJ = KB / 8, NK = KB / 16;
    constexpr int CPR = D / 8, RSTEP = NTH / CPR, PASSES = (KB + RSTEP - 1) / RSTEP; /* 16-byte copies of a K/V row */
    constexpr bool QSH = WM > 1, LEAN = LOOP != LOOP_OLD, PIPE = LOOP == LOOP_PIPE;
    constexpr int NBUF = PIPE ? 4 : 2; /* K/V buffers */
    static_assert(!PIPE || (WM == 2 && NW == 8), "LOOP_PIPE: 8 warps of 32 rows");
    extern __shared__ __align__(16) uint16_t skv[]; /* [NBUF buffers][K, V][KB][LD], then (QSH) Q [ROWS][LD], then
                                                      (PIPE) the buffers' FULL and EMPTY barriers: rows
                                                      padded 16 bytes, so the 8 row addresses of an ldmatrix hit 32
                                                      distinct banks */
    uint16_t *Qs = skv + 2 * NBUF * KB * LD;
    uint64_t *full = reinterpret_cast<uint64_t *>(Qs + ROWS * LD), *empty = full + NBUF; /* PIPE */
    const int G = H / Hkv, rows = T * G, g = (int)(blockIdx.x % Hkv);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, qr = lane >> 2, qc = lane & 3;
    const int64_t kvs = (int64_t)Hkv * D;
    const int rb = (int)(gridDim.x / Hkv - 1 - blockIdx.x / Hkv) * ROWS;
    const int rlast = rb + ROWS - 1 < rows - 1 ? rb + ROWS - 1 : rows - 1;

    /* this thread's rows: qr and qr + 8 of each of the warp's m16 tiles (recomputed where needed: registers) */
    auto row_of = [&](int mt, int i) { return rb + warp * WR + mt * 16 + qr + 8 * i; };
    auto row_index = [&](int R) { return prow_index(R, rows, G, H, g); };
    /* key ranges (rows are sorted by position): the block's, the keys some row of the warp sees [wlo, whi], and
     * the keys every row of the warp sees [alo, ahi] */
    int64_t blo, bhi;
    prow_keys(rb, rlast, G, pos0, window, tile_lo, tile_hi, P, kv_last, &blo, &bhi);
    const int wr0 = rb + warp * WR, wr1 = wr0 + WR - 1 < rlast ? wr0 + WR - 1 : rlast;
    const bool wlive = wr0 <= rlast, wfull = wr0 + WR - 1 <= rlast;
    const int64_t wlo = window_lo(pos0 + wr0 / G, window), whi = pos0 + wr1 / G;
    const int64_t alo = window_lo(pos0 + wr1 / G, window), ahi = pos0 + wr0 / G;

    const int nsub = (P + KB - 1) / KB;
    const int first = blo <= bhi ? sub_of(blo, tile_lo, nsub, P) : 0;
    const int last = blo <= bhi ? sub_of(bhi, tile_lo, nsub, P) : -1;
    const int lr = threadIdx.x / CPR; /* this thread's first row and (below) 16-byte column of a K/V sub-block */
    const uint16_t *Kg = Kc + (int64_t)g * D + threadIdx.x % CPR * 8, *Vg = Vc + (Kg - Kc);
    /* sub-block (kb0, nb) into buffer buf: rows past kv_last (or the sub-block) zero-filled, never read */
    auto load = [&](int64_t kb0, int nb, int buf) {
        const int64_t room = kv_last - kb0 + 1;
        const int n = room < nb ? (int)room : nb;
        uint16_t *Ks = skv + buf * 2 * KB * LD + lr * LD + threadIdx.x % CPR * 8, *Vs = Ks + KB * LD;
        if constexpr (LEAN) { /* row lr + it RSTEP at kp + it rstep: 32-bit offsets inside the sub-block */
            const int64_t base = (kb0 + lr - kv_pos0) * kvs;
            const uint16_t *kp = Kg + base, *vp = Vg + base;
            const int rstep = RSTEP * (int)kvs;
            if (n == KB) {
#pragma unroll
                for (int it = 0; it < PASSES; it++)
                    if (RSTEP * PASSES == KB || lr + it * RSTEP < KB) {
                        cp16(Ks + it * RSTEP * LD, kp + it * rstep, true);
                        cp16(Vs + it * RSTEP * LD, vp + it * rstep, true);
                    }
            } else {
#pragma unroll
                for (int it = 0; it < PASSES; it++) {
                    const int r = lr + it * RSTEP;
                    if (RSTEP * PASSES == KB || r < KB) {
                        const bool ok = r < n;
                        cp16(Ks + it * RSTEP * LD, ok ? kp + it * rstep : Kg, ok);
                        cp16(Vs + it * RSTEP * LD, ok ? vp + it * rstep : Vg, ok);
                    }
                }
            }
        } else {
            int64_t off = (kb0 + lr - kv_pos0) * kvs;
#pragma unroll
            for (int it = 0; it < PASSES; it++, off += RSTEP * kvs) {
                const int r = lr + it * RSTEP;
                if (RSTEP * PASSES == KB || r < KB) {
                    const bool ok = r < n;
                    cp16(Ks + it * RSTEP * LD, Kg + (ok ? off : 0), ok);
                    cp16(Vs + it * RSTEP * LD, Vg + (ok ? off : 0), ok);
                }
            }
        }
        cpa_commit();
    };
    auto load_idx = [&](int idx, int buf) { /* OLD: the sub-block of index idx */
        int64_t kb0;
        int nb;
        sub_block(idx, tile_lo, nsub, P, &kb0, &nb);
        load(kb0, nb, buf);
    };
    SubCur cur = {0, P}; /* LEAN: the sub-block computed next */
    if constexpr (PIPE) {
        if (threadIdx.x == 0)
            for (int b = 0; b < NBUF; b++) {
                mbar_init(full + b, NTH);
                mbar_init(empty + b, NTH);
            }
        __syncthreads(); /* the barriers initialized before any thread arrives on one */
    }
    if (first <= last) {
        if constexpr (LEAN) {
            const int s0 = first % nsub;
            cur = {(int64_t)(tile_lo + first / nsub) * P + (int64_t)s0 * KB, P - s0 * KB};
            load(cur.kb0, cur.nb(), 0);
            if constexpr (PIPE) {
                cp_mbar_arrive(full);
                if (first + 1 <= last) {
                    SubCur nx = cur;
                    nx.next(P);
                    load(nx.kb0, nx.nb(), 1);
                    cp_mbar_arrive(full + 1);
                }
            }
        } else {
            load_idx(first, 0);
        }
    }

    /* Q (A of S = Q K^T), rounded to bf16: in registers (WM = 1) or in shared memory (WM = 2) */
    unsigned qf[QSH ? 1 : KS][4];
    if constexpr (QSH) {
        constexpr int C4 = D / 4;
#pragma unroll 4
        for (int i = threadIdx.x; i < ROWS * C4; i += NTH) {
            const int r = i / C4, c = i % C4, R = rb + r;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (R < rows)
                v = *reinterpret_cast<const float4 *>(q + row_index(R) * D + c * 4);
            *reinterpret_cast<uint2 *>(Qs + r * LD + c * 4) =
                make_uint2(pack2(bf16_rne(v.x), bf16_rne(v.y)), pack2(bf16_rne(v.z), bf16_rne(v.w)));
        }
    } else {
        const int64_t ri[2] = {row_index(row_of(0, 0)), row_index(row_of(0, 1))};
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
#pragma unroll
            for (int j = 0; j < 2; j++)
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    float2 v = make_float2(0.0f, 0.0f);
                    if (row_of(0, i) < rows)
                        v = *reinterpret_cast<const float2 *>(q + ri[i] * D + ks * 16 + j * 8 + 2 * qc);
                    qf[ks][i + 2 * j] = pack2(bf16_rne(v.x), bf16_rne(v.y));
                }
    }
    float o[WM][NT][4], m[WM][2], l[WM][2]; /* m in raw score units (st_m too) */
#pragma unroll
    for (int mt = 0; mt < WM; mt++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int R = row_of(mt, i);
            const bool ld = !(flags & ENGK_INIT) && R < rows;
            const int64_t ri = row_index(R);
            m[mt][i] = ld ? st_m[ri] : -INFINITY;
            l[mt][i] = ld ? st_l[ri] : 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                float2 v = make_float2(0.0f, 0.0f);
                if (ld)
                    v = *reinterpret_cast<const float2 *>(st_acc + ri * D + nt * 8 + 2 * qc);
                o[mt][nt][2 * i] = v.x;
                o[mt][nt][2 * i + 1] = v.y;
            }
        }
    const bool no_rescale = RC_FAULTS_BUILT && (flags & FAULT_NO_RESCALE);
    if constexpr (PIPE)
        __syncthreads(); /* Q in shared memory for every warp (the loop has no block-wide barrier) */

    for (int idx = first; idx <= last; idx++) {
        const int buf = PIPE ? (idx - first) % NBUF : (idx - first) & 1;
        if constexpr (PIPE) {
            /* copy sub-block idx + 2 into the buffer of idx - 2 once every thread is done with idx - 2 (so warps
             * may run up to a sub-block apart without waiting), arrive on its FULL when this thread's copies land;
             * then wait for every thread's copies of idx */
            const int u2 = idx + 2 - first, b2 = u2 % NBUF;
            if (idx + 2 <= last) {
                if (u2 >= NBUF)
                    mbar_wait(empty + b2, (unsigned)(u2 / NBUF - 1) & 1u);
                SubCur nx = cur; /* cur: sub-block idx */
                nx.next(P);
                nx.next(P);
                load(nx.kb0, nx.nb(), b2);
                cp_mbar_arrive(full + b2);
            }
            mbar_wait(full + buf, (unsigned)((idx - first) / NBUF) & 1u);
        } else {
            cpa_wait<0>();
            __syncthreads(); /* sub-block idx (and Q) landed for every thread; every warp is done with buffer buf ^ 1 */
        }
        int64_t kb0;
        int nb;
        if constexpr (PIPE) {
            kb0 = cur.kb0;
            nb = cur.nb();
            cur.next(P);
        } else if constexpr (LEAN) {
            if (idx < last) {
                SubCur nx = cur;
                nx.next(P);
                load(nx.kb0, nx.nb(), buf ^ 1);
            }
            kb0 = cur.kb0;
            nb = cur.nb();
            cur.next(P);
        } else {
            if (idx < last)
                load_idx(idx + 1, buf ^ 1);
            sub_block(idx, tile_lo, nsub, P, &kb0, &nb);
        }
        if (!wlive || kb0 > whi || kb0 + nb - 1 < wlo) {
            if constexpr (PIPE)
                mbar_arrive(empty + buf);
            continue;
        }
        const uint16_t *Ks = skv + buf * 2 * KB * LD, *Vs = Ks + KB * LD;
        float s[WM][NJ][4];
        auto qk = [&](int m0, int m1) { /* S = Q K^T of m16 tiles m0 .. m1 - 1, over D in order */
#pragma unroll
            for (int mt = m0; mt < m1; mt++)
#pragma unroll
                for (int j = 0; j < NJ; j++)
                    s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                unsigned a[WM][4];
#pragma unroll
                for (int mt = m0; mt < m1; mt++) {
                    if constexpr (QSH)
                        ldsm_x4<false>(a[mt], Qs + (warp * WR + mt * 16 + (lane & 15)) * LD + ks * 16 + (lane >> 4) * 8);
                    else
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            a[mt][e] = qf[ks][e];
                }
#pragma unroll
                for (int jp = 0; jp < NJ / 2; jp++) { /* B fragments of key groups 2jp, 2jp + 1: K rows as stored */
                    unsigned r[4];
                    ldsm_x4<false>(r, Ks + ((2 * jp + (lane >> 4)) * 8 + (lane & 7)) * LD + ks * 16 +
                                          ((lane >> 3) & 1) * 8);
#pragma unroll
                    for (int mt = m0; mt < m1; mt++) {
                        mma16816(s[mt][2 * jp], a[mt], r[0], r[1]);
                        mma16816(s[mt][2 * jp + 1], a[mt], r[2], r[3]);
                    }
                }
            }
        };
        const bool edge = !(wfull && nb == KB && kb0 >= alo && kb0 + KB - 1 <= ahi); /* diagonal, window edge, short */
        auto mask = [&](int m0, int m1) { /* keys outside a row's [lo(p), p] of m16 tiles m0 .. m1 - 1 to -inf */
            if (!edge)
                return;
#pragma unroll
            for (int mt = m0; mt < m1; mt++) {
                const int R[2] = {row_of(mt, 0), row_of(mt, 1)};
                prow_mask(s[mt], R, rows, G, kb0 - pos0, nb, window, qc);
            }
        };
        qk(0, WM);
        mask(0, WM);
        int nrs = no_rescale; /* LEAN: opaque per sub-block, so ptxas does not unswitch the softmax on it */
        if constexpr (LEAN)
            asm volatile("" : "+r"(nrs));
        unsigned pb[WM][NJ][2];
        auto pv = [&](int m0, int m1) { /* acc += P V of m16 tiles m0 .. m1 - 1, the keys in order */
#pragma unroll
            for (int kk = 0; kk < NK; kk++) {
                unsigned a[WM][4];
#pragma unroll
                for (int mt = m0; mt < m1; mt++) {
                    a[mt][0] = pb[mt][2 * kk][0];
                    a[mt][1] = pb[mt][2 * kk][1];
                    a[mt][2] = pb[mt][2 * kk + 1][0];
                    a[mt][3] = pb[mt][2 * kk + 1][1];
                }
#pragma unroll
                for (int np = 0; np < NT / 2; np++) {
                    unsigned r[4];
                    ldsm_x4<true>(r, Vs + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD + np * 16 +
                                         (lane >> 4) * 8);
#pragma unroll
                    for (int mt = m0; mt < m1; mt++) {
                        mma16816(o[mt][2 * np], a[mt], r[0], r[1]);
                        mma16816(o[mt][2 * np + 1], a[mt], r[2], r[3]);
                    }
                }
            }
        };
#pragma unroll
        for (int mt = 0; mt < WM; mt++)
            prow_softmax(s[mt], pb[mt], o[mt], m[mt], l[mt], scale_log2, nrs);
        pv(0, WM);
        if constexpr (PIPE)
            mbar_arrive(empty + (idx - first) % NBUF); /* recomputed: buf need not live across the sub-block */
    }
#pragma unroll
    for (int mt = 0; mt < WM; mt++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int R = row_of(mt, i);
            if (R < rows)
                prow_store<D>(o[mt], i, m[mt][i], l[mt][i], row_index(R), ctx, st_m, st_l, st_acc, flags, qc);
        }
#else
    __trap(); /* the host launches this only on sm_80+ (engk_attn_prefill_mma) */
#endif
}

template <int D, int NW, int WM, int LOOP = LOOP_LEAN> constexpr size_t mma_smem()
{
    constexpr int NBUF = LOOP == LOOP_PIPE ? 4 : 2;
    return (size_t)(2 * NBUF * KB + (WM > 1 ? NW * 16 * WM : 0)) * (D + 8) * sizeof(uint16_t) +
           (LOOP == LOOP_PIPE ? 2 * NBUF * sizeof(uint64_t) : 0);
}

size_t mma_smem_of(int D) /* the 64-row blocks of 16 rows per warp, which launch_mma may always pick */
{
    switch (D) {
    case 16: return mma_smem<16, MMA_WARPS, 1>();
    case 32: return mma_smem<32, MMA_WARPS, 1>();
    case 64: return mma_smem<64, MMA_WARPS, 1>();
    case 128: return mma_smem<128, MMA_WARPS, 1>();
    case 256: return mma_smem<256, MMA_WARPS, 1>();
    default: return 0;
    }
}

/* The prefill grid: blocks of `rows` packed rows (T G of them) times the KV heads (the kernels take the row blocks
 * from the end: the most keys first). */
static unsigned prefill_grid(int T, int H, int Hkv, int rows)
{
    const int G = H / Hkv;
    return (unsigned)((T * G + rows - 1) / rows) * (unsigned)Hkv;
}
/* The kernels' softmax scale in base 2: scale log2(e). */
static float scale_base2(float scale) { return scale * 1.4426950408889634f; }

/* A kernel's opt-in dynamic shared memory (and with carveout the largest shared-memory carveout, so that blocks that
 * fit by shared memory are resident together), set once per kernel instance (*done). */
template <typename Kern> cudaError_t opt_in_smem(Kern *fn, size_t smem, bool carveout, int *done)
{
    if (*done)
        return cudaSuccess;
    cudaError_t err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err == cudaSuccess && carveout)
        err = cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                                   (int)cudaSharedmemCarveoutMaxShared);
    if (err == cudaSuccess)
        *done = 1;
    return err;
}

template <int D, int NW, int WM, int LOOP>
cudaError_t launch_form(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const uint16_t *K,
                        const uint16_t *V, int64_t kv_pos0, int64_t kv_last, int tile_lo, int tile_hi, int P, int T,
                        int64_t pos0, int H, int Hkv, float scale, int window, int flags, cudaStream_t s)
{
    static int attr_done = 0;
    const size_t smem = mma_smem<D, NW, WM, LOOP>();
    const cudaError_t err = opt_in_smem(k_attn_mma<D, NW, WM, LOOP>, smem, true, &attr_done); /* mma_resident blocks */
    if (err != cudaSuccess)
        return err;
    const unsigned grid = prefill_grid(T, H, Hkv, NW * 16 * WM);
    const float scale_log2 = scale_base2(scale);
    k_attn_mma<D, NW, WM, LOOP><<<grid, NW * 32, smem, s>>>(q, ctx, st_m, st_l, st_acc, K, V, kv_pos0, kv_last,
                                                             tile_lo, tile_hi, P, T, pos0, H, Hkv, scale_log2, window,
                                                             flags);
    return cudaGetLastError();
}

/* The loop of MMA_FORM (32 rows per warp) or MMA_LOOP16 (16 rows per warp), or the one ENGK_MMA_OLD /
 * ENGK_MMA_LEAN forces (the same bits). */
template <int D, int NW, int WM>
cudaError_t launch_rows(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const uint16_t *K,
                        const uint16_t *V, int64_t kv_pos0, int64_t kv_last, int tile_lo, int tile_hi, int P, int T,
                        int64_t pos0, int H, int Hkv, float scale, int window, int flags, cudaStream_t s)
{
    const int loop = flags & ENGK_MMA_OLD    ? LOOP_OLD
                     : flags & ENGK_MMA_LEAN ? LOOP_LEAN
                     : WM > 1                ? MMA_FORM_LOOP
                                             : MMA_LOOP16;
    if constexpr (WM == 2 && NW == 2 * MMA_WARPS) /* ENGK_MMA_PIPE: 8 warps of 32 rows (launch_mma routes it here) */
        if (flags & ENGK_MMA_PIPE)
            return launch_form<D, NW, WM, LOOP_PIPE>(q, ctx, st_m, st_l, st_acc, K, V, kv_pos0, kv_last, tile_lo,
                                                     tile_hi, P, T, pos0, H, Hkv, scale, window, flags, s);
    if (loop == LOOP_OLD)
        return launch_form<D, NW, WM, LOOP_OLD>(q, ctx, st_m, st_l, st_acc, K, V, kv_pos0, kv_last, tile_lo, tile_hi,
                                                P, T, pos0, H, Hkv, scale, window, flags, s);
    return launch_form<D, NW, WM, LOOP_LEAN>(q, ctx, st_m, st_l, st_acc, K, V, kv_pos0, kv_last, tile_lo, tile_hi, P,
                                             T, pos0, H, Hkv, scale, window, flags, s);
}

/* D <= 128: long chunks in blocks of 32 rows per warp when their shared memory fits: with MMA_FORM_8WARPS (or
 * ENGK_MMA_WARP32X8) 256-row blocks of 8 warps when they fill one per SM, else 128-row blocks of 4 warps when they
 * fill two per SM (or ENGK_MMA_WARP32); else 64-row blocks of 16 rows per warp (three per SM at D = 128: short
 * chunks); at D = 256 (registers) 64-row blocks of 16 rows per warp. ENGK_MMA_ROWS64 / ENGK_MMA_ROWS128 force 16
 * rows per warp in blocks of 64 / 128 rows (D <= 128). The same bits every way. */
template <int D>
cudaError_t launch_mma(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const uint16_t *K,
                       const uint16_t *V, int64_t kv_pos0, int64_t kv_last, int tile_lo, int tile_hi, int P, int T,
                       int64_t pos0, int H, int Hkv, float scale, int window, int flags, cudaStream_t s)
{
    static int sms = 0, optin = 0;
    if (!sms) {
        int dev = 0;
        cudaError_t err = cudaGetDevice(&dev);
        if (err == cudaSuccess)
            err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        if (err == cudaSuccess)
            err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (err != cudaSuccess)
            return err;
    }
    const int64_t rowsG = (int64_t)T * (H / Hkv);
    const int64_t blocks128 = (rowsG + 2 * MMA_ROWS - 1) / (2 * MMA_ROWS) * Hkv;
    const int64_t blocks256 = (rowsG + 4 * MMA_ROWS - 1) / (4 * MMA_ROWS) * Hkv;
    const bool w32 = D <= 128 && mma_smem<D, MMA_WARPS, 2>() <= (size_t)optin &&
                     !(flags & (ENGK_MMA_ROWS64 | ENGK_MMA_ROWS128));
    const bool pipe = w32 && mma_smem<D, 2 * MMA_WARPS, 2, LOOP_PIPE>() <= (size_t)optin;
    if (!pipe)
        flags &= ~ENGK_MMA_PIPE; /* D = 256, or no room for four buffers: LEAN8 where it fits */
    if (w32 && mma_smem<D, 2 * MMA_WARPS, 2>() <= (size_t)optin && !(flags & ENGK_MMA_WARP32) &&
        ((flags & (ENGK_MMA_WARP32X8 | ENGK_MMA_PIPE)) || (MMA_FORM_8WARPS && blocks256 >= (int64_t)sms))) {
        if (MMA_FORM_PIPE && pipe && !(flags & (ENGK_MMA_OLD | ENGK_MMA_LEAN)))
            flags |= ENGK_MMA_PIPE; /* the engine's 8-warp loop */
        return launch_rows<D, D <= 128 ? 2 * MMA_WARPS : MMA_WARPS, D <= 128 ? 2 : 1>(
            q, ctx, st_m, st_l, st_acc, K, V, kv_pos0, kv_last, tile_lo, tile_hi, P, T, pos0, H, Hkv, scale, window,
            flags, s);
    }
    if (w32 && ((flags & (ENGK_MMA_WARP32 | ENGK_MMA_WARP32X8)) || blocks128 >= 2 * (int64_t)sms))
        return launch_rows<D, MMA_WARPS, D <= 128 ? 2 : 1>(q, ctx, st_m, st_l, st_acc, K, V, kv_pos0, kv_last, tile_lo,
                                                           tile_hi, P, T, pos0, H, Hkv, scale, window, flags, s);
    if (D <= 128 && (flags & ENGK_MMA_ROWS128))
        return launch_rows<D, D <= 128 ? 2 * MMA_WARPS : MMA_WARPS, 1>(q, ctx, st_m, st_l, st_acc, K, V, kv_pos0,
                                                                       kv_last, tile_lo, tile_hi, P, T, pos0, H, Hkv,
                                                                       scale, window, flags, s);
    return launch_rows<D, MMA_WARPS, 1>(q, ctx, st_m, st_l, st_acc, K, V, kv_pos0, kv_last, tile_lo, tile_hi, P, T,
                                        pos0, H, Hkv, scale, window, flags, s);
}

/* ---------------- prefill on wgmma (bf16 KV, D = 128, sm_90a) ---------------- */

/* k_attn_wg: k_attn_mma's walk, masks and online softmax, with the two products on Hopper's warpgroup MMA
 * (wgmma.mma_async m64nNk16, fp32 accumulation). Blocks of NWG warpgroups (128 threads each) x 64 packed rows; warp w
 * of the block holds rows rb + 16 w .. + 15 as k_attn_mma's WM = 1 warps do, in the same register fragment (the
 * wgmma accumulator of m64nN is, per warp of the warpgroup, the m16n8 C fragment repeated over N / 8 column groups,
 * and its register A fragment of m64k16 is per warp the m16n8k16 A fragment: P goes from S's accumulator to A by a
 * conversion to bf16 alone). Shared memory holds every operand as 8 x 8 core matrices of bf16 (8 rows of 16 bytes,
 * 128 contiguous bytes), no swizzle:
 *   element (r, d) of an R-row x 128-dim operand at ((d / 8) (R / 8) + r / 8) 64 + (r % 8) 8 + d % 8  (wg_off)
 * so core matrices adjacent in r are 128 bytes apart and those adjacent in d are R / 8 x 128 bytes apart (1024 at
 * R = 64). Q (block rows, rounded to bf16) is R = 64 per warpgroup; a K and a V sub-block are R = KB = 64 keys.
 * Descriptors (PTX ISA "Matrix Descriptor Format"; canonical layouts for no swizzle, in 16-bit elements, T = 8):
 *   S = Q K^T, m64n64k16, k-step ks over dims 16 ks .. 16 ks + 15: A = Q and B = K are K-major (the reduction dim d
 *   contiguous in each core-matrix row): ((8, m), (T, 2)) : ((T, SBO), (1, LBO)), so SBO = the step between core
 *   matrices along rows / keys = 128 bytes, LBO = the step between the two core matrices along d = 1024 bytes; the
 *   start address moves 2 x 1024 bytes per k-step.
 *   O += P V, m64n128k16, k-step kk over keys 16 kk .. 16 kk + 15: B = V with N = d and K = key is N-major (d
 *   contiguous: the same core matrices read the other way, imm-trans-b = 1): ((T, 1, m), (8, k)) : ((1, T, SBO),
 *   (T, LBO)), so SBO = the step along d = 1024 bytes, LBO = the step along the keys = 128 bytes; the start address
 *   moves 2 x 128 bytes per k-step.
 *   Start addresses 16-byte aligned, encoded (addr & 0x3ffff) >> 4, as LBO and SBO; base offset 0 and swizzle mode
 *   0 (no swizzle: no 1024-byte pattern alignment needed).
 * Per sub-block (the same walk as k_attn_mma: KB keys aligned to absolute positions inside the P tiles, double-
 * buffered cp.async, a short sub-block's missing keys zero rows): S by 8 wgmma k-steps over D in order, masked
 * where k_attn_mma masks, the same softmax arithmetic (ex2, fmaf, the per-quad sum order) and p rounded to bf16,
 * then acc += P V by 4 wgmma k-steps over the keys in order. A warpgroup skips a sub-block none of its rows sees
 * (the skip is an exact no-op for every row, as in k_attn_mma). Each row's bits depend on its position, the KV and
 * P only, so one launch, per-tile launches with the state in memory, any chunking and NWG = 1 or 2 give the same
 * bits (the checker compares them); on the H200 also k_attn_mma's bits (another MMA instruction, the same fp32
 * accumulation order: the checker fails on any difference). */
constexpr int WG_D = 128, WG_TILE = KB * WG_D; /* bf16 elements of a K or a V sub-block */
template <int NWG> constexpr size_t wg_smem() /* [2 buffers][K, V][WG_TILE], then Q [NWG][64 x WG_D] */
{
    return (size_t)(4 * WG_TILE + NWG * 64 * WG_D) * sizeof(uint16_t);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) /* wgmma: the arch-specific target sm_90a only */
__device__ __forceinline__ int wg_off(int r, int d, int R)
{
    return ((d >> 3) * (R >> 3) + (r >> 3)) * 64 + (r & 7) * 8 + (d & 7);
}
/* Packed rows r0 .. r0 + n - 1 (n a multiple of 64) of q rounded to bf16 into 64-row core-matrix operands at Qs
 * (8 dims of a row per copy, threads tid of nth; rows past the chunk: zeros). */
__device__ __forceinline__ void wg_store_q(uint16_t *Qs, const float *q, int r0, int n, int tid, int nth, int rows,
                                           int G, int H, int g)
{
    for (int i = tid; i < n * 16; i += nth) {
        const int r = (i >> 7) * 8 + (i & 7), c = (i >> 3) & 15, R = r0 + r;
        float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a;
        if (R < rows) {
            const float4 *src = reinterpret_cast<const float4 *>(q + prow_index(R, rows, G, H, g) * WG_D + c * 8);
            a = src[0];
            b = src[1];
        }
        *reinterpret_cast<uint4 *>(Qs + (r >> 6) * 64 * WG_D + wg_off(r & 63, c * 8, 64)) =
            make_uint4(pack2(bf16_rne(a.x), bf16_rne(a.y)), pack2(bf16_rne(a.z), bf16_rne(a.w)),
                       pack2(bf16_rne(b.x), bf16_rne(b.y)), pack2(bf16_rne(b.z), bf16_rne(b.w)));
    }
}
/* A shared-memory matrix descriptor: start address, leading and stride byte offsets, no swizzle. */
__device__ __forceinline__ uint64_t wg_desc(unsigned addr, unsigned lbo, unsigned sbo)
{
    return (uint64_t)((addr & 0x3ffffu) >> 4) | (uint64_t)((lbo & 0x3ffffu) >> 4) << 16 |
           (uint64_t)((sbo & 0x3ffffu) >> 4) << 32;
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
/* Generic-proxy writes of this thread to shared memory (cp.async, st.shared) made visible to the async proxy that
 * wgmma reads through (before the barrier that publishes them). */
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/* After wgmma.wait_group: the accumulator registers are read only after this point (no use moved above the wait). */
template <int N> __device__ __forceinline__ void wg_hold(float (&x)[N][4])
{
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            asm volatile("" : "+f"(x[i][e])::"memory");
}
/* S[64 x 64] (+)= A B^T of one k16 step: A (64 rows x 16) and B (64 keys x 16), both K-major in shared memory. */
template <int SD = 1> __device__ __forceinline__ void wg_qk(float (&s)[8][4], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "%32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(s[0][0]), "+f"(s[0][1]), "+f"(s[0][2]), "+f"(s[0][3]), "+f"(s[1][0]), "+f"(s[1][1]),
                   "+f"(s[1][2]), "+f"(s[1][3]), "+f"(s[2][0]), "+f"(s[2][1]), "+f"(s[2][2]), "+f"(s[2][3]),
                   "+f"(s[3][0]), "+f"(s[3][1]), "+f"(s[3][2]), "+f"(s[3][3]), "+f"(s[4][0]), "+f"(s[4][1]),
                   "+f"(s[4][2]), "+f"(s[4][3]), "+f"(s[5][0]), "+f"(s[5][1]), "+f"(s[5][2]), "+f"(s[5][3]),
                   "+f"(s[6][0]), "+f"(s[6][1]), "+f"(s[6][2]), "+f"(s[6][3]), "+f"(s[7][0]), "+f"(s[7][1]),
                   "+f"(s[7][2]), "+f"(s[7][3])
                 : "l"(da), "l"(db), "n"(SD));
}
/* S[64 x 64] (+)= A B^T of one k16 step with A (64 rows x 16 dims) in registers (per warp the m16n8k16 A fragment)
 * and B (64 keys x 16) K-major in shared memory; SD = 0: S = A B^T (the accumulator only written). */
template <int SD> __device__ __forceinline__ void wg_qk_rs(float (&s)[8][4], const unsigned (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(s[0][0]), "+f"(s[0][1]), "+f"(s[0][2]), "+f"(s[0][3]), "+f"(s[1][0]), "+f"(s[1][1]),
                   "+f"(s[1][2]), "+f"(s[1][3]), "+f"(s[2][0]), "+f"(s[2][1]), "+f"(s[2][2]), "+f"(s[2][3]),
                   "+f"(s[3][0]), "+f"(s[3][1]), "+f"(s[3][2]), "+f"(s[3][3]), "+f"(s[4][0]), "+f"(s[4][1]),
                   "+f"(s[4][2]), "+f"(s[4][3]), "+f"(s[5][0]), "+f"(s[5][1]), "+f"(s[5][2]), "+f"(s[5][3]),
                   "+f"(s[6][0]), "+f"(s[6][1]), "+f"(s[6][2]), "+f"(s[6][3]), "+f"(s[7][0]), "+f"(s[7][1]),
                   "+f"(s[7][2]), "+f"(s[7][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(SD));
}
__device__ __forceinline__ void wg_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
/* A 128-byte-swizzled descriptor (layout type 1): K-major (LBO unused, 1; SBO the 8-row group stride) or MN-major
 * (LBO the stride between 64-element atoms along M/N, SBO the 8-row group stride along K). Atoms 1024-byte aligned. */
__device__ __forceinline__ uint64_t wg_desc_sw(unsigned addr, unsigned lbo, unsigned sbo)
{
    return wg_desc(addr, lbo, sbo) | (uint64_t)1 << 62;
}
/* The TMA copier's FULL arrival: this thread's arrive, expecting tx bytes of bulk copies on the barrier. */
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, unsigned tx)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)), "r"(tx) : "memory");
}
/* One TMA box (64 dims x 1 head x 64 positions, 128-byte swizzle) of map at (d0, head, row) into dst, completing
 * on bar. */
__device__ __forceinline__ void tma_load3(unsigned dst, const CUtensorMap *map, int d0, int head, int row, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
                 "[%5];\n" ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(d0), "r"(head), "r"(row),
                 "r"(smem_u32(bar))
                 : "memory");
}
/* O[64 x 128] += A B of one k16 step: A (64 rows x 16 keys) in registers, B (16 keys x 128 dims) N-major in shared
 * memory (imm-trans-b = 1). */
__device__ __forceinline__ void wg_pv(float (&o)[16][4], const unsigned (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : "+f"(o[0][0]), "+f"(o[0][1]), "+f"(o[0][2]), "+f"(o[0][3]), "+f"(o[1][0]), "+f"(o[1][1]),
                   "+f"(o[1][2]), "+f"(o[1][3]), "+f"(o[2][0]), "+f"(o[2][1]), "+f"(o[2][2]), "+f"(o[2][3]),
                   "+f"(o[3][0]), "+f"(o[3][1]), "+f"(o[3][2]), "+f"(o[3][3]), "+f"(o[4][0]), "+f"(o[4][1]),
                   "+f"(o[4][2]), "+f"(o[4][3]), "+f"(o[5][0]), "+f"(o[5][1]), "+f"(o[5][2]), "+f"(o[5][3]),
                   "+f"(o[6][0]), "+f"(o[6][1]), "+f"(o[6][2]), "+f"(o[6][3]), "+f"(o[7][0]), "+f"(o[7][1]),
                   "+f"(o[7][2]), "+f"(o[7][3]), "+f"(o[8][0]), "+f"(o[8][1]), "+f"(o[8][2]), "+f"(o[8][3]),
                   "+f"(o[9][0]), "+f"(o[9][1]), "+f"(o[9][2]), "+f"(o[9][3]), "+f"(o[10][0]), "+f"(o[10][1]),
                   "+f"(o[10][2]), "+f"(o[10][3]), "+f"(o[11][0]), "+f"(o[11][1]), "+f"(o[11][2]), "+f"(o[11][3]),
                   "+f"(o[12][0]), "+f"(o[12][1]), "+f"(o[12][2]), "+f"(o[12][3]), "+f"(o[13][0]), "+f"(o[13][1]),
                   "+f"(o[13][2]), "+f"(o[13][3]), "+f"(o[14][0]), "+f"(o[14][1]), "+f"(o[14][2]), "+f"(o[14][3]),
                   "+f"(o[15][0]), "+f"(o[15][1]), "+f"(o[15][2]), "+f"(o[15][3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(1));
}
#endif

template <int NWG>
__global__ void __launch_bounds__(NWG * 128, 2) /* two blocks per SM: the shared memory of two at NWG = 1 or 2 */
    k_attn_wg(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const uint16_t *Kc,
              const uint16_t *Vc, int64_t kv_pos0, int64_t kv_last, int tile_lo, int tile_hi, int P, int T,
              int64_t pos0, int H, int Hkv, float scale_log2, int window, int flags)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int D = WG_D, NTH = NWG * 128, ROWS = NWG * 64, NJ = KB / 8, NT = D / 8, KS = D / 16, NK = KB / 16;
    constexpr int PASSES = KB * (D / 8) / NTH; /* 16-byte copies of a K (and a V) sub-block per thread */
    static_assert(KB == 64 && PASSES * NTH == KB * (D / 8), "wgmma tiles: 64-key sub-blocks");
    extern __shared__ __align__(128) uint16_t swg[];
    uint16_t *Qs = swg + 4 * WG_TILE;
    const int G = H / Hkv, rows = T * G, g = (int)(blockIdx.x % Hkv);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, qr = lane >> 2, qc = lane & 3, wg = threadIdx.x >> 7;
    const int64_t kvs = (int64_t)Hkv * D;
    const int rb = (int)(gridDim.x / Hkv - 1 - blockIdx.x / Hkv) * ROWS;
    const int rlast = rb + ROWS - 1 < rows - 1 ? rb + ROWS - 1 : rows - 1;

    auto row_of = [&](int i) { return rb + warp * 16 + qr + 8 * i; };
    auto row_index = [&](int R) { return prow_index(R, rows, G, H, g); };
    /* key ranges: the block's [blo, bhi] (the walk), the warpgroup's [glo, ghi] (its skip), the keys every row of
     * the warp sees [alo, ahi] (its mask) */
    int64_t blo, bhi;
    prow_keys(rb, rlast, G, pos0, window, tile_lo, tile_hi, P, kv_last, &blo, &bhi);
    const int gr0 = rb + wg * 64, gr1 = gr0 + 63 < rlast ? gr0 + 63 : rlast;
    const bool glive = gr0 <= rlast;
    const int64_t glo = window_lo(pos0 + gr0 / G, window), ghi = pos0 + gr1 / G;
    const int wr0 = rb + warp * 16, wr1 = wr0 + 15 < rlast ? wr0 + 15 : rlast;
    const bool wfull = wr0 + 15 <= rlast;
    const int64_t alo = window_lo(pos0 + wr1 / G, window), ahi = pos0 + wr0 / G;

    const int nsub = (P + KB - 1) / KB;
    const int first = blo <= bhi ? sub_of(blo, tile_lo, nsub, P) : 0;
    const int last = blo <= bhi ? sub_of(bhi, tile_lo, nsub, P) : -1;
    /* this thread's copies: key (lg + NWG it) 8 + lr8 of the sub-block, dims 8 lc .. 8 lc + 7 (a warp writes 4
     * whole core matrices: 8 keys x 4 dim groups) */
    const int lr8 = threadIdx.x & 7, lc = (threadIdx.x >> 3) & 15, lg = threadIdx.x >> 7;
    const uint16_t *Kg = Kc + (int64_t)g * D + lc * 8, *Vg = Vc + (int64_t)g * D + lc * 8;
    auto load = [&](int idx, int buf) { /* sub-block idx into buffer buf: rows past kv_last zero, never read */
        int64_t kb0;
        int nb;
        sub_block(idx, tile_lo, nsub, P, &kb0, &nb);
        const int64_t room = kv_last - kb0 + 1;
        const int n = room < nb ? (int)room : nb;
        uint16_t *Ks = swg + buf * 2 * WG_TILE, *Vs = Ks + WG_TILE;
#pragma unroll
        for (int it = 0; it < PASSES; it++) {
            const int r = (lg + NWG * it) * 8 + lr8, so = wg_off(r, lc * 8, KB);
            const bool ok = r < n;
            const int64_t off = ok ? (kb0 + r - kv_pos0) * kvs : 0;
            cp16(Ks + so, Kg + off, ok);
            cp16(Vs + so, Vg + off, ok);
        }
        cpa_commit();
    };
    if (first <= last)
        load(first, 0);

    /* Q rounded to bf16 into the warpgroups' core matrices */
    wg_store_q(Qs, q, rb, ROWS, threadIdx.x, NTH, rows, G, H, g);
    float o[NT][4], m[2], l[2]; /* m in raw score units (st_m too) */
    {
        const bool ld[2] = {!(flags & ENGK_INIT) && row_of(0) < rows, !(flags & ENGK_INIT) && row_of(1) < rows};
        const int64_t ri[2] = {row_index(row_of(0)), row_index(row_of(1))};
        prow_state_load<D>(o, m, l, ld, ri, st_m, st_l, st_acc, qc);
    }
    const bool no_rescale = RC_FAULTS_BUILT && (flags & FAULT_NO_RESCALE);
    const unsigned sbase = smem_u32(swg);
    const unsigned qaddr = sbase + (unsigned)((4 * WG_TILE + wg * 64 * D) * sizeof(uint16_t));
    /* descriptor byte offsets (the derivation above); exchanged only by the checker's diagnostics */
    const bool xqk = flags & ENGK_WGMMA_SWAP_QK, xv = flags & ENGK_WGMMA_SWAP_V;
    const unsigned qk_lbo = xqk ? 128u : 1024u, qk_sbo = xqk ? 1024u : 128u;
    const unsigned v_lbo = xv ? 1024u : 128u, v_sbo = xv ? 128u : 1024u;

    for (int idx = first; idx <= last; idx++) {
        const int buf = (idx - first) & 1;
        cpa_wait<0>();
        fence_async_smem();
        __syncthreads(); /* sub-block idx (and Q) landed for every thread and the async proxy; every warpgroup's
                            wgmma on buffer buf ^ 1 completed (wait_group 0 before this barrier) */
        if (idx < last)
            load(idx + 1, buf ^ 1);
        int64_t kb0;
        int nb;
        sub_block(idx, tile_lo, nsub, P, &kb0, &nb);
        if (!glive || kb0 > ghi || kb0 + nb - 1 < glo) /* warpgroup-uniform: wgmma needs all 4 warps */
            continue;
        const unsigned kaddr = sbase + (unsigned)(buf * 2 * WG_TILE * sizeof(uint16_t));
        const unsigned vaddr = kaddr + (unsigned)(WG_TILE * sizeof(uint16_t));
        float s[NJ][4];
#pragma unroll
        for (int j = 0; j < NJ; j++)
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            wg_qk(s, wg_desc(qaddr + ks * 2048u, qk_lbo, qk_sbo), wg_desc(kaddr + ks * 2048u, qk_lbo, qk_sbo));
        wg_commit();
        wg_wait0();
        wg_hold(s);
        if (!(wfull && nb == KB && kb0 >= alo && kb0 + KB - 1 <= ahi)) { /* diagonal, window edge, short */
            const int R[2] = {row_of(0), row_of(1)};
            prow_mask(s, R, rows, G, kb0 - pos0, nb, window, qc);
        }
        int nrs = no_rescale; /* opaque per sub-block, so ptxas does not unswitch the softmax on it */
        asm volatile("" : "+r"(nrs));
        unsigned pb[NJ][2];
        prow_softmax(s, pb, o, m, l, scale_log2, nrs);
        wg_fence(); /* o and pb were written by this thread: ordered before the wgmma that reads them */
#pragma unroll
        for (int kk = 0; kk < NK; kk++) {
            const unsigned a[4] = {pb[2 * kk][0], pb[2 * kk][1], pb[2 * kk + 1][0], pb[2 * kk + 1][1]};
            wg_pv(o, a, wg_desc(vaddr + kk * 256u, v_lbo, v_sbo));
        }
        wg_commit();
        wg_wait0();
        wg_hold(o);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int R = row_of(i);
        if (R < rows)
            prow_store<D>(o, i, m[i], l[i], row_index(R), ctx, st_m, st_l, st_acc, flags, qc);
    }
#else
    __trap(); /* the host launches this only where engk_attn_prefill_wgmma holds (an sm_90a build on CC 9.0) */
#endif
}

template <int NWG>
cudaError_t launch_wg(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const uint16_t *K,
                      const uint16_t *V, int64_t kv_pos0, int64_t kv_last, int tile_lo, int tile_hi, int P, int T,
                      int64_t pos0, int H, int Hkv, float scale, int window, int flags, cudaStream_t s)
{
    static int attr_done = 0;
    const size_t smem = wg_smem<NWG>();
    const cudaError_t err = opt_in_smem(k_attn_wg<NWG>, smem, true, &attr_done);
    if (err != cudaSuccess)
        return err;
    const unsigned grid = prefill_grid(T, H, Hkv, NWG * 64);
    const float scale_log2 = scale_base2(scale);
    k_attn_wg<NWG><<<grid, NWG * 128, smem, s>>>(q, ctx, st_m, st_l, st_acc, K, V, kv_pos0, kv_last, tile_lo, tile_hi,
                                                 P, T, pos0, H, Hkv, scale_log2, window, flags);
    return cudaGetLastError();
}

/* k_attn_wgs: k_attn_wg's arithmetic (the same wgmma instructions on the same operands in the same order per row, so
 * the same bits) in a warp-specialized block of three warpgroups. Warpgroup 0 only copies: its 128 threads bring
 * sub-block after sub-block of K and V into WGS_NS stage buffers (cp.async, the core-matrix layout of k_attn_wg), two
 * sub-blocks in flight; once a thread's copies of a sub-block landed (cp.async.wait_group) it fences them for the
 * async proxy that wgmma reads through and arrives on that stage's FULL barrier (128 arrivals). Warpgroups 1 and 2
 * each own 64 packed rows (128 a block) and run k_attn_wg's per-sub-block steps after waiting on FULL, then each of
 * their warps arrives on the stage's EMPTY barrier (8 arrivals) that the copier waits on before refilling it. No
 * block-wide barrier after the start: a warpgroup's softmax runs while the other one's wgmma do, and the copies
 * run ahead. A warpgroup that sees none of a sub-block's keys still waits on its FULL before arriving on its EMPTY
 * (else it could complete a later phase of that barrier while the other warpgroup still reads the stage). */
constexpr int WGS_NS = 4;
/* Variants (the same bits; test_engk_attn --bench times each): WGS_QREG Q as register A fragments (wgmma RS for S),
 * else Q in shared memory (SS); WGS_OVERLAP S(t + 1) issued with P(t) V(t) and the softmax of t + 1 between them (no
 * branch in that stretch: the mask runs on every sub-block, the rescale is unconditional), else S, softmax, P V one
 * after the other. Either takes setmaxnreg (copier 40 registers, row warpgroups 232). */
/* WGS_TMA (with WGS_QREG): one copier thread loads K and V by TMA (four 64-dim x 64-key boxes a sub-block) into
 * 128-byte-swizzled stages (1024-byte aligned), the wgmma descriptors swizzled to match; rows past the launch's last
 * tile or past kv_last come in as zeros (out of the tensor map's bounds), so a box longer than its sub-block reads
 * only the launch's own keys or zeros (masked, p = 0, and 0 * 0 in P V). */
/* WGS_PP (with WGS_TMA, not WGS_OVERLAP): the two row warpgroups take turns on the tensor cores (FlashAttention-3's
 * ping-pong). Each walks the same phases over the union of their sub-blocks: phase k issues P V of sub-block uf + k - 1
 * and S of uf + k (each only where the sub-block has keys the warpgroup's rows see), after waiting on its named
 * barrier for the other warpgroup's phase k - 1 (warpgroup 1's phase k waits for warpgroup 0's phase k); it then
 * arrives on the other's barrier, waits for both products and runs the softmax of uf + k while the other warpgroup's
 * products run. Per row the steps are the other forms' (S, softmax, rescale, P V, in sub-block order; one wait for
 * both products instead of one each), so the same bits. No deadlock with the stages: a warpgroup's acquire of
 * sub-block j needs both warpgroups' releases of j - WGS_NS, and each warpgroup releases a sub-block right after its
 * phase's wait, never behind a named barrier, so those releases precede (in its program order) the barrier steps
 * the acquiring warpgroup has already passed; warpgroup 1 arrives once before its first phase and not after its
 * last, so every barrier's arrivals are consumed. Measured 11-13% slower than the TMA form (one warpgroup's softmax
 * alone is latency-bound at 64-key sub-blocks; engine/README.md, "The ping-pong form"): a checked form, not the
 * engine's. */
enum { WGS_QREG = 1, WGS_OVERLAP = 2, WGS_TMA = 4, WGS_PP = 8 };
template <int VAR> constexpr size_t wgs_smem() /* [WGS_NS][K, V][WG_TILE], (not QREG) Q [2][64 x WG_D], barriers */
{
    return (size_t)(WGS_NS * 2 * WG_TILE + ((VAR & WGS_QREG) ? 0 : 2 * 64 * WG_D)) * sizeof(uint16_t) +
           2 * WGS_NS * sizeof(uint64_t) + ((VAR & WGS_TMA) ? 1024 : 0);
}

template <int VAR>
__global__ void __launch_bounds__(384, 1)
    k_attn_wgs(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const uint16_t *Kc,
               const uint16_t *Vc, int64_t kv_pos0, int64_t kv_last, int tile_lo, int tile_hi, int P, int T,
               int64_t pos0, int H, int Hkv, float scale_log2, int window, int flags,
               const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr bool QREG = VAR & WGS_QREG, OVERLAP = VAR & WGS_OVERLAP, TMA = VAR & WGS_TMA, PP = VAR & WGS_PP;
    static_assert(!TMA || QREG, "the TMA variant keeps Q in registers");
    static_assert(!PP || (TMA && !OVERLAP), "the ping-pong variant is the TMA form's, without the overlap");
    constexpr int D = WG_D, ROWS = 128, NJ = KB / 8, NT = D / 8, KS = D / 16, NK = KB / 16;
    constexpr int PASSES = KB * (D / 8) / 128; /* 16-byte copies of a K (and a V) sub-block per copier thread */
    static_assert(KB == 64 && PASSES * 128 == KB * (D / 8), "wgmma tiles: 64-key sub-blocks");
    extern __shared__ __align__(128) uint16_t swg_raw[];
    /* TMA: the stages on a 1024-byte boundary (the swizzle pattern's period) */
    uint16_t *swg = swg_raw + (TMA ? ((1024u - (smem_u32(swg_raw) & 1023u)) & 1023u) / 2 : 0);
    uint16_t *Qs = swg + WGS_NS * 2 * WG_TILE; /* not QREG */
    uint64_t *full = reinterpret_cast<uint64_t *>(Qs + (QREG ? 0 : 2 * 64 * D)), *empty = full + WGS_NS;
    const int G = H / Hkv, rows = T * G, g = (int)(blockIdx.x % Hkv);
    const int wg = threadIdx.x >> 7, lane = threadIdx.x & 31;
    const int rb = (int)(gridDim.x / Hkv - 1 - blockIdx.x / Hkv) * ROWS;
    const int rlast = rb + ROWS - 1 < rows - 1 ? rb + ROWS - 1 : rows - 1;
    int64_t blo, bhi;
    prow_keys(rb, rlast, G, pos0, window, tile_lo, tile_hi, P, kv_last, &blo, &bhi);
    const int nsub = (P + KB - 1) / KB;
    const int first = blo <= bhi ? sub_of(blo, tile_lo, nsub, P) : 0;
    const int last = blo <= bhi ? sub_of(bhi, tile_lo, nsub, P) : -1;
    if (threadIdx.x == 0) {
        for (int b = 0; b < WGS_NS; b++) {
            mbar_init(full + b, TMA ? 1 : 128);
            mbar_init(empty + b, 8);
        }
    }
    __syncthreads(); /* the barriers' init, before any thread uses them (the last block-wide barrier) */

    if (wg == 0) { /* the copier */
        if constexpr (QREG || OVERLAP)
            asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        /* stage u % WGS_NS, once its previous use is released; the keys of sub-block first + u */
        auto claim = [&](int u, int64_t *kb0, int *nb) {
            const int b = u % WGS_NS;
            if (u >= WGS_NS)
                mbar_wait(empty + b, (unsigned)(u / WGS_NS - 1) & 1u);
            sub_block(first + u, tile_lo, nsub, P, kb0, nb);
            return b;
        };
        if constexpr (TMA) {
            if (threadIdx.x == 0) {
                const unsigned sb = smem_u32(swg), tile_bytes = WG_TILE * sizeof(uint16_t);
                for (int u = 0; u < last - first + 1; u++) {
                    int64_t kb0;
                    int nb;
                    const int b = claim(u, &kb0, &nb);
                    const int row = (int)(kb0 - kv_pos0);
                    const unsigned ks = sb + (unsigned)b * 2u * tile_bytes, vs = ks + tile_bytes;
                    mbar_expect_tx(full + b, 2u * tile_bytes);
                    tma_load3(ks, &tk, 0, g, row, full + b);
                    tma_load3(ks + tile_bytes / 2, &tk, 64, g, row, full + b);
                    tma_load3(vs, &tv, 0, g, row, full + b);
                    tma_load3(vs + tile_bytes / 2, &tv, 64, g, row, full + b);
                }
            }
            return;
        }
        const int lr8 = threadIdx.x & 7, lc = (threadIdx.x >> 3) & 15;
        const int64_t kvs = (int64_t)Hkv * D;
        const uint16_t *Kg = Kc + (int64_t)g * D + lc * 8, *Vg = Vc + (int64_t)g * D + lc * 8;
        const int cnt = last - first + 1;
        for (int u = 0; u < cnt; u++) {
            int64_t kb0;
            int nb;
            const int b = claim(u, &kb0, &nb);
            const int64_t room = kv_last - kb0 + 1;
            const int n = room < nb ? (int)room : nb;
            uint16_t *Ks = swg + b * 2 * WG_TILE, *Vs = Ks + WG_TILE;
#pragma unroll
            for (int it = 0; it < PASSES; it++) { /* rows past kv_last zero, never read */
                const int r = it * 8 + lr8, so = wg_off(r, lc * 8, KB);
                const bool ok = r < n;
                const int64_t off = ok ? (kb0 + r - kv_pos0) * kvs : 0;
                cp16(Ks + so, Kg + off, ok);
                cp16(Vs + so, Vg + off, ok);
            }
            cpa_commit();
            if (u >= 2) { /* sub-block u - 2 landed: publish it */
                cpa_wait<2>();
                fence_async_smem();
                mbar_arrive(full + (u - 2) % WGS_NS);
            }
        }
        if (cnt >= 2) {
            cpa_wait<1>();
            fence_async_smem();
            mbar_arrive(full + (cnt - 2) % WGS_NS);
        }
        if (cnt >= 1) {
            cpa_wait<0>();
            fence_async_smem();
            mbar_arrive(full + (cnt - 1) % WGS_NS);
        }
        return;
    }

    /* the two row warpgroups: warp cw (0 .. 7) holds rows rb + 16 cw .. + 15 as k_attn_wg's warp cw does */
    if constexpr (QREG || OVERLAP)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cwg = wg - 1, cw = (threadIdx.x >> 5) - 4, qr = lane >> 2, qc = lane & 3;
    auto row_of = [&](int i) { return rb + cw * 16 + qr + 8 * i; };
    auto row_index = [&](int R) { return prow_index(R, rows, G, H, g); };
    const int gr0 = rb + cwg * 64, gr1 = gr0 + 63 < rlast ? gr0 + 63 : rlast;
    const int64_t glo = window_lo(pos0 + gr0 / G, window), ghi = pos0 + gr1 / G;
    const int wr0 = rb + cw * 16, wr1 = wr0 + 15 < rlast ? wr0 + 15 : rlast;
    const bool wfull = wr0 + 15 <= rlast;
    const int64_t alo = window_lo(pos0 + wr1 / G, window), ahi = pos0 + wr0 / G;
    /* the sub-blocks this warpgroup computes: those with a key in [glo, ghi] (a contiguous run of the walk) */
    const int64_t klo = glo > blo ? glo : blo, khi = ghi < bhi ? ghi : bhi;
    const bool glive = gr0 <= rlast && klo <= khi;
    const int gfirst = glive ? sub_of(klo, tile_lo, nsub, P) : last + 1, glast = glive ? sub_of(khi, tile_lo, nsub, P) : last;
    /* WGS_PP: the sub-blocks warpgroup c computes (the derivation above for its rows); false: none */
    auto range_of = [&](int c, int *gf, int *gl) {
        const int r0 = rb + c * 64, r1 = r0 + 63 < rlast ? r0 + 63 : rlast;
        const int64_t lo = window_lo(pos0 + r0 / G, window), hi = pos0 + r1 / G;
        const int64_t a = lo > blo ? lo : blo, b = hi < bhi ? hi : bhi;
        if (r0 > rlast || a > b)
            return false;
        *gf = sub_of(a, tile_lo, nsub, P);
        *gl = sub_of(b, tile_lo, nsub, P);
        return true;
    };

    /* Q rounded to bf16: as the A fragments of the 8 k-steps over D (QREG), or into the warpgroup's core matrices
     * (rows past the chunk: zeros) */
    unsigned qf[QREG ? KS : 1][4];
    if constexpr (QREG) {
        const int R0 = row_of(0), R1 = row_of(1);
        const float *q0 = q + row_index(R0) * D + 2 * qc, *q1 = q + row_index(R1) * D + 2 * qc;
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float2 v0 = make_float2(0.0f, 0.0f), v1 = v0;
                if (R0 < rows)
                    v0 = *reinterpret_cast<const float2 *>(q0 + 16 * ks + 8 * h);
                if (R1 < rows)
                    v1 = *reinterpret_cast<const float2 *>(q1 + 16 * ks + 8 * h);
                qf[ks][2 * h] = pack2(bf16_rne(v0.x), bf16_rne(v0.y));
                qf[ks][2 * h + 1] = pack2(bf16_rne(v1.x), bf16_rne(v1.y));
            }
    } else {
        wg_store_q(Qs + cwg * 64 * D, q, gr0, 64, threadIdx.x & 127, 128, rows, G, H, g);
        fence_async_smem();
        asm volatile("bar.sync %0, 128;\n" ::"r"(1 + cwg) : "memory"); /* the warpgroup's Q, for its wgmma */
    }
    float o[NT][4], m[2], l[2]; /* m in raw score units (st_m too) */
    {
        const bool ld[2] = {!(flags & ENGK_INIT) && row_of(0) < rows, !(flags & ENGK_INIT) && row_of(1) < rows};
        const int64_t ri[2] = {row_index(row_of(0)), row_index(row_of(1))};
        prow_state_load<D>(o, m, l, ld, ri, st_m, st_l, st_acc, qc);
    }
    const bool no_rescale = RC_FAULTS_BUILT && (flags & FAULT_NO_RESCALE);
    const unsigned sbase = smem_u32(swg);
    const unsigned qaddr = sbase + (unsigned)((WGS_NS * 2 * WG_TILE + cwg * 64 * D) * sizeof(uint16_t)); /* !QREG */
    const unsigned qk_lbo = 1024u, qk_sbo = 128u, v_lbo = 128u, v_sbo = 1024u; /* k_attn_wg's derivation */
    /* TMA: the swizzled descriptors' offsets (above); the checker's diagnostics exchange them (ENGK_WGMMA_SWAP_*) */
    const bool xk = flags & ENGK_WGMMA_SWAP_QK, xv = flags & ENGK_WGMMA_SWAP_V;
    const unsigned k_lbo = xk ? 1024u : 16u, k_sbo = xk ? 16u : 1024u, vs_lbo = xv ? 1024u : 8192u,
                   vs_sbo = xv ? 8192u : 1024u;
    auto release = [&](int idx) { /* this warp is done with sub-block idx's stage */
        __syncwarp();
        if (lane == 0)
            mbar_arrive(empty + (idx - first) % WGS_NS);
    };
    auto acquire = [&](int idx) { mbar_wait(full + (idx - first) % WGS_NS, (unsigned)((idx - first) / WGS_NS) & 1u); };
    /* S of sub-block idx (the first k-step only writes the accumulator: no zeroing between the wgmma) */
    float s[NJ][4];
    auto issue_s = [&](int idx) {
        const unsigned kaddr = sbase + (unsigned)((idx - first) % WGS_NS * 2 * WG_TILE * sizeof(uint16_t));
        wg_fence();
        if constexpr (TMA) { /* K-major, swizzled: dims 0-63 then 64-127 (8 KB apart), 32 bytes a k-step */
            wg_qk_rs<0>(s, qf[0], wg_desc_sw(kaddr, k_lbo, k_sbo));
#pragma unroll
            for (int ks = 1; ks < KS; ks++)
                wg_qk_rs<1>(s, qf[ks], wg_desc_sw(kaddr + (ks >> 2) * 8192u + (ks & 3) * 32u, k_lbo, k_sbo));
        } else if constexpr (QREG) {
            wg_qk_rs<0>(s, qf[0], wg_desc(kaddr, qk_lbo, qk_sbo));
#pragma unroll
            for (int ks = 1; ks < KS; ks++)
                wg_qk_rs<1>(s, qf[ks], wg_desc(kaddr + ks * 2048u, qk_lbo, qk_sbo));
        } else {
            wg_qk<0>(s, wg_desc(qaddr, qk_lbo, qk_sbo), wg_desc(kaddr, qk_lbo, qk_sbo));
#pragma unroll
            for (int ks = 1; ks < KS; ks++)
                wg_qk<1>(s, wg_desc(qaddr + ks * 2048u, qk_lbo, qk_sbo), wg_desc(kaddr + ks * 2048u, qk_lbo, qk_sbo));
        }
        wg_commit();
    };
    /* masked (OVERLAP: on every sub-block, a no-op where every row sees every key, so no branch while P V runs)
     * and through the softmax: p in s, corr (m, l updated) */
    auto softmax = [&](int idx, float (&corr)[2]) {
        wg_hold(s);
        int64_t kb0;
        int nb;
        sub_block(idx, tile_lo, nsub, P, &kb0, &nb);
        if (OVERLAP || !(wfull && nb == KB && kb0 >= alo && kb0 + KB - 1 <= ahi)) {
            const int R[2] = {row_of(0), row_of(1)};
            prow_mask(s, R, rows, G, kb0 - pos0, nb, window, qc);
        }
        int nrs = no_rescale; /* opaque per sub-block, so ptxas does not unswitch the softmax on it */
        asm volatile("" : "+r"(nrs));
        unsigned unused[NJ][2];
        prow_softmax_p<NJ, true>(s, unused, corr, m, l, scale_log2, nrs);
    };
    unsigned pb[NJ][2];
    auto pack = [&]() { /* p to bf16 pairs, P V's A fragments (the same rounding k_attn_wg applies) */
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            pb[j][0] = cvt_bf16x2(s[j][0], s[j][1]);
            pb[j][1] = cvt_bf16x2(s[j][2], s[j][3]);
        }
    };
    auto rescale = [&](const float (&corr)[2]) { prow_rescale<NT, OVERLAP>(o, corr); }; /* OVERLAP: unconditional */
    auto issue_pv = [&](int idx) {
        const unsigned vaddr = sbase + (unsigned)(((idx - first) % WGS_NS * 2 + 1) * WG_TILE * sizeof(uint16_t));
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < NK; kk++) {
            const unsigned a[4] = {pb[2 * kk][0], pb[2 * kk][1], pb[2 * kk + 1][0], pb[2 * kk + 1][1]};
            /* TMA: MN-major, swizzled: 64-dim atoms 8 KB apart (LBO), 8-key groups 1 KB apart (SBO), 16 keys a
             * k-step */
            wg_pv(o, a, TMA ? wg_desc_sw(vaddr + kk * 2048u, vs_lbo, vs_sbo) : wg_desc(vaddr + kk * 256u, v_lbo, v_sbo));
        }
        wg_commit();
    };

    int idx = first;
    if constexpr (PP) {
        int of = 0, ol = -1;
        const bool olive = range_of(1 - cwg, &of, &ol);
        /* the union of the two warpgroups' sub-blocks, the same in both */
        const int uf = !glive ? of : !olive ? gfirst : gfirst < of ? gfirst : of;
        const int ul = !glive ? ol : !olive ? glast : glast > ol ? glast : ol;
        if (glive || olive) {
            for (; idx < uf; idx++) { /* keys no row of the block sees */
                acquire(idx);
                release(idx);
            }
            /* named barriers 3 + warpgroup (1 + warpgroup hold Q without QREG), immediate ids (an id in a register
             * makes ptxas reserve all 16); the whole warpgroup, its 128 threads with the other's 128 */
            auto turn = [&](bool arrive, int w) {
                if (arrive && w == 0)
                    asm volatile("bar.arrive 3, 256;\n" ::: "memory");
                else if (arrive)
                    asm volatile("bar.arrive 4, 256;\n" ::: "memory");
                else if (w == 0)
                    asm volatile("bar.sync 3, 256;\n" ::: "memory");
                else
                    asm volatile("bar.sync 4, 256;\n" ::: "memory");
            };
            if (cwg == 1)
                turn(true, 0); /* warpgroup 0 takes the first phase */
            const int np = ul - uf + 2;
            float corr[2];
            for (int k = 0; k < np; k++) {
                const int is = uf + k, ip = is - 1;
                const bool ls = glive && is >= gfirst && is <= glast, lp = glive && ip >= gfirst && ip <= glast;
                if (is <= ul)
                    acquire(is);
                turn(false, cwg);
                if (lp)
                    issue_pv(ip);
                if (ls)
                    issue_s(is);
                if (cwg == 0 || k < np - 1) /* warpgroup 1's last phase has no phase of warpgroup 0 after it */
                    turn(true, 1 - cwg);
                wg_wait0();
                wg_hold(o);
                if (k > 0)
                    release(ip);
                if (ls) {
                    softmax(is, corr);
                    rescale(corr);
                    pack();
                }
            }
            idx = ul + 1;
        }
    } else {
        for (; idx < gfirst && idx <= last; idx++) { /* keys none of this warpgroup's rows sees */
            acquire(idx);
            release(idx);
        }
        if (gfirst <= glast) {
            float corr[2];
            if constexpr (OVERLAP) {
                /* S(t + 1) and P(t) V(t) in flight together; the softmax of t + 1 runs while P(t) V(t) does, and acc
                 * is rescaled by corr(t + 1) once P(t) V(t) landed: acc's order is k_attn_wg's (rescale, add P V) */
                acquire(gfirst);
                issue_s(gfirst);
                wg_wait0();
                softmax(gfirst, corr);
                rescale(corr);
                pack();
                for (idx = gfirst + 1; idx <= glast; idx++) {
                    acquire(idx);
                    issue_s(idx);
                    issue_pv(idx - 1);
                    wg_wait1(); /* S(idx) landed; P V of idx - 1 may still run */
                    softmax(idx, corr);
                    wg_wait0();
                    wg_hold(o);
                    release(idx - 1);
                    rescale(corr);
                    pack();
                }
                issue_pv(glast);
                wg_wait0();
                wg_hold(o);
                release(glast);
            } else {
                for (idx = gfirst; idx <= glast; idx++) {
                    acquire(idx);
                    issue_s(idx);
                    wg_wait0();
                    softmax(idx, corr);
                    rescale(corr);
                    pack();
                    issue_pv(idx);
                    wg_wait0();
                    wg_hold(o);
                    release(idx);
                }
            }
            idx = glast + 1;
        }
    }
    for (; idx <= last; idx++) {
        acquire(idx);
        release(idx);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int R = row_of(i);
        if (R < rows)
            prow_store<D>(o, i, m[i], l[i], row_index(R), ctx, st_m, st_l, st_acc, flags, qc);
    }
#else
    __trap(); /* the host launches this only where engk_attn_prefill_wgmma holds (an sm_90a build on CC 9.0) */
#endif
}

/* The TMA variant's tensor maps over the K and V caches from position kv_pos0 (row 0) on, `rows` rows (launch_wgs:
 * to the launch's last tile or kv_last): bf16 [rows][Hkv][128], boxes of 64 dims x 1 head x 64 rows, 128-byte
 * swizzle, rows out of bounds read as zeros. cuTensorMapEncodeTiled is fetched once through the runtime (no link to
 * the driver library; cudaGetDriverEntryPointByVersion: CUDA 12.5 or later, else engk_attn_prefill_wgmma says 0). */
static cudaError_t wgs_maps(CUtensorMap *tk, CUtensorMap *tv, const uint16_t *K, const uint16_t *V, int64_t rows,
                            int Hkv)
{
#if CUDART_VERSION >= 12050
    static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    if (!encode) {
        cudaDriverEntryPointQueryResult q;
        void *fn = nullptr;
        const cudaError_t err =
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
        if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn)
            return err != cudaSuccess ? err : cudaErrorNotSupported;
        encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }
    const cuuint64_t dims[3] = {(cuuint64_t)WG_D, (cuuint64_t)Hkv, (cuuint64_t)rows};
    const cuuint64_t strides[2] = {(cuuint64_t)WG_D * 2, (cuuint64_t)Hkv * WG_D * 2};
    const cuuint32_t box[3] = {64, 1, KB}, estr[3] = {1, 1, 1};
    for (int i = 0; i < 2; i++) {
        const CUresult r = encode(i ? tv : tk, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
                                  const_cast<uint16_t *>(i ? V : K), dims, strides, box, estr,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS)
            return cudaErrorInvalidValue;
    }
    return cudaSuccess;
#else
    (void)tk, (void)tv, (void)K, (void)V, (void)rows, (void)Hkv;
    return cudaErrorNotSupported;
#endif
}

template <int VAR>
cudaError_t launch_wgs(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const uint16_t *K,
                       const uint16_t *V, int64_t kv_pos0, int64_t kv_last, int tile_lo, int tile_hi, int P, int T,
                       int64_t pos0, int H, int Hkv, float scale, int window, int flags, cudaStream_t s)
{
    static int attr_done = 0;
    const size_t smem = wgs_smem<VAR>();
    cudaError_t err = opt_in_smem(k_attn_wgs<VAR>, smem, false, &attr_done); /* one block an SM */
    if (err != cudaSuccess)
        return err;
    const unsigned grid = prefill_grid(T, H, Hkv, 128);
    const float scale_log2 = scale_base2(scale);
    CUtensorMap tk, tv;
    memset(&tk, 0, sizeof tk);
    memset(&tv, 0, sizeof tv);
    if (VAR & WGS_TMA) {
        /* the rows this launch may read: its tiles' up to kv_last. A box is 64 keys whatever P, so with P < 64 (or
         * not a multiple of it) a sub-block's box reaches past its tile; those rows must come in as zeros, not as
         * what follows in memory: a KV-offload buffer holds one tile, and NaN there would make 0 * NaN in P V. */
        const int64_t kend = (int64_t)tile_hi * P - 1 < kv_last ? (int64_t)tile_hi * P - 1 : kv_last;
        err = wgs_maps(&tk, &tv, K, V, kend >= kv_pos0 ? kend - kv_pos0 + 1 : 1, Hkv);
        if (err != cudaSuccess)
            return err;
    }
    k_attn_wgs<VAR><<<grid, 384, smem, s>>>(q, ctx, st_m, st_l, st_acc, K, V, kv_pos0, kv_last, tile_lo, tile_hi, P,
                                            T, pos0, H, Hkv, scale_log2, window, flags, tk, tv);
    return cudaGetLastError();
}

/* ---------------- decode on tensor cores (bf16 KV, sm_80+) ---------------- */

/* engk_attn_decode_fused_post's qkv_post: the q|k|v row (fp32 [H + 2 Hkv][D], as the GEMV leaves it), the q/k
 * norms (NULL: none), their kind and eps, the RoPE row (cos, sin: rot/2 each), the caches the new K/V row goes to
 * (Kc, Vc, writable) and back (the kv_stale_slot fault: the row goes to *pos_dev - back). */
struct PostArgs {
    const float *qkv, *qn, *kn, *cos_t, *sin_t;
    uint16_t *k, *v;
    int kind, rot, back;
    float eps;
};

/* Geometry at head dim D (16 .. 256, a power of two). A warp takes a key group (16 keys of a tile); lane
 * (r, c4) = (lane / 4, lane % 4). S^T [16 keys x 8 heads] = K Q^T by MT m16n8k16 MMAs (k-steps over D): A = the K
 * rows r and r + 8 as stored, KN runs of KR consecutive bf16 per row and lane, so a k-step's 16 dims are a fixed
 * permutation of D's, applied to q alike; B = the group's q rounded to bf16 (heads in N, padded to 8). acc^T
 * [D x 8] += V^T P^T by MT MMAs (m-tiles over D): A = V^T, lane (r, c4) loading keys 2 c4, 2 c4 + 1, 2 c4 + 8,
 * 2 c4 + 9 (VN runs of VR dims per key: dims VR (r + 8 j) + e) and pairing two keys per register (prmt); B = P^T,
 * the probabilities rounded to bf16, moved from S's fragment layout by four shuffles. */
template <int D> struct Dmma {
    static constexpr int MT = D / 16;
    static constexpr int KR = D / 4 < 8 ? D / 4 : 8, KN = D / 4 / KR;
    static constexpr int VR = D / 8 < 8 ? D / 8 : 8, VN = D / 8 / VR;
};
constexpr int DMMA_WARPS = 4, DMMA_THREADS = DMMA_WARPS * 32, DMMA_N = 8; /* DMMA_N: heads per MMA (G <= 8) */
/* A block's threads: the POST form posts its rows (G q heads, K, V per item) with twice the warps that run the keys,
 * so a group's rows are posted in one round (the helpers then only keep the block's barriers); the rest with
 * DMMA_WARPS. */
__host__ __device__ constexpr int dmma_threads(bool post) { return post ? 2 * DMMA_THREADS : DMMA_THREADS; }
/* floats of the warps' accumulators [DMMA_WARPS][G][D], which the POST form's posting warps first use as rows [2
 * DMMA_WARPS][D] */
__host__ __device__ constexpr int dmma_sacc(int G, int D) { return DMMA_WARPS * (G > 2 ? G : 2) * D; }
constexpr int DMMA_QPAD = 32; /* bf16 padding of a q row in shared memory: 16-byte reads of rows r, r + 1 miss */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* N words (2N bf16) from global memory, not kept in L1 (each K/V row is read once per step); zeros when !ok. COH:
 * the coherent form (no .nc), for a cache row the same launch wrote (k_dec_mma with POST). */
template <bool COH> __device__ __forceinline__ void ld_run(unsigned (&w)[4], const uint16_t *p, bool ok)
{
    w[0] = w[1] = w[2] = w[3] = 0u;
    if (ok && COH)
        asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                     : "l"(p)
                     : "memory");
    else if (ok)
        asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
            : "l"(p));
}
template <bool COH> __device__ __forceinline__ void ld_run(unsigned (&w)[2], const uint16_t *p, bool ok)
{
    w[0] = w[1] = 0u;
    if (ok && COH)
        asm volatile("ld.global.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p) : "memory");
    else if (ok)
        asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
}
template <bool COH> __device__ __forceinline__ void ld_run(unsigned (&w)[1], const uint16_t *p, bool ok)
{
    w[0] = 0u;
    if (ok && COH)
        asm volatile("ld.global.L1::no_allocate.u32 %0, [%1];" : "=r"(w[0]) : "l"(p) : "memory");
    else if (ok)
        asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(w[0]) : "l"(p));
}
__device__ __forceinline__ void lds_run(unsigned (&w)[4], const uint16_t *p)
{
    const uint4 u = *reinterpret_cast<const uint4 *>(p);
    w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
}
__device__ __forceinline__ void lds_run(unsigned (&w)[2], const uint16_t *p)
{
    const uint2 u = *reinterpret_cast<const uint2 *>(p);
    w[0] = u.x, w[1] = u.y;
}
__device__ __forceinline__ void lds_run(unsigned (&w)[1], const uint16_t *p) { w[0] = *reinterpret_cast<const unsigned *>(p); }
#endif

/* The split-KV partials of the live tiles in [kmin, kmax] on tensor cores (bf16 KV): the same items, grid and
 * partial format (m, l, acc per tile and head) as k_dec_part, another arithmetic. Per item (tile k, kv head g) of
 * n keys from a = max(kP, lo): warp w takes key groups w, w + 4, ... (keys a + 16 grp ..); per group, s = scale (q
 * K^T) with q rounded to bf16 (fp32 accumulation; SPLIT: plus K times bf16(q - bf16(q)) in a second accumulator,
 * added after), keys past n at -inf; per head m_new = max(m, max s) (butterfly 4, 8, 16), corr = m_new == m ? 1 :
 * expf(m - m_new), p = expf(s - m_new), l = fmaf(l, corr, p_r + p_r+8) per lane, acc = acc corr + V^T P^T with p
 * rounded to bf16 (SPLIT: then + V^T times the rests bf16(p - bf16(p))). The warp's l is summed over its key lanes (butterfly 4,
 * 8, 16); the tile's m is the max over the warps, each warp's acc and l scaled by f = expf(m_w - m), and the warps
 * summed 0..3 in order. Each step's order is fixed by n and P, never by the grid or which block runs the item. A
 * warp issues its next group's K loads when its S is done and the V loads when its P V is done, so one item's
 * softmax, P V and the block's merge run under the next item's loads. FUSE (engk_attn_decode_fused): the merge
 * folded in, as in k_dec_part (merge_one for a single live tile, else merge_tail). */
template <int D, bool SPLIT, bool FUSE, bool POST>
__global__ void __launch_bounds__(dmma_threads(POST))
    k_dec_mma(const float *q, float *part, float *ctx, unsigned *cnt, const uint16_t *Kc, const uint16_t *Vc,
              const int64_t *pos_dev, int64_t kv_pos0, int kmin, int kmax, int max_tiles, int P, int H, int Hkv,
              float scale, int window, PostArgs post)
{
    if (!POST) {
        dep_wait(); /* q, the new K/V row and *pos_dev come from the kernels before: launch_dep */
        dep_launch();
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int MT = Dmma<D>::MT, KR = Dmma<D>::KR, KN = Dmma<D>::KN, VR = Dmma<D>::VR, VN = Dmma<D>::VN;
    constexpr int LDQ = D + DMMA_QPAD;
    extern __shared__ __align__(16) float sdm[];
    const int G = H / Hkv, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, r = lane >> 2, c4 = lane & 3;
    const bool mw = warp < DMMA_WARPS;              /* POST: warps past DMMA_WARPS only help post the rows */
    float *sacc = sdm;                              /* [warp][G][D] (at least [2 DMMA_WARPS][D]: the post's rows) */
    float *swm = sacc + dmma_sacc(G, D);            /* [warp][8] m, then [warp][8] l */
    float *swl = swm + DMMA_WARPS * DMMA_N, *stm = swl + DMMA_WARPS * DMMA_N; /* stm [8]: the tile's m */
    uint16_t *sq = reinterpret_cast<uint16_t *>(stm + DMMA_N); /* [H][LDQ] bf16(q), with SPLIT then [H][LDQ] its rest */
    const int64_t pos = *pos_dev, lo = window_lo(pos, window);
    const int tl = engk_dec_tlo(pos, window, P), th = engk_dec_thi(pos, P);
    const int tlo = tl > kmin ? tl : kmin, thi = th < kmax ? th : kmax;
    const int64_t items = thi >= tlo ? (int64_t)(thi - tlo + 1) * Hkv : 0;
    const int64_t kvs = (int64_t)Hkv * D;
    __shared__ __align__(16) uint16_t snew[POST ? 2 * D : 8]; /* POST: the first item's new K and V rows, bf16 */
    uint16_t *const snew_v = snew + (POST ? D : 0);
    float *pa = part, *pm = pa + (int64_t)max_tiles * H * D, *pl = pm + (int64_t)max_tiles * H;

    auto geom = [&](int64_t it, int64_t *base, int *n) { /* item it: K/V offset of its first key, its keys */
        const int64_t t0 = (int64_t)(tlo + (int)(it / Hkv)) * P, a = t0 > lo ? t0 : lo;
        const int64_t b = t0 + P - 1 < pos ? t0 + P - 1 : pos;
        *n = (int)(b - a + 1);
        *base = (a - kv_pos0) * kvs + (it % Hkv) * D;
    };
    unsigned kw[2][KN][KR / 2], vw[4][VN][VR / 2];
    auto load_k = [&](int64_t base, int n, int grp) { /* rows 16 grp + r and + 8 */
#pragma unroll
        for (int h2 = 0; h2 < 2; h2++) {
            const int jj = 16 * grp + r + 8 * h2;
            const uint16_t *p = Kc + base + (int64_t)jj * kvs + KR * c4;
#pragma unroll
            for (int c = 0; c < KN; c++)
                ld_run<POST>(kw[h2][c], p + 4 * KR * c, jj < n);
        }
    };
    auto load_v = [&](int64_t base, int n, int grp) { /* keys 16 grp + 2 c4 + {0, 1, 8, 9} */
#pragma unroll
        for (int vk = 0; vk < 4; vk++) {
            const int jj = 16 * grp + 2 * c4 + (vk & 1) + 8 * (vk >> 1);
            const uint16_t *p = Vc + base + (int64_t)jj * kvs + VR * r;
#pragma unroll
            for (int j = 0; j < VN; j++)
                ld_run<POST>(vw[vk][j], p + 8 * VR * j, jj < n);
        }
    };

    if (FUSE && blockIdx.x >= items) /* no item (short contexts: most of the grid): skip loading q */
        return;
    int64_t it = blockIdx.x, pit = -1; /* (pit, pgrp): the group whose K/V this warp has in flight */
    int pgrp = -1;
    int64_t b0 = 0;
    int n0 = 0;
    /* POST with the row at *pos_dev (back 0): the first item's first group of each warp is loaded before
     * dep_wait(), all but the new row (the last key: one live tile ends at pos), which this launch writes and the
     * owning warp takes from snew below. Safe to read early: *pos_dev is a memcpy node before the step's kernels
     * (the engine's decode graph) or stream-ordered (direct launches), and the older rows were written by earlier
     * steps, which are complete (a step is one graph launch; without a graph, launches are stream-ordered). */
    const bool early = POST && post.back == 0;
    if (POST && thi != tlo)
        __trap(); /* the host's contract: one live tile (engk_attn_decode_fused_post) */
    if (early && it < items) {
        geom(it, &b0, &n0);
        if (mw && 16 * warp < n0) {
            load_k(b0, n0 - 1, warp);
            load_v(b0, n0 - 1, warp);
            pit = it;
            pgrp = warp;
        }
    }
    if (POST && warp == 0) { /* the post's weights and RoPE row into L1 (no kernel of the step writes them) */
        auto l1 = [&](const float *p, int n) {
            for (int i = 32 * lane; p && i < n; i += 32 * 32)
                asm volatile("prefetch.global.L1 [%0];" ::"l"(p + i));
        };
        l1(post.qn, D);
        l1(post.kn, D);
        l1(post.cos_t, post.rot / 2);
        l1(post.sin_t, post.rot / 2);
    }
    if (POST) {
        dep_wait(); /* q|k|v comes from the kernel before: launch_dep (the early loads above read none of it) */
        dep_launch();
        /* qkv_post folded in (one live tile: item it is KV head it, every block's items in tile tlo): for each of
         * its items the block posts the group's G q heads into sq (as k_qkv_post_rows would store them, then
         * rounded as the copy below rounds them) and the new K and V rows into the caches; warp w of the 8
         * takes tasks w, w + 8, ... of (G q heads, K, V) per item, each in k_qkv_post_rows' arithmetic (head_norm,
         * rope_pair, one bf16 rounding); then the block's loads of the tile see its rows (ld_run<true>), and the
         * warp that loaded the first item's new row early takes it from snew. */
        float *u = sacc + warp * D; /* free until the merge */
        const int half = post.rot / 2, tasks = G + 2;
        const int64_t prow = (pos - post.back - kv_pos0) * kvs;
        const int64_t mine = (items - blockIdx.x + gridDim.x - 1) / gridDim.x, ntask = mine * tasks;
        constexpr int QV = (D / 4 + 31) / 32; /* float4 of a q|k|v row a lane */
        auto item_of = [&](int64_t t) { return (int)(blockIdx.x + (t / tasks) * gridDim.x); }; /* task t's KV head */
        auto row_of = [&](int g, int j) { return j < G ? g * G + j : j == G ? H + g : H + Hkv + g; }; /* of q|k|v */
        auto load_row = [&](float4 (&v)[QV], int64_t t) {
            const float4 *src =
                reinterpret_cast<const float4 *>(post.qkv + (int64_t)row_of(item_of(t), (int)(t % tasks)) * D);
#pragma unroll
            for (int i = 0; i < QV; i++)
                v[i] = lane + 32 * i < D / 4 ? src[lane + 32 * i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        };
        float4 cur[QV];
        if (warp < ntask)
            load_row(cur, warp);
        constexpr int PW = dmma_threads(POST) / 32; /* the warps that post */
        for (int64_t t = warp; t < ntask; t += PW) {
            const int g = item_of(t), j = (int)(t % tasks), h = row_of(g, j);
            float4 nxt[QV]; /* the warp's next task's row, in flight while this one is posted */
            const bool more = t + PW < ntask;
            if (more)
                load_row(nxt, t + PW);
#pragma unroll
            for (int i = 0; i < QV; i++)
                if (lane + 32 * i < D / 4)
                    reinterpret_cast<float4 *>(u)[lane + 32 * i] = cur[i];
            __syncwarp();
            if (j <= G) { /* q or K: norm, RoPE */
                const float *nw = j < G ? post.qn : post.kn;
                if (nw)
                    head_norm(u, D, nw, post.kind, post.eps, lane);
                for (int i = lane; i < half; i += 32)
                    rope_pair(u, i, half, post.cos_t[i], post.sin_t[i]);
                __syncwarp();
            }
            if (j < G) {
                for (int d = 2 * lane; d < D; d += 64) {
                    const unsigned hx = bf16_rne(u[d]), hy = bf16_rne(u[d + 1]);
                    *reinterpret_cast<unsigned *>(sq + h * LDQ + d) = pack2(hx, hy);
                    if (SPLIT)
                        *reinterpret_cast<unsigned *>(sq + (H + h) * LDQ + d) =
                            pack2(bf16_rne(u[d] - __uint_as_float(hx << 16)), bf16_rne(u[d + 1] - __uint_as_float(hy << 16)));
                }
            } else {
                uint16_t *dst = (j == G ? post.k : post.v) + prow + (int64_t)g * D;
                for (int d = 2 * lane; d < D; d += 64) {
                    const unsigned w = pack2(bf16_rne(u[d]), bf16_rne(u[d + 1]));
                    *reinterpret_cast<unsigned *>(dst + d) = w;
                    if (early && t < tasks) /* the first item's */
                        *reinterpret_cast<unsigned *>(snew + (j - G) * D + d) = w;
                }
            }
            __syncwarp();
            if (more)
#pragma unroll
                for (int i = 0; i < QV; i++)
                    cur[i] = nxt[i];
        }
        __syncthreads();
        trace_mark();
        const int last = n0 - 1 - 16 * warp; /* the new row in this warp's early group: its lanes' words of it */
        if (early && pit == it && last < 16) {
#pragma unroll
            for (int h2 = 0; h2 < 2; h2++)
                if (r + 8 * h2 == last)
#pragma unroll
                    for (int c = 0; c < KN; c++)
                        lds_run(kw[h2][c], snew + KR * c4 + 4 * KR * c);
#pragma unroll
            for (int vk = 0; vk < 4; vk++)
                if (2 * c4 + (vk & 1) + 8 * (vk >> 1) == last)
#pragma unroll
                    for (int j = 0; j < VN; j++)
                        lds_run(vw[vk][j], snew_v + VR * r + 8 * VR * j);
        }
    }

    if (!early && it < items) {
        geom(it, &b0, &n0);
        if (mw && 16 * warp < n0) {
            load_k(b0, n0, warp);
            load_v(b0, n0, warp);
            pit = it;
            pgrp = warp;
        }
    }
    /* q into shared memory: QB float2 loads a thread in flight before its first store (one wait for memory per
     * QB x DMMA_THREADS pairs, not possibly one per pair) */
    constexpr int QB = 8;
    for (int i0 = tid; !POST && i0 < H * D / 2; i0 += QB * DMMA_THREADS) {
        float2 qv[QB];
#pragma unroll
        for (int j = 0; j < QB; j++) {
            const int i = i0 + j * DMMA_THREADS, h = 2 * i / D, d = 2 * i - h * D;
            qv[j] = i < H * D / 2 ? *reinterpret_cast<const float2 *>(q + (int64_t)h * D + d) : make_float2(0.0f, 0.0f);
        }
#pragma unroll
        for (int j = 0; j < QB; j++) {
            const int i = i0 + j * DMMA_THREADS, h = 2 * i / D, d = 2 * i - h * D;
            if (i >= H * D / 2)
                break;
            const float2 v = qv[j];
            const unsigned hx = bf16_rne(v.x), hy = bf16_rne(v.y);
            *reinterpret_cast<unsigned *>(sq + h * LDQ + d) = pack2(hx, hy);
            if (SPLIT) /* q - bf16(q) is exact in fp32 */
                *reinterpret_cast<unsigned *>(sq + (H + h) * LDQ + d) =
                    pack2(bf16_rne(v.x - __uint_as_float(hx << 16)), bf16_rne(v.y - __uint_as_float(hy << 16)));
        }
    }
    __syncthreads();
    trace_mark();
    for (; it < items; it += gridDim.x) {
        int64_t base;
        int n;
        geom(it, &base, &n);
        const int g = (int)(it % Hkv), k = tlo + (int)(it / Hkv);
        const bool qlive = r < G; /* B column r: head r of the group, zero past G (read at row 0: no divergence) */
        const uint16_t *qrow = sq + (g * G + (qlive ? r : 0)) * LDQ + KR * c4;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, acc[MT][4];
#pragma unroll
        for (int i = 0; i < MT; i++)
            acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
        for (int grp = warp; mw && 16 * grp < n; grp += DMMA_WARPS) {
            if (pit != it || pgrp != grp) {
                load_k(base, n, grp);
                load_v(base, n, grp);
            }
            int64_t nit = it, nbase = base; /* this warp's next group: in this item, else in its next item */
            int ngp = grp + DMMA_WARPS, nn = n;
            if (16 * ngp >= n) {
                nit = it + gridDim.x;
                ngp = warp;
                if (nit < items)
                    geom(nit, &nbase, &nn);
            }
            const bool pre = nit < items && 16 * ngp < nn;

            float s[4] = {0.0f, 0.0f, 0.0f, 0.0f}, s2[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* S^T: keys r, r + 8 x heads
                                                                                2 c4, 2 c4 + 1; s2: K times q's rest */
#pragma unroll
            for (int c = 0; c < KN; c++) {
                unsigned qw[KR / 2], ql[KR / 2];
                lds_run(qw, qrow + 4 * KR * c);
                if (SPLIT)
                    lds_run(ql, qrow + H * LDQ + 4 * KR * c);
#pragma unroll
                for (int u = 0; u < KR / 2; u++) {
                    qw[u] = qlive ? qw[u] : 0u;
                    ql[u] = qlive && SPLIT ? ql[u] : 0u;
                }
#pragma unroll
                for (int t = 0; t < KR / 4; t++) {
                    const unsigned a[4] = {kw[0][c][2 * t], kw[1][c][2 * t], kw[0][c][2 * t + 1], kw[1][c][2 * t + 1]};
                    mma16816(s, a, qw[2 * t], qw[2 * t + 1]);
                    if (SPLIT)
                        mma16816(s2, a, ql[2 * t], ql[2 * t + 1]);
                }
            }
            if (SPLIT)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    s[i] = s[i] + s2[i];
            if (pre)
                load_k(nbase, nn, ngp);
            const int j0 = 16 * grp + r;
#pragma unroll
            for (int i = 0; i < 4; i++)
                s[i] = j0 + 8 * (i >> 1) < n ? s[i] * scale : -INFINITY;
            float corr[2], p[4];
#pragma unroll
            for (int j = 0; j < 2; j++) {
                float mx = fmaxf(s[j], s[j + 2]);
                mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 4));
                mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 8));
                mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 16));
                const float mn = fmaxf(m[j], mx);
                corr[j] = mn == m[j] ? 1.0f : expf(m[j] - mn);
                m[j] = mn;
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
                p[i] = expf(s[i] - m[i & 1]);
#pragma unroll
            for (int j = 0; j < 2; j++)
                l[j] = fmaf(l[j], corr[j], p[j] + p[j + 2]);
            if (grp != warp)
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    acc[i][0] = acc[i][0] * corr[0];
                    acc[i][1] = acc[i][1] * corr[1];
                    acc[i][2] = acc[i][2] * corr[0];
                    acc[i][3] = acc[i][3] * corr[1];
                }
            /* P^T fragment of lane (r, c4): head r, keys 2 c4, 2 c4 + 1 (b0) and + 8, + 9 (b1); lane 8 c4 + r / 2 holds
             * keys 2 c4 and 2 c4 + 8 of heads r & ~1, r | 1, lane 8 c4 + 4 + r / 2 keys 2 c4 + 1 and 2 c4 + 9 */
            const unsigned X = cvt_bf16x2(p[0], p[2]), Y = cvt_bf16x2(p[1], p[3]);
            const int src = 8 * c4 + (r >> 1);
            const unsigned x0 = __shfl_sync(FULL, X, src), y0 = __shfl_sync(FULL, Y, src);
            const unsigned x1 = __shfl_sync(FULL, X, src + 4), y1 = __shfl_sync(FULL, Y, src + 4);
            const unsigned z0 = r & 1 ? y0 : x0, z1 = r & 1 ? y1 : x1;
            const unsigned b0 = __byte_perm(z0, z1, 0x5410), b1 = __byte_perm(z0, z1, 0x7632);
            unsigned bl0 = 0u, bl1 = 0u; /* SPLIT: the same for the rests p - bf16(p) (exact in fp32) */
            if (SPLIT) {
                const unsigned Xl = cvt_bf16x2(p[0] - __uint_as_float(X << 16), p[2] - __uint_as_float(X & 0xffff0000u));
                const unsigned Yl = cvt_bf16x2(p[1] - __uint_as_float(Y << 16), p[3] - __uint_as_float(Y & 0xffff0000u));
                const unsigned xl0 = __shfl_sync(FULL, Xl, src), yl0 = __shfl_sync(FULL, Yl, src);
                const unsigned xl1 = __shfl_sync(FULL, Xl, src + 4), yl1 = __shfl_sync(FULL, Yl, src + 4);
                const unsigned zl0 = r & 1 ? yl0 : xl0, zl1 = r & 1 ? yl1 : xl1;
                bl0 = __byte_perm(zl0, zl1, 0x5410);
                bl1 = __byte_perm(zl0, zl1, 0x7632);
            }
#pragma unroll
            for (int i = 0; i < MT; i++) { /* m-tile i: dims of slots i (rows r) and MT + i (rows r + 8) */
                const int s0 = i, s1 = MT + i;
                const int j0v = s0 / VR, e0 = s0 % VR, j1v = s1 / VR, e1 = s1 % VR;
                const unsigned sel0 = e0 & 1 ? 0x7632u : 0x5410u, sel1 = e1 & 1 ? 0x7632u : 0x5410u;
                const unsigned a[4] = {__byte_perm(vw[0][j0v][e0 >> 1], vw[1][j0v][e0 >> 1], sel0),
                                       __byte_perm(vw[0][j1v][e1 >> 1], vw[1][j1v][e1 >> 1], sel1),
                                       __byte_perm(vw[2][j0v][e0 >> 1], vw[3][j0v][e0 >> 1], sel0),
                                       __byte_perm(vw[2][j1v][e1 >> 1], vw[3][j1v][e1 >> 1], sel1)};
                mma16816(acc[i], a, b0, b1);
                if (SPLIT)
                    mma16816(acc[i], a, bl0, bl1);
            }
            if (pre)
                load_v(nbase, nn, ngp);
            pit = pre ? nit : -1;
            pgrp = ngp;
        }
        /* the block's merge of its warps */
        trace_mark();
#pragma unroll
        for (int j = 0; j < 2; j++) {
            l[j] += __shfl_xor_sync(FULL, l[j], 4);
            l[j] += __shfl_xor_sync(FULL, l[j], 8);
            l[j] += __shfl_xor_sync(FULL, l[j], 16);
        }
        if (mw && r == 0) {
            swm[warp * DMMA_N + 2 * c4] = m[0];
            swm[warp * DMMA_N + 2 * c4 + 1] = m[1];
        }
        __syncthreads();
        trace_mark();
        float f[2];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            float M = swm[2 * c4 + j];
#pragma unroll
            for (int w = 1; w < DMMA_WARPS; w++)
                M = fmaxf(M, swm[w * DMMA_N + 2 * c4 + j]);
            f[j] = expf(m[j] - M); /* 0 for a warp without keys (m = -inf) */
            if (mw && r == 0) {
                swl[warp * DMMA_N + 2 * c4 + j] = l[j] * f[j];
                if (warp == 0)
                    stm[2 * c4 + j] = M;
            }
            if (mw && 2 * c4 + j < G) {
                float *dst = sacc + (warp * G + 2 * c4 + j) * D + VR * r;
#pragma unroll
                for (int sl = 0; sl < D / 8; sl += 2) { /* slot sl: dim VR (r + 8 (sl / VR)) + sl % VR */
                    const float v0 = sl < MT ? acc[sl][j] : acc[sl - MT][2 + j];
                    const float v1 = sl + 1 < MT ? acc[sl + 1][j] : acc[sl + 1 - MT][2 + j];
                    *reinterpret_cast<float2 *>(dst + 8 * VR * (sl / VR) + sl % VR) = make_float2(v0 * f[j], v1 * f[j]);
                }
            }
        }
        __syncthreads();
        const int64_t slot = (int64_t)k * H + (int64_t)g * G; /* (tile, first head of the group) */
        const int gd = G * D;
        const bool one = FUSE && thi == tlo; /* a single live tile: this item's block writes ctx */
        for (int i = 4 * tid; tid < DMMA_THREADS && i < gd; i += 4 * DMMA_THREADS) {
            const float4 v0 = *reinterpret_cast<const float4 *>(sacc + i);
            const float4 v1 = *reinterpret_cast<const float4 *>(sacc + gd + i);
            const float4 v2 = *reinterpret_cast<const float4 *>(sacc + 2 * gd + i);
            const float4 v3 = *reinterpret_cast<const float4 *>(sacc + 3 * gd + i);
            const float4 a = make_float4(((v0.x + v1.x) + v2.x) + v3.x, ((v0.y + v1.y) + v2.y) + v3.y,
                                         ((v0.z + v1.z) + v2.z) + v3.z, ((v0.w + v1.w) + v2.w) + v3.w);
            *reinterpret_cast<float4 *>(pa + slot * D + i) = a;
            if (one) { /* the 4 dims are of head i / D (D % 16 == 0); its m and l as stored in pm, pl below */
                const int hh = i / D;
                const float m = stm[hh];
                const float l = ((swl[hh] + swl[DMMA_N + hh]) + swl[2 * DMMA_N + hh]) + swl[3 * DMMA_N + hh];
                *reinterpret_cast<float4 *>(ctx + (int64_t)g * gd + i) =
                    make_float4(merge_one(a.x, m, l), merge_one(a.y, m, l), merge_one(a.z, m, l), merge_one(a.w, m, l));
            }
        }
        if (tid < G) {
            pm[slot + tid] = stm[tid];
            pl[slot + tid] = ((swl[tid] + swl[DMMA_N + tid]) + swl[2 * DMMA_N + tid]) + swl[3 * DMMA_N + tid];
        }
        if (FUSE && !one)
            merge_tail<DMMA_THREADS>(part, ctx, cnt, g, G, tlo, thi, max_tiles, H, D, sacc, DMMA_WARPS * G * D);
        trace_mark();
    }
#else
    __trap(); /* the host launches this only on sm_80+ (dec_mma_ok) */
#endif
}

size_t dmma_smem(int H, int G, int D) /* sacc (dmma_sacc), swm, swl [4][8], stm [8]; sq [2][H][D + pad] bf16 */
{
    return (size_t)(dmma_sacc(G, D) + 2 * DMMA_WARPS * DMMA_N + DMMA_N) * sizeof(float) +
           (size_t)2 * H * (D + DMMA_QPAD) * sizeof(uint16_t);
}

int dec_kernel = ENGK_DEC_AUTO; /* tests and the benchmark (engk_attn_decode_kernel) */

/* 1 if the decode partials of this shape run on tensor cores on the current device: bf16 KV, sm_80+, D a power of
 * two in 16 .. 256 (as the prefill's tensor cores), at most 8 query heads per KV head, shared memory <= 48 KiB. */
int dec_mma_ok(int H, int Hkv, int D, int f32)
{
    static int dev_c = -1, major = 0;
    if (f32 || dec_kernel == ENGK_DEC_CUDA_CORES || H % Hkv || H / Hkv > DMMA_N || (D != 16 && D != 32 && D != 64 && D != 128 && D != 256) ||
        dmma_smem(H, H / Hkv, D) > 48 * 1024)
        return 0;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (dev != dev_c) {
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        dev_c = dev;
    }
    return major >= 8;
}

/* The grid: as many blocks as the device holds at once (occupancy at this shared memory), at most one per item, at
 * most dec_blocks_cap. */
template <int D, bool SPLIT, bool FUSE, bool POST>
cudaError_t launch_dmma(const float *q, float *part, float *ctx, unsigned *cnt, const uint16_t *K, const uint16_t *V,
                        const int64_t *pos_dev, int64_t kv_pos0, int kmin, int kmax, int max_tiles, int P, int H,
                        int Hkv, float scale, int window, const PostArgs &post, cudaStream_t s)
{
    static Held h;
    const size_t smem = dmma_smem(H, H / Hkv, D);
    const cudaError_t err = held_blocks((const void *)k_dec_mma<D, SPLIT, FUSE, POST>, dmma_threads(POST), smem, h);
    if (err != cudaSuccess)
        return err;
    int64_t blocks = h.blocks();
    const int64_t items = (int64_t)(kmax - kmin + 1) * Hkv;
    blocks = blocks < items ? blocks : items;
    if (dec_blocks_cap > 0 && blocks > dec_blocks_cap)
        blocks = dec_blocks_cap;
    return launch_dep(k_dec_mma<D, SPLIT, FUSE, POST>, dim3((unsigned)blocks), dim3(dmma_threads(POST)), smem, s, q,
                      part, ctx, cnt, K, V, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, scale, window, post);
}

template <bool SPLIT, bool FUSE, bool POST = false>
cudaError_t dec_mma_d(const float *q, float *part, float *ctx, unsigned *cnt, const uint16_t *k, const uint16_t *v,
                      const int64_t *pos_dev, int64_t kv_pos0, int kmin, int kmax, int max_tiles, int P, int H,
                      int Hkv, int D, float scale, int window, cudaStream_t s, const PostArgs &post = PostArgs())
{
    switch (D) {
    case 16: return launch_dmma<16, SPLIT, FUSE, POST>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, scale, window, post, s);
    case 32: return launch_dmma<32, SPLIT, FUSE, POST>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, scale, window, post, s);
    case 64: return launch_dmma<64, SPLIT, FUSE, POST>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, scale, window, post, s);
    case 128: return launch_dmma<128, SPLIT, FUSE, POST>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, scale, window, post, s);
    default: return launch_dmma<256, SPLIT, FUSE, POST>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, scale, window, post, s);
    }
}

/* ctx, cnt: engk_attn_decode_fused's (the merge folded in), or NULL (the partials alone) */
cudaError_t dec_mma_part(const float *q, float *part, float *ctx, unsigned *cnt, const void *K, const void *V,
                         const int64_t *pos_dev, int64_t kv_pos0, int kmin, int kmax, int max_tiles, int P, int H,
                         int Hkv, int D, float scale, int window, cudaStream_t s)
{
    const uint16_t *k = static_cast<const uint16_t *>(K), *v = static_cast<const uint16_t *>(V);
    const bool bf = dec_kernel == ENGK_DEC_MMA_BF16;
    if (cnt)
        return bf ? dec_mma_d<false, true>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s)
                  : dec_mma_d<true, true>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
    return bf ? dec_mma_d<false, false>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s)
              : dec_mma_d<true, false>(q, part, ctx, cnt, k, v, pos_dev, kv_pos0, kmin, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
}

size_t dec_smem(int G, int D, int P) /* qs [G][D], later red [DEC_WARPS][HG][D]; sp [G][P] */
{
    const size_t red = (size_t)DEC_WARPS * (DEC_LOADS / (dec_cpl(D) > 0 ? dec_cpl(D) : 1)) * D;
    return ((size_t)G * D > red ? (size_t)G * D : red) * sizeof(float) + (size_t)G * P * sizeof(float);
}

size_t rows_smem(int G, int D, int P) { return ((size_t)2 * G * D + (size_t)G * P + 3 * (size_t)G) * sizeof(float); }

} // namespace

extern "C" {

int engk_attn_max_tiles(int64_t max_ctx, int P) { return (int)((max_ctx - 1) / P + 1); }

int64_t engk_attn_part_floats(int max_tiles, int H, int D) { return (int64_t)max_tiles * H * (D + 2); }

size_t engk_attn_smem(int G, int D, int P)
{
    const size_t a = dec_smem(G, D, P), b = rows_smem(G, D, P);
    return a > b ? a : b;
}

cudaError_t engk_attn_decode_tile(const float *q, float *part, const void *Kt, const void *Vt, int f32,
                                  const int64_t *pos_dev, int k, int max_tiles, int P, int H, int Hkv, int D,
                                  float scale, int window, cudaStream_t s)
{
    const int64_t kv0 = (int64_t)k * P;
    if (dec_mma_ok(H, Hkv, D, f32))
        return dec_mma_part(q, part, NULL, NULL, Kt, Vt, pos_dev, kv0, k, k, max_tiles, P, H, Hkv, D, scale, window, s);
    return f32 ? dec_part<float>(q, part, NULL, NULL, Kt, Vt, pos_dev, kv0, k, k, max_tiles, P, H, Hkv, D, scale, window, s)
               : dec_part<uint16_t>(q, part, NULL, NULL, Kt, Vt, pos_dev, kv0, k, k, max_tiles, P, H, Hkv, D, scale, window, s);
}

cudaError_t engk_attn_decode_merge(const float *part, float *ctx, const int64_t *pos_dev, int max_tiles, int P,
                                   int H, int D, int window, cudaStream_t s)
{
    const dim3 grid((unsigned)H, (unsigned)((D + MERGE_DIMS - 1) / MERGE_DIMS));
    return launch_dep(k_dec_merge, grid, dim3(MERGE_THREADS), 0, s, part, ctx, pos_dev, max_tiles, P, H, D, window);
}

/* The partials of every live tile over the resident cache; with cnt the merge folded in (ctx written). */
static cudaError_t decode_parts(const float *q, float *ctx, float *part, unsigned *cnt, const void *K, const void *V,
                                int f32, const int64_t *pos_dev, int max_tiles, int P, int H, int Hkv, int D,
                                float scale, int window, cudaStream_t s)
{
    const int kmax = max_tiles - 1;
    return dec_mma_ok(H, Hkv, D, f32)
               ? dec_mma_part(q, part, ctx, cnt, K, V, pos_dev, 0, 0, kmax, max_tiles, P, H, Hkv, D, scale, window, s)
           : f32 ? dec_part<float>(q, part, ctx, cnt, K, V, pos_dev, 0, 0, kmax, max_tiles, P, H, Hkv, D, scale, window, s)
                 : dec_part<uint16_t>(q, part, ctx, cnt, K, V, pos_dev, 0, 0, kmax, max_tiles, P, H, Hkv, D, scale, window, s);
}

cudaError_t engk_attn_decode(const float *q, float *ctx, float *part, const void *K, const void *V, int f32,
                             const int64_t *pos_dev, int max_tiles, int P, int H, int Hkv, int D, float scale,
                             int window, cudaStream_t s)
{
    cudaError_t err = decode_parts(q, ctx, part, NULL, K, V, f32, pos_dev, max_tiles, P, H, Hkv, D, scale, window, s);
    if (err != cudaSuccess)
        return err;
    return engk_attn_decode_merge(part, ctx, pos_dev, max_tiles, P, H, D, window, s);
}

cudaError_t engk_attn_decode_fused(const float *q, float *ctx, float *part, unsigned *cnt, const void *K,
                                   const void *V, int f32, const int64_t *pos_dev, int max_tiles, int P, int H,
                                   int Hkv, int D, float scale, int window, cudaStream_t s)
{
    if (!cnt)
        return cudaErrorInvalidValue;
    return decode_parts(q, ctx, part, cnt, K, V, f32, pos_dev, max_tiles, P, H, Hkv, D, scale, window, s);
}

int engk_attn_decode_post_ok(int H, int Hkv, int D, int f32)
{ /* k_dec_mma's POST form also holds the new K/V row (static shared memory, 4 D bytes) */
    return D % 8 == 0 && dec_mma_ok(H, Hkv, D, f32) && dmma_smem(H, H / Hkv, D) + 4 * (size_t)D <= 48 * 1024;
}

cudaError_t engk_attn_decode_fused_post(const float *qkv, const float *qn, const float *kn, int norm_kind, float eps,
                                        const float *cos_t, const float *sin_t, int rot, int back, float *ctx,
                                        float *part, unsigned *cnt, void *K, void *V, const int64_t *pos_dev,
                                        int max_tiles, int P, int H, int Hkv, int D, float scale, int window,
                                        cudaStream_t s)
{
    if (!cnt || !qkv || !engk_attn_decode_post_ok(H, Hkv, D, 0) || rot < 0 || rot > D || rot % 2 || back < 0 ||
        (rot > 0 && (!cos_t || !sin_t)))
        return cudaErrorInvalidValue;
    const PostArgs post = {qkv, qn, kn, cos_t, sin_t, static_cast<uint16_t *>(K), static_cast<uint16_t *>(V),
                           norm_kind, rot, back, eps};
    const uint16_t *k = static_cast<const uint16_t *>(K), *v = static_cast<const uint16_t *>(V);
    const int kmax = max_tiles - 1;
    return dec_kernel == ENGK_DEC_MMA_BF16
               ? dec_mma_d<false, true, true>(NULL, part, ctx, cnt, k, v, pos_dev, 0, 0, kmax, max_tiles, P, H, Hkv, D,
                                              scale, window, s, post)
               : dec_mma_d<true, true, true>(NULL, part, ctx, cnt, k, v, pos_dev, 0, 0, kmax, max_tiles, P, H, Hkv, D,
                                             scale, window, s, post);
}

void engk_attn_decode_blocks(int n) { dec_blocks_cap = n > 0 ? n : 0; }

void engk_attn_decode_kernel(int kernel) { dec_kernel = kernel; }

int engk_attn_decode_mma(int H, int Hkv, int D, int f32) { return dec_mma_ok(H, Hkv, D, f32); }

int engk_attn_prefill_mma(int D, int f32)
{
    int dev = 0, major = 0, optin = 0;
    if (f32 || mma_smem_of(D) == 0 || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major >= 8 && mma_smem_of(D) <= (size_t)optin;
}

int engk_attn_prefill_wgmma(int D, int f32)
{
#ifdef ENGK_WGMMA_BUILT /* engine/meson.build: eng_attn.cu compiled for sm_90a */
    int dev = 0, major = 0, minor = 0, optin = 0;
    if (f32 || D != WG_D || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return CUDART_VERSION >= 12050 && major == 9 && minor == 0 && wg_smem<2>() <= (size_t)optin &&
           wgs_smem<0>() <= (size_t)optin;
#else
    (void)D;
    (void)f32;
    return 0;
#endif
}

cudaError_t engk_attn_prefill_bf16(const float *q, uint16_t *ctxb, float *st_m, float *st_l, float *st_acc,
                                   const void *K, const void *V, int f32, int64_t kv_pos0, int64_t kv_last,
                                   int tile_lo, int tile_hi, int P, int T, int64_t pos0, int H, int Hkv, int D,
                                   float scale, int window, int flags, cudaStream_t s)
{
    if (!ctxb || (uintptr_t)ctxb % 4 || !(flags & ENGK_FINAL) || (flags & (ENGK_CUDA_CORES | CTX_BF16)) ||
        !engk_attn_prefill_mma(D, f32))
        return cudaErrorInvalidValue;
    return engk_attn_prefill(q, reinterpret_cast<float *>(ctxb), st_m, st_l, st_acc, K, V, f32, kv_pos0, kv_last,
                             tile_lo, tile_hi, P, T, pos0, H, Hkv, D, scale, window, flags | CTX_BF16, s);
}

cudaError_t engk_attn_prefill(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const void *K,
                              const void *V, int f32, int64_t kv_pos0, int64_t kv_last, int tile_lo, int tile_hi,
                              int P, int T, int64_t pos0, int H, int Hkv, int D, float scale, int window, int flags,
                              cudaStream_t s)
{
    if (!(flags & ENGK_INIT) && rc_fault_active("kv_offload_no_rescale")) /* fault: a continued tile */
        flags |= FAULT_NO_RESCALE;
    if ((flags & ENGK_WGS_PP) && (flags & (ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_TMA | ENGK_WGS_OVERLAP)) !=
                                     (ENGK_MMA_WGMMA | ENGK_WGMMA_WS | ENGK_WGS_TMA))
        return cudaErrorInvalidValue; /* ping-pong: a form of the warp-specialized TMA kernel, without the overlap */
    if (flags & ENGK_MMA_WGMMA) {
        if ((flags & ENGK_CUDA_CORES) || !engk_attn_prefill_wgmma(D, f32))
            return cudaErrorInvalidValue;
        const uint16_t *k = (const uint16_t *)K, *v = (const uint16_t *)V;
        if (flags & ENGK_WGMMA_WS) {
            const int tma = flags & ENGK_WGS_TMA ? WGS_TMA | WGS_QREG : 0;
            const int var = (flags & ENGK_WGS_QREG ? WGS_QREG : 0) | (flags & ENGK_WGS_OVERLAP ? WGS_OVERLAP : 0) | tma;
            auto *fn = var == 0 ? launch_wgs<0> : var == 1 ? launch_wgs<1> : var == 2 ? launch_wgs<2> :
                       var == 3 ? launch_wgs<3> : var == 7 ? launch_wgs<7> :
                       (flags & ENGK_WGS_PP) ? launch_wgs<WGS_TMA | WGS_QREG | WGS_PP> : launch_wgs<5>;
            return fn(q, ctx, st_m, st_l, st_acc, k, v, kv_pos0, kv_last, tile_lo, tile_hi, P, T, pos0, H, Hkv, scale,
                      window, flags, s);
        }
        if (flags & ENGK_MMA_ROWS64)
            return launch_wg<1>(q, ctx, st_m, st_l, st_acc, k, v, kv_pos0, kv_last, tile_lo, tile_hi, P, T, pos0, H, Hkv,
                                scale, window, flags, s);
        return launch_wg<2>(q, ctx, st_m, st_l, st_acc, k, v, kv_pos0, kv_last, tile_lo, tile_hi, P, T, pos0, H, Hkv,
                            scale, window, flags, s);
    }
    if (!(flags & ENGK_CUDA_CORES) && engk_attn_prefill_mma(D, f32)) {
        const uint16_t *k = (const uint16_t *)K, *v = (const uint16_t *)V;
        switch (D) {
        case 16: return launch_mma<16>(q, ctx, st_m, st_l, st_acc, k, v, kv_pos0, kv_last, tile_lo, tile_hi, P, T, pos0, H, Hkv, scale, window, flags, s);
        case 32: return launch_mma<32>(q, ctx, st_m, st_l, st_acc, k, v, kv_pos0, kv_last, tile_lo, tile_hi, P, T, pos0, H, Hkv, scale, window, flags, s);
        case 64: return launch_mma<64>(q, ctx, st_m, st_l, st_acc, k, v, kv_pos0, kv_last, tile_lo, tile_hi, P, T, pos0, H, Hkv, scale, window, flags, s);
        case 128: return launch_mma<128>(q, ctx, st_m, st_l, st_acc, k, v, kv_pos0, kv_last, tile_lo, tile_hi, P, T, pos0, H, Hkv, scale, window, flags, s);
        default: return launch_mma<256>(q, ctx, st_m, st_l, st_acc, k, v, kv_pos0, kv_last, tile_lo, tile_hi, P, T, pos0, H, Hkv, scale, window, flags, s);
        }
    }
    const size_t smem = rows_smem(H / Hkv, D, P);
    const int grid = T * Hkv;
    if (f32)
        k_attn_rows<float><<<grid, ROW_THREADS, smem, s>>>(q, ctx, st_m, st_l, st_acc, (const float *)K,
                                                           (const float *)V, kv_pos0, tile_lo, tile_hi, P, pos0, H,
                                                           Hkv, D, scale, window, flags);
    else
        k_attn_rows<uint16_t><<<grid, ROW_THREADS, smem, s>>>(q, ctx, st_m, st_l, st_acc, (const uint16_t *)K,
                                                              (const uint16_t *)V, kv_pos0, tile_lo, tile_hi, P, pos0,
                                                              H, Hkv, D, scale, window, flags);
    return cudaGetLastError();
}

} // extern "C"
