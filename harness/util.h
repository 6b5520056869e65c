/* Small helpers of the harness commands: files, goldens, tolerances, child processes, git. */
#ifndef HARNESS_UTIL_H
#define HARNESS_UTIL_H

#include <stddef.h>

#include "tolerance.h"

struct cJSON;

/* Writes text to path through a temp file and a rename; refuses an existing path unless force
 * (link(2) makes the no-overwrite case atomic too). Prints one error line; returns 0 or 2. */
int rc_write_file_atomic(const char *path, const char *text, int force);
/* root printed as JSON and written to path as rc_write_file_atomic(.., force = 1) does; returns 0 or 2 (2 also when
 * cJSON cannot print it). */
int rc_write_json_file(const char *path, const struct cJSON *root);
/* The JSON file at path whose "format" is `format` and whose `array_key` is an array (what names the file in the
 * error), or NULL after one error line naming the file and, if it is another file, `not_what`. */
struct cJSON *rc_json_file(const char *path, const char *what, const char *format, const char *array_key,
                           const char *not_what);
/* Every *.h5 of the golden folder ($REFCHAIN_GOLDEN_DIR or the built-in one), sorted; free with
 * rc_free_list. Prints one error line and returns 2 when there are none. */
int rc_golden_list(char ***out, int *n);
void rc_free_list(char **list, int n);
/* The tolerance file (NULL = the default one), then each --tol spec of specs[0..n) appended in order.
 * Prints one error line and returns 2 (t left empty) when either fails. */
int rc_load_tolerances(rc_tolerances *t, const char *file, const char *const *specs, int n);
/* --device N: a GPU ordinal in [0, 1024]; 0 when s is anything else (empty, "abc", "1x", "-1"). */
int rc_parse_device(const char *s, int *out);
/* The message for a command-line argument no option took ("%s" is the argument): a known option missing its
 * value at the end of the line says so; anything else is unknown. value_opts: NULL-terminated. */
const char *rc_arg_error_fmt(const char *arg, const char *const *value_opts);
/* Prints "harness: <fmt with arg> (see harness --help)" on stderr as one line; returns RC_EXIT_ERROR. */
int rc_usage_error(const char *fmt, const char *arg);
/* Runs argv (argv[0] looked up in PATH) in dir (NULL = here); stdout+stderr go to out (malloc'd, may be
 * NULL) unless out is NULL, then they pass through. Returns the exit status, 128+signal, or -1. */
int rc_run(char *const argv[], const char *dir, char **out);
/* The same for one shell command line. */
int rc_sh(const char *cmd, char **out);
/* Trims trailing whitespace in place. */
char *rc_rstrip(char *s);
/* Shell-quotes s into buf ('...'). */
const char *rc_shq(const char *s, char *buf, size_t cap);

#endif
