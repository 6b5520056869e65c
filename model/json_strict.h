/* JSON parsed the way Python reads it, or refused: cJSON alone accepts a byte-order mark, text after the value,
 * duplicate keys (keeping the first, where Python keeps the last) and \u0000 inside strings (cutting the
 * string short), so one file could mean two things to HF and to us. */
#ifndef RC_JSON_STRICT_H
#define RC_JSON_STRICT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "err.h"

/* Parses text[len] (len = the bytes read; a NUL byte inside is refused) as one JSON value with nothing but
 * whitespace after it, no BOM, no duplicate key in any object and no \u0000 escape. what names the file in
 * the one-line message (RC_E_FORMAT). Returns NULL on failure. */
cJSON *rc_json_parse_strict(const char *text, size_t len, const char *what, rc_err *e);

#endif
