/* Gated delta net kernels of the engine (see eng_gdn.h). Built with -fmad=false like eng_kernels.cu: the only
 * fused multiply-adds are the explicit fmaf() calls. Transcendentals run in double and round once, as ref does. */
#include "eng_gdn.h"

#include <math.h>

#include "eng_kdev.cuh"
#include "fault.h"

namespace {

constexpr int CONV_THREADS = 128, PREP_WARPS = 4, DELTA_WARPS = 4, NG_WARPS = 4;

__device__ __forceinline__ float silu(float x)
{
    const double d = x;
    return (float)(d / (1.0 + exp(-d)));
}

__device__ __forceinline__ float sigmoid(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }

/* torch's softplus (threshold 20) */
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : (float)log1p(exp((double)x)); }

/* A warp's q or k head: dst = src / sqrt(lane-strided fmaf sum of squares + 1e-6), times qmul for q. */
__device__ __forceinline__ void l2norm_head(float *dst, const float *src, int dk, int lane, bool isq, float qmul)
{
    float ss = 0.0f;
    for (int d = lane; d < dk; d += 32)
        ss = fmaf(src[d], src[d], ss);
    const float inv = (float)(1.0 / sqrt((double)(warp_sum(ss) + 1e-6f)));
    for (int d = lane; d < dk; d += 32) {
        const float y = src[d] * inv;
        dst[d] = isq ? y * qmul : y;
    }
}

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

/* Blocks (row, group of PREP_WARPS heads): a warp per q or k head (lane-strided fmaf sum of squares, butterfly);
 * group 0 also computes the row's gates. A decode step's 2 Hk heads thus run on 2 Hk / PREP_WARPS blocks. */
__global__ void __launch_bounds__(PREP_WARPS * 32) k_gdn_prep(float *qn, float *kn, float *beta, float *g,
                                                              const float *u, const float *gin, int64_t xs,
                                                              int64_t boff, const float *A_log, const float *dt_bias,
                                                              int Hk, int Hv, int dk, int dv, float qmul)
{
    const int t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t C = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv;
    for (int j = blockIdx.y * PREP_WARPS + warp; j < 2 * Hk; j += PREP_WARPS * gridDim.y) {
        const bool isq = j < Hk;
        const int kh = isq ? j : j - Hk;
        const float *src = u + (int64_t)t * C + (isq ? 0 : (int64_t)Hk * dk) + (int64_t)kh * dk;
        l2norm_head((isq ? qn : kn) + ((int64_t)t * Hk + kh) * dk, src, dk, lane, isq, qmul);
    }
    const float *row = gin + (int64_t)t * xs + boff;
    for (int h = blockIdx.y ? Hv : threadIdx.x; h < Hv; h += PREP_WARPS * 32) {
        const float x = row[Hv + h] + dt_bias[h];
        const float sp = softplus(x);
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

/* ---- the fused decode step (T = 1): conv + silu, q/k norms and gates, the delta rule and the gated norm in one
 * launch. Blocks (slice of W = dv / ns value dims, value head); a cluster holds every block that reads key head
 * kh = y / r (r = Hv / Hk): the ns slices of its r value heads, so the q/k conv state it rewrites is read only inside
 * the cluster (its rank 0 writes it after the cluster barrier), and the gated norm gathers the head's dv outputs
 * across the slices' shared memory. Each value is computed by the unfused kernels' arithmetic in their order (same
 * bits). Two forms: k_gdn_step_v1 (a warp per state column, the outputs pulled from the peers; kept for the checker
 * and --bench to hold k_gdn_step to) and k_gdn_step (what the engine runs). */
constexpr int STEP_THREADS = 256, STEP_WARPS = STEP_THREADS / 32, STEP_KMAX = 4, STEP_MAXW = 4 * STEP_WARPS;

struct StepArgs {
    float *y, *S, *cst;
    const float *gin, *cw, *A_log, *dt, *nw;
    int Hk, Hv, dk, dv, K, ns, r, fresh, shift, hm;
    float qmul, eps;
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900 /* its callers' arch */
/* Channel c's K taps of history at T = 1 (tap K-1 the current row gin[c]; zeros past K and before a fresh start). */
__device__ __forceinline__ void conv_hist(float (&hv)[STEP_KMAX], const StepArgs &a, int64_t C, int64_t c)
{
#pragma unroll
    for (int j = 0; j < STEP_KMAX; j++)
        hv[j] = j >= a.K ? 0.0f : j == a.K - 1 ? a.gin[c] : a.fresh ? 0.0f : a.cst[(int64_t)j * C + c];
}
#endif

template <int NPL, int CPW>
__global__ void __launch_bounds__(STEP_THREADS) k_gdn_step_v1(StepArgs a)
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
    __shared__ float raw[512], qn[256], kn[256], hist[STEP_KMAX][512], vv[STEP_MAXW], core[STEP_MAXW], gates[2];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tid = threadIdx.x;
    const int dk = a.dk, dv = a.dv, K = a.K, W = dv / a.ns, e0 = blockIdx.x * W, y = blockIdx.y, kh = y / a.r;
    /* fault gdn_key_head_modulo: value head h reads key head h % Hk; the cluster of key head kh then holds heads
     * kh, kh + Hk, ... */
    const int h = RC_FAULTS_BUILT && a.hm ? (y % a.r) * a.Hk + kh : y;
    const int64_t C = 2 * (int64_t)a.Hk * dk + (int64_t)a.Hv * dv;
    float s[CPW][NPL];
#pragma unroll
    for (int j = 0; j < CPW; j++) { /* the state columns first: their loads overlap the conv */
        const int e = warp + STEP_WARPS * j;
        const float *Sc = a.S + ((int64_t)h * dv + e0 + e) * dk;
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            const int d = lane + 32 * i;
            s[j][i] = !a.fresh && e < W && d < dk ? Sc[d] : 0.0f;
        }
    }
    float zs = 0.0f, wn = 0.0f; /* warp 0: silu(z) and the norm weight of column e0 + lane */
    if (warp == 0 && lane < W) {
        zs = silu(a.gin[C + (int64_t)h * dv + e0 + lane]);
        wn = a.nw[e0 + lane];
    }
    if (tid == STEP_THREADS - 1) { /* the gates, as k_gdn_prep */
        const float *row = a.gin + C + (int64_t)a.Hv * dv;
        const float x = row[a.Hv + h] + a.dt[h];
        const float sp = softplus(x);
        gates[0] = sigmoid(row[h]);
        gates[1] = -(float)exp((double)a.A_log[h]) * sp;
    }
    for (int i = tid; i < 2 * dk + W; i += STEP_THREADS) { /* conv + silu as k_gdn_conv at T = 1 */
        const int64_t c = i < dk ? (int64_t)kh * dk + i
                          : i < 2 * dk ? (int64_t)a.Hk * dk + (int64_t)kh * dk + i - dk
                                       : 2 * (int64_t)a.Hk * dk + (int64_t)h * dv + e0 + i - 2 * dk;
        float hv[STEP_KMAX], acc = 0.0f;
        conv_hist(hv, a, C, c);
#pragma unroll
        for (int j = 0; j < STEP_KMAX; j++)
            if (j < K)
                acc = fmaf(a.cw[c * K + j], hv[j], acc);
        if (i < 2 * dk) {
            raw[i] = silu(acc);
#pragma unroll
            for (int j = 0; j < STEP_KMAX; j++)
                hist[j][i] = hv[j];
        } else {
            vv[i - 2 * dk] = silu(acc);
#pragma unroll
            for (int j = 0; j < STEP_KMAX - 1; j++) /* this block alone reads these channels */
                if (j < K - 1)
                    a.cst[(int64_t)j * C + c] = a.shift ? hv[j] : hv[j + 1];
        }
    }
    __syncthreads();
    if (warp < 2) /* q (warp 0) and k (warp 1) L2 norm, as k_gdn_prep */
        l2norm_head(warp ? kn : qn, raw + warp * dk, dk, lane, warp == 0, a.qmul);
    __syncthreads();
    const float decay = (float)exp((double)gates[1]), bt = gates[0];
#pragma unroll
    for (int j = 0; j < CPW; j++) { /* the delta rule as k_gdn_delta, a warp per column */
        const int e = warp + STEP_WARPS * j;
        if (e >= W)
            break;
        float kk[NPL], m = 0.0f;
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            const int d = lane + 32 * i;
            kk[i] = d < dk ? kn[d] : 0.0f;
            s[j][i] = s[j][i] * decay;
            m = fmaf(s[j][i], kk[i], m);
        }
        const float delta = (vv[e] - warp_sum(m)) * bt;
        float o = 0.0f;
        float *Sc = a.S + ((int64_t)h * dv + e0 + e) * dk;
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            const int d = lane + 32 * i;
            s[j][i] = fmaf(kk[i], delta, s[j][i]);
            o = fmaf(s[j][i], d < dk ? qn[d] : 0.0f, o);
            if (d < dk)
                Sc[d] = s[j][i];
        }
        o = warp_sum(o);
        if (lane == 0)
            core[e] = o;
    }
    __cluster_barrier_arrive(); /* release: core is visible, and every block is done reading the old conv state */
    __cluster_barrier_wait();
    if (__clusterRelativeBlockRank() == 0) /* the q/k conv state of key head kh */
        for (int i = tid; i < 2 * dk; i += STEP_THREADS) {
            const int64_t c = i < dk ? (int64_t)kh * dk + i : (int64_t)a.Hk * dk + (int64_t)kh * dk + i - dk;
            for (int j = 0; j < K - 1; j++)
                a.cst[(int64_t)j * C + c] = hist[j + 1 - a.shift][i];
        }
    if (warp == 0) { /* the gated RMSNorm of head h over its ns slices, as k_gdn_norm_gate */
        const int base = (y % a.r) * a.ns;
        float ss = 0.0f;
        for (int i = lane; i < dv; i += 32) {
            const float x = *(const float *)__cluster_map_shared_rank(&core[i % W], base + i / W);
            ss = fmaf(x, x, ss);
        }
        const float ms = warp_sum(ss) / (float)dv;
        const float inv = (float)(1.0 / sqrt((double)(ms + a.eps)));
        if (lane < W) {
            const float hn = core[lane] * inv * wn;
            a.y[(int64_t)h * dv + e0 + lane] = hn * zs;
        }
    }
    __cluster_barrier_arrive(); /* no block leaves while a peer may still read its core */
    __cluster_barrier_wait();
