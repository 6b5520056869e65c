/* The cuda stage's kernels: plain fp32 CUDA C, one thread per output element, one block per row or one per head. */
#include "kernels.h"

#include <math.h>

#include "fault.h"

#define EW_BLOCK 256   /* elementwise kernels */
#define NORM_BLOCK 256 /* rmsnorm: one block per row */
#define ATT_BLOCK 128  /* attention: one block per (query, head) */
#define DR_BLOCK 256   /* delta rule: one block per value head */
#define TILE 16        /* matmul tile edge */
#define MAX_GRID_Y 65535

static unsigned blocks_for(int64_t n)
{
    int64_t b = (n + EW_BLOCK - 1) / EW_BLOCK;
    return b > (1 << 20) ? (1u << 20) : (unsigned)b; /* grid-stride loops cover the rest */
}

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* Sum / max of v over the block; red holds blockDim.x floats (a power of two); every thread gets the result. */
static __device__ float block_sum(float v, float *red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

static __device__ float block_max(float v, float *red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

/* ---- embedding gather ---- */
static __global__ void embed_kernel(float *x, const float *embed, const int32_t *ids, int64_t T, int64_t hd,
                                    float scale)
{
    GRID_STRIDE(idx, T * hd) {
        const int64_t t = idx / hd, i = idx % hd;
        const float v = embed[(int64_t)ids[t] * hd + i];
        x[idx] = scale != 0.0f ? v * scale : v;
    }
}

/* ---- matmul: block (TILE, TILE) computes y[t0..t0+15, n0..n0+15] ---- */
static __global__ void matmul_kernel(float *y, const float *x, const float *W, const float *b, int64_t T, int64_t N,
                                     int64_t K)
{
    __shared__ float xs[TILE][TILE];     /* x[t0 + r, k0 + c] */
    __shared__ float ws[TILE][TILE + 1]; /* W[n0 + r, k0 + c] */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t t0 = (int64_t)blockIdx.y * TILE, n0 = (int64_t)blockIdx.x * TILE;
    const int64_t t = t0 + ty, n = n0 + tx;
    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += TILE) {
        const int64_t kc = k0 + tx;
        xs[ty][tx] = t < T && kc < K ? x[t * K + kc] : 0.0f;
        ws[ty][tx] = n0 + ty < N && kc < K ? W[(n0 + ty) * K + kc] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < TILE; kk++)
            acc += xs[ty][kk] * ws[tx][kk];
        __syncthreads();
    }
    if (t < T && n < N)
        y[t * N + n] = b ? acc + b[n] : acc;
}

/* ---- RMSNorm: block per row ---- */
static __global__ void rmsnorm_kernel(float *y, const float *x, const float *w, int64_t n, float eps,
                                      rc_norm_kind kind)
{
    __shared__ float red[NORM_BLOCK];
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        ss += xr[i] * xr[i];
    ss = block_sum(ss, red);
    const float ms = ss / (float)n;
    const float inv = 1.0f / sqrtf(ms + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float h = xr[i] * inv;
        switch (kind) {
        case RC_NORM_W: yr[i] = h * w[i]; break;
        case RC_NORM_1PW: yr[i] = h * (1.0f + w[i]); break;
        case RC_NORM_POW_W: yr[i] = h * w[i]; break;
        case RC_NORM_POW: yr[i] = h; break;
        }
    }
}

/* ---- RoPE: inv_freq comes from the model (model/rope.c); cos/sin in double rounded once, times the fp32
 * attention factor, as ref does; apply is fp32 ---- */
