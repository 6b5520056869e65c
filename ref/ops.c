/* Reference ops (see ops.h). */
#include "ops.h"

#include <math.h>

void ref_matmul(float *y, const float *x, const float *W, const float *b, int64_t T, int64_t N, int64_t K)
{
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
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++)
            ss += (double)xr[i] * (double)xr[i];
        float ms = (float)(ss / (double)n);
        float inv = (float)(1.0 / sqrt((double)(ms + eps)));
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

void ref_rope_inv_freq(float *inv, const rc_rope_desc *r)
{
    for (int i = 0; i < r->rot_dim / 2; i++) {
        if (i >= r->n_freq) {
            inv[i] = 0.0f;
            continue;
        }
        float ex = (float)(2 * i) / (float)r->exp_den;
        float p = (float)pow((double)(float)r->theta, (double)ex);
        float f = 1.0f / p;
        inv[i] = r->factor != 1.0 ? f / (float)r->factor : f;
    }
}

void ref_rope_table(float *cos_t, float *sin_t, const float *inv, int64_t pos0, int64_t T, int rot_dim)
{
    const int half = rot_dim / 2;
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            float a = (float)(pos0 + t) * inv[i];
            float c = (float)cos((double)a), s = (float)sin((double)a);
            cos_t[t * rot_dim + i] = cos_t[t * rot_dim + i + half] = c;
            sin_t[t * rot_dim + i] = sin_t[t * rot_dim + i + half] = s;
        }
}

void ref_rope_apply(float *x, const float *cos_t, const float *sin_t, int64_t T, int n_heads, int head_dim,
                    int rot_dim)
{
    const int half = rot_dim / 2;
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (t * n_heads + h) * head_dim;
            const float *c = cos_t + t * rot_dim, *s = sin_t + t * rot_dim;
            for (int i = 0; i < half; i++) {
                float x1 = v[i], x2 = v[i + half];
                float a = x1 * c[i], b = -x2 * s[i];
                float a2 = x2 * c[i + half], b2 = x1 * s[i + half];
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
    float *p = scratch;
    for (int64_t t = 0; t < T; t++) {
        const int64_t pos = q_pos0 + t;
        const int64_t lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
        const int64_t hi = pos < S - 1 ? pos : S - 1;
        for (int h = 0; h < H; h++) {
            const float *qv = q + (t * H + h) * D;
            const int kvh = h / G;
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
    for (int64_t i = 0; i < n; i++)
        out[i] = ref_act(gate[i], act) * up[i];
}

void ref_softcap(float *x, int64_t n, float c)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = c * (float)tanh((double)(x[i] / c));
}