#else
    __trap();
#endif
}

/* k_gdn_step: a state column is spread over STEP_TPC threads, so every thread runs one column and each dot of it
 * ends in 3 shuffles. k_gdn_delta's lane partials of a column (p_l: lane l's fmaf over d = l + 32 i) are held by
 * thread g = l % 8 as p_g, p_g+8, p_g+16, p_g+24, and its butterfly (xor 16, 8, 4, 2, 1) becomes (p_g + p_g+16) +
 * (p_g+8 + p_g+24) in the thread, then xor 4, 2, 1 over the column's 8 threads: the same sums (every lane of a
 * butterfly holds the same bits), so the same result. The prologue runs in parallel warps whose loads issue before
 * the state's: q (warp 0) and k (1) of key head kh (conv + silu, then the L2 norm in the warp), the slice's v (2),
 * g and exp(g) (3), silu(z) and the norm weight (4), beta (6); one __syncthreads. Each block then stores its outputs
 * into the shared memory of its value head's ns slices, and every block computes the gated norm of its slice from
 * the head's dv outputs there. Three forms, the same arithmetic (ENG_GDN_STEP_*):
 *  V2 (PDL = AX = false): a cluster barrier armed at the start says the peers run; the outputs go by plain stores
 *     and one cluster barrier (which also says every block has read the old q/k conv state) precedes the norm.
 *  V3 (PDL): V2 launched programmatically inside a captured graph (launch_dep's rule): it lets the next kernel
 *     launch at once, loads the weights (conv taps, dt_bias, A_log, norm weight) and asks L2 for its S slice and
 *     conv-state rows (a prefetch reads no value, so it may precede the writes it races), then dep_wait() before
 *     gin, the conv state and S (the kernels before write them): its launch, the weight loads and, in decode where
 *     S comes from DRAM, most of S's latency hide behind the kernels before.
 *  V4 (PDL + AX): V3 with the outputs sent by st.async into an mbarrier of each receiving block (armed at the start
 *     for the (ns - 1) W peers' values and W arrivals of its own slice's writers): the norm waits for its head's dv
 *     outputs alone, not for the whole cluster; the cluster barrier that orders the q/k conv state rewrite after
 *     every block's reads is armed before the sends and waited on at the end only. */
constexpr int STEP_TPC = 8;
static_assert(STEP_TPC * STEP_MAXW == STEP_THREADS && STEP_WARPS >= 7, "k_gdn_step: a thread per (column, group)");

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900 /* sm_90: clusters, st.async, mbarrier tx counts */
__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

/* v into *p of cluster block `rank`, completing sizeof(float) bytes of that block's mbarrier *bar. */
__device__ __forceinline__ void st_async_rank(float *p, float v, uint64_t *bar, unsigned rank)
{
    uint32_t rp, rb;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rp) : "r"(smem_u32(p)), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(smem_u32(bar)), "r"(rank));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(rp),
                 "r"(__float_as_uint(v)), "r"(rb)
                 : "memory");
}

/* Waits for phase 0 of the mbarrier *bar (acquire at cluster scope: the peers' st.async data is visible). A lost
 * store would hang the step: after ~2^32 cycles it traps instead (a launch failure the checker reports). */
__device__ __forceinline__ void mbar_wait0(uint64_t *bar)
{
    const long long t0 = clock64();
    for (;;) {
        uint32_t done;
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(smem_u32(bar))
                     : "memory");
        if (done)
            return;
        if (clock64() - t0 > (1ll << 32))
            __trap();
    }
}
#endif

