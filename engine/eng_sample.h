/* Host-side token choice: greedy argmax, or seeded temperature / top-k / top-p sampling. Deterministic:
 * the same seed, settings and logits give the same token on every machine (double arithmetic, a total
 * order on candidates: larger logit first, then smaller id). */
#ifndef ENG_SAMPLE_H
#define ENG_SAMPLE_H

#include <stdint.h>

#include "err.h"

typedef struct eng_sampler {
    double temperature; /* <= 0: greedy */
    int64_t top_k;      /* <= 0: off */
    double top_p;       /* >= 1 or <= 0: off */
    uint64_t s[4];      /* xoshiro256** state */
    int64_t cap;        /* scratch capacity */
    int32_t *idx;
    double *p;
} eng_sampler;

void eng_sampler_init(eng_sampler *s, double temperature, int64_t top_k, double top_p, uint64_t seed);
void eng_sampler_free(eng_sampler *s);
/* The first index of the largest logit (NaN never wins); -1 if every logit is NaN. */
int32_t eng_argmax(const float *logits, int64_t V);
/* 1 if eng_sample is eng_argmax with these settings (temperature <= 0 or top-k 1). */
int eng_sampler_greedy(const eng_sampler *s);
/* Picks one token from logits[V]. RC_E_RANGE if no logit is a number. */
int eng_sample(eng_sampler *s, const float *logits, int64_t V, int32_t *tok, rc_err *e);
/* Next uniform double in [0, 1) (exposed for tests). */
double eng_sampler_uniform(eng_sampler *s);

#endif
