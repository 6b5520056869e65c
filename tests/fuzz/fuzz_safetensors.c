/* libFuzzer target: bytes -> a .safetensors file -> rc_safetensors_load (header JSON, offsets, dtypes). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[4096];
    if (!path[0]) { /* the reader maps a file; one per process, rewritten each run */
        const char *t = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/refchain-fuzz-%ld.safetensors", t && *t ? t : "/tmp", (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if ((size && fwrite(data, 1, size, f) != size) | fclose(f))
        abort();
    rc_tensors s = {0};
    rc_err e = {0};
    rc_safetensors_load(path, &s, &e);
    rc_tensors_free(&s);
    unlink(path);
    return 0;
}
