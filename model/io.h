/* Whole-file text input, shared by the model loaders and the harness. */
#ifndef RC_IO_H
#define RC_IO_H

#include <stdint.h>

#include "err.h"

/* The whole of the text file at path, NUL-terminated (malloc'd; free it), or NULL with e set: RC_E_IO when
 * it cannot be opened or read, or holds limit bytes or more (limit <= 0: no limit); RC_E_NOMEM when host
 * memory runs out. what names the file in messages ("config", "the tolerance file"). Reads to the end of the
 * file, so files whose size is not known ahead (/proc, pipes) work too. */
char *rc_read_text(const char *path, const char *what, int64_t limit, rc_err *e);

#endif
