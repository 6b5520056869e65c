/* Reference ops (see ops.h). */
#include "ops.h"

#include <math.h>

#include "fault.h"

void ref_matmul(float *y, const float *x, const float *W, const float *b, int64_t T, int64_t N, int64_t K)
{
    /* threads split the output elements only: each is the same serial loop, so the bits do not change */
#ifdef _OPENMP
#pragma omp parallel for collapse(2) schedule(static) if (T * N * K > REF_OMP_MIN_MACS)
#endif
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            const float *xr = x + t * K, *wr = W + n * K;
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)xr[k] * (double)wr[k];
            float v = (float)acc;
            y[t * N + n] = b ? v + b[n] : v;
        }
}

void ref_rmsnorm(float *y, const float *x, const float *w, int64_t rows, int64_t n, float eps, rc_norm_kind kind)
{
    const int f_eps = rc_fault_active("rmsnorm_eps_outside");
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++)
            ss += (double)xr[i] * (double)xr[i];
        float ms = (float)(ss / (double)n);
        float inv = (float)(1.0 / sqrt((double)(ms + eps)));
        if (f_eps) /* fault: 1 / (sqrt(ms) + eps) */
            inv = (float)(1.0 / (sqrt((double)ms) + eps));
        for (int64_t i = 0; i < n; i++) {
            float h = xr[i] * inv;
            switch (kind) {
            case RC_NORM_W: yr[i] = h * w[i]; break;
            case RC_NORM_1PW: yr[i] = h * (1.0f + w[i]); break;
            case RC_NORM_POW_W: yr[i] = h * w[i]; break;
            case RC_NORM_POW: yr[i] = h; break;
            }
        }
    }
}

void ref_rope_apply(float *x, const float *cos_t, const float *sin_t, int64_t T, int n_heads, int head_dim,
                    int rot_dim)
{
    const int half = rot_dim / 2;
    const int f_pairs = rc_fault_active("rope_interleaved");        /* fault: pairs (2i, 2i+1) */
    const float f_sg = rc_fault_active("rope_sin_sign") ? -1.0f : 1.0f; /* fault: rotation the wrong way */
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (t * n_heads + h) * head_dim;
            const float *c = cos_t + t * rot_dim, *s = sin_t + t * rot_dim;
            for (int i = 0; i < half && f_pairs; i++) {
                float x1 = v[2 * i], x2 = v[2 * i + 1];
                v[2 * i] = x1 * c[i] - x2 * s[i];
                v[2 * i + 1] = x2 * c[i] + x1 * s[i];
            }
            for (int i = 0; i < half && !f_pairs; i++) {
                float x1 = v[i], x2 = v[i + half];
                float a = x1 * c[i], b = -x2 * (f_sg * s[i]);
                float a2 = x2 * c[i + half], b2 = x1 * (f_sg * s[i + half]);
                v[i] = a + b;
                v[i + half] = a2 + b2;
            }
        }
}

void ref_softmax(float *x, int64_t n)
{
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    if (rc_fault_active("softmax_no_max")) { /* fault: no max subtraction; the +100 shift, a no-op for a */
        for (int64_t i = 0; i < n; i++)      /* correct softmax, overflows exp as large logits would */
            x[i] += 100.0f;
        mx = 0.0f;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float ev = (float)exp((double)(x[i] - mx));
        x[i] = ev;
        sum += ev;
    }
    float s = (float)sum;
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] / s;
}

void ref_attention(float *ctx, const float *q, const float *k, const float *v, int64_t T, int64_t S, int64_t q_pos0,
                   int H, int Hkv, int D, float scale, int window, float *scratch)
{
    const int G = H / Hkv;
    const int f_gqa = rc_fault_active("gqa_head_map"), f_mask = rc_fault_active("causal_off_by_one");
    if (rc_fault_active("attn_no_scale")) /* fault: the 1/sqrt(d) scale dropped */
        scale = 1.0f;
    float *p = scratch;
    for (int64_t t = 0; t < T; t++) {
        const int64_t pos = q_pos0 + t, last = f_mask ? pos + 1 : pos; /* fault: one future key visible */
        const int64_t lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
        const int64_t hi = last < S - 1 ? last : S - 1;
        for (int h = 0; h < H; h++) {
            const float *qv = q + (t * H + h) * D;
            const int kvh = f_gqa ? h % Hkv : h / G; /* fault: heads dealt round-robin */
            int64_t n = 0;
            for (int64_t j = lo; j <= hi; j++, n++) {
                const float *kv = k + (j * Hkv + kvh) * D;
                double acc = 0.0;
                for (int d = 0; d < D; d++)
                    acc += (double)qv[d] * (double)kv[d];
                p[n] = (float)acc * scale;
            }
            ref_softmax(p, n);
            float *out = ctx + (t * H + h) * D;
            for (int d = 0; d < D; d++) {
                double acc = 0.0;
                for (int64_t j = lo, i = 0; j <= hi; j++, i++)
                    acc += (double)p[i] * (double)v[(j * Hkv + kvh) * D + d];
                out[d] = (float)acc;
            }
        }
    }
}

