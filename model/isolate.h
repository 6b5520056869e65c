/* Parsing an untrusted file in a child process first (isolate.c).
 *
 * Some files are parsed by a library this project does not own (HDF5 for goldens), which on a corrupt file can
 * crash, loop forever or ask for unbounded memory instead of returning an error (libhdf5 1.10 does all three on
 * mutated goldens: tests/hostile/README.md). A file whose bytes are not verified against a checksum is therefore
 * parsed once in a forked child under CPU, wall-clock and memory limits; only a file the child parsed without
 * dying is parsed again in the calling process. */
#ifndef RC_ISOLATE_H
#define RC_ISOLATE_H

#include "err.h"
#include <stdint.h>

/* The parse to try: returns RC_OK or an error code with e filled, as the loaders do. */
typedef int (*rc_isolated_fn)(void *arg, rc_err *e);

/* Runs fn(arg) in a child process (stdout and stderr to /dev/null, no core file, a CPU limit growing with
 * size bytes, a data limit outside sanitizer builds). Returns what fn returned there, with its message in e; if
 * the child died (signal, sanitizer exit, a limit), RC_E_FORMAT naming path, what it was parsing ('lib', e.g.
 * "HDF5") and how the child ended. RC_E_IO if the child could not be started. */
int rc_isolated_parse(const char *path, const char *lib, int64_t size, rc_isolated_fn fn, void *arg, rc_err *e);

#endif
