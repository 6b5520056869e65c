/* Final logit softcapping (see softcap.h). */
#include "softcap.h"

void rc_softcap(float *x, int64_t n, float c)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rc_softcap1(x[i], c);
}