static __global__ void rope_table_kernel(float *cos_t, float *sin_t, const float *inv, float m, int64_t pos0,
                                         int64_t T, int rot_dim)
{
    const int half = rot_dim / 2;
    GRID_STRIDE(idx, T * half) {
        const int64_t t = idx / half;
        const int i = (int)(idx % half);
        const float a = (float)(pos0 + t) * inv[i];
        const float c = __fmul_rn((float)cos((double)a), m), s = __fmul_rn((float)sin((double)a), m);
        cos_t[t * rot_dim + i] = cos_t[t * rot_dim + i + half] = c;
        sin_t[t * rot_dim + i] = sin_t[t * rot_dim + i + half] = s;
    }
}

static __global__ void rope_apply_kernel(float *x, const float *cos_t, const float *sin_t, int64_t T, int n_heads,
                                         int head_dim, int rot_dim)
{
    const int half = rot_dim / 2;
    GRID_STRIDE(idx, T * n_heads * half) {
        const int i = (int)(idx % half);
        const int64_t th = idx / half, t = th / n_heads;
        float *v = x + th * head_dim;
        const float *c = cos_t + t * rot_dim, *s = sin_t + t * rot_dim;
        const float x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c[i] - x2 * s[i];
        v[i + half] = x2 * c[i + half] + x1 * s[i + half];
    }
}

/* ---- attention: block (t, h); shared memory = red[ATT_BLOCK] | q row [D] | scores [n_max] ---- */
static __global__ void attention_kernel(float *ctx, const float *q, const float *k, const float *v, int64_t S,
                                        int64_t q_pos0, int H, int Hkv, int D, float scale, int window)
{
    extern __shared__ float sm[];
    float *red = sm, *qs = sm + ATT_BLOCK, *p = sm + ATT_BLOCK + D;
    const int64_t t = blockIdx.x;
    const int h = blockIdx.y, kvh = h / (H / Hkv);
    const int64_t pos = q_pos0 + t;
    const int64_t lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    const int64_t hi = pos < S - 1 ? pos : S - 1;
    const int64_t n = hi - lo + 1;
    const float *qr = q + (t * H + h) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x)
        qs[d] = qr[d];
    __syncthreads();

    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const float *kr = k + ((lo + j) * Hkv + kvh) * D;
        float acc = 0.0f;
        for (int d = 0; d < D; d++)
            acc += qs[d] * kr[d];
        p[j] = acc * scale;
        mx = fmaxf(mx, p[j]);
    }
    mx = block_max(mx, red);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        p[j] = expf(p[j] - mx);
        sum += p[j];
    }
    sum = block_sum(sum, red);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        p[j] = p[j] / sum;
    __syncthreads();

    float *out = ctx + (t * H + h) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int64_t j = 0; j < n; j++)
            acc += p[j] * v[((lo + j) * Hkv + kvh) * D + d];
        out[d] = acc;
    }
}

/* ---- elementwise ---- */
static __device__ float act(float x, rc_act a)
{
    switch (a) {
    case RC_ACT_SILU: return x / (1.0f + expf(-x));
    case RC_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    }
    return x;
}

static __global__ void glu_kernel(float *out, const float *gate, const float *up, int64_t n, rc_act a)
{
    GRID_STRIDE(i, n) out[i] = act(gate[i], a) * up[i];
}

static __global__ void add_kernel(float *x, const float *y, int64_t n)
{
    GRID_STRIDE(i, n) x[i] += y[i];
}

static __global__ void softcap_kernel(float *x, int64_t n, float c)
{
    GRID_STRIDE(i, n) x[i] = c * tanhf(x[i] / c);
}

/* ---- elementwise pieces of the gated attention, gated delta net and per-layer-embedding paths ---- */
static __device__ float sigmoid_dev(float x)
{
    return (float)(1.0 / (1.0 + exp(-(double)x)));
}

static __device__ float softplus_dev(float x)
{
    return x > 20.0f ? x : (float)log1p(exp((double)x));
}

static __global__ void split_halves_kernel(float *a, float *b, const float *src, int64_t rows, int D)
{
    GRID_STRIDE(idx, rows * D) {
        const int64_t r = idx / D, i = idx % D;
        a[idx] = src[r * 2 * D + i];
        b[idx] = src[r * 2 * D + D + i];
    }
}

