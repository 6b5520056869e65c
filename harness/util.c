/* Harness helpers (see util.h). */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "compare.h"
#include "io.h"
#include "golden.h"
#include "weights_ref.h"

#ifndef RC_GOLDEN_DIR
#define RC_GOLDEN_DIR "golden"
#endif

int rc_write_file_atomic(const char *path, const char *text, int force)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (!force && access(path, F_OK) == 0) {
        fprintf(stderr, "harness: error: %s exists; refusing to overwrite it (--force replaces it)\n", path);
        return 2;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fprintf(stderr, "harness: error: %s: cannot write (%s)\n", tmp, strerror(errno));
        return 2;
    }
    int ok = fputs(text, f) >= 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (ok) {
        if (force)
            ok = rename(tmp, path) == 0;
        else {
            ok = link(tmp, path) == 0; /* fails with EEXIST if someone wrote path meanwhile */
            int err = errno;
            unlink(tmp);
            errno = err;
        }
    }
    if (!ok) {
        fprintf(stderr, "harness: error: %s: write failed (%s)\n", path, strerror(errno));
        unlink(tmp);
        return 2;
    }
    return 0;
}

int rc_write_json_file(const char *path, const cJSON *root)
{
    char *text = cJSON_Print(root);
    const int rc = text ? rc_write_file_atomic(path, text, 1) : RC_EXIT_ERROR;
    free(text);
    return rc;
}

cJSON *rc_json_file(const char *path, const char *what, const char *format, const char *array_key,
                    const char *not_what)
{
    rc_err e = {0};
    char *text = rc_read_text(path, what, 0, &e);
    if (!text) {
        fprintf(stderr, "harness: error: %s\n", e.msg);
        return NULL;
    }
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *fmt = root ? cJSON_GetObjectItemCaseSensitive(root, "format") : NULL;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, format) ||
        !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, array_key))) {
        fprintf(stderr, "harness: error: %s: not %s\n", path, not_what);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* 0 when path is a golden whose referenced weights file (a real checkpoint, fetched apart) cannot be found: the
 * bundled list leaves it out with one note, so chain and report run wherever the committed goldens do. A golden
 * that does not load stays in, for its command to refuse by name. */
static int weights_available(const char *path)
{
    rc_golden g;
    rc_err e = {0};
    if (rc_golden_load(path, 0, &g, &e))
        return 1;
    int ok = 1;
    if (g.weights_file) {
        char found[4096];
        rc_err we = {0};
        if (rc_weights_ref_resolve(path, g.weights_file, g.weights_size, g.weights_sha256, found, (int)sizeof found,
                                   &we) == RC_E_IO) {
            fprintf(stderr, "harness: note: %s left out: its weights file %s is not fetched (bash "
                            "scripts/fetch-weights.sh, or set REFCHAIN_WEIGHTS_PATH)\n", path, g.weights_file);
            ok = 0;
        }
    }
    rc_golden_free(&g);
    return ok;
}

int rc_golden_list(char ***out, int *n)
{
    const char *dir = getenv("REFCHAIN_GOLDEN_DIR");
    if (!dir || !*dir)
        dir = RC_GOLDEN_DIR;
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "harness: error: %s: cannot open the golden folder\n", dir);
        return 2;
    }
    char **list = NULL;
    int cnt = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 3, ".h5") != 0)
            continue;
        char **nl = realloc(list, (size_t)(cnt + 1) * sizeof *nl);
        char *p = malloc(strlen(dir) + len + 2);
        if (!nl || !p) {
            free(p);
            rc_free_list(nl ? nl : list, cnt);
            closedir(d);
            fprintf(stderr, "harness: error: out of host memory\n");
            return 2;
        }
        sprintf(p, "%s/%s", dir, de->d_name);
        list = nl;
        if (weights_available(p))
            list[cnt++] = p;
        else
            free(p);
    }
    closedir(d);
    if (!cnt) {
        fprintf(stderr, "harness: error: %s: no *.h5 goldens\n", dir);
        free(list);
        return 2;
    }
    qsort(list, (size_t)cnt, sizeof *list, cmp_str);
    *out = list;
    *n = cnt;
    return 0;
}

void rc_free_list(char **list, int n)
{
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

int rc_load_tolerances(rc_tolerances *t, const char *file, const char *const *specs, int n)
{
    rc_err e = {0};
    if (rc_tol_load(t, file, &e)) {
        fprintf(stderr, "harness: error: %s\n", e.msg);
        return 2;
    }
    for (int i = 0; i < n; i++)
        if (rc_tol_override(t, specs[i], &e)) {
            fprintf(stderr, "harness: %s (see harness --help)\n", e.msg);
            rc_tol_free(t);
            return 2;
        }
    return 0;
}

int rc_parse_device(const char *s, int *out)
{
    char *end;
    errno = 0;
    long d = strtol(s, &end, 10);
    if (errno || end == s || *end || d < 0 || d > 1024)
        return 0;
    *out = (int)d;
    return 1;
}

int rc_usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "harness: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see harness --help)\n");
    return RC_EXIT_ERROR;
}

const char *rc_arg_error_fmt(const char *arg, const char *const *value_opts)
{
    for (int i = 0; value_opts[i]; i++)
        if (!strcmp(arg, value_opts[i]))
            return "'%s' needs a value";
    return "unknown argument '%s'";
}

int rc_run(char *const argv[], const char *dir, char **out)
{
    int fd[2] = {-1, -1};
    if (out) {
        *out = NULL;
        if (pipe(fd) != 0)
            return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        if (out) {
            close(fd[0]);
            close(fd[1]);
        }
        return -1;
    }
    if (pid == 0) {
        if (out) {
            dup2(fd[1], 1);
            dup2(fd[1], 2);
            close(fd[0]);
            close(fd[1]);
        }
        if (dir && chdir(dir) != 0)
            _exit(127);
        execvp(argv[0], argv);
        _exit(127);
    }
    if (out) {
        close(fd[1]);
        size_t len = 0, cap = 0;
        char *buf = NULL, chunk[4096];
        ssize_t got;
        while ((got = read(fd[0], chunk, sizeof chunk)) > 0 || (got < 0 && errno == EINTR)) {
            if (got < 0)
                continue;
            if (len + (size_t)got + 1 > cap) {
                cap = (len + (size_t)got + 1) * 2;
                char *nb = realloc(buf, cap);
                if (!nb)
                    break;
                buf = nb;
            }
            memcpy(buf + len, chunk, (size_t)got);
            len += (size_t)got;
            buf[len] = 0;
        }
        close(fd[0]);
        *out = buf ? buf : strdup("");
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return -1;
}

int rc_sh(const char *cmd, char **out)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    return rc_run(argv, NULL, out);
}

char *rc_rstrip(char *s)
{
    size_t n = s ? strlen(s) : 0;
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\t'))
        s[--n] = 0;
    return s;
}

const char *rc_shq(const char *s, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap < 3) {
        if (cap)
            buf[0] = 0;
        return buf;
    }
    buf[n++] = '\'';
    for (; *s && n + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(buf + n, "'\\''", 4);
            n += 4;
        } else
            buf[n++] = *s;
    }
    buf[n++] = '\'';
    buf[n] = 0;
    return buf;
}
