/* Whole-file text input and regular-file opening, shared by the model loaders and the harness. */
#ifndef RC_IO_H
#define RC_IO_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"

/* The cap rc_read_text applies when its caller gives none. */
#define RC_READ_TEXT_MAX ((int64_t)64 << 20)

/* Opens path read-only if it is a regular file (a FIFO, a device such as /dev/zero, a folder are refused
 * without blocking); *size gets its size. Returns the descriptor, or -1 with e set (RC_E_IO). what names
 * the file in messages ("config", "the tolerance file"). */
int rc_open_regular(const char *path, const char *what, int64_t *size, rc_err *e);

/* Reads up to n bytes from fd into p, retrying short and interrupted reads; returns the bytes read (fewer than n
 * at the end of the data or on an error). */
size_t rc_read_full(int fd, void *p, size_t n);

/* The whole of the regular text file at path, NUL-terminated (malloc'd; free it), or NULL with e set: RC_E_IO
 * when it is not a regular file, cannot be opened or read, or holds limit bytes or more (limit <= 0:
 * RC_READ_TEXT_MAX); RC_E_NOMEM when host memory runs out. Reads to the end of the file, so files whose
 * size the kernel reports as 0 (/proc) work too. */
char *rc_read_text(const char *path, const char *what, int64_t limit, rc_err *e);

/* A file written whole or not at all: a temporary beside path, renamed onto path by rc_atomic_commit. */
typedef struct rc_atomic_file {
    FILE *f;
    char tmp[4096], path[4096];
} rc_atomic_file;
int rc_atomic_open(rc_atomic_file *a, const char *path, rc_err *e);
/* Flushes, syncs and renames; on any failure removes the temporary (RC_E_IO naming path). */
int rc_atomic_commit(rc_atomic_file *a, rc_err *e);
/* Removes the temporary (after a failed write). */
void rc_atomic_abort(rc_atomic_file *a);

#endif