static __global__ void sigmoid_mul_kernel(float *x, const float *g, int64_t n)
{
    GRID_STRIDE(i, n) x[i] = x[i] * sigmoid_dev(g[i]);
}

static __global__ void act_kernel(float *x, int64_t n, rc_act a)
{
    GRID_STRIDE(i, n) x[i] = act(x[i], a);
}

static __global__ void glu_rows_kernel(float *g, const float *up, int64_t T, int n, int64_t ld, rc_act a)
{
    GRID_STRIDE(idx, T * n) {
        const int64_t t = idx / n, i = idx % n;
        g[idx] = act(g[idx], a) * up[t * ld + i];
    }
}

static __global__ void scale_kernel(float *y, const float *x, int64_t n, float s)
{
    GRID_STRIDE(i, n) y[i] = x[i] * s;
}

static __global__ void add_scale_kernel(float *x, const float *y, int64_t n, float s)
{
    GRID_STRIDE(i, n) x[i] = (x[i] + y[i]) * s;
}

/* ---- gated delta net ---- */
static __global__ void conv1d_causal_kernel(float *y, const float *x, const float *w, const float *state, int64_t T,
                                            int64_t C, int K)
{
    GRID_STRIDE(idx, T * C) {
        const int64_t t = idx / C, c = idx % C;
        float acc = 0.0f;
        for (int j = 0; j < K; j++) {
            const int64_t src = t - (K - 1) + j; /* < 0 reads the state (or zeros) */
            const float xv = src >= 0 ? x[src * C + c] : state ? state[(src + K - 1) * C + c] : 0.0f;
            acc += w[c * K + j] * xv;
        }
        y[idx] = acc;
    }
}

/* block (t, h): q/k of value head h are key head h / rep's slices of conv row t, l2-normed; q times qmul */
static __global__ void gdn_qk_kernel(float *q, float *k, const float *conv, int64_t C, int64_t Kd, int Hv, int rep,
                                     int dk, float qmul, float eps)
{
    __shared__ float red[NORM_BLOCK];
    const int64_t t = blockIdx.x;
    const int h = blockIdx.y;
    for (int which = 0; which < 2; which++) {
        const float *src = conv + t * C + (which ? Kd : 0) + (int64_t)(h / rep) * dk;
        float *dst = (which ? k : q) + (t * Hv + h) * dk;
        float ss = 0.0f;
        for (int i = threadIdx.x; i < dk; i += blockDim.x)
            ss += src[i] * src[i];
        ss = block_sum(ss, red);
        const float inv = 1.0f / sqrtf(ss + eps);
        for (int i = threadIdx.x; i < dk; i += blockDim.x)
            dst[i] = which ? src[i] * inv : (src[i] * inv) * qmul;
    }
}

static __global__ void gdn_gates_kernel(float *beta, float *g, const float *b, const float *a, const float *A_log,
                                        const float *dt_bias, int64_t T, int Hv)
{
    GRID_STRIDE(i, T * Hv) {
        const int h = (int)(i % Hv);
        beta[i] = sigmoid_dev(b[i]);
        g[i] = -(float)exp((double)A_log[h]) * softplus_dev(a[i] + dt_bias[h]);
    }
}

/* One block per value head h, chunk after chunk, in ref_delta_rule_chunked's order (HF's chunked form); the
 * block's threads share each step's independent elements; scratch holds that function's buffers per head. */
