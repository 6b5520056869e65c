/* Engine kernels (see eng_kernels.h). Built with -fmad=false: the only fused multiply-adds are the
 * explicit fmaf() calls, so each reduction's rounding is fixed by the source, whichever kernel inlines it. */
#include "eng_kernels.h"

#include <math.h>

#include "fault.h"

#include "eng_kdev.cuh"

namespace {

constexpr int ENGK_FAULT_NO_RESCALE = 0x100; /* fault injection (kv_offload_no_rescale): corr = 1 */
constexpr int MM_WARPS = 8, ATT_THREADS = 256, POST_WARPS = 4;

template <typename W>
__global__ void k_embed(float *x, const W *E, const int32_t *ids, int Hd, float scale)
{
    const W *row = E + (int64_t)ids[blockIdx.x] * Hd;
    float *xr = x + (int64_t)blockIdx.x * Hd;
    for (int i = threadIdx.x; i < Hd; i += blockDim.x) {
        const float v = ld1(row + i);
        xr[i] = scale != 0.0f ? v * scale : v;
    }
}

__global__ void __launch_bounds__(NORM_THREADS) k_rmsnorm(float *y, const float *x, const float *w, int n,
                                                          float eps, int kind)
{
    __shared__ float part[NORM_THREADS / 32];
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += NORM_THREADS)
        ss = fmaf(xr[i], xr[i], ss);
    const float inv = inv_rms(block_sum(ss, part), n, eps);
    for (int i = threadIdx.x; i < n; i += NORM_THREADS)
        yr[i] = norm_apply(xr[i], inv, w, i, kind);
}

/* One warp per output column n, R rows per block row: lane l walks chunks l, l+32, ... of 8 k's,
 * fmaf in order, then the xor butterfly (eng_hgemv.c replicates this order on the host). */
template <typename W, int R>
__global__ void __launch_bounds__(MM_WARPS * 32) k_matmul(float *y, const float *x, const W *Wm, const float *b,
                                                          const float *res, int T, int N, int K)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n = blockIdx.x * MM_WARPS + warp;
    if (n >= N)
        return;
    const int t0 = blockIdx.y * R, nc = K >> 3;
    const W *wr = Wm + (int64_t)n * K;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        acc[r] = 0.0f;
