/* SHA-256 (FIPS 180-4) of a file, to check referenced weight files. */
#ifndef RC_SHA256_H
#define RC_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct rc_sha256 {
    uint32_t h[8];
    uint64_t n;              /* bytes hashed */
    unsigned char buf[64];
    size_t fill;
} rc_sha256;

void rc_sha256_init(rc_sha256 *s);
void rc_sha256_update(rc_sha256 *s, const void *data, size_t len);
/* 64 lowercase hex digits and a NUL into hex[65]. */
void rc_sha256_hex(rc_sha256 *s, char hex[65]);
/* The hex digest of the whole file at path. */
int rc_sha256_file(const char *path, char hex[65], rc_err *e);

#endif