/* The delta rule on one state column spread over STEP_TPC threads (thread g holds values d = g + 8 t + 32 i): decay,
 * m = S.k, S += k (v - m) beta, and the column's output S.q, each dot's lane partials and butterfly as k_gdn_delta's
 * (see above); every thread of the column returns it. k and q at d are kn[d], qn[d] in shared memory (zeros past
 * dk). */
template <int NPL>
__device__ __forceinline__ float delta_cols(float (&s)[4][NPL], const float *kn, const float *qn, float v, float decay,
                                            float bt, int g)
{
    float m[4], o[4];
#pragma unroll
    for (int t = 0; t < 4; t++) { /* m = S.k after the decay */
        m[t] = 0.0f;
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            const int d = g + 8 * t + 32 * i;
            s[t][i] = s[t][i] * decay;
            m[t] = fmaf(s[t][i], kn[d], m[t]);
        }
    }
    float mm = (m[0] + m[2]) + (m[1] + m[3]);
#pragma unroll
    for (int off = STEP_TPC / 2; off; off >>= 1)
        mm += __shfl_xor_sync(FULL, mm, off);
    const float delta = (v - mm) * bt;
#pragma unroll
    for (int t = 0; t < 4; t++) { /* S += k delta, o = S.q */
        o[t] = 0.0f;
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            const int d = g + 8 * t + 32 * i;
            s[t][i] = fmaf(kn[d], delta, s[t][i]);
            o[t] = fmaf(s[t][i], qn[d], o[t]);
        }
    }
    float oo = (o[0] + o[2]) + (o[1] + o[3]);
#pragma unroll
    for (int off = STEP_TPC / 2; off; off >>= 1)
        oo += __shfl_xor_sync(FULL, oo, off);
    return oo;
}

/* Thread (column, group g)'s values d = g + 8 t + 32 i of the state column Sc: loaded (zeros where !on or past dk),
 * stored back (where on). */
template <int NPL>
__device__ __forceinline__ void col_load(float (&s)[4][NPL], const float *Sc, bool on, int g, int dk)
{
#pragma unroll
    for (int t = 0; t < 4; t++)
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            const int d = g + 8 * t + 32 * i;
            s[t][i] = on && d < dk ? Sc[d] : 0.0f;
        }
}
template <int NPL>
__device__ __forceinline__ void col_store(float *Sc, const float (&s)[4][NPL], bool on, int g, int dk)
{
#pragma unroll
    for (int t = 0; t < 4; t++)
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            const int d = g + 8 * t + 32 * i;
            if (on && d < dk)
                Sc[d] = s[t][i];
        }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900 /* k_gdn_step's arch */
/* One warp: the gated RMSNorm of head h as k_gdn_norm_gate from the head's dv outputs in full, y of slice x's W dims */
__device__ __forceinline__ void norm_slice(const StepArgs &a, const float *full, const float *wn, const float *zs,
                                           int h, int x, int W, int lane)
{
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (lane + 32 * j < a.dv)
            ss = fmaf(full[lane + 32 * j], full[lane + 32 * j], ss);
    const float ms = warp_sum(ss) / (float)a.dv;
    const float inv = (float)(1.0 / sqrt((double)(ms + a.eps)));
    if (lane < W)
        a.y[(int64_t)h * a.dv + x * W + lane] = full[x * W + lane] * inv * wn[lane] * zs[lane];
}
#endif

