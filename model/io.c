/* Whole-file text input (see io.h). */
#include "io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *rc_read_text(const char *path, const char *what, int64_t limit, rc_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        rc_fail(e, RC_E_IO, "%s: cannot open %s (%s)", path, what, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = RC_OK;
    for (;;) {
        if (cap - len <= 1) {
            size_t nc = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, nc);
            if (!nb) {
                rc = rc_fail(e, RC_E_NOMEM, "%s: out of host memory reading %s", path, what);
                break;
            }
            buf = nb;
            cap = nc;
        }
        size_t want = cap - len - 1, got = fread(buf + len, 1, want, f);
        len += got;
        if (limit > 0 && len >= (uint64_t)limit) {
            rc = rc_fail(e, RC_E_IO, "%s: cannot read %s: %lld bytes or more", path, what, (long long)limit);
            break;
        }
        if (got < want) {
            if (ferror(f))
                rc = rc_fail(e, RC_E_IO, "%s: cannot read %s (%s)", path, what, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (rc) {
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    return buf;
}
