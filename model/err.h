/* Error codes and the one-line error message every refchain library call fills on failure. */
#ifndef RC_ERR_H
#define RC_ERR_H

#include <stdint.h>

enum {
    RC_OK = 0,
    RC_E_USAGE = -1,       /* bad arguments */
    RC_E_IO = -2,          /* missing / unreadable / truncated file */
    RC_E_FORMAT = -3,      /* corrupt or foreign file content */
    RC_E_UNSUPPORTED = -4, /* capability gate: math we do not implement */
    RC_E_SHAPE = -5,       /* tensor shape does not match the model description */
    RC_E_MISSING = -6,     /* missing / duplicate / unexpected tensor */
    RC_E_NOMEM = -7,       /* allocation failed (host or device) */
    RC_E_RANGE = -8,       /* value out of range (token id, sizes) */
    RC_E_DEVICE = -9,      /* CUDA runtime error */
};

typedef struct rc_err {
    int code;
    char msg[768];
} rc_err;

/* Sets e (if not NULL) and returns code. */
int rc_fail(rc_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *rc_code_name(int code);

/* Overflow-safe size arithmetic: return 0 and leave *out untouched on overflow or negative input. */
int rc_mul_i64(int64_t a, int64_t b, int64_t *out);
int rc_numel(int ndim, const int64_t *shape, int64_t *out);

void *rc_calloc(int64_t n, int64_t size, rc_err *e, const char *what);

#endif