#pragma unroll 4
    for (int c = lane; c < nc; c += 32) {
        float w8[8];
        load8(wr + (int64_t)c * 8, w8);
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (t0 + r < T) {
                const float *xr = x + (int64_t)(t0 + r) * K + (int64_t)c * 8;
                const float4 a = *reinterpret_cast<const float4 *>(xr);
                const float4 bq = *reinterpret_cast<const float4 *>(xr + 4);
                float s = acc[r];
                s = fmaf(w8[0], a.x, s); s = fmaf(w8[1], a.y, s); s = fmaf(w8[2], a.z, s); s = fmaf(w8[3], a.w, s);
                s = fmaf(w8[4], bq.x, s); s = fmaf(w8[5], bq.y, s); s = fmaf(w8[6], bq.z, s); s = fmaf(w8[7], bq.w, s);
                acc[r] = s;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
        acc[r] = warp_sum(acc[r]);
    if (lane == 0)
#pragma unroll
        for (int r = 0; r < R; r++)
            if (t0 + r < T) {
                float v = acc[r];
                if (b)
                    v = v + b[n];
                const int64_t o = (int64_t)(t0 + r) * N + n;
                if (res)
                    v = res[o] + v;
                y[o] = v;
            }
}

/* One warp per head of one row: norm, RoPE (pairs (i, i + rot/2), as ref_rope_apply), store. */
template <typename KV>
__global__ void __launch_bounds__(POST_WARPS * 32) k_qkv_post(const float *qkv, float *q, KV *kdst, KV *vdst,
                                                              const float *qn, const float *kn, int kind, float eps,
                                                              const float *cos_t, const float *sin_t, int H,
                                                              int Hkv, int D, int rot, const int64_t *pos_dev,
                                                              int64_t pos_row, int back)
{
    if (pos_dev) { /* decode: the destination row is the device-side position (minus 'back', a fault) */
        kdst += (*pos_dev - back) * pos_row;
        vdst += (*pos_dev - back) * pos_row;
    }
    extern __shared__ float shq[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int t = blockIdx.y, hh = blockIdx.x * POST_WARPS + warp;
    if (hh >= H + Hkv)
        return;
    const float *row = qkv + (int64_t)t * (H + 2 * Hkv) * D;
    const bool isq = hh < H;
    const int g = hh - H;
    const float *src = isq ? row + (int64_t)hh * D : row + (int64_t)H * D + (int64_t)g * D;
    const float *nw = isq ? qn : kn;
    float *u = shq + warp * D;
    for (int d = lane; d < D; d += 32)
        u[d] = src[d];
    __syncwarp();
    if (nw) {
        float ss = 0.0f;
        for (int d = lane; d < D; d += 32)
            ss = fmaf(u[d], u[d], ss);
        const float inv = inv_rms(warp_sum(ss), D, eps);
        for (int d = lane; d < D; d += 32)
            u[d] = norm_apply(u[d], inv, nw, d, kind);
        __syncwarp();
    }
    const int half = rot / 2;
    const float *c = cos_t + (int64_t)t * half, *s = sin_t + (int64_t)t * half;
    float *qo = isq ? q + ((int64_t)t * H + hh) * D : nullptr;
    KV *ko = isq ? nullptr : kdst + ((int64_t)t * Hkv + g) * D;
    for (int i = lane; i < half; i += 32) {
        const float x1 = u[i], x2 = u[i + half];
        const float a = x1 * c[i], b = -x2 * s[i];
        const float a2 = x2 * c[i], b2 = x1 * s[i];
        const float r1 = a + b, r2 = a2 + b2;
        if (isq) {
            qo[i] = r1;
            qo[i + half] = r2;
        } else {
            st1(ko + i, r1);
            st1(ko + i + half, r2);
        }
    }
    for (int d = rot + lane; d < D; d += 32) {
        if (isq)
            qo[d] = u[d];
        else
            st1(ko + d, u[d]);
    }
    if (!isq) {
        const float *vs = row + (int64_t)(H + Hkv) * D + (int64_t)g * D;
        KV *vo = vdst + ((int64_t)t * Hkv + g) * D;
        for (int d = lane; d < D; d += 32)
            st1(vo + d, vs[d]);
    }
}

/* One block per (row t, kv head g) serving the G query heads of the group; the KV tile walk and the
 * (m, l, acc) update order are fixed by the tile size P alone (see README, "determinism"). */
template <typename KV>
__global__ void __launch_bounds__(ATT_THREADS) k_attention(const float *q, float *ctx, float *st_m, float *st_l,
                                                           float *st_acc, const KV *Kc, const KV *Vc,
                                                           int64_t kv_pos0, int tile_lo, int tile_hi, int P,
                                                           int64_t pos0, int H, int Hkv, int D, float scale,
                                                           int window, int flags, const int64_t *pos_dev)
{
    if (pos_dev) { /* decode of one row at the device-side position: the tile range as attention() derives it */
        pos0 = *pos_dev;
        const int64_t lo0 = window > 0 && pos0 - window + 1 > 0 ? pos0 - window + 1 : 0;
        tile_lo = (int)(lo0 / P);
        tile_hi = (int)(pos0 / P) + 1;
    }
    extern __shared__ float sha[];
    const int G = H / Hkv;
    float *qs = sha, *acc = qs + G * D, *sp = acc + G * D, *sm = sp + G * P, *sl = sm + G, *sc = sl + G;
    const int t = blockIdx.x / Hkv, g = blockIdx.x % Hkv;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, nw = ATT_THREADS / 32;
    const int64_t pos = pos0 + t;
    const int64_t lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    const int64_t hb = (int64_t)t * H + (int64_t)g * G; /* (t, first head of the group) in [T, H] */
    const int64_t kvs = (int64_t)Hkv * D;
    for (int i = tid; i < G * D; i += ATT_THREADS) {
        qs[i] = q[hb * D + i];
        acc[i] = (flags & ENGK_INIT) ? 0.0f : st_acc[hb * D + i];
    }
    for (int h = tid; h < G; h += ATT_THREADS) {
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
                part = fmaf(qh[d], ld1(kr + d), part);
            part = warp_sum(part);
            if (lane == 0)
                sp[h * P + jj] = part * scale;
        }
        __syncthreads();
        /* per head: tile max, rescale factor, probabilities, tile sum */
        for (int h = warp; h < G; h += nw) {
            float mt = -INFINITY;
            for (int jj = lane; jj < n; jj += 32)
                mt = fmaxf(mt, sp[h * P + jj]);
            mt = warp_max(mt);
            const float mo = sm[h], mn = fmaxf(mo, mt);
            const float corr = RC_FAULTS_BUILT && (flags & ENGK_FAULT_NO_RESCALE) ? 1.0f : expf(mo - mn);
            float ls = 0.0f;
            for (int jj = lane; jj < n; jj += 32) {
                const float p = expf(sp[h * P + jj] - mn);
                sp[h * P + jj] = p;
                ls += p;
            }
            ls = warp_sum(ls);
            __syncwarp();
            if (lane == 0) {
                sl[h] = fmaf(sl[h], corr, ls);
                sm[h] = mn;
                sc[h] = corr;
            }
        }
        __syncthreads();
        /* acc = acc * corr + sum_j p_j v_j, one thread per (head, dim), keys in order */
        for (int i = tid; i < G * D; i += ATT_THREADS) {
            const int h = i / D, d = i % D;
            const float *ph = sp + h * P;
            const KV *vr = Vc + (a - kv_pos0) * kvs + (int64_t)g * D + d;
            float s = 0.0f;
#pragma unroll 4
            for (int jj = 0; jj < n; jj++)
                s = fmaf(ph[jj], ld1(vr + jj * kvs), s);
            acc[i] = fmaf(acc[i], sc[h], s);
        }
        __syncthreads();
    }
    if (flags & ENGK_FINAL) {
        for (int i = tid; i < G * D; i += ATT_THREADS)
            ctx[hb * D + i] = acc[i] / sl[i / D];
    } else {
        for (int i = tid; i < G * D; i += ATT_THREADS)
            st_acc[hb * D + i] = acc[i];
        for (int h = tid; h < G; h += ATT_THREADS) {
            st_m[hb + h] = sm[h];
            st_l[hb + h] = sl[h];
        }
    }
}

__global__ void k_glu(float *out, const float *gu, int64_t total, int I, int act)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total)
        return;
    const int64_t t = i / I, c = i % I;
    out[i] = glu_apply(gu[t * 2 * I + c], gu[t * 2 * I + I + c], act);
}

