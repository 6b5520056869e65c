/* Test helpers shared by the cmocka suites: a private temp folder, whole-file read/write/copy. */
#ifndef RC_TESTUTIL_H
#define RC_TESTUTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef RC_TEST_GOLDEN_DIR
#define RC_TEST_GOLDEN_DIR "golden"
#endif
#define GOLDEN(name) RC_TEST_GOLDEN_DIR "/" name

/* mkdtemp under $TMPDIR (or /tmp); abort()s on failure: a test cannot run without it. */
static inline char *tu_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/refchain-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        abort();
    }
    return strdup(buf);
}

/* Removes a folder of plain files (one level, which is all the tests make) and frees the path. */
static inline void tu_rmdir(char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[4096];
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    free(dir);
}

/* "dir/name" in a static rotating buffer (8 slots). */
static inline const char *tu_path(const char *dir, const char *name)
{
    static char bufs[8][4096];
    static int i;
    char *b = bufs[i++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

static inline int tu_write(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

/* Whole file, malloc'd, NUL-terminated; *n its size. */
static inline char *tu_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fileno(f), &st) == 0 && (buf = malloc((size_t)st.st_size + 1)) &&
        fread(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size) {
        buf[st.st_size] = 0;
        if (n)
            *n = (size_t)st.st_size;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* Copies the first 'limit' bytes of src to dst (all of it if limit < 0). */
static inline int tu_copy(const char *src, const char *dst, long limit)
{
    size_t n;
    char *buf = tu_read(src, &n);
    if (!buf)
        return -1;
    if (limit >= 0 && (size_t)limit < n)
        n = (size_t)limit;
    int rc = tu_write(dst, buf, n);
    free(buf);
    return rc;
}

#endif
