/* Parsing an untrusted file in a child process first: see isolate.h. */
#include "isolate.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define RC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RC_ASAN 1
#endif
#endif

/* CPU seconds the child may use: a golden of a few MB parses in milliseconds (tens with sanitizers); a looping
 * parser is stopped after this */
static unsigned cpu_limit(int64_t size) { return 5u + (unsigned)(size / (8 << 20)); }

#ifndef RC_ASAN
/* The child's private data now (VmData of /proc/self/status, bytes; 0 if unknown) */
static int64_t data_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmData: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb > 0 ? (int64_t)kb * 1024 : 0;
}
#endif

static void child_limits(int64_t size)
{
    /* a fault ends the child with its signal, whatever handlers the process installed (a sanitizer's, a test
     * framework's that would jump back into the caller's code) */
    const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGXCPU, SIGALRM};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        signal(fatal[i], SIG_DFL);
    const struct rlimit core = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &core);
    const rlim_t cpu = cpu_limit(size);
    struct rlimit c = {cpu, cpu + 1}; /* SIGXCPU at the soft limit, SIGKILL at the hard one */
    (void)setrlimit(RLIMIT_CPU, &c);
    alarm(4 * (unsigned)cpu); /* a parser that sleeps or waits rather than spins */
#ifndef RC_ASAN
    /* memory: what the process holds plus 2 GiB and 16 bytes a byte of the file (ASan's shadow mappings count as
     * data, so sanitizer builds keep only the CPU and wall-clock limits) */
    const int64_t now = data_now();
    if (now > 0) {
        const rlim_t d = (rlim_t)now + ((rlim_t)2 << 30) + (rlim_t)size * 16;
        struct rlimit r = {d, d};
        (void)setrlimit(RLIMIT_DATA, &r);
    }
#endif
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        const ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int rc_isolated_parse(const char *path, const char *lib, int64_t size, rc_isolated_fn fn, void *arg, rc_err *e)
{
    int fds[2];
    if (pipe(fds) != 0)
        return rc_fail(e, RC_E_IO, "%s: cannot start the isolated parse (pipe: %s)", path, strerror(errno));
    fflush(NULL); /* nothing buffered is written twice */
    const pid_t pid = fork();
    if (pid < 0) {
        const int err = errno;
        close(fds[0]);
        close(fds[1]);
        return rc_fail(e, RC_E_IO, "%s: cannot start the isolated parse (fork: %s)", path, strerror(err));
    }
    if (pid == 0) { /* the child: parse, report the result through the pipe, leave without exit handlers */
        close(fds[0]);
        const int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            (void)dup2(null, STDOUT_FILENO);
            (void)dup2(null, STDERR_FILENO);
            close(null);
        }
        child_limits(size);
        rc_err ce = {0, ""};
        const int rc = fn(arg, &ce);
        ce.code = rc;
        _exit(write_all(fds[1], &ce, sizeof ce) ? 3 : 0);
    }
    close(fds[1]);
    rc_err ce;
    const size_t got = rc_read_full(fds[0], &ce, sizeof ce);
    close(fds[0]);
    int status = 0;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    if (w == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == sizeof ce) {
        if (ce.code == RC_OK)
            return RC_OK;
        ce.msg[sizeof ce.msg - 1] = '\0';
        return rc_fail(e, ce.code, "%s", ce.msg);
    }
    char how[96];
    const unsigned cpu = cpu_limit(size);
    if (w != pid)
        snprintf(how, sizeof how, "ended unobserved (waitpid: %s)", strerror(errno));
    else if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGXCPU || WTERMSIG(status) == SIGKILL))
        snprintf(how, sizeof how, "ran past its %u s CPU limit (signal %d)", cpu, WTERMSIG(status));
    else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        snprintf(how, sizeof how, "ran past its %u s wall-clock limit", 4 * cpu);
    else if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "crashed (signal %d, %s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(how, sizeof how, "died (exit status %d: a sanitizer's report or a failed allocation)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return rc_fail(e, RC_E_FORMAT, "%s: corrupt file: parsing it, the %s library %s (its bytes are not verified: "
                   "no checksum lists it)", path, lib, how);
}
