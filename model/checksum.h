/* SHA-256 of a file, checked against the SHA256SUMS list beside it (how bundled goldens are verified before
 * the HDF5 library parses a byte of them). */
#ifndef RC_CHECKSUM_H
#define RC_CHECKSUM_H

#include <stdint.h>

#include "err.h"

/* Lowercase hex SHA-256 of n bytes. hex: 65 chars. */
void rc_sha256_hex(const void *data, int64_t n, char hex[65]);

/* The hex digest of the whole file at path, read in blocks (weights files referenced by a golden). */
int rc_sha256_file(const char *path, char hex[65], rc_err *e);

/* Looks path's file name up in SHA256SUMS of its folder (`sha256sum` format: "<hex>  <name>"). data/n: the
 * file's bytes. RC_OK when it matches; RC_E_FORMAT (one line naming both digests) when it does not; RC_OK
 * with *listed = 0 when the folder has no SHA256SUMS or no line for the file. */
int rc_checksum_verify(const char *path, const void *data, int64_t n, int *listed, rc_err *e);

#endif
