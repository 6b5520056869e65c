/* Final logit softcapping (gemma4), shared by every stage that runs it on the host. */
#ifndef RC_SOFTCAP_H
#define RC_SOFTCAP_H

#include <stdint.h>

/* x = c * tanh(x / c): fp32 division, double tanh rounded once, fp32 product. */
void rc_softcap(float *x, int64_t n, float c);

#endif