static __global__ void delta_rule_chunked_kernel(float *out, float *S_all, const float *q, const float *k,
                                                 const float *v, const float *g, const float *beta, int64_t T, int Hv,
                                                 int dk, int dv, int L, float *scratch_all, int64_t scratch_n)
{
    const int h = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
    float *S = S_all + (int64_t)h * dk * dv;
    float *qc = scratch_all + h * scratch_n, *kc = qc + L * dk, *kb = kc + L * dk, *kcd = kb + L * dk,
          *q2 = kcd + L * dk, *k2 = q2 + L * dk;                  /* [L, dk] each */
    float *vb = k2 + L * dk, *nv = vb + L * dv, *vn = nv + L * dv; /* [L, dv] each */
    float *pd = vn + L * dv, *ut = pd + L * L, *at = ut + L * L;   /* [L, L] each */
    float *cum = at + L * L, *ecum = cum + L, *gc = ecum + L, *bc = gc + L;
    for (int i = tid; i < dk * dv; i += nt)
        S[i] = 0.0f;
    for (int64_t c0 = 0; c0 < T; c0 += L) {
        const int n = T - c0 < L ? (int)(T - c0) : L; /* real rows; the rest is zero padding */
        __syncthreads();
        for (int r = tid; r < L; r += nt) {
            gc[r] = r < n ? g[(c0 + r) * Hv + h] : 0.0f;
            bc[r] = r < n ? beta[(c0 + r) * Hv + h] : 0.0f;
        }
        __syncthreads();
        for (int i = tid; i < L * dk; i += nt) {
            const int r = i / dk, d = i % dk;
            qc[i] = r < n ? q[((c0 + r) * Hv + h) * dk + d] : 0.0f;
            kc[i] = r < n ? k[((c0 + r) * Hv + h) * dk + d] : 0.0f;
            kb[i] = kc[i] * bc[r];
        }
        for (int i = tid; i < L * dv; i += nt) {
            const int r = i / dv, e = i % dv;
            vb[i] = (r < n ? v[((c0 + r) * Hv + h) * dv + e] : 0.0f) * bc[r];
        }
        if (tid == 0) {
            double run = 0.0; /* cumsum in double, as torch does on the CPU */
            for (int r = 0; r < L; r++) {
                run += gc[r];
                cum[r] = (float)run;
                ecum[r] = (float)exp((double)cum[r]);
            }
        }
        __syncthreads();
        for (int i = tid; i < L * L; i += nt) {
            const int r = i / L, s = i % L;
            const float p = s <= r ? (float)exp((double)(cum[r] - cum[s])) : 0.0f;
            float du = 0.0f, da = 0.0f;
            for (int d = 0; d < dk; d++) {
                du += kb[r * dk + d] * kc[s * dk + d];
                da += qc[r * dk + d] * kc[s * dk + d];
            }
            pd[i] = p;
            ut[i] = du * p;
            at[i] = da * p;
        }
        __syncthreads();
        /* unit lower-triangular solves, row after row: nv = M^-1 vb, kcd = M^-1 (kb * exp(cum)) */
        for (int r = 0; r < L; r++) {
            for (int i = tid; i < dv + dk; i += nt) {
                if (i < dv) {
                    float acc = vb[r * dv + i];
                    for (int s = 0; s < r; s++)
                        acc -= ut[r * L + s] * nv[s * dv + i];
                    nv[r * dv + i] = acc;
                } else {
                    const int d = i - dv;
                    float acc = kb[r * dk + d] * ecum[r];
                    for (int s = 0; s < r; s++)
                        acc -= ut[r * L + s] * kcd[s * dk + d];
                    kcd[r * dk + d] = acc;
                }
            }
            __syncthreads();
        }
        const float last = cum[L - 1], cdecay = (float)exp((double)last);
        for (int i = tid; i < L * dk; i += nt) {
            const int r = i / dk;
            q2[i] = qc[i] * ecum[r];
            k2[i] = kc[i] * (float)exp((double)(last - cum[r]));
        }
        for (int i = tid; i < L * dv; i += nt) {
            const int r = i / dv, e = i % dv;
            float acc = 0.0f;
            for (int d = 0; d < dk; d++)
                acc += kcd[r * dk + d] * S[d * dv + e];
            vn[i] = nv[i] - acc;
        }
        __syncthreads();
        for (int i = tid; i < n * dv; i += nt) {
            const int r = i / dv, e = i % dv;
            float inter = 0.0f, intra = 0.0f;
            for (int d = 0; d < dk; d++)
                inter += q2[r * dk + d] * S[d * dv + e];
            for (int s = 0; s < L; s++)
                intra += at[r * L + s] * vn[s * dv + e];
            out[((c0 + r) * Hv + h) * dv + e] = inter + intra;
        }
        __syncthreads();
        for (int i = tid; i < dk * dv; i += nt) {
            const int d = i / dv, e = i % dv;
            float acc = 0.0f;
            for (int r = 0; r < L; r++)
                acc += k2[r * dk + d] * vn[r * dv + e];
            S[i] = S[i] * cdecay + acc;
        }
    }
}