template <int NPL, bool PDL, bool AX>
__global__ void __launch_bounds__(STEP_THREADS) k_gdn_step(StepArgs a)
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
    __shared__ float qn[32 * NPL], kn[32 * NPL], vv[STEP_MAXW], zs[STEP_MAXW], wn[STEP_MAXW], full[8 * STEP_MAXW],
        gates[2];
    __shared__ uint64_t xbar; /* AX: phase 0 completes once the head's dv outputs are in full */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tid = threadIdx.x;
    const int dk = a.dk, dv = a.dv, K = a.K, W = dv / a.ns, x = blockIdx.x, e0 = x * W, y = blockIdx.y, kh = y / a.r;
    if (AX) {
        if (tid == 0) { /* arrivals: this one (with the peers' bytes to expect) and the W own-slice writers */
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(&xbar)), "r"(1 + W) : "memory");
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&xbar)),
                         "r"((dv - W) * (int)sizeof(float))
                         : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __cluster_barrier_arrive(); /* release: waited on before the first st.async into a peer */
    } else {
        __cluster_barrier_arrive_relaxed(); /* waited on before the first store into a peer's shared memory */
    }
    if (PDL)
        dep_launch();
    const int h = RC_FAULTS_BUILT && a.hm ? (y % a.r) * a.Hk + kh : y; /* fault gdn_key_head_modulo */
    const int64_t C = 2 * (int64_t)a.Hk * dk + (int64_t)a.Hv * dv;
    /* the prologue's loads: warps 0-2 a conv channel per (lane, i), its K taps of history (as k_gdn_step_v1) and
     * weights; warps 3, 4 and 6 their few values. PDL: the weights (no kernel writes them) before dep_wait. */
    const int lim = warp < 2 ? dk : warp == 2 ? W : 0;
    const int64_t cb = warp == 0   ? (int64_t)kh * dk
                       : warp == 1 ? (int64_t)a.Hk * dk + (int64_t)kh * dk
                                   : 2 * (int64_t)a.Hk * dk + (int64_t)h * dv + e0;
    float hv[STEP_KMAX][NPL], cw[STEP_KMAX][NPL];
    auto taps = [&](auto f) { /* f(i, j, channel, on) over the lane's channels i and taps j */
#pragma unroll
        for (int i = 0; i < NPL; i++)
#pragma unroll
            for (int j = 0; j < STEP_KMAX; j++)
                f(i, j, cb + lane + 32 * i, lane + 32 * i < lim);
    };
    auto hist = [&](int i, int j, int64_t c, bool on) {
        hv[j][i] = !on || j >= K ? 0.0f : j == K - 1 ? a.gin[c] : a.fresh ? 0.0f : a.cst[(int64_t)j * C + c];
    };
    auto wts = [&](int i, int j, int64_t c, bool on) { cw[j][i] = on && j < K ? a.cw[c * K + j] : 0.0f; };
    const float *row = a.gin + C + (int64_t)a.Hv * dv; /* b [Hv] | a [Hv] */
    /* the state slice: thread (column e, group g) holds partials l = g + 8 t, values d = l + 32 i */
    const int e = tid / STEP_TPC, g = tid % STEP_TPC;
    const bool col = e < W;
    float *Sc = a.S + ((int64_t)h * dv + e0 + (col ? e : 0)) * dk;
    if (!PDL) { /* V2's order: history and taps together, then warps 3 and 4 */
        taps([&](int i, int j, int64_t c, bool on) {
            hist(i, j, c, on);
            wts(i, j, c, on);
        });
        if (warp == 3 && (lane == 1 || lane == 2)) {
            hv[0][0] = lane == 1 ? row[a.Hv + h] : a.A_log[h];
            hv[1][0] = lane == 1 ? a.dt[h] : 0.0f;
        } else if (warp == 6 && lane == 0) {
            hv[0][0] = row[h];
        } else if (warp == 4 && lane < W) {
            hv[0][0] = a.gin[C + (int64_t)h * dv + e0 + lane];
            hv[1][0] = a.nw[e0 + lane];
        }
    } else { /* the weights, L2 prefetches (no value read, so no order to keep), dep_wait, then the rest */
        taps(wts);
        float wg = 0.0f; /* dt_bias, A_log (warp 3), norm weight (4) */
        if (warp == 3 && (lane == 1 || lane == 2))
            wg = lane == 1 ? a.dt[h] : a.A_log[h];
        else if (warp == 4 && lane < W)
            wg = a.nw[e0 + lane];
        if (!a.fresh) {
            if (col && 32 * g < dk)
                prefetch_l2(Sc + 32 * g);
            taps([&](int, int j, int64_t c, bool on) {
                if (on && j < K - 1)
                    prefetch_l2(a.cst + (int64_t)j * C + c);
            });
        }
        dep_wait(); /* gin, the conv state and S belong to the kernels before */
        taps(hist);
        if (warp == 3 && (lane == 1 || lane == 2)) {
            hv[0][0] = lane == 1 ? row[a.Hv + h] : wg;
            hv[1][0] = lane == 1 ? wg : 0.0f;
        } else if (warp == 6 && lane == 0) {
            hv[0][0] = row[h];
        } else if (warp == 4 && lane < W) {
            hv[0][0] = a.gin[C + (int64_t)h * dv + e0 + lane];
            hv[1][0] = wg;
        }
    }
    float s[4][NPL];
    col_load<NPL>(s, Sc, !a.fresh && col, g, dk);
    if (warp < 3) { /* conv + silu as k_gdn_conv at T = 1 */
        float u[NPL];
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            float acc = 0.0f;
#pragma unroll
            for (int j = 0; j < STEP_KMAX; j++)
                if (j < K)
                    acc = fmaf(cw[j][i], hv[j][i], acc);
            u[i] = lane + 32 * i < lim ? silu(acc) : 0.0f;
        }
        if (warp < 2) { /* q (warp 0) or k (1): the L2 norm as l2norm_head, zeros past dk */
            float ss = 0.0f;
#pragma unroll
            for (int i = 0; i < NPL; i++)
                if (lane + 32 * i < dk)
                    ss = fmaf(u[i], u[i], ss);
            const float inv = (float)(1.0 / sqrt((double)(warp_sum(ss) + 1e-6f)));
#pragma unroll
            for (int i = 0; i < NPL; i++) {
                const int d = lane + 32 * i;
                const float yv = u[i] * inv;
                (warp ? kn : qn)[d] = d >= dk ? 0.0f : warp ? yv : yv * a.qmul;
            }
        } else if (lane < W) {
            vv[lane] = u[0];
        }
    } else if (warp == 3) { /* g as k_gdn_prep, then exp(g): exp(a + dt_bias) (lane 1) and exp(A_log) (lane 2, whose
                             * hv[1][0] is 0) are one exp of the warp, not two divergent ones; then the softplus */
        const float xa = hv[0][0] + hv[1][0];
        const double ex = exp((double)xa);
        float v = (float)ex;
        if (lane == 1)
            v = xa > 20.0f ? xa : (float)log1p(ex);
        const float ea = __shfl_sync(FULL, v, 2);
        if (lane == 1)
            gates[1] = (float)exp((double)(-ea * v));
    } else if (warp == 6 && lane == 0) { /* beta, beside warp 3's chain (on another scheduler than warp 3) */
        gates[0] = sigmoid(hv[0][0]);
    } else if (warp == 4 && lane < W) {
        zs[lane] = silu(hv[0][0]);
        wn[lane] = hv[1][0];
    }
    __syncthreads();
    trace_mark();
    const float oo = delta_cols<NPL>(s, kn, qn, col ? vv[e] : 0.0f, gates[1], gates[0], g);
    trace_mark();
    const unsigned dst0 = (unsigned)((y % a.r) * a.ns); /* cluster rank of slice 0 of this value head */
    __cluster_barrier_wait(); /* every peer has started (AX: its mbarrier is armed): it takes our stores */
    if (AX)
        __cluster_barrier_arrive(); /* release: this block is done reading the old conv state */
    if (col && g < a.ns) { /* output e of slice x into slice g of this value head */
        if (!AX)
            *(float *)__cluster_map_shared_rank(&full[x * W + e], dst0 + g) = oo;
        else if (g != x)
            st_async_rank(&full[x * W + e], oo, &xbar, dst0 + g);
        else { /* this block's own slice: a plain store, then an arrival (release) on xbar */
            full[x * W + e] = oo;
            asm volatile("{\n\t.reg .b64 tok;\n\tmbarrier.arrive.shared::cta.b64 tok, [%0];\n\t}" ::"r"(smem_u32(&xbar))
                         : "memory");
        }
    }
    if (!AX)
        __cluster_barrier_arrive(); /* release: the stores above, and every block is done with the old conv state */
    col_store<NPL>(Sc, s, col, g, dk); /* after the arrive, which would otherwise wait for these stores */
    if (warp == 2 && lane < W) /* v's conv state: this block alone reads these channels */
#pragma unroll
        for (int j = 0; j < STEP_KMAX - 1; j++)
            if (j < K - 1)
                a.cst[(int64_t)j * C + cb + lane] = a.shift ? hv[j][0] : hv[j + 1][0];
    if (!AX)
        __cluster_barrier_wait(); /* the peers' outputs are here */
    trace_mark();
    if (warp == 2) { /* the gated RMSNorm of head h as k_gdn_norm_gate, from the head's dv outputs here */
        if (AX)
            mbar_wait0(&xbar);
        norm_slice(a, full, wn, zs, h, x, W, lane);
    }
    trace_mark();
    if (AX)
        __cluster_barrier_wait(); /* every block of the cluster has read the old conv state */
    if (warp < 2 && __clusterRelativeBlockRank() == 0) /* the q/k conv state of key head kh */
#pragma unroll
        for (int i = 0; i < NPL; i++)
            if (lane + 32 * i < dk)
#pragma unroll
                for (int j = 0; j < STEP_KMAX - 1; j++)
                    if (j < K - 1)
                        a.cst[(int64_t)j * C + cb + lane + 32 * i] = a.shift ? hv[j][i] : hv[j + 1][i];
#else
    __trap();
#endif
}

/* The launch floor of the fused step (--bench): its grid and clusters, one cluster barrier, PDL as V3. */
template <bool PDL>
__global__ void __launch_bounds__(STEP_THREADS) k_gdn_step_nop(StepArgs)
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
    __cluster_barrier_arrive_relaxed();
    if (PDL) {
        dep_launch();
        dep_wait();
    }
    __cluster_barrier_wait();
#else
    __trap();
#endif
}

__global__ void k_sigmoid_gate(float *ctx, const float *gate, int64_t total)
{
    dep_launch();
    dep_wait(); /* ctx and gate come from the kernels before: launch_dep */
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total)
        ctx[i] = ctx[i] * sigmoid(gate[i]);
}

