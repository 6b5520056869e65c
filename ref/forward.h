/* The frozen oracle: full-sequence fp32 forward over the prompt, no cache, every probe reported. */
#ifndef REF_FORWARD_H
#define REF_FORWARD_H

#include <stdint.h>

#include "model.h"

extern const rc_caps ref_caps;

/* Runs ids[T] through the model; logits [T, V] if not NULL; probes through sink (may be NULL). */
int ref_forward(const rc_model *m, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink,
                rc_err *e);

/* Which algorithm ref runs where HF has two for the same map. */
typedef struct ref_opts {
    int gdn_recurrent; /* gated delta net: 0 = chunked form (HF prefill), 1 = token-by-token recurrence (HF decode) */
} ref_opts;

/* ref_forward with options (NULL = defaults, which is ref_forward). */
int ref_forward_ex(const rc_model *m, const int32_t *ids, int64_t T, float *logits, const rc_probe_sink *sink,
                   const ref_opts *o, rc_err *e);

#endif
