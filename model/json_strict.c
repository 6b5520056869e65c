/* Strict JSON parsing (see json_strict.h). */
#include "json_strict.h"

#include <stdlib.h>
#include <string.h>

/* Offset of the first \u0000 escape inside a string, or -1. Text outside strings cannot hold a backslash in
 * valid JSON, and cJSON refuses it there anyway. */
static long nul_escape(const char *s, size_t len)
{
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"')
            in_str = !in_str;
        else if (in_str && s[i] == '\\' && i + 1 < len) {
            if (s[i + 1] == 'u' && i + 5 < len && strncmp(s + i + 2, "0000", 4) == 0)
                return (long)i;
            i++; /* the escaped character, quote or backslash included */
        }
    }
    return -1;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first key that occurs twice in one object of the tree (depth-first), or NULL; *nomem on allocation
 * failure. */
static const char *duplicate_key(const cJSON *it, int *nomem)
{
    for (; it; it = it->next) {
        if (cJSON_IsObject(it) && it->child) {
            size_t n = 0;
            for (const cJSON *c = it->child; c; c = c->next)
                n++;
            const char **names = malloc(n * sizeof *names);
            if (!names) {
                *nomem = 1;
                return NULL;
            }
            n = 0;
            for (const cJSON *c = it->child; c; c = c->next)
                names[n++] = c->string;
            qsort(names, n, sizeof *names, cmp_names);
            const char *dup = NULL;
            for (size_t i = 1; i < n && !dup; i++)
                if (strcmp(names[i - 1], names[i]) == 0)
                    dup = names[i];
            free(names);
            if (dup)
                return dup;
        }
        if (it->child) {
            const char *dup = duplicate_key(it->child, nomem);
            if (dup || *nomem)
                return dup;
        }
    }
    return NULL;
}

cJSON *rc_json_parse_strict(const char *text, size_t len, const char *what, rc_err *e)
{
    const void *nul = memchr(text, 0, len);
    if (nul) {
        rc_fail(e, RC_E_FORMAT, "%s: a NUL byte at offset %ld: not JSON text", what, (long)((const char *)nul - text));
        return NULL;
    }
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        rc_fail(e, RC_E_FORMAT, "%s: starts with a UTF-8 byte-order mark, which Python's json refuses", what);
        return NULL;
    }
    long at = nul_escape(text, len);
    if (at >= 0) {
        rc_fail(e, RC_E_FORMAT, "%s: a \\u0000 escape at offset %ld: a string with an embedded NUL is refused", what,
                at);
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        long off = end && end >= text && end <= text + len ? (long)(end - text) : -1;
        rc_fail(e, RC_E_FORMAT, "%s: not valid JSON (near offset %ld)", what, off);
        return NULL;
    }
    while (end && end < text + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
        end++;
    if (end && end < text + len) {
        rc_fail(e, RC_E_FORMAT, "%s: text after the JSON value at offset %ld", what, (long)(end - text));
        cJSON_Delete(root);
        return NULL;
    }
    int nomem = 0;
    const char *dup = duplicate_key(root, &nomem);
    if (dup || nomem) {
        if (nomem)
            rc_fail(e, RC_E_NOMEM, "%s: out of memory checking keys", what);
        else
            rc_fail(e, RC_E_FORMAT, "%s: key '%.80s' appears twice in one object (Python keeps the last, cJSON the "
                    "first): refused", what, dup);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