/* block per row: y = N_w(x; w) * silu(z), norm first */
static __global__ void rmsnorm_gated_kernel(float *y, const float *x, const float *z, const float *w, int64_t n,
                                            float eps)
{
    __shared__ float red[NORM_BLOCK];
    const int64_t off = (int64_t)blockIdx.x * n;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        ss += x[off + i] * x[off + i];
    ss = block_sum(ss, red);
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        y[off + i] = (x[off + i] * inv * w[i]) * act(z[off + i], RC_ACT_SILU);
}

/* ---- host wrappers ---- */
extern "C" {

cudaError_t cuda_k_embed(float *x, const float *embed, const int32_t *ids, int64_t T, int64_t hd, float scale)
{
    if (T < 0 || hd < 0)
        return cudaErrorInvalidValue;
    if (T == 0 || hd == 0)
        return cudaSuccess;
    embed_kernel<<<blocks_for(T * hd), EW_BLOCK>>>(x, embed, ids, T, hd, scale);
    return cudaGetLastError();
}

cudaError_t cuda_k_matmul(float *y, const float *x, const float *W, const float *b, int64_t T, int64_t N, int64_t K)
{
    if (T < 0 || N < 0 || K < 0 || (T + TILE - 1) / TILE > MAX_GRID_Y || (N + TILE - 1) / TILE > INT32_MAX)
        return cudaErrorInvalidValue;
    if (T == 0 || N == 0)
        return cudaSuccess;
    const dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((T + TILE - 1) / TILE)), block(TILE, TILE);
    if (rc_fault_active("cuda_matmul_bias_dropped")) /* fault: the launcher forgets the bias */
        b = NULL;
    matmul_kernel<<<grid, block>>>(y, x, W, b, T, N, K);
    return cudaGetLastError();
}

cudaError_t cuda_k_rmsnorm(float *y, const float *x, const float *w, int64_t rows, int64_t n, float eps,
                           rc_norm_kind kind)
{
    if (rows < 0 || rows > INT32_MAX || n < 1 || (kind != RC_NORM_POW && !w))
        return cudaErrorInvalidValue;
    if (rows == 0)
        return cudaSuccess;
    rmsnorm_kernel<<<(unsigned)rows, NORM_BLOCK>>>(y, x, w, n, eps, kind);
    return cudaGetLastError();
}

cudaError_t cuda_k_rope_table(float *cos_t, float *sin_t, const float *inv, float attn_factor, int64_t pos0, int64_t T,
                              int rot_dim)
{
    if (T < 0 || pos0 < 0 || rot_dim < 0 || rot_dim % 2)
        return cudaErrorInvalidValue;
    if (T == 0 || rot_dim == 0)
        return cudaSuccess;
    rope_table_kernel<<<blocks_for(T * (rot_dim / 2)), EW_BLOCK>>>(cos_t, sin_t, inv, attn_factor, pos0, T, rot_dim);
    return cudaGetLastError();
}