/* ---- the chunked delta rule (prefill) ----
 * The rows of one call form a virtual sequence: np pending rows (an earlier call's part of the base's chunk),
 * then the call's T rows. Chunk 0 spans `first` rows of it, every later chunk CH. Per (chunk, value head), with
 * cum the running sum of g (double, rounded per row), beta, k, q of the chunk's rows r < n:
 *   N[r][s] = -(beta_r (k_r . k_s)) exp(cum_r - cum_s) (s < r), Ti = (I - N)^-1 by rows (row i from rows < i),
 *   Aq[r][s] = (q_r . k_s) exp(cum_r - cum_s) (s <= r)                                    (k_gdn_intra)
 * and per (value head, slice of value dims), chunk after chunk on the state S(b):
 *   X_r = beta_r (v_r - exp(cum_r) S k_r), vn_r = sum_{s<=r} Ti[r][s] X_s,
 *   out_r = exp(cum_r) S q_r + sum_{s<=r} Aq[r][s] vn_s,
 *   complete chunk: S = exp(cum_last) S + sum_r exp(cum_last - cum_r) vn_r k_r^T          (k_gdn_inter)
 * Every sum runs s (or d, or r) ascending with fmaf from 0: a row's bits never depend on the rows after it. */
constexpr int CH = ENG_GDN_CHUNK, CK_THREADS = 256, DVS = 16; /* value dims per k_gdn_inter block */
constexpr int64_t WS_PER = CH + 2 * CH * CH;                  /* per (chunk, head): cum, Ti, Aq */
static_assert(CK_THREADS == 256 && DVS == 16 && CH == 64, "k_gdn_inter's X / QS tile: 32 x 8 threads");

struct Rows {
    const float *qn, *kn, *u, *beta, *g; /* the call's rows */
    const float *pk, *pv, *pb, *pg;      /* the pending rows */
    int np, T, C, Hk, Hv, dk, dv;
    __device__ const float *k(int vr, int kh) const
    {
        return vr < np ? pk + ((int64_t)vr * Hk + kh) * dk : kn + ((int64_t)(vr - np) * Hk + kh) * dk;
    }
    __device__ const float *q(int vr, int kh) const { return qn + ((int64_t)(vr - np) * Hk + kh) * dk; }
    __device__ float v(int vr, int h, int e) const
    {
        return vr < np ? pv[((int64_t)vr * Hv + h) * dv + e]
                       : u[(int64_t)(vr - np) * C + 2 * (int64_t)Hk * dk + (int64_t)h * dv + e];
    }
    __device__ float b(int vr, int h) const
    {
        return vr < np ? pb[(int64_t)vr * Hv + h] : beta[(int64_t)(vr - np) * Hv + h];
    }
    __device__ float gg(int vr, int h) const
    {
        return vr < np ? pg[(int64_t)vr * Hv + h] : g[(int64_t)(vr - np) * Hv + h];
    }
};

__host__ __device__ inline int n_chunks(int total, int first)
{
    return total <= first ? 1 : 1 + (total - first + CH - 1) / CH;
}

/* chunk c's first virtual row, its rows present (n) and its full length */
__device__ inline void chunk_span(int c, int first, int total, int *c0, int *n, int *full)
{
    *c0 = c == 0 ? 0 : first + (c - 1) * CH;
    *full = c == 0 ? first : CH;
    *n = min(*c0 + *full, total) - *c0;
}

/* K (and Q for the call's rows) of chunk rows [c0, c0 + n) into smem rows of stride ks, zeros elsewhere */
__device__ void load_kq(float *K, float *Q, const Rows &R, int c0, int n, int kh, int ks)
{
    for (int i = threadIdx.x; i < CH * R.dk; i += blockDim.x) {
        const int r = i / R.dk, d = i % R.dk, vr = c0 + r;
        K[r * ks + d] = r < n ? R.k(vr, kh)[d] : 0.0f;
        Q[r * ks + d] = r < n && vr >= R.np ? R.q(vr, kh)[d] : 0.0f;
    }
}

__device__ inline int key_head(int h, int Hk, int Hv, int hm) { return RC_FAULTS_BUILT && hm ? h % Hk : h / (Hv / Hk); }

__global__ void __launch_bounds__(CK_THREADS) k_gdn_intra(float *ws, Rows R, int first, int hm)
{
    extern __shared__ float sm[];
    const int c = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, ks = R.dk + 1, kh = key_head(h, R.Hk, R.Hv, hm);
    int c0, n, full;
    chunk_span(c, first, R.np + R.T, &c0, &n, &full);
    float *K = sm, *Q = K + CH * ks, *N = Q + CH * ks, *Ts = N + CH * CH, *cum = Ts + CH * CH, *bt = cum + CH;
    float *W = ws + ((int64_t)c * R.Hv + h) * WS_PER, *Ti = W + CH, *Aq = Ti + CH * CH;
    load_kq(K, Q, R, c0, n, kh, ks);
    if (tid < CH)
        bt[tid] = tid < n ? R.b(c0 + tid, h) : 0.0f;
    if (tid == 0) {
        double run = 0.0;
        for (int r = 0; r < CH; r++) {
            if (r < n)
                run += R.gg(c0 + r, h);
            cum[r] = (float)run;
        }
    }
    __syncthreads();
    for (int i = tid; i < CH * CH; i += CK_THREADS) {
        const int r = i / CH, s = i % CH;
        float nv = 0.0f, aq = 0.0f;
        if (r < n && s <= r) {
            const float dec = (float)exp((double)(cum[r] - cum[s]));
            if (s < r) {
                float a = 0.0f;
                for (int d = 0; d < R.dk; d++)
                    a = fmaf(K[r * ks + d], K[s * ks + d], a);
                nv = -(bt[r] * a * dec);
            }
            if (c0 + r >= R.np) {
                float a = 0.0f;
                for (int d = 0; d < R.dk; d++)
                    a = fmaf(Q[r * ks + d], K[s * ks + d], a);
                aq = a * dec;
            }
        }
        N[i] = nv;
        Aq[i] = aq;
        Ts[i] = r == s ? 1.0f : 0.0f;
    }
    __syncthreads();
    for (int i = 1; i < n; i++) { /* Ti[i][j] = sum_{m=j}^{i-1} N[i][m] Ti[m][j] (Ti[m][m] = 1) */
        if (tid < i) {
            float acc = 0.0f;
            for (int m = tid; m < i; m++)
                acc = fmaf(N[i * CH + m], Ts[m * CH + tid], acc);
            Ts[i * CH + tid] = acc;
        }
        __syncthreads();
    }
    for (int i = tid; i < CH * CH; i += CK_THREADS)
        Ti[i] = Ts[i];
    if (tid < CH)
        W[tid] = cum[tid];
}

