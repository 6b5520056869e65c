/* harness quality: a stage's next-token predictions over a long text scored against a reference stage's
 * (mean NLL, perplexity, ΔNLL, KL(ref || stage), top-1 agreement). */
#ifndef HARNESS_QUALITY_H
#define HARNESS_QUALITY_H

#include <stdint.h>

#include "err.h"

typedef struct rc_quality {
    int64_t n;                  /* positions scored: T - 1 (position t predicts ids[t + 1]) */
    double nll_ref, nll_stage;  /* mean negative log-likelihood of the next token, natural log */
    double kl_mean, kl_max;     /* KL(ref || stage) of the next-token distributions */
    int64_t kl_max_pos;
    int64_t top1_agree;         /* positions where both argmaxes agree */
    int64_t bad_pos;            /* first position with a non-finite logit, -1 none */
    int bad_stage;              /* which side had it: 0 the reference, 1 the stage */
} rc_quality;

/* Scores logits [T, V] of the reference and the stage over ids[T] (each in [0, V)), in double with a stable
 * log-softmax.
 * Returns 0, or -1 when a logit is NaN/Inf (q->bad_pos, q->bad_stage say where) or T < 2. */
int rc_quality_score(const float *ref, const float *stage, const int32_t *ids, int64_t T, int64_t V,
                     rc_quality *q);
/* The text file's ids under the model's own tokenizer (special prefix included); at least 2. */
int rc_quality_text_ids(const char *model, const char *text_path, int32_t **ids, int64_t *n, rc_err *e);
/* harness quant-quality (harness/quant_quality.c): the ΔNLL / KL / top-1 table per quantization scheme. */
int rc_cmd_quant_quality(int argc, char **argv);
/* harness quality --stage S --model M --text FILE [...]; returns the exit code. */
int rc_cmd_quality(int argc, char **argv);

#endif
