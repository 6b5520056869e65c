/* Whole-file text input and regular-file opening (see io.h). */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

size_t rc_read_full(int fd, void *p, size_t n)
{
    char *c = p;
    size_t got = 0;
    while (got < n) {
        const ssize_t r = read(fd, c + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

int rc_open_regular(const char *path, const char *what, int64_t *size, rc_err *e)
{
    /* O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        rc_fail(e, RC_E_IO, "%s: cannot open %s (%s)", path, what, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        rc_fail(e, RC_E_IO, "%s: %s is not a regular file", path, what);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        close(fd);
        rc_fail(e, RC_E_IO, "%s: cannot open %s (%s)", path, what, strerror(errno));
        return -1;
    }
    if (size)
        *size = (int64_t)st.st_size;
    return fd;
}

char *rc_read_text(const char *path, const char *what, int64_t limit, rc_err *e)
{
    if (limit <= 0)
        limit = RC_READ_TEXT_MAX;
    int64_t size;
    int fd = rc_open_regular(path, what, &size, e);
    if (fd < 0)
        return NULL;
    if (size >= limit) {
        close(fd);
        rc_fail(e, RC_E_IO, "%s: cannot read %s: %lld bytes or more", path, what, (long long)limit);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        rc_fail(e, RC_E_IO, "%s: cannot open %s (%s)", path, what, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = RC_OK;
    for (;;) {
        if (cap - len <= 1) {
            size_t nc = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, nc);
            if (!nb) {
                rc = rc_fail(e, RC_E_NOMEM, "%s: out of host memory reading %s", path, what);
                break;
            }
            buf = nb;
            cap = nc;
        }
        size_t want = cap - len - 1, got = fread(buf + len, 1, want, f);
        len += got;
        if (len >= (uint64_t)limit) {
            rc = rc_fail(e, RC_E_IO, "%s: cannot read %s: %lld bytes or more", path, what, (long long)limit);
            break;
        }
        if (got < want) {
            if (ferror(f))
                rc = rc_fail(e, RC_E_IO, "%s: cannot read %s (%s)", path, what, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (rc) {
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    return buf;
}

int rc_atomic_open(rc_atomic_file *a, const char *path, rc_err *e)
{
    memset(a, 0, sizeof *a);
    if (strlen(path) + 32 >= sizeof a->tmp)
        return rc_fail(e, RC_E_IO, "%.200s...: path too long", path);
    snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
    if (!(a->f = fopen(a->tmp, "wb")))
        return rc_fail(e, RC_E_IO, "%s: cannot write (%s)", a->tmp, strerror(errno));
    return RC_OK;
}

int rc_atomic_commit(rc_atomic_file *a, rc_err *e)
{
    int ok = !ferror(a->f) && fflush(a->f) == 0 && fsync(fileno(a->f)) == 0;
    ok = fclose(a->f) == 0 && ok;
    a->f = NULL;
    if (!ok || rename(a->tmp, a->path) != 0) {
        int err = errno;
        unlink(a->tmp);
        return rc_fail(e, RC_E_IO, "%s: write failed (%s)", a->path, strerror(err));
    }
    return RC_OK;
}

void rc_atomic_abort(rc_atomic_file *a)
{
    if (a->f)
        fclose(a->f);
    a->f = NULL;
    if (a->tmp[0])
        unlink(a->tmp);
}
