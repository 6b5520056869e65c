/* Token sampling (see eng_sample.h). */
#include "eng_sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void eng_sampler_init(eng_sampler *s, double temperature, int64_t top_k, double top_p, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->temperature = temperature;
    s->top_k = top_k;
    s->top_p = top_p;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s->s[i] = splitmix64(&x);
}

void eng_sampler_free(eng_sampler *s)
{
    free(s->idx);
    free(s->p);
    s->idx = NULL;
    s->p = NULL;
    s->cap = 0;
}

double eng_sampler_uniform(eng_sampler *s)
{
    uint64_t *q = s->s;
    const uint64_t r = rotl(q[1] * 5, 7) * 9, t = q[1] << 17;
    q[2] ^= q[0];
    q[3] ^= q[1];
    q[1] ^= q[2];
    q[0] ^= q[3];
    q[2] ^= t;
    q[3] = rotl(q[3], 45);
    return (double)(r >> 11) * 0x1.0p-53;
}

int32_t eng_argmax(const float *x, int64_t V)
{
    int64_t best = -1;
    for (int64_t i = 0; i < V; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
            best = i;
    return (int32_t)best;
}

int eng_sampler_greedy(const eng_sampler *s) { return !(s->temperature > 0) || s->top_k == 1; }

/* a before b: larger logit, then smaller id. */
static int before(const float *x, int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); }

/* Keeps the k best of idx[0..n) in idx[0..k), sorted (a heap whose root is the worst, then a heap sort). */
static void sift_down(const float *x, int32_t *h, int64_t k, int64_t i)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < k && before(x, h[m], h[l])) m = l; /* m: the worst so far */
        if (r < k && before(x, h[m], h[r])) m = r;
        if (m == i)
            return;
        int32_t t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
}

static void top_k_sorted(const float *x, int32_t *idx, int64_t n, int64_t k)
{
    for (int64_t i = k / 2 - 1; i >= 0; i--)
        sift_down(x, idx, k, i);
    for (int64_t i = k; i < n; i++)
        if (before(x, idx[i], idx[0])) {
            idx[0] = idx[i];
            sift_down(x, idx, k, 0);
        }
    for (int64_t end = k - 1; end > 0; end--) { /* heap sort: the worst goes last */
        int32_t t = idx[0]; idx[0] = idx[end]; idx[end] = t;
        sift_down(x, idx, end, 0);
    }
}

int eng_sample(eng_sampler *s, const float *x, int64_t V, int32_t *tok, rc_err *e)
{
    int32_t best = eng_argmax(x, V);
    if (best < 0)
        return rc_fail(e, RC_E_RANGE, "sampler: every logit is NaN");
    if (eng_sampler_greedy(s)) {
        *tok = best;
        return RC_OK;
    }
    if (s->cap < V) {
        int32_t *ni = realloc(s->idx, (size_t)V * sizeof *ni);
        if (ni)
            s->idx = ni;
        double *np = realloc(s->p, (size_t)V * sizeof *np);
        if (np)
            s->p = np;
        if (!ni || !np)
            return rc_fail(e, RC_E_NOMEM, "sampler: out of host memory for %lld candidates", (long long)V);
        s->cap = V;
    }
    int64_t n = 0;
    for (int64_t i = 0; i < V; i++)
        if (!isnan(x[i]) && x[i] != -INFINITY)
            s->idx[n++] = (int32_t)i;
    if (n == 0) { /* every number is -inf: the first of them */
        *tok = best;
        return RC_OK;
    }
    const int64_t k = s->top_k > 0 && s->top_k < n ? s->top_k : n;
    top_k_sorted(x, s->idx, n, k);
    /* softmax over the k candidates, in double, in sorted order */
    const double inv_t = 1.0 / s->temperature, mx = (double)x[s->idx[0]];
    double sum = 0.0;
    for (int64_t i = 0; i < k; i++) {
        s->p[i] = exp(((double)x[s->idx[i]] - mx) * inv_t);
        sum += s->p[i];
    }
    int64_t keep = k;
    if (s->top_p > 0 && s->top_p < 1) {
        double cum = 0.0;
        for (keep = 0; keep < k;) {
            cum += s->p[keep++] / sum;
            if (cum >= s->top_p)
                break;
        }
        sum = 0.0;
        for (int64_t i = 0; i < keep; i++)
            sum += s->p[i];
    }
    const double u = eng_sampler_uniform(s) * sum;
    double cum = 0.0;
    for (int64_t i = 0; i < keep; i++) {
        cum += s->p[i];
        if (u < cum) {
            *tok = s->idx[i];
            return RC_OK;
        }
    }
    *tok = s->idx[keep - 1]; /* u rounded up to the total */
    return RC_OK;
}
