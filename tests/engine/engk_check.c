/* Shared helpers of the engine kernel checkers (see engk_check.h). */
#include "engk_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_rng.h>

#include "eng_bw.h"
#include "gpu_skip.h"

void ekc_skip_unless_gpu(const char *test)
{
    gpu_skip_unless_present(test);
}

void ekc_cuda_ok(cudaError_t err, const char *call, const char *file, int line)
{
    if (err == cudaSuccess)
        return;
    printf("%s failed at %s:%d: %s\n", call, file, line, cudaGetErrorString(err));
    fflush(stdout);
    exit(1);
}

void *ekc_hmalloc(int64_t n, size_t size)
{
    void *p = calloc((size_t)(n > 0 ? n : 1), size);
    if (!p) {
        printf("out of host memory for %lld x %zu bytes\n", (long long)n, size);
        exit(1);
    }
    return p;
}

void ekc_fill(float *x, int64_t n, double lo, double hi, unsigned long seed)
{
    gsl_set_error_handler_off();
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (!r) {
        printf("gsl_rng_alloc failed\n");
        exit(1);
    }
    gsl_rng_set(r, seed);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * gsl_rng_uniform(r));
    gsl_rng_free(r);
}

double ekc_splitmix_unif(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

uint64_t ekc_xorshift64(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

void *ekc_dev_alloc(int64_t n, size_t size)
{
    void *d = NULL;
    EKC_CU(cudaMalloc(&d, (size_t)(n > 0 ? n : 1) * size));
    return d;
}

void ekc_poison(void *d, int64_t n, size_t size)
{
    if (n > 0)
        EKC_CU(cudaMemset(d, 0xff, (size_t)n * size));
}

void *ekc_to_dev(const void *h, int64_t n, size_t size)
{
    void *d = ekc_dev_alloc(n, size);
    if (n > 0)
        EKC_CU(cudaMemcpy(d, h, (size_t)n * size, cudaMemcpyHostToDevice));
    return d;
}

void ekc_from_dev(void *h, const void *d, int64_t n, size_t size)
{
    EKC_CU(cudaDeviceSynchronize());
    if (n > 0)
        EKC_CU(cudaMemcpy(h, d, (size_t)n * size, cudaMemcpyDeviceToHost));
}

void ekc_dev_free(void *d)
{
    EKC_CU(cudaFree(d));
}

void *ekc_dev_nan(int64_t n, size_t size)
{
    void *d = ekc_dev_alloc(n, size);
    ekc_poison(d, n, size);
    return d;
}

double ekc_ulp(float x)
{
    int e;
    if (x == 0.0f || !isfinite(x))
        return 0x1p-149;
    frexpf(x, &e); /* |x| = m 2^e, m in [0.5, 1): 24 significant bits */
    return fmax(ldexp(1.0, e - 24), 0x1p-149);
}

double ekc_ulp_bf16(double x)
{
    int e;
    if (x == 0.0 || !isfinite(x))
        return 0x1p-133;
    frexp(x, &e); /* 8 significant bits */
    return fmax(ldexp(1.0, e - 8), 0x1p-133);
}

int ekc_check(const char *what, const float *got, const float *want, const float *bound, const char *rule,
              int64_t n)
{
    int64_t bad = 0, nonfinite = 0;
    double worst = 0.0, worst_ulp = 0.0, worst_ratio = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double g = got[i], w = want[i], d = fabs(g - w);
        const int ok = bound ? isfinite(g) && d <= bound[i] : memcmp(&got[i], &want[i], sizeof got[i]) == 0;
        nonfinite += !isfinite(g);
        if (isfinite(g)) {
            worst = fmax(worst, d);
            worst_ulp = fmax(worst_ulp, d / ekc_ulp(want[i]));
            if (bound)
                worst_ratio = fmax(worst_ratio, bound[i] > 0 ? d / bound[i] : d > 0 ? INFINITY : 0.0);
        }
        if (!ok && bad++ < 4)
            printf("    [%lld] got %.9g want %.9g |diff| %.3e bound %.3e\n", (long long)i, g, w, d,
                   bound ? (double)bound[i] : 0.0);
    }
    if (bound)
        printf("  %-64s max|err| %.3e (%5.1f ulp, %4.2f of bound; bound %s)  %s\n", what, worst, worst_ulp,
               worst_ratio, rule, bad ? "FAIL" : "ok");
    else
        printf("  %-64s max|err| %.3e (bound: bit-equal to %s)  %s\n", what, worst, rule, bad ? "FAIL" : "ok");
    if (bad)
        printf("    %lld of %lld elements fail (%lld of them not finite: never written, or NaN/Inf)\n", (long long)bad,
               (long long)n, (long long)nonfinite);
    return bad > 0;
}

int64_t ekc_bits(const char *what, const float *got, const float *want, int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i]) != 0 && bad++ < 3)
            printf("    %s: [%lld] got %.9g want %.9g\n", what, (long long)i, got[i], want[i]);
    printf("  %-64s %s\n", what, bad ? "DIFFER" : "bit-identical");
    if (bad)
        printf("    %lld of %lld elements differ\n", (long long)bad, (long long)n);
    return bad;
}