__global__ void __launch_bounds__(CK_THREADS) k_gdn_inter(float *core, float *S, const float *ws, Rows R, int first,
                                                          int fresh, int settle, int hm)
{
    extern __shared__ float sm[];
    const int h = blockIdx.y, e0 = blockIdx.x * DVS, tid = threadIdx.x, dk = R.dk, ks = dk + 1;
    const int ne = min(DVS, R.dv - e0), kh = key_head(h, R.Hk, R.Hv, hm), total = R.np + R.T;
    const int nch = n_chunks(total, first);
    float *Ss = sm, *K = Ss + DVS * ks, *Q = K + CH * ks;
    float *X = Q + CH * ks, *VN = X + CH * DVS, *QS = VN + CH * DVS, *cum = QS + CH * DVS, *ec = cum + CH,
          *kd = ec + CH, *bt = kd + CH;
    float *Sg = S + ((int64_t)h * R.dv + e0) * dk;
    for (int i = tid; i < DVS * dk; i += CK_THREADS) {
        const int e = i / dk, d = i % dk;
        Ss[e * ks + d] = !fresh && e < ne ? Sg[(int64_t)e * dk + d] : 0.0f;
    }
    int advanced = 0;
    for (int c = 0; c < nch; c++) {
        int c0, n, full;
        chunk_span(c, first, total, &c0, &n, &full);
        /* Ti and Aq are read from global memory (L1): in shared memory too, a block would not leave room for a
         * second one on the SM */
        const float *W = ws + ((int64_t)c * R.Hv + h) * WS_PER, *Ti = W + CH, *Aq = Ti + CH * CH;
        __syncthreads(); /* the previous chunk is done with the buffers */
        load_kq(K, Q, R, c0, n, kh, ks);
        for (int i = tid; i < CH * DVS; i += CK_THREADS) {
            const int r = i / DVS, e = i % DVS;
            X[i] = r < n && e < ne ? R.v(c0 + r, h, e0 + e) : 0.0f;
        }
        if (tid < CH) {
            cum[tid] = W[tid];
            ec[tid] = (float)exp((double)W[tid]);
            bt[tid] = tid < n ? R.b(c0 + tid, h) : 0.0f;
        }
        __syncthreads();
        { /* X_r = beta_r (v_r - exp(cum_r) S k_r), QS_r = S q_r: rows r, r + 32 by value dims e, e + 8 */
            const int e = tid % 8, r = tid / 8;
            float p[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}}, qs[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
            for (int d = 0; d < dk; d++) {
                const float s0 = Ss[e * ks + d], s1 = Ss[(e + 8) * ks + d];
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const float kv = K[(r + 32 * j) * ks + d], qv = Q[(r + 32 * j) * ks + d];
                    p[j][0] = fmaf(s0, kv, p[j][0]);
                    p[j][1] = fmaf(s1, kv, p[j][1]);
                    qs[j][0] = fmaf(s0, qv, qs[j][0]);
                    qs[j][1] = fmaf(s1, qv, qs[j][1]);
                }
            }
#pragma unroll
            for (int j = 0; j < 2; j++)
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const int rr = r + 32 * j, idx = rr * DVS + e + 8 * i;
                    X[idx] = rr < n ? bt[rr] * (X[idx] - ec[rr] * p[j][i]) : 0.0f;
                    QS[idx] = qs[j][i];
                }
        }
        __syncthreads();
        for (int i = tid; i < CH * DVS; i += CK_THREADS) {
            const int r = i / DVS, e = i % DVS;
            float acc = 0.0f;
            for (int s = 0; s <= r; s++)
                acc = fmaf(Ti[r * CH + s], X[s * DVS + e], acc);
            VN[i] = r < n ? acc : 0.0f;
        }
        __syncthreads();
        for (int i = tid; i < CH * DVS; i += CK_THREADS) {
            const int r = i / DVS, e = i % DVS;
            if (r >= n || c0 + r < R.np || e >= ne)
                continue;
            float acc = 0.0f;
            for (int s = 0; s <= r; s++)
                acc = fmaf(Aq[r * CH + s], VN[s * DVS + e], acc);
            core[((int64_t)(c0 + r - R.np) * R.Hv + h) * R.dv + e0 + e] = ec[r] * QS[i] + acc;
        }
        if (n == full || (settle && c == nch - 1)) { /* uniform over the block */
            if (tid < n)
                kd[tid] = (float)exp((double)(cum[n - 1] - cum[tid]));
            __syncthreads();
            const float cd = ec[n - 1];
            for (int i = tid; i < (DVS / 4) * dk; i += CK_THREADS) {
                const int eq = i / dk, d = i % dk;
                float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (int r = 0; r < n; r++) {
                    const float kr = K[r * ks + d] * kd[r];
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        acc[j] = fmaf(kr, VN[r * DVS + eq + 4 * j], acc[j]);
                }
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    float *sp = &Ss[(eq + 4 * j) * ks + d];
                    *sp = *sp * cd + acc[j];
                }
            }
            advanced = 1;
        }
    }
    __syncthreads();
    if (advanced)
        for (int i = tid; i < ne * dk; i += CK_THREADS)
            Sg[i] = Ss[(i / dk) * ks + i % dk];
}

/* The rows of the last incomplete chunk into the pending store (rows [dst0, dst0 + cnt) from call rows src0..) */
__global__ void k_gdn_keep(float *pend, Rows R, int src0, int dst0, int cnt)
{
    const int64_t kw = (int64_t)R.Hk * R.dk, vw = (int64_t)R.Hv * R.dv, row = kw + vw + 2 * R.Hv;
    float *pk = pend, *pv = pk + CH * kw, *pb = pv + CH * vw, *pg = pb + CH * R.Hv;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)cnt * row;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / row);
        const int64_t j = i % row, t = src0 + r, o = dst0 + r;
        if (j < kw)
            pk[o * kw + j] = R.kn[t * kw + j];
        else if (j < kw + vw)
            pv[o * vw + j - kw] = R.u[t * R.C + 2 * kw + j - kw];
        else if (j < kw + vw + R.Hv)
            pb[o * R.Hv + j - kw - vw] = R.beta[t * R.Hv + j - kw - vw];
        else
            pg[o * R.Hv + j - kw - vw - R.Hv] = R.g[t * R.Hv + j - kw - vw - R.Hv];
    }
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
    const dim3 grid(T, (2 * Hk + PREP_WARPS - 1) / PREP_WARPS);
    k_gdn_prep<<<grid, PREP_WARPS * 32, 0, s>>>(qn, kn, beta, g, u, gin, xs, boff, A_log, dt_bias, Hk, Hv, dk, dv,
                                                qmul);
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
    if (total <= 0)
        return cudaGetLastError();
    return launch_dep(k_sigmoid_gate, dim3((unsigned)((total + 255) / 256)), dim3(256), 0, s, ctx, gate, total);
}

/* The slices per value head of the fused step (0: it does not apply: no cluster launch, or a shape outside it). */
static int step_slices(int Hk, int Hv, int dk, int dv, int K)
{
    int dev = 0, cl = 0;
    if (Hk < 1 || Hv % Hk || dk > 256 || K < 2 || K > STEP_KMAX || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&cl, cudaDevAttrClusterLaunch, dev) != cudaSuccess || !cl)
        return 0;
    const int r = Hv / Hk;
    for (int ns = 8; ns >= 1; ns /= 2)
        if (ns * r <= 8 && dv % ns == 0 && dv / ns <= STEP_MAXW)
            return ns;
    return 0;
}

