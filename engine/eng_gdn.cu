/* Gated delta net kernels of the engine (see eng_gdn.h). Built with -fmad=false like eng_kernels.cu: the only
 * fused multiply-adds are the explicit fmaf() calls. Transcendentals run in double and round once, as ref does. */
#include "eng_gdn.h"

#include <math.h>

#include "fault.h"

namespace {

constexpr unsigned FULL = 0xffffffffu;
constexpr int CONV_THREADS = 128, PREP_WARPS = 4, DELTA_WARPS = 4, NG_WARPS = 4;

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int off = 16; off; off >>= 1)
        v += __shfl_xor_sync(FULL, v, off);
    return v;
}

__device__ __forceinline__ float silu(float x)
{
    const double d = x;
    return (float)(d / (1.0 + exp(-d)));
}

__device__ __forceinline__ float sigmoid(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }

/* One thread per channel: the taps in order (fmaf from 0), rows before the chunk from the carried state. */
__global__ void __launch_bounds__(CONV_THREADS) k_gdn_conv(float *u, float *st, const float *x, int64_t xs,
                                                           const float *w, int T, int C, int K, int fresh,
                                                           int shift)
{
    const int c = blockIdx.x * CONV_THREADS + threadIdx.x;
    if (c >= C)
        return;
    const float *wc = w + (int64_t)c * K;
    for (int t = 0; t < T; t++) {
        float acc = 0.0f;
        for (int j = 0; j < K; j++) {
            const int src = t - (K - 1) + j;
            const float xv = src >= 0 ? x[(int64_t)src * xs + c] : fresh ? 0.0f : st[(int64_t)(src + K - 1) * C + c];
            acc = fmaf(wc[j], xv, acc);
        }
        u[(int64_t)t * C + c] = silu(acc);
    }
    /* new state row j = history row T - (K-1) + j (shift: the gdn_conv_state_shift fault, 1 row too early); an
     * old row read (T + j - shift >= j) is never one already written */
    for (int j = 0; j < K - 1; j++) {
        const int src = T - (K - 1) + j - shift;
        st[(int64_t)j * C + c] = src >= 0 ? x[(int64_t)src * xs + c]
                                 : fresh  ? 0.0f
                                          : st[(int64_t)(src + K - 1) * C + c];
    }
}

/* One block per row: a warp per q or k head (lane-strided fmaf sum of squares, butterfly), then the gates. */
__global__ void __launch_bounds__(PREP_WARPS * 32) k_gdn_prep(float *qn, float *kn, float *beta, float *g,
                                                              const float *u, const float *gin, int64_t xs,
                                                              int64_t boff, const float *A_log, const float *dt_bias,
                                                              int Hk, int Hv, int dk, int dv, float qmul)
{
    const int t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t C = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv;
    for (int j = warp; j < 2 * Hk; j += PREP_WARPS) {
        const bool isq = j < Hk;
        const int kh = isq ? j : j - Hk;
        const float *src = u + (int64_t)t * C + (isq ? 0 : (int64_t)Hk * dk) + (int64_t)kh * dk;
        float *dst = (isq ? qn : kn) + ((int64_t)t * Hk + kh) * dk;
        float ss = 0.0f;
        for (int d = lane; d < dk; d += 32)
            ss = fmaf(src[d], src[d], ss);
        const float inv = (float)(1.0 / sqrt((double)(warp_sum(ss) + 1e-6f)));
        for (int d = lane; d < dk; d += 32) {
            const float y = src[d] * inv;
            dst[d] = isq ? y * qmul : y;
        }
    }
    const float *row = gin + (int64_t)t * xs + boff;
    for (int h = threadIdx.x; h < Hv; h += PREP_WARPS * 32) {
        const float x = row[Hv + h] + dt_bias[h];
        const float sp = x > 20.0f ? x : (float)log1p(exp((double)x)); /* torch softplus, threshold 20 */
        g[(int64_t)t * Hv + h] = -(float)exp((double)A_log[h]) * sp;
        beta[(int64_t)t * Hv + h] = sigmoid(row[h]);
    }
}

/* One warp per (value head, column e): the state column S[h][e][:] lives in registers, NPL values per lane
 * (d = lane + 32 i); per row: decay, m = S.k (lane fmaf + butterfly), S += k * (v - m) beta, out = S.q. */
