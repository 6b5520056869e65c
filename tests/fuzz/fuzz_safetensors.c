/* libFuzzer target: bytes -> a .safetensors file -> rc_safetensors_load (header JSON, offsets, dtypes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, "safetensors");
    rc_tensors s = {0};
    rc_err e = {0};
    rc_safetensors_load(path, &s, &e);
    rc_tensors_free(&s);
    unlink(path);
    return 0;
}