int engk_gdn_step_fits(int Hk, int Hv, int dk, int dv, int K)
{
    return step_slices(Hk, Hv, dk, dv, K) > 0;
}

/* the fused step in form `form` (ENG_GDN_STEP_V1 .. V4; STEP_NOP, STEP_NOP_PDL: its launch floor, --bench alone) */
constexpr int STEP_NOP = ENG_GDN_STEP_NFORMS + 1, STEP_NOP_PDL = STEP_NOP + 1;
static cudaError_t step_launch(int form, float *y, float *state, float *conv_state, const float *gin,
                               const float *conv_w, const float *A_log, const float *dt_bias, const float *norm_w,
                               int Hk, int Hv, int dk, int dv, int K, float qmul, float eps, int fresh, cudaStream_t s)
{
    const int ns = step_slices(Hk, Hv, dk, dv, K);
    if (!ns)
        return cudaErrorNotSupported;
    if (form < ENG_GDN_STEP_V1 || form > STEP_NOP_PDL)
        return cudaErrorInvalidValue;
    const StepArgs a = {y, state, conv_state, gin, conv_w, A_log, dt_bias, norm_w, Hk, Hv, dk, dv, K, ns, Hv / Hk,
                        fresh, rc_fault_active("gdn_conv_state_shift") ? 1 : 0,
                        rc_fault_active("gdn_key_head_modulo") ? 1 : 0, qmul, eps};
    const int W = dv / ns, cpw = (W + STEP_WARPS - 1) / STEP_WARPS;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)ns;
    attr[0].val.clusterDim.y = (unsigned)(Hv / Hk);
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization; /* V3, V4: as launch_dep */
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)ns, (unsigned)Hv);
    cfg.blockDim = dim3(STEP_THREADS);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = s;
    cfg.attrs = attr;
    const bool pdl = form == ENG_GDN_STEP_V3 || form == ENG_GDN_STEP_V4 || form == STEP_NOP_PDL;
    cfg.numAttrs = pdl && programmatic(s) ? 2 : 1;
    cudaError_t err;
    if (form == ENG_GDN_STEP_V1) {
#define STEP(n, c) (cudaLaunchKernelEx(&cfg, k_gdn_step_v1<n, c>, a))
#define STEP_C(n) (cpw == 1 ? STEP(n, 1) : cpw == 2 ? STEP(n, 2) : STEP(n, 4))
        err = dk <= 32 ? STEP_C(1) : dk <= 64 ? STEP_C(2) : dk <= 128 ? STEP_C(4) : STEP_C(8);
#undef STEP_C
#undef STEP
    } else if (form >= STEP_NOP) {
        err = form == STEP_NOP ? cudaLaunchKernelEx(&cfg, k_gdn_step_nop<false>, a)
                               : cudaLaunchKernelEx(&cfg, k_gdn_step_nop<true>, a);
    } else {
#define STEP_F(n, p, x) (cudaLaunchKernelEx(&cfg, k_gdn_step<n, p, x>, a))
#define STEP(n)                                                                                                     \
    (form == ENG_GDN_STEP_V2   ? STEP_F(n, false, false)                                                             \
     : form == ENG_GDN_STEP_V3 ? STEP_F(n, true, false)                                                              \
                               : STEP_F(n, true, true))
        err = dk <= 32 ? STEP(1) : dk <= 64 ? STEP(2) : dk <= 128 ? STEP(4) : STEP(8);
#undef STEP
#undef STEP_F
    }
    return err != cudaSuccess ? err : cudaGetLastError();
}

cudaError_t engk_gdn_step_form(int form, float *y, float *state, float *conv_state, const float *gin,
                               const float *conv_w, const float *A_log, const float *dt_bias, const float *norm_w,
                               int Hk, int Hv, int dk, int dv, int K, float qmul, float eps, int fresh, cudaStream_t s)
{
    if (form < ENG_GDN_STEP_V1 || form > ENG_GDN_STEP_NFORMS)
        return cudaErrorInvalidValue;
    return step_launch(form, y, state, conv_state, gin, conv_w, A_log, dt_bias, norm_w, Hk, Hv, dk, dv, K, qmul, eps,
                       fresh, s);
}

int64_t engk_gdn_chunk_ws_floats(int64_t rows, int Hv)
{
    return (rows / CH + 2) * Hv * WS_PER;
}

int64_t engk_gdn_pend_floats(int Hk, int Hv, int dk, int dv)
{
    return (int64_t)CH * ((int64_t)Hk * dk + (int64_t)Hv * dv + 2 * Hv);
}

int64_t engk_gdn_next_base(int64_t b, int64_t end)
{
    const int64_t ce = (b / CH + 1) * CH;
    return end < ce ? b : end - (end - ce) % CH;
}

cudaError_t engk_gdn_chunked(float *core, float *state, float *pend, float *ws, const float *qn, const float *kn,
                             const float *u, const float *beta, const float *g, int T, int C, int Hk, int Hv, int dk,
                             int dv, int np, int first, int fresh, int settle, cudaStream_t s)
{
    if (dk > 256 || np < 0 || np >= first || first > CH || T < 0 || (settle && T) || Hv % Hk)
        return cudaErrorInvalidValue;
    const int total = np + T;
    if (total == 0)
        return cudaSuccess;
    const int64_t kw = (int64_t)Hk * dk, vw = (int64_t)Hv * dv;
    const Rows R = {qn, kn, u, beta, g, pend, pend + CH * kw, pend + CH * (kw + vw), pend + CH * (kw + vw + Hv),
                    np, T, C, Hk, Hv, dk, dv};
    const int hm = rc_fault_active("gdn_key_head_modulo") ? 1 : 0, nch = n_chunks(total, first), ks = dk + 1;
    const size_t sm1 = sizeof(float) * (2 * (size_t)CH * ks + 2 * CH * CH + 2 * CH);
    const size_t sm2 = sizeof(float) * ((size_t)DVS * ks + 2 * (size_t)CH * ks + 3 * CH * DVS + 4 * CH);
    cudaError_t err = cudaFuncSetAttribute(k_gdn_intra, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm1);
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(k_gdn_inter, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm2);
    if (err != cudaSuccess)
        return err;
    k_gdn_intra<<<dim3(nch, Hv), CK_THREADS, sm1, s>>>(ws, R, first, hm);
    k_gdn_inter<<<dim3((dv + DVS - 1) / DVS, Hv), CK_THREADS, sm2, s>>>(core, state, ws, R, first, fresh, settle, hm);
    if (settle)
        return cudaGetLastError();
    /* keep the last chunk's rows when it is incomplete */
    int c0 = nch == 1 ? 0 : first + (nch - 2) * CH;
    const int full = nch == 1 ? first : CH, n = total - c0;
    if (n < full) {
        const int src0 = c0 > np ? c0 - np : 0, dst0 = c0 > np ? 0 : np, cnt = total - (c0 > np ? c0 : np);
        const int64_t work = (int64_t)cnt * (kw + vw + 2 * Hv);
        if (cnt > 0)
            k_gdn_keep<<<(unsigned)((work + 255) / 256 < 1024 ? (work + 255) / 256 : 1024), 256, 0, s>>>(pend, R, src0,
                                                                                                       dst0, cnt);
    }
    return cudaGetLastError();
}

