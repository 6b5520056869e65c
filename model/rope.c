/* RoPE inverse frequencies and cos/sin rows (see rope.h). Each formula follows transformers'
 * modeling_rope_utils operation by operation in fp32 (a Python scalar meets an fp32 tensor as an fp32
 * value; `s / t` is reciprocal(t) * s), so the buffer is bit-identical to HF's. */
#include "rope.h"

#include <math.h>

/* fl32(theta ** fl32(fl32(2i) / fl32(E))): HF's default frequency denominator */
static float rope_pow(const rc_rope_desc *r, int i)
{
    const float ex = (float)(2 * i) / (float)r->exp_den;
    return (float)pow((double)(float)r->theta, (double)ex);
}

static void inv_llama3(float *inv, const rc_rope_desc *r)
{
    const float factor = (float)r->factor, lff = (float)r->low_freq_factor;
    const float low_wl = (float)(r->original_max_pos / r->low_freq_factor);
    const float high_wl = (float)(r->original_max_pos / r->high_freq_factor);
    const float band = (float)(r->high_freq_factor - r->low_freq_factor), omp = (float)r->original_max_pos;
    const float two_pi = (float)(2 * M_PI);
    for (int i = 0; i < r->n_freq; i++) {
        const float f = 1.0f / rope_pow(r, i);
        const float wl = (1.0f / f) * two_pi;
        const float v = wl > low_wl ? f / factor : f;
        const float smooth = ((1.0f / wl) * omp - lff) / band;
        const float smoothed = (1.0f - smooth) * v / factor + smooth * v;
        inv[i] = !(wl < high_wl) && !(wl > low_wl) ? smoothed : v;
    }
}

/* the rotary dimension at which a frequency makes `rot` turns over the original context (double, as Python) */
static double yarn_dim(double rot, int dim, double theta, double omp)
{
    return (dim * log(omp / (rot * 2 * M_PI))) / (2 * log(theta));
}

static void inv_yarn(float *inv, const rc_rope_desc *r)
{
    const int dim = r->exp_den;
    double lo = yarn_dim(r->beta_fast, dim, r->theta, r->original_max_pos);
    double hi = yarn_dim(r->beta_slow, dim, r->theta, r->original_max_pos);
    if (r->truncate) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    lo = lo > 0 ? lo : 0;
    hi = hi < dim - 1 ? hi : dim - 1;
    if (lo == hi)
        hi += 0.001; /* HF: prevent singularity */
    const float lo32 = (float)lo, span = (float)(hi - lo), factor = (float)r->factor;
    for (int i = 0; i < r->n_freq; i++) {
        const float p = rope_pow(r, i);
        const float extrap = 1.0f / p, interp = 1.0f / (factor * p);
        float ramp = ((float)i - lo32) / span;
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        const float ef = 1.0f - ramp; /* extrapolation weight */
        inv[i] = interp * (1.0f - ef) + extrap * ef;
    }
}

void rc_rope_inv_freq(float *inv, const rc_rope_desc *r)
{
    for (int i = 0; i < r->rot_dim / 2; i++)
        inv[i] = 0.0f;
    switch (r->type) {
    case RC_ROPE_LLAMA3: inv_llama3(inv, r); return;
    case RC_ROPE_YARN: inv_yarn(inv, r); return;
    case RC_ROPE_DEFAULT:
    case RC_ROPE_PROPORTIONAL:
    case RC_ROPE_LINEAR:
        for (int i = 0; i < r->n_freq; i++) {
            const float f = 1.0f / rope_pow(r, i);
            inv[i] = r->factor != 1.0 ? f / (float)r->factor : f;
        }
        return;
    }
}

float rc_rope_attn_factor(const rc_rope_desc *r)
{
    return r->type == RC_ROPE_YARN ? (float)r->attn_factor : 1.0f;
}

void rc_rope_table(float *cos_t, float *sin_t, const float *inv, const rc_rope_desc *r, int64_t pos0, int64_t T)
{
    const int rot_dim = r->rot_dim, half = rot_dim / 2;
    const float m = rc_rope_attn_factor(r);
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            const float a = (float)(pos0 + t) * inv[i];
            const float c = (float)cos((double)a) * m, s = (float)sin((double)a) * m;
            cos_t[t * rot_dim + i] = cos_t[t * rot_dim + i + half] = c;
            sin_t[t * rot_dim + i] = sin_t[t * rot_dim + i + half] = s;
        }
}