__global__ void k_spin(long long cycles)
{
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

} // namespace

extern "C" {

cudaError_t engk_embed(float *x, const void *E, int f32, const int32_t *ids, int T, int Hd, float scale,
                       cudaStream_t s)
{
    if (f32)
        k_embed<float><<<T, 256, 0, s>>>(x, (const float *)E, ids, Hd, scale);
    else
        k_embed<uint16_t><<<T, 256, 0, s>>>(x, (const uint16_t *)E, ids, Hd, scale);
    return cudaGetLastError();
}

cudaError_t engk_rmsnorm(float *y, const float *x, const float *w, int rows, int n, float eps, int kind,
                         cudaStream_t s)
{
    k_rmsnorm<<<rows, NORM_THREADS, 0, s>>>(y, x, w, n, eps, kind);
    return cudaGetLastError();
}

cudaError_t engk_matmul(float *y, const float *x, const void *W, int f32, const float *b, const float *res, int T,
                        int N, int K, cudaStream_t s)
{
    const dim3 blk(MM_WARPS * 32);
    if (T == 1) {
        const dim3 grid((N + MM_WARPS - 1) / MM_WARPS, 1);
        if (f32)
            k_matmul<float, 1><<<grid, blk, 0, s>>>(y, x, (const float *)W, b, res, T, N, K);
        else
            k_matmul<uint16_t, 1><<<grid, blk, 0, s>>>(y, x, (const uint16_t *)W, b, res, T, N, K);
    } else {
        const dim3 grid((N + MM_WARPS - 1) / MM_WARPS, (T + 7) / 8);
        if (f32)
            k_matmul<float, 8><<<grid, blk, 0, s>>>(y, x, (const float *)W, b, res, T, N, K);
        else
            k_matmul<uint16_t, 8><<<grid, blk, 0, s>>>(y, x, (const uint16_t *)W, b, res, T, N, K);
    }
    return cudaGetLastError();
}

cudaError_t engk_qkv_post(const float *qkv, float *q, void *kdst, void *vdst, int f32, const float *qn,
                          const float *kn, int norm_kind, float eps, const float *cos_t, const float *sin_t, int T,
                          int H, int Hkv, int D, int rot, cudaStream_t s)
{
    const dim3 grid((H + Hkv + POST_WARPS - 1) / POST_WARPS, T);
    const size_t smem = (size_t)POST_WARPS * D * sizeof(float);
    if (f32)
        k_qkv_post<float><<<grid, POST_WARPS * 32, smem, s>>>(qkv, q, (float *)kdst, (float *)vdst, qn, kn,
                                                             norm_kind, eps, cos_t, sin_t, H, Hkv, D, rot, nullptr, 0, 0);
    else
        k_qkv_post<uint16_t><<<grid, POST_WARPS * 32, smem, s>>>(qkv, q, (uint16_t *)kdst, (uint16_t *)vdst, qn,
                                                                kn, norm_kind, eps, cos_t, sin_t, H, Hkv, D, rot, nullptr,
                                                                0, 0);
    return cudaGetLastError();
}

size_t engk_attention_smem(int G, int D, int P) { return ((size_t)2 * G * D + (size_t)G * P + 3 * (size_t)G) * 4; }

cudaError_t engk_attention(const float *q, float *ctx, float *st_m, float *st_l, float *st_acc, const void *K,
                           const void *V, int f32, int64_t kv_pos0, int tile_lo, int tile_hi, int P, int T,
                           int64_t pos0, int H, int Hkv, int D, float scale, int window, int flags, cudaStream_t s)
{
    const size_t smem = engk_attention_smem(H / Hkv, D, P);
    const int grid = T * Hkv;
    if (!(flags & ENGK_INIT) && rc_fault_active("kv_offload_no_rescale")) /* fault: a continued tile */
        flags |= ENGK_FAULT_NO_RESCALE;
    if (f32)
        k_attention<float><<<grid, ATT_THREADS, smem, s>>>(q, ctx, st_m, st_l, st_acc, (const float *)K,
                                                           (const float *)V, kv_pos0, tile_lo, tile_hi, P, pos0, H,
                                                           Hkv, D, scale, window, flags, nullptr);
    else
        k_attention<uint16_t><<<grid, ATT_THREADS, smem, s>>>(q, ctx, st_m, st_l, st_acc, (const uint16_t *)K,
                                                              (const uint16_t *)V, kv_pos0, tile_lo, tile_hi, P,
                                                              pos0, H, Hkv, D, scale, window, flags, nullptr);
    return cudaGetLastError();
}

cudaError_t engk_qkv_post_dev(const float *qkv, float *q, void *kbase, void *vbase, const int64_t *pos_dev, int back,
                              int f32, const float *qn, const float *kn, int norm_kind, float eps, const float *cos_t,
                              const float *sin_t, int H, int Hkv, int D, int rot, cudaStream_t s)
{
    const dim3 grid((H + Hkv + POST_WARPS - 1) / POST_WARPS, 1);
    const size_t smem = (size_t)POST_WARPS * D * sizeof(float);
    const int64_t row = (int64_t)Hkv * D;
    if (f32)
        k_qkv_post<float><<<grid, POST_WARPS * 32, smem, s>>>(qkv, q, (float *)kbase, (float *)vbase, qn, kn,
                                                             norm_kind, eps, cos_t, sin_t, H, Hkv, D, rot, pos_dev,
                                                             pos_dev ? row : 0, back);
    else
        k_qkv_post<uint16_t><<<grid, POST_WARPS * 32, smem, s>>>(qkv, q, (uint16_t *)kbase, (uint16_t *)vbase, qn,
                                                                kn, norm_kind, eps, cos_t, sin_t, H, Hkv, D, rot,
                                                                pos_dev, pos_dev ? row : 0, back);
    return cudaGetLastError();
}

cudaError_t engk_attention_dev(const float *q, float *ctx, const void *K, const void *V, int f32,
                               const int64_t *pos_dev, int P, int H, int Hkv, int D, float scale, int window,
                               cudaStream_t s)
{
    const size_t smem = engk_attention_smem(H / Hkv, D, P);
    const int flags = ENGK_INIT | ENGK_FINAL;
    if (f32)
        k_attention<float><<<Hkv, ATT_THREADS, smem, s>>>(q, ctx, nullptr, nullptr, nullptr, (const float *)K,
                                                          (const float *)V, 0, 0, 0, P, 0, H, Hkv, D, scale, window,
                                                          flags, pos_dev);
    else
        k_attention<uint16_t><<<Hkv, ATT_THREADS, smem, s>>>(q, ctx, nullptr, nullptr, nullptr, (const uint16_t *)K,
                                                             (const uint16_t *)V, 0, 0, 0, P, 0, H, Hkv, D, scale,
                                                             window, flags, pos_dev);
    return cudaGetLastError();
}

cudaError_t engk_glu(float *out, const float *gu, int T, int I, int act, cudaStream_t s)
{
    const int64_t total = (int64_t)T * I;
    k_glu<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(out, gu, total, I, act);
    return cudaGetLastError();
}

cudaError_t engk_spin(long long cycles, cudaStream_t s)
{
    k_spin<<<1, 1, 0, s>>>(cycles);
    return cudaGetLastError();
}

} // extern "C"
