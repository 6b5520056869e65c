/* Weights referenced by checksum: the search path and the size and sha256 checks. */
#include "weights_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checksum.h"

static int check(const char *path, int64_t size, const char *sha256, const struct stat *st, rc_err *e)
{
    if ((int64_t)st->st_size != size)
        return rc_fail(e, RC_E_FORMAT, "%s: weights file has %lld bytes, the golden expects %lld (sha256 %s)", path,
                       (long long)st->st_size, (long long)size, sha256);
    char hex[65];
    int rc = rc_sha256_file(path, hex, e);
    if (rc)
        return rc;
    if (strcmp(hex, sha256))
        return rc_fail(e, RC_E_FORMAT, "%s: weights file sha256 %s differs from the golden's %s", path, hex, sha256);
    return RC_OK;
}

/* Tries dir/name: 1 and *rc set when a file is there, 0 otherwise. */
static int try_dir(const char *dir, size_t dlen, const char *name, int64_t size, const char *sha256, char *out,
                   int cap, int *rc, rc_err *e)
{
    if (dlen == 0)
        return 0;
    snprintf(out, (size_t)cap, "%.*s/%s", (int)dlen, dir, name);
    struct stat st;
    if (stat(out, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    *rc = check(out, size, sha256, &st, e);
    return 1;
}

int rc_weights_ref_resolve(const char *golden_path, const char *name, int64_t size, const char *sha256, char *out,
                           int cap, rc_err *e)
{
    if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
        return rc_fail(e, RC_E_FORMAT, "%s: weights_file '%s' must be a plain file name", golden_path, name);
    if (strlen(sha256) != 64 || strspn(sha256, "0123456789abcdef") != 64)
        return rc_fail(e, RC_E_FORMAT, "%s: weights_sha256 '%.80s' is not 64 lowercase hex digits", golden_path,
                       sha256);
    int rc = RC_OK;
    const char *env = getenv("REFCHAIN_WEIGHTS_PATH");
    for (const char *p = env; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (try_dir(p, len, name, size, sha256, out, cap, &rc, e))
            return rc;
        p += len + (colon ? 1 : 0);
    }
    const char *slash = strrchr(golden_path, '/');
    if (try_dir(slash ? golden_path : ".", slash ? (size_t)(slash - golden_path) : 1, name, size, sha256, out, cap,
                &rc, e))
        return rc;
    char cache[4096];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0])
        snprintf(cache, sizeof cache, "%s/refchain", xdg);
    else
        snprintf(cache, sizeof cache, "%s/.cache/refchain", home ? home : "");
    if (try_dir(cache, strlen(cache), name, size, sha256, out, cap, &rc, e))
        return rc;
    return rc_fail(e, RC_E_IO,
                   "%s: weights file '%s' (sha256 %.12s...) not found in $REFCHAIN_WEIGHTS_PATH, the golden's folder "
                   "or %s. HINT: bash scripts/fetch-weights.sh",
                   golden_path, name, sha256, cache);
}