template <int NPL>
__global__ void __launch_bounds__(DELTA_WARPS * 32) k_gdn_delta(float *core, float *S, const float *qn,
                                                                const float *kn, const float *u, const float *beta,
                                                                const float *g, int T, int C, int Hk, int Hv, int dk,
                                                                int dv, int fresh, int head_modulo)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int e = blockIdx.x * DELTA_WARPS + warp, h = blockIdx.y;
    const int kh = RC_FAULTS_BUILT && head_modulo ? h % Hk : h / (Hv / Hk); /* fault gdn_key_head_modulo */
    if (e >= dv)
        return;
    float *Sc = S + ((int64_t)h * dv + e) * dk;
    const int64_t voff = 2 * (int64_t)Hk * dk + (int64_t)h * dv + e;
    float s[NPL];
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        const int d = lane + 32 * i;
        s[i] = !fresh && d < dk ? Sc[d] : 0.0f;
    }
    for (int t = 0; t < T; t++) {
        const float *kr = kn + ((int64_t)t * Hk + kh) * dk, *qr = qn + ((int64_t)t * Hk + kh) * dk;
        const float decay = (float)exp((double)g[(int64_t)t * Hv + h]);
        const float bt = beta[(int64_t)t * Hv + h], vt = u[(int64_t)t * C + voff];
        float kk[NPL], m = 0.0f;
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            const int d = lane + 32 * i;
            kk[i] = d < dk ? kr[d] : 0.0f;
            s[i] = s[i] * decay;
            m = fmaf(s[i], kk[i], m);
        }
        const float delta = (vt - warp_sum(m)) * bt;
        float o = 0.0f;
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            const int d = lane + 32 * i;
            s[i] = fmaf(kk[i], delta, s[i]);
            o = fmaf(s[i], d < dk ? qr[d] : 0.0f, o);
        }
        o = warp_sum(o);
        if (lane == 0)
            core[((int64_t)t * Hv + h) * dv + e] = o;
    }
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        const int d = lane + 32 * i;
        if (d < dk)
            Sc[d] = s[i];
    }
}

/* One warp per (row, head): RMSNorm (plain w) as eng_kernels' rmsnorm rounds it, times silu(z). */
__global__ void __launch_bounds__(NG_WARPS * 32) k_gdn_norm_gate(float *y, const float *x, const float *z,
                                                                 int64_t zs, const float *w, int T, int Hv, int dv,
                                                                 float eps)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t r = (int64_t)blockIdx.x * NG_WARPS + warp;
    if (r >= (int64_t)T * Hv)
        return;
    const int64_t t = r / Hv, h = r % Hv;
    const float *xr = x + r * dv, *zr = z + t * zs + h * dv;
    float *yr = y + r * dv;
    float ss = 0.0f;
    for (int i = lane; i < dv; i += 32)
        ss = fmaf(xr[i], xr[i], ss);
    const float ms = warp_sum(ss) / (float)dv;
    const float inv = (float)(1.0 / sqrt((double)(ms + eps)));
    for (int i = lane; i < dv; i += 32) {
        const float hn = xr[i] * inv * w[i];
        yr[i] = hn * silu(zr[i]);
    }
}

__global__ void k_sigmoid_gate(float *ctx, const float *gate, int64_t total)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total)
        ctx[i] = ctx[i] * sigmoid(gate[i]);
}

} // namespace

extern "C" {

cudaError_t engk_gdn_conv(float *u, float *state, const float *x, int64_t xs, const float *w, int T, int C, int K,
                          int fresh, cudaStream_t s)
{
    const int shift = rc_fault_active("gdn_conv_state_shift") ? 1 : 0; /* fault: the kept rows one too early */
    k_gdn_conv<<<(C + CONV_THREADS - 1) / CONV_THREADS, CONV_THREADS, 0, s>>>(u, state, x, xs, w, T, C, K, fresh,
                                                                           shift);
    return cudaGetLastError();
}

cudaError_t engk_gdn_prep(float *qn, float *kn, float *beta, float *g, const float *u, const float *gin, int64_t xs,
                          int64_t boff, const float *A_log, const float *dt_bias, int T, int Hk, int Hv, int dk,
                          int dv, float qmul, cudaStream_t s)
{
    k_gdn_prep<<<T, PREP_WARPS * 32, 0, s>>>(qn, kn, beta, g, u, gin, xs, boff, A_log, dt_bias, Hk, Hv, dk, dv, qmul);
    return cudaGetLastError();
}

cudaError_t engk_gdn_delta(float *core, float *state, const float *qn, const float *kn, const float *u,
                           const float *beta, const float *g, int T, int C, int Hk, int Hv, int dk, int dv, int fresh,
                           cudaStream_t s)
{
    const dim3 grid((dv + DELTA_WARPS - 1) / DELTA_WARPS, Hv), blk(DELTA_WARPS * 32);
    const int hm = rc_fault_active("gdn_key_head_modulo") ? 1 : 0; /* fault: value head h reads key head h % Hk */
#define DELTA(n) k_gdn_delta<n><<<grid, blk, 0, s>>>(core, state, qn, kn, u, beta, g, T, C, Hk, Hv, dk, dv, fresh, hm)
    if (dk <= 32)
        DELTA(1);
    else if (dk <= 64)
        DELTA(2);
    else if (dk <= 128)
        DELTA(4);
    else if (dk <= 256)
        DELTA(8);
    else
        return cudaErrorInvalidValue;
#undef DELTA
    return cudaGetLastError();
}

cudaError_t engk_gdn_norm_gate(float *y, const float *x, const float *z, int64_t zs, const float *w, int T, int Hv,
                               int dv, float eps, cudaStream_t s)
{
    const int64_t rows = (int64_t)T * Hv;
    k_gdn_norm_gate<<<(unsigned)((rows + NG_WARPS - 1) / NG_WARPS), NG_WARPS * 32, 0, s>>>(y, x, z, zs, w, T, Hv, dv,
                                                                                          eps);
    return cudaGetLastError();
}

cudaError_t engk_sigmoid_gate(float *ctx, const float *gate, int T, int n, cudaStream_t s)
{
    const int64_t total = (int64_t)T * n;
    k_sigmoid_gate<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(ctx, gate, total);
    return cudaGetLastError();
}

} // extern "C"
