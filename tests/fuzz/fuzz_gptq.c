/* libFuzzer target: byte 0 picks a GPTQ scheme, the rest is a .safetensors file -> rc_safetensors_load ->
 * rc_gptq_dequant_store (each P.qweight / qzeros / scales / g_idx group checked against the scheme and unpacked
 * into P.weight: shapes, bits, groups, act-order, zeros, the full-precision policy). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "gptq_layout.h"
#include "quant.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const rc_quant_scheme schemes[] = {
        {RC_QF_AFFINE, 4, 32, 1, 0}, /* AutoGPTQ v1, group 32, asymmetric (the seeds') */
        {RC_QF_SCALE, 4, 32, 0, 0},  /* symmetric, gptq_v2 */
        {RC_QF_SCALE, 8, 0, 1, 0},   /* int8, one group a row */
        {RC_QF_AFFINE, 4, 64, 0, 1}, /* group 64, lm_head quantized too */
    };
    if (!size)
        return 0;
    const rc_quant_scheme *sc = &schemes[data[0] % (sizeof schemes / sizeof schemes[0])];
    const char *path = fuzz_file(data + 1, size - 1, "safetensors");
    rc_tensors s = {0};
    rc_err e = {0};
    if (!rc_safetensors_load(path, &s, &e)) {
        rc_quant q;
        memset(&q, 0, sizeof q);
        rc_gptq_dequant_store(&s, sc, &q, "fuzz", &e);
        rc_quant_free(&q);
    }
    rc_tensors_free(&s);
    unlink(path);
    return 0;
}
