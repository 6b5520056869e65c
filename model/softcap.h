/* Final logit softcapping (gemma4), shared by every stage that runs it on the host, and by the engine's device
 * kernel (engine/eng_gemma.cu), which includes this header to round it exactly as the host does.
 *
 * x = c * tanh(x / c): fp32 division, tanh in double rounded once to fp32, fp32 product. The double tanh is
 * rc_tanh below, not libm's: it uses only +, -, *, / and exact power-of-two scaling, each correctly rounded in
 * IEEE double on the CPU and on the GPU alike, so a host loop (C11, no contraction: GCC's default in ISO C and
 * -ffp-contract=off where set) and a CUDA kernel built with -fmad=false give the same bits for every input. libm's
 * tanh (within ~2 ulp of double) and CUDA's (within 1 ulp) do not agree bit for bit, so a device softcap on libm
 * would differ from the host's in the last fp32 bit now and then; with rc_tanh the engine's device logits equal
 * the host's in every memory mode (docs/architectures.md, "Final logit softcap"). */
#ifndef RC_SOFTCAP_H
#define RC_SOFTCAP_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define RC_SOFTCAP_FN static inline __host__ __device__
#else
#define RC_SOFTCAP_FN static inline
#endif

/* 2^-k for 0 <= k <= 64, exactly (the exponent field set directly). */
RC_SOFTCAP_FN double rc_pow2_neg(int k)
{
    const uint64_t b = (uint64_t)(1023 - k) << 52;
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)b);
#else
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
#endif
}

/* expm1(z) for -45 <= z <= 0: z = -k ln2 + r with ln2 in two parts (fdlibm's split: k ln2_hi exact for k < 2^21),
 * |r| <= ~0.35; expm1(r) by its Taylor series to r^13 (remainder < 2^-56 |r|) in Horner form; then
 * 2^-k expm1(r) + (2^-k - 1), both terms exact but the last sum. A few ulp of double. */
RC_SOFTCAP_FN double rc_expm1_neg(double z)
{
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    const double inv_ln2 = 1.44269504088896338700e+00;
    const int k = (int)(-z * inv_ln2 + 0.5);
    const double r = (z + (double)k * ln2_hi) + (double)k * ln2_lo;
    /* 1/n! for n = 13 down to 2 */
    const double c[12] = {1.6059043836821613e-10, 2.08767569878681e-09, 2.505210838544172e-08, 2.755731922398589e-07,
                          2.7557319223985893e-06, 2.48015873015873e-05, 1.984126984126984e-04, 1.388888888888889e-03,
                          8.333333333333333e-03, 4.1666666666666664e-02, 1.6666666666666666e-01, 0.5};
    double p = c[0];
    for (int i = 1; i < 12; i++)
        p = p * r + c[i];
    const double e = (p * r + 1.0) * r; /* expm1(r) */
    if (k == 0)
        return e;
    const double s = rc_pow2_neg(k);
    return s * e + (s - 1.0);
}

/* tanh(u) in double from rc_expm1_neg: tanh |u| = -t / (2 + t), t = expm1(-2 |u|); |u| < 2^-28: u (the next term,
 * u^3 / 3, is below half an ulp); |u| > 22: +-1 (1 - tanh 22 < 2^-62). NaN stays NaN. */
RC_SOFTCAP_FN double rc_tanh(double u)
{
    if (u != u)
        return u;
    const double a = u < 0.0 ? -u : u;
    double t;
    if (a > 22.0)
        t = 1.0;
    else if (a < 3.7252902984619140625e-09) /* 2^-28 */
        t = a;
    else {
        const double e = rc_expm1_neg(-2.0 * a);
        t = -e / (2.0 + e);
    }
    return u < 0.0 ? -t : t;
}

/* One logit: c * (float)rc_tanh((double)(x / c)). */
RC_SOFTCAP_FN float rc_softcap1(float x, float c) { return c * (float)rc_tanh((double)(x / c)); }

/* x[i] = rc_softcap1(x[i], c) for i < n. */
void rc_softcap(float *x, int64_t n, float c);

#endif