/* Synthetic inputs (zeros: finite, no NaN) timed with events; phase 0 the step as the engine runs it, 1-4 the
 * fused forms V1-V4 (where they apply), then unfused and the launch floor (eng_gdn.h). layers = 1: one graph of 200
 * steps of one layer (each step reads the state the one before wrote, from L2). layers > 1: the layers' own states
 * and conv states, one step of each in a graph (as the engine's decode graph holds them: a layer's state comes back
 * from DRAM when the other layers' have passed through L2), the graph replayed until at least 200 steps ran. */
cudaError_t engk_gdn_step_times(int Hk, int Hv, int dk, int dv, int K, int layers, double us[ENG_GDN_STEP_NTIMES],
                                int *fused_out)
{
    const int fused = engk_gdn_step_fits(Hk, Hv, dk, dv, K);
    *fused_out = fused;
    for (int i = 0; i < ENG_GDN_STEP_NTIMES; i++)
        us[i] = 0.0;
    if (layers < 1)
        return cudaErrorInvalidValue;
    const int C = 2 * Hk * dk + Hv * dv, nin = C + Hv * dv + 2 * Hv;
    const int per = layers > 1 ? layers : 200, replays = layers > 1 ? (200 + layers - 1) / layers : 1;
    const int64_t ns = (int64_t)Hv * dv * dk, ncs = (int64_t)(K - 1) * C;
    const int64_t n = (int64_t)nin + C + 2 * (int64_t)Hk * dk + 2 * Hv + Hv * dv + (ns + ncs) * layers +
                      (int64_t)C * K + 2 * Hv + dv;
    float *buf = NULL;
    cudaEvent_t t[2] = {NULL, NULL};
    cudaStream_t s = NULL;
    cudaError_t err = cudaMalloc((void **)&buf, (size_t)n * sizeof(float));
    for (int i = 0; i < 2 && err == cudaSuccess; i++)
        err = cudaEventCreate(&t[i]);
    if (err == cudaSuccess)
        err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (err == cudaSuccess)
        err = cudaMemsetAsync(buf, 0, (size_t)n * sizeof(float), s); /* zero inputs: exact, finite, no NaN */
    float *gin = buf, *u = gin + nin, *qn = u + C, *kn = qn + (int64_t)Hk * dk, *beta = kn + (int64_t)Hk * dk,
          *g = beta + Hv, *core = g + Hv, *S = core + (int64_t)Hv * dv, *cst = S + ns * layers,
          *cw = cst + ncs * layers, *alog = cw + (int64_t)C * K, *dt = alog + Hv, *nw = dt + Hv;
    float ms[ENG_GDN_STEP_NTIMES] = {0.0f};
    const int unfused = ENG_GDN_TIME_UNFUSED;
    cudaError_t first = err, ferr = cudaSuccess; /* setup error; a phase's (it reads -1, the others still run) */
    for (int phase = 0; phase < ENG_GDN_STEP_NTIMES && first == cudaSuccess; phase++) {
        if (phase > 0 && phase != unfused && !fused)
            continue; /* the steps captured as one graph, as decode */
        const int form = phase == unfused || !fused          ? 0
                         : phase == 0                        ? ENG_GDN_STEP_FORM
                         : phase == ENG_GDN_TIME_NOP         ? STEP_NOP
                         : phase == ENG_GDN_TIME_NOP_PDL     ? STEP_NOP_PDL
                                                             : phase;
        cudaGraph_t graph = NULL;
        cudaGraphExec_t exec = NULL;
        err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        const int capturing = err == cudaSuccess;
        for (int i = 0; i < per && err == cudaSuccess; i++) {
            const int l = layers > 1 ? i : 0;
            float *Sl = S + ns * l, *cl = cst + ncs * l;
            if (form) {
                err = step_launch(form, core, Sl, cl, gin, cw, alog, dt, nw, Hk, Hv, dk, dv, K, 1.0f, 1e-6f, 0, s);
                continue;
            }
            err = engk_gdn_conv(u, cl, gin, nin, cw, 1, C, K, 0, s);
            if (err == cudaSuccess)
                err = engk_gdn_prep(qn, kn, beta, g, u, gin, nin, C + (int64_t)Hv * dv, alog, dt, 1, Hk, Hv, dk, dv,
                                    1.0f, s);
            if (err == cudaSuccess)
                err = engk_gdn_delta(core, Sl, qn, kn, u, beta, g, 1, C, Hk, Hv, dk, dv, 0, s);
            if (err == cudaSuccess)
                err = engk_gdn_norm_gate(core, core, gin + C, nin, nw, 1, Hv, dv, 1e-6f, s);
        }
        if (capturing) {
            const cudaError_t end = cudaStreamEndCapture(s, &graph);
            err = err != cudaSuccess ? err : end;
        }
        if (err == cudaSuccess)
            err = cudaGraphInstantiate(&exec, graph, 0);
        if (err == cudaSuccess)
            err = cudaGraphLaunch(exec, s); /* warm-up */
        if (err == cudaSuccess)
            err = cudaEventRecord(t[0], s);
        for (int r = 0; r < replays && err == cudaSuccess; r++)
            err = cudaGraphLaunch(exec, s);
        if (err == cudaSuccess)
            err = cudaEventRecord(t[1], s);
        if (err == cudaSuccess)
            err = cudaEventSynchronize(t[1]);
        if (err == cudaSuccess)
            err = cudaEventElapsedTime(&ms[phase], t[0], t[1]);
        if (exec)
            cudaGraphExecDestroy(exec);
        if (graph)
            cudaGraphDestroy(graph);
        if (err != cudaSuccess) {
            ms[phase] = -1e-3f * per * replays;
            ferr = ferr != cudaSuccess ? ferr : err;
            (void)cudaGetLastError(); /* a launch refused is not sticky: the next phases still run */
            if (cudaDeviceSynchronize() != cudaSuccess)
                first = err; /* a fault in a kernel is: stop */
        }
    }
    for (int i = 0; i < ENG_GDN_STEP_NTIMES; i++)
        us[i] = 1e3 * ms[i] / ((double)per * replays);
    for (int i = 0; i < 2; i++)
        if (t[i])
            cudaEventDestroy(t[i]);
    if (s)
        cudaStreamDestroy(s);
    cudaFree(buf);
    return first != cudaSuccess ? first : ferr;
}

cudaError_t engk_gdn_step_bench(int Hk, int Hv, int dk, int dv, int K, int layers, double *step_us,
                                double *unfused_us, int *fused)
{
    double us[ENG_GDN_STEP_NTIMES];
    const cudaError_t err = engk_gdn_step_times(Hk, Hv, dk, dv, K, layers, us, fused);
    *step_us = us[0];
    *unfused_us = us[ENG_GDN_TIME_UNFUSED];
    return err;
}

} // extern "C"