float ref_act(float x, rc_act act)
{
    double d = x;
    switch (act) {
    case RC_ACT_SILU: return (float)(d / (1.0 + exp(-d)));
    case RC_ACT_GELU_TANH: return (float)(0.5 * d * (1.0 + tanh(sqrt(2.0 / M_PI) * (d + 0.044715 * d * d * d))));
    }
    return x;
}

void ref_glu(float *out, const float *gate, const float *up, int64_t n, rc_act act)
{
    if (rc_fault_active("mlp_gate_up_swapped")) { /* fault: act(up) * gate */
        const float *tmp = gate;
        gate = up;
        up = tmp;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = ref_act(gate[i], act) * up[i];
}

float ref_sigmoid(float x)
{
    return (float)(1.0 / (1.0 + exp(-(double)x)));
}

float ref_softplus(float x)
{
    return x > 20.0f ? x : (float)log1p(exp((double)x));
}

void ref_l2norm(float *y, const float *x, int64_t rows, int64_t n, float eps)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++)
            ss += (double)xr[i] * (double)xr[i];
        float inv = (float)(1.0 / sqrt((double)((float)ss + eps)));
        for (int64_t i = 0; i < n; i++)
            y[r * n + i] = xr[i] * inv;
    }
}

void ref_rmsnorm_gated(float *y, const float *x, const float *z, const float *w, int64_t rows, int64_t n, float eps)
{
    ref_rmsnorm(y, x, w, rows, n, eps, RC_NORM_W);
    for (int64_t i = 0; i < rows * n; i++)
        y[i] = y[i] * ref_act(z[i], RC_ACT_SILU);
}

void ref_conv1d_causal(float *y, const float *x, const float *w, const float *state, int64_t T, int64_t C, int K)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) {
            double acc = 0.0;
            for (int j = 0; j < K; j++) {
                int64_t src = t - (K - 1) + j; /* row index; < 0 reads the state (or zeros) */
                float xv = src >= 0 ? x[src * C + c] : state ? state[(src + K - 1) * C + c] : 0.0f;
                acc += (double)w[c * K + j] * (double)xv;
            }
            y[t * C + c] = (float)acc;
        }
}

void ref_delta_rule_step(float *S, float *out, const float *q, const float *k, const float *v, float g, float beta,
                         int dk, int dv)
{
    const float decay = (float)exp((double)g);
    for (int i = 0; i < dk * dv; i++)
        S[i] *= decay;
    for (int e = 0; e < dv; e++) {
        double mem = 0.0; /* (S^T k)[e] */
        for (int d = 0; d < dk; d++)
            mem += (double)S[d * dv + e] * (double)k[d];
        float delta = (v[e] - (float)mem) * beta;
        for (int d = 0; d < dk; d++)
            S[d * dv + e] += k[d] * delta;
    }
    for (int e = 0; e < dv; e++) {
        double acc = 0.0;
        for (int d = 0; d < dk; d++)
            acc += (double)S[d * dv + e] * (double)q[d];
        out[e] = (float)acc;
    }
}

int64_t ref_delta_rule_chunked_scratch(int dk, int dv, int chunk)
{
    return (int64_t)chunk * (6 * (int64_t)dk + 3 * (int64_t)dv + 3 * (int64_t)chunk + 4);
}

/* dot of two fp32 rows, in double, rounded once */
static float dot_f(const float *a, const float *b, int n)
{
    double acc = 0.0;
    for (int i = 0; i < n; i++)
        acc += (double)a[i] * (double)b[i];
    return (float)acc;
}

