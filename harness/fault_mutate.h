/* Weight- and config-level faults as mutations of the bound model: the harness hands the faulted stage a
 * mutated copy, so the stage's code (the plain fp32 oracle) carries no hook for them. The case's own model,
 * which the double-precision noise floor runs, is never touched: a mutation cannot move its own yardstick. */
#ifndef HARNESS_FAULT_MUTATE_H
#define HARNESS_FAULT_MUTATE_H

#include "model.h"

typedef struct rc_mutant {
    rc_model m;               /* shallow copy of the source with the mutation applied; never rc_model_free'd */
    rc_layer_weights *layers; /* owned copy of the per-layer pointers */
    float **owned;            /* rewritten tensors */
    int n_owned;
} rc_mutant;

/* 1 if fault `name` is a mutation of the model (and so needs no hook in the stage). */
int rc_fault_is_mutation(const char *name);
/* If the selected fault (rc_fault_selected) is a mutation for `stage`: *out = a mutated copy of m.
 * Else *out = NULL. Returns RC_OK or an error (out of memory). */
int rc_mutant_open(const rc_model *m, const char *stage, rc_mutant **out, rc_err *e);
void rc_mutant_free(rc_mutant *mu);

#endif