double ekc_time_us(cudaError_t (*fn)(void *ctx), void *ctx)
{
    cudaEvent_t t0, t1;
    EKC_CU(cudaEventCreate(&t0));
    EKC_CU(cudaEventCreate(&t1));
    for (int i = 0; i < 2; i++)
        EKC_CU(fn(ctx));
    float ms = 0.0f;
    EKC_CU(cudaEventRecord(t0, 0));
    EKC_CU(fn(ctx));
    EKC_CU(cudaEventRecord(t1, 0));
    EKC_CU(cudaEventSynchronize(t1));
    EKC_CU(cudaEventElapsedTime(&ms, t0, t1));
    int reps = ms > 0.0f ? (int)(20.0f / ms) : 200; /* about 20 ms a batch */
    reps = reps < 3 ? 3 : reps > 200 ? 200 : reps;
    double best = INFINITY;
    for (int b = 0; b < 3; b++) {
        EKC_CU(cudaEventRecord(t0, 0));
        for (int i = 0; i < reps; i++)
            EKC_CU(fn(ctx));
        EKC_CU(cudaEventRecord(t1, 0));
        EKC_CU(cudaEventSynchronize(t1));
        EKC_CU(cudaEventElapsedTime(&ms, t0, t1));
        best = fmin(best, 1e3 * ms / reps);
    }
    EKC_CU(cudaEventDestroy(t0));
    EKC_CU(cudaEventDestroy(t1));
    return best;
}

double ekc_time_median_ms(cudaError_t (*fn)(void *ctx), void *ctx, int reps)
{
    enum { MAXREP = 64 };
    cudaEvent_t ev[MAXREP + 1];
    float t[MAXREP];
    reps = reps < 1 ? 1 : reps < MAXREP ? reps : MAXREP;
    for (int i = 0; i <= reps; i++)
        EKC_CU(cudaEventCreate(&ev[i]));
    for (int i = 0; i < 3; i++)
        EKC_CU(fn(ctx));
    EKC_CU(cudaEventRecord(ev[0], 0));
    for (int i = 0; i < reps; i++) {
        EKC_CU(fn(ctx));
        EKC_CU(cudaEventRecord(ev[i + 1], 0));
    }
    EKC_CU(cudaEventSynchronize(ev[reps]));
    for (int i = 0; i < reps; i++) {
        EKC_CU(cudaEventElapsedTime(&t[i], ev[i], ev[i + 1]));
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            const float tmp = t[j];
            t[j] = t[j - 1];
            t[j - 1] = tmp;
        }
    }
    for (int i = 0; i <= reps; i++)
        EKC_CU(cudaEventDestroy(ev[i]));
    return t[reps / 2];
}

double ekc_read_ceiling_gbs(void)
{
    double best = 0.0, median = 0.0;
    const char *what = "";
    int dev = 0;
    EKC_CU(cudaGetDevice(&dev));
    const cudaError_t err = engk_read_bandwidth(dev, (size_t)1 << 30, 10, &best, &median, &what);
    ekc_cuda_ok(err, what, __FILE__, __LINE__);
    return best / 1e9;
}