cudaError_t cuda_k_rope_apply(float *x, const float *cos_t, const float *sin_t, int64_t T, int n_heads, int head_dim,
                              int rot_dim)
{
    if (T < 0 || n_heads < 0 || rot_dim < 0 || rot_dim % 2 || rot_dim > head_dim)
        return cudaErrorInvalidValue;
    const int64_t n = T * n_heads * (rot_dim / 2);
    if (n == 0)
        return cudaSuccess;
    rope_apply_kernel<<<blocks_for(n), EW_BLOCK>>>(x, cos_t, sin_t, T, n_heads, head_dim, rot_dim);
    return cudaGetLastError();
}

size_t cuda_k_attention_smem(int64_t S, int window, int D)
{
    const int64_t n_max = window > 0 && window < S ? window : S;
    return (size_t)(ATT_BLOCK + D + (n_max > 0 ? n_max : 0)) * sizeof(float);
}

cudaError_t cuda_k_attention(float *ctx, const float *q, const float *k, const float *v, int64_t T, int64_t S,
                             int64_t q_pos0, int H, int Hkv, int D, float scale, int window)
{
    if (T < 0 || T > INT32_MAX || S < 0 || q_pos0 < 0 || H < 1 || H > MAX_GRID_Y || Hkv < 1 || H % Hkv || D < 1 ||
        window < 0)
        return cudaErrorInvalidValue;
    if (T == 0)
        return cudaSuccess;
    const size_t smem = cuda_k_attention_smem(S, window, D);
    if (smem > 48 * 1024) {
        cudaError_t err = cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               (int)(smem > INT32_MAX ? INT32_MAX : smem));
        if (err != cudaSuccess)
            return err;
    }
    const dim3 grid((unsigned)T, (unsigned)H);
    if (rc_fault_active("cuda_attn_no_scale")) /* fault: the launcher drops the 1/sqrt(d) scale */
        scale = 1.0f;
    attention_kernel<<<grid, ATT_BLOCK, smem>>>(ctx, q, k, v, S, q_pos0, H, Hkv, D, scale, window);
    return cudaGetLastError();
}

cudaError_t cuda_k_glu(float *out, const float *gate, const float *up, int64_t n, rc_act act)
{
    if (n < 0)
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    glu_kernel<<<blocks_for(n), EW_BLOCK>>>(out, gate, up, n, act);
    return cudaGetLastError();
}

cudaError_t cuda_k_add(float *x, const float *y, int64_t n)
{
    if (n < 0)
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    add_kernel<<<blocks_for(n), EW_BLOCK>>>(x, y, n);
    return cudaGetLastError();
}

cudaError_t cuda_k_softcap(float *x, int64_t n, float c)
{
    if (n < 0 || c == 0.0f)
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    softcap_kernel<<<blocks_for(n), EW_BLOCK>>>(x, n, c);
    return cudaGetLastError();
}

/* An elementwise launch over n items: invalid for n < 0, nothing for n == 0. */
#define EW_LAUNCH(kernel, n, ...) \
    do { \
        if ((n) < 0) \
            return cudaErrorInvalidValue; \
        if ((n) == 0) \
            return cudaSuccess; \
        kernel<<<blocks_for(n), EW_BLOCK>>>(__VA_ARGS__); \
        return cudaGetLastError(); \
    } while (0)

cudaError_t cuda_k_split_halves(float *a, float *b, const float *src, int64_t rows, int D)
{
    if (rows < 0 || D < 0)
        return cudaErrorInvalidValue;
    EW_LAUNCH(split_halves_kernel, rows * D, a, b, src, rows, D);
}

cudaError_t cuda_k_sigmoid_mul(float *x, const float *g, int64_t n)
{
    EW_LAUNCH(sigmoid_mul_kernel, n, x, g, n);
}

cudaError_t cuda_k_act(float *x, int64_t n, rc_act a)
{
    EW_LAUNCH(act_kernel, n, x, n, a);
}

