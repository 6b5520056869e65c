/* Final logit softcapping (see softcap.h). */
#include "softcap.h"

#include <math.h>

void rc_softcap(float *x, int64_t n, float c)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = c * (float)tanh((double)(x[i] / c));
}
