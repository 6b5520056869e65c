/* Error reporting and overflow-safe size helpers. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int rc_fail(rc_err *e, int code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

const char *rc_code_name(int code)
{
    switch (code) {
    case RC_OK: return "ok";
    case RC_E_USAGE: return "usage";
    case RC_E_IO: return "io";
    case RC_E_FORMAT: return "format";
    case RC_E_UNSUPPORTED: return "unsupported";
    case RC_E_SHAPE: return "shape";
    case RC_E_MISSING: return "missing";
    case RC_E_NOMEM: return "out-of-memory";
    case RC_E_RANGE: return "range";
    case RC_E_DEVICE: return "device";
    default: return "error";
    }
}

int rc_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0)
        return 0;
    if (a != 0 && b > INT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

int rc_numel(int ndim, const int64_t *shape, int64_t *out)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (!rc_mul_i64(n, shape[i], &n))
            return 0;
    *out = n;
    return 1;
}

void *rc_calloc(int64_t n, int64_t size, rc_err *e, const char *what)
{
    int64_t bytes;
    if (!rc_mul_i64(n, size, &bytes) || (uint64_t)bytes > SIZE_MAX) {
        rc_fail(e, RC_E_RANGE, "%s: size %lld x %lld overflows", what, (long long)n, (long long)size);
        return NULL;
    }
    void *p = calloc(bytes ? (size_t)bytes : 1, 1);
    if (!p)
        rc_fail(e, RC_E_NOMEM, "%s: out of host memory allocating %lld bytes", what, (long long)bytes);
    return p;
}