cudaError_t cuda_k_glu_rows(float *g, const float *up, int64_t T, int n, int64_t ld, rc_act a)
{
    if (T < 0 || n < 0 || ld < n)
        return cudaErrorInvalidValue;
    EW_LAUNCH(glu_rows_kernel, T * n, g, up, T, n, ld, a);
}

cudaError_t cuda_k_scale(float *y, const float *x, int64_t n, float s)
{
    EW_LAUNCH(scale_kernel, n, y, x, n, s);
}

cudaError_t cuda_k_add_scale(float *x, const float *y, int64_t n, float s)
{
    EW_LAUNCH(add_scale_kernel, n, x, y, n, s);
}

cudaError_t cuda_k_conv1d_causal(float *y, const float *x, const float *w, const float *state, int64_t T, int64_t C,
                                 int K)
{
    if (T < 0 || C < 0 || K < 1)
        return cudaErrorInvalidValue;
    EW_LAUNCH(conv1d_causal_kernel, T * C, y, x, w, state, T, C, K);
}

cudaError_t cuda_k_gdn_qk(float *q, float *k, const float *conv, int64_t T, int64_t C, int Hk, int Hv, int dk,
                          float qmul, float eps)
{
    if (T < 0 || T > INT32_MAX || Hk < 1 || Hv < 1 || Hv % Hk || Hv > MAX_GRID_Y || dk < 1 ||
        C < 2 * (int64_t)Hk * dk)
        return cudaErrorInvalidValue;
    if (T == 0)
        return cudaSuccess;
    const dim3 grid((unsigned)T, (unsigned)Hv);
    gdn_qk_kernel<<<grid, NORM_BLOCK>>>(q, k, conv, C, (int64_t)Hk * dk, Hv, Hv / Hk, dk, qmul, eps);
    return cudaGetLastError();
}

cudaError_t cuda_k_gdn_gates(float *beta, float *g, const float *b, const float *a, const float *A_log,
                             const float *dt_bias, int64_t T, int Hv)
{
    if (T < 0 || Hv < 1)
        return cudaErrorInvalidValue;
    EW_LAUNCH(gdn_gates_kernel, T * Hv, beta, g, b, a, A_log, dt_bias, T, Hv);
}

int64_t cuda_k_delta_rule_scratch(int dk, int dv, int chunk)
{
    return (int64_t)chunk * (6 * (int64_t)dk + 3 * (int64_t)dv + 3 * (int64_t)chunk + 4);
}

cudaError_t cuda_k_delta_rule_chunked(float *out, float *S, const float *q, const float *k, const float *v,
                                      const float *g, const float *beta, int64_t T, int Hv, int dk, int dv, int chunk,
                                      float *scratch)
{
    if (T < 0 || Hv < 1 || Hv > INT32_MAX || dk < 1 || dv < 1 || chunk < 1 ||
        (int64_t)chunk * (dk > dv ? dk : dv) > INT32_MAX || (int64_t)chunk * chunk > INT32_MAX ||
        (int64_t)dk * dv > INT32_MAX)
        return cudaErrorInvalidValue;
    delta_rule_chunked_kernel<<<(unsigned)Hv, DR_BLOCK>>>(out, S, q, k, v, g, beta, T, Hv, dk, dv, chunk, scratch,
                                                          cuda_k_delta_rule_scratch(dk, dv, chunk));
    return cudaGetLastError();
}

cudaError_t cuda_k_rmsnorm_gated(float *y, const float *x, const float *z, const float *w, int64_t rows, int64_t n,
                                 float eps)
{
    if (rows < 0 || rows > INT32_MAX || n < 1 || !w)
        return cudaErrorInvalidValue;
    if (rows == 0)
        return cudaSuccess;
    rmsnorm_gated_kernel<<<(unsigned)rows, NORM_BLOCK>>>(y, x, z, w, n, eps);
    return cudaGetLastError();
}

} /* extern "C" */
