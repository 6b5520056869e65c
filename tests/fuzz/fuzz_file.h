/* The fuzz targets whose reader maps a file: the input's bytes written to one temporary file per process
 * ($TMPDIR or /tmp, named by the pid and ext), rewritten for each input; aborts if it cannot be written. */
#ifndef RC_FUZZ_FILE_H
#define RC_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *fuzz_file(const uint8_t *data, size_t size, const char *ext)
{
    static char path[4096];
    if (!path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/refchain-fuzz-%ld.%s", t && *t ? t : "/tmp", (long)getpid(), ext);
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if ((size && fwrite(data, 1, size, f) != size) | fclose(f))
        abort();
    return path;
}

#endif