void ref_delta_rule_chunked(float *out, float *S, const float *q, const float *k, const float *v, const float *g,
                            const float *beta, int64_t T, int dk, int dv, int chunk, float *scratch)
{
    const int L = chunk;
    float *qc = scratch, *kc = qc + L * dk, *kb = kc + L * dk, *kcd = kb + L * dk, *q2 = kcd + L * dk,
          *k2 = q2 + L * dk;                                      /* [L, dk] each */
    float *vb = k2 + L * dk, *nv = vb + L * dv, *vn = nv + L * dv; /* [L, dv] each */
    float *pd = vn + L * dv, *ut = pd + L * L, *at = ut + L * L;   /* [L, L] each */
    float *cum = at + L * L, *ecum = cum + L, *gc = ecum + L, *bc = gc + L;
    for (int64_t c0 = 0; c0 < T; c0 += L) {
        const int n = T - c0 < L ? (int)(T - c0) : L; /* real rows; the rest is zero padding */
        /* phase 1: intra-chunk quantities (HF computes them for all chunks first; they do not depend on S) */
        for (int r = 0; r < L; r++) {
            const int real = r < n;
            gc[r] = real ? g[c0 + r] : 0.0f;
            bc[r] = real ? beta[c0 + r] : 0.0f;
            for (int d = 0; d < dk; d++) {
                qc[r * dk + d] = real ? q[(c0 + r) * dk + d] : 0.0f;
                kc[r * dk + d] = real ? k[(c0 + r) * dk + d] : 0.0f;
                kb[r * dk + d] = kc[r * dk + d] * bc[r];
            }
            for (int e = 0; e < dv; e++)
                vb[r * dv + e] = (real ? v[(c0 + r) * dv + e] : 0.0f) * bc[r];
        }
        double run = 0.0; /* cumsum: torch accumulates in double on the CPU */
        for (int r = 0; r < L; r++) {
            run += gc[r];
            cum[r] = (float)run;
            ecum[r] = (float)exp((double)cum[r]);
        }
        for (int r = 0; r < L; r++)
            for (int s = 0; s < L; s++) {
                pd[r * L + s] = s <= r ? (float)exp((double)(cum[r] - cum[s])) : 0.0f;
                ut[r * L + s] = dot_f(kb + r * dk, kc + s * dk, dk) * pd[r * L + s];
                at[r * L + s] = dot_f(qc + r * dk, kc + s * dk, dk) * pd[r * L + s];
            }
        /* unit lower-triangular solves (strictly lower part of ut): nv = M^-1 vb, kcd = M^-1 (kb * exp(cum)) */
        for (int r = 0; r < L; r++) {
            for (int e = 0; e < dv; e++) {
                double acc = vb[r * dv + e];
                for (int s = 0; s < r; s++)
                    acc -= (double)ut[r * L + s] * (double)nv[s * dv + e];
                nv[r * dv + e] = (float)acc;
            }
            for (int d = 0; d < dk; d++) {
                double acc = kb[r * dk + d] * ecum[r];
                for (int s = 0; s < r; s++)
                    acc -= (double)ut[r * L + s] * (double)kcd[s * dk + d];
                kcd[r * dk + d] = (float)acc;
            }
        }
        const float last = cum[L - 1], cdecay = (float)exp((double)last);
        for (int r = 0; r < L; r++) {
            const float kdec = (float)exp((double)(last - cum[r]));
            for (int d = 0; d < dk; d++) {
                q2[r * dk + d] = qc[r * dk + d] * ecum[r];
                k2[r * dk + d] = kc[r * dk + d] * kdec;
            }
        }
        /* phase 2: read and update the state */
        for (int r = 0; r < L; r++)
            for (int e = 0; e < dv; e++) {
                double acc = 0.0;
                for (int d = 0; d < dk; d++)
                    acc += (double)kcd[r * dk + d] * (double)S[d * dv + e];
                vn[r * dv + e] = nv[r * dv + e] - (float)acc;
            }
        for (int r = 0; r < n; r++)
            for (int e = 0; e < dv; e++) {
                double inter = 0.0, intra = 0.0;
                for (int d = 0; d < dk; d++)
                    inter += (double)q2[r * dk + d] * (double)S[d * dv + e];
                for (int s = 0; s < L; s++)
                    intra += (double)at[r * L + s] * (double)vn[s * dv + e];
                out[(c0 + r) * dv + e] = (float)inter + (float)intra;
            }
        for (int d = 0; d < dk; d++)
            for (int e = 0; e < dv; e++) {
                double acc = 0.0;
                for (int r = 0; r < L; r++)
                    acc += (double)k2[r * dk + d] * (double)vn[r * dv + e];
                S[d * dv + e] = S[d * dv + e] * cdecay + (float)acc;
            }
    }
}
