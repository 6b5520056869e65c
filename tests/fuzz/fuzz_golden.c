/* libFuzzer target: bytes -> rc_golden_load_image (the golden reader past the checksum gate, HDF5's core
 * driver parsing the image in memory), then the model bound from it as the harness does. */
#include <stdint.h>
#include <stdlib.h>

#include "golden.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rc_golden g;
    rc_err e = {0};
    if (rc_golden_load_image(data, (int64_t)size, "fuzz.h5", RC_GOLDEN_ALL, &g, &e) == RC_OK) {
        rc_model m;
        if (rc_model_from_golden(&m, &g, &e) == RC_OK)
            rc_model_free(&m);
        rc_golden_free(&g);
    }
    return 0;
}
