/* harness chain: ref -> cuda -> engine on one case; the verdict names the first link that broke and the
 * first divergent probe. Also the entry points of the chain, report, bisect and faults commands. */
#ifndef HARNESS_CHAIN_H
#define HARNESS_CHAIN_H

#include "compare.h"

#define RC_CHAIN_MAX 8

typedef struct rc_chain_opts {
    const char *stages[RC_CHAIN_MAX]; /* chain order; default ref, cuda, engine */
    int nstages;
    rc_compare_opts base;             /* everything but .stage */
    const rc_tolerances *tols;
} rc_chain_opts;

enum { RC_LINK_RAN, RC_LINK_NOT_BUILT, RC_LINK_UNAVAILABLE, RC_LINK_UNSUPPORTED, RC_LINK_ERROR };
enum { RC_CHAIN_PASS, RC_CHAIN_FAIL, RC_CHAIN_NOT_CHECKED, RC_CHAIN_ERROR };

typedef struct rc_chain_link {
    char stage[32], link[32];
    int state;
    char why[768];  /* not run: why (as large as rc_eval.why) */
    rc_eval ev;     /* RC_LINK_RAN */
} rc_chain_link;

typedef struct rc_chain_result {
    char golden[512];
    rc_case c;
    int case_ok;
    char case_why[768];
    rc_chain_link links[RC_CHAIN_MAX];
    int n;
    int status;
    int failed;          /* index of the first failing link, -1 */
    char verdict[1024];  /* one line */
    double seconds;
} rc_chain_result;

/* Parses "ref,cuda,engine" into o->stages. */
int rc_chain_parse_stages(rc_chain_opts *o, const char *list);
void rc_chain_default_stages(rc_chain_opts *o);
/* Runs every link of o on the golden at path. */
void rc_chain_golden(const char *path, const rc_chain_opts *o, rc_chain_result *r);
/* Tables (unless o->base.quiet), one line per link, the CHAIN verdict line. */
void rc_chain_print(const rc_chain_result *r, const rc_chain_opts *o);
void *rc_chain_json(const rc_chain_result *r);
void rc_chain_free(rc_chain_result *r);
int rc_chain_exit_code(const rc_chain_result *r);
const char *rc_chain_status_name(int status);

/* Runs every catalogued fault (or only one) through the chain; prints the table when print. Returns the
 * JSON section for the report (cJSON *), *exit_code: 0 all runnable faults detected and attributed,
 * 1 not, 77 nothing could run (e.g. --only of a GPU fault here), 2 error. */
void *rc_faults_run(const char *catalogue, const char *only, const rc_tolerances *t, int print, int *exit_code);

int rc_cmd_chain(int argc, char **argv);
int rc_cmd_report(int argc, char **argv);
int rc_cmd_bisect(int argc, char **argv);
int rc_cmd_faults(int argc, char **argv);

#endif
