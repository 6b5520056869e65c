/* The noise floor: ref's forward with every value in double. fp32 implementations (HF included) are
 * judged by how far they sit from it; it is never compared for correctness itself. */
#ifndef REF_FORWARD64_H
#define REF_FORWARD64_H

#include <stdint.h>

#include "forward.h"
#include "model.h"

/* What the double forward implements; a model outside it is refused (the harness then says
 * "floor unavailable"). */
extern const rc_caps ref64_caps;

typedef struct ref64_sink {
    int (*emit)(void *user, const char *name, const double *data, int ndim, const int64_t *shape);
    int (*want)(void *user, const char *name); /* NULL = all */
    void *user;
} ref64_sink;

/* Checks m against ref64_caps (RC_E_UNSUPPORTED with the reason if outside it). */
int ref64_check(const rc_model *m, rc_err *e);
/* Runs ids[T]: logits [T, V] in double if not NULL; probes (ref's names and shapes) through sink. */
int ref64_forward(const rc_model *m, const int32_t *ids, int64_t T, double *logits, const ref64_sink *sink,
                  rc_err *e);
/* ref64_forward with ref's options (NULL = defaults): the same algorithm choice as the fp32 run it floors. */
int ref64_forward_ex(const rc_model *m, const int32_t *ids, int64_t T, double *logits, const ref64_sink *sink,
                     const ref_opts *o, rc_err *e);

#endif
