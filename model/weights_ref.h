/* Finds the weights file a golden references (by name, size and sha256) on the weights search path. */
#ifndef RC_WEIGHTS_REF_H
#define RC_WEIGHTS_REF_H

#include <stdint.h>

#include "err.h"

/* Searches, in order: every folder of $REFCHAIN_WEIGHTS_PATH (colon-separated), the golden's own folder,
 * $XDG_CACHE_HOME/refchain (default ~/.cache/refchain). The first file named name must have size bytes and
 * the sha256 given, or it is refused (RC_E_FORMAT); none found is RC_E_IO naming the places searched. */
int rc_weights_ref_resolve(const char *golden_path, const char *name, int64_t size, const char *sha256, char *out,
                           int cap, rc_err *e);

#endif
