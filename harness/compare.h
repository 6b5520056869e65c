/* harness compare: a stage checked against a reference (HF's golden, or another stage's output) probe by
 * probe in data-flow order. One evaluation (rc_eval_stage) returns structured results that compare,
 * chain, report and faults all print or record. Cases: case.c; evaluation: eval.c; output: eval_print.c
 * (text) and eval_json.c (JSON); the compare command: compare.c. */
#ifndef HARNESS_COMPARE_H
#define HARNESS_COMPARE_H

#include "metrics.h"
#include "stage.h"
#include "tolerance.h"

enum { RC_EXIT_PASS = 0, RC_EXIT_BOUND = 1, RC_EXIT_ERROR = 2 };
/* What each probe is judged against: the tolerance file's default ('reference'), the case's reference (HF's
 * tensors), or the exact (double) forward wherever it agrees with that reference within the floor cap. */
enum { RC_AGAINST_DEFAULT, RC_AGAINST_REF, RC_AGAINST_EXACT };

typedef struct rc_compare_opts {
    const rc_stage *stage;
    rc_stage_opts stage_opts;
    const rc_tolerances *tols; /* NULL: the default tolerance file */
    const char *probe;         /* fnmatch pattern or NULL */
    int greedy;                /* also check the greedy continuation */
    int quiet;                 /* verdict lines only */
    int allow_near_ties;       /* a token mismatch at a near-tie whose logits are within bounds passes */
    int no_floor;              /* skip the double-precision noise floor */
    int against;               /* RC_AGAINST_* */
} rc_compare_opts;

/* What a stage is checked against, loaded once and shared by every stage of a chain. */
typedef struct rc_case {
    char label[512];           /* golden path, or model path */
    char preset[64], model_type[64];
    char precision[8];         /* the reference's precision: fp32, bf16, fp16 (a golden's dtype, a stage's storage) */
    char versions[128];        /* "transformers X, torch Y" of a golden, else "" */
    char ref_name[32];         /* "HF", or the reference stage's name */
    rc_model m;
    int has_model;
    /* the reference */
    int32_t *ids;
    int64_t n_ids;
    rc_tensors probes;         /* data-flow order */
    int32_t *tokens;           /* greedy continuation [n_steps] */
    float *step_logits;        /* [n_steps, vocab] */
    int64_t n_steps, vocab;
    /* noise floor: the reference's distance from the double forward, per probe and per greedy step */
    int floor_state;           /* 0 not computed, 1 available, -1 unavailable (floor_why says why) */
    int floor_recurrent;       /* the double forward ran the gated delta net token by token (rc_stage.gdn_recurrent) */
    char floor_why[768];
    rc_metrics *floor;         /* [probes.n] */
    unsigned char *floor_has;  /* [probes.n] */
    rc_metrics *floor_steps;   /* [n_steps] */
    unsigned char *floor_steps_has;
    double **exact;            /* [probes.n]: the double forward's own probe (NULL where it has none) */
    double *exact_steps;       /* [n_steps, vocab]: its greedy-step logits (valid where floor_steps_has) */
} rc_case;

/* 1 if the shell pattern (NULL = all) selects the probe name. */
int rc_probe_selected(const char *pattern, const char *name);
/* The first index of the largest value. */
int rc_argmax(const float *x, int64_t n);

/* A probe sink that copies what a stage reports into got: every probe when ref is NULL (the stage is the
 * reference), else only the probes of ref that pattern selects. The first report of a name counts. */
typedef struct rc_collect {
    const rc_tensors *ref;
    const char *pattern;
    rc_tensors got;
    rc_err *e;
} rc_collect;
rc_probe_sink rc_collect_sink(rc_collect *cc);

/* A golden: HF is the reference. A probe_order naming a probe no stage produces (ref reports every one it
 * can) is bad input. */
int rc_case_from_golden(rc_case *c, const char *path, rc_err *e);
/* A model folder or file with a prompt (NULL: the golden's prompt for a .h5 file, else a fixed one):
 * stage B (opened with bo) is the reference, its own greedy continuation of n_steps tokens included. */
int rc_case_from_stage(rc_case *c, const char *model_path, const int32_t *prompt, int64_t n_prompt,
                       const rc_stage *B, const rc_stage_opts *bo, int64_t n_steps, rc_err *e);
/* Runs the double forward, with the gated delta net in the form the stage uses (gdn_recurrent as
 * rc_stage.gdn_recurrent); again only when that form changes. floor_state says how it went; never an
 * error for the caller. */
void rc_case_floor(rc_case *c, const char *probe_pattern, int gdn_recurrent);
void rc_case_free(rc_case *c);

typedef enum {
    RC_ROW_UNSELECTED, RC_ROW_OK, RC_ROW_OK_FLOOR, RC_ROW_FAIL, RC_ROW_NONFINITE, RC_ROW_MISSING, RC_ROW_SKIPPED,
    RC_ROW_SHAPE, RC_ROW_TOKEN, RC_ROW_NEAR_TIE,
    RC_ROW_PRECISION /* over a --tol bound only, within the stage's precision yardstick: no link to blame */
} rc_row_status;

/* Where a row sits in the data flow. */
typedef struct rc_where {
    int layer;      /* -1: global (emb, rope, final_norm, logits) or a greedy step */
    char op[48];    /* "attn.q_rope", "logits", ... */
    int64_t token;  /* token position of the worst element (its first index), -1 if not token-major */
    int step;       /* greedy decode step, -1 for prompt probes */
} rc_where;

typedef struct rc_row {
    char name[64], shape[48], worst[48];
    rc_row_status status;
    int fail;
    rc_metrics m;
    int has_floor;
    rc_metrics floor;   /* the reference's distance from double */
    double xfloor;      /* max_abs / floor max_abs (NAN if the floor is unavailable or 0, or not the yardstick) */
    int vs_exact;       /* judged against the double forward, not the case's reference */
    int precision;      /* fails only a --tol bound, within the yardstick (fp32: the floor rule; else the file) */
    rc_bounds b;
    int bad_metric;     /* the first metric out of bounds, -1 none, RC_MET_COUNT: NaN/Inf */
    rc_where where;
    int tok, want_tok;  /* greedy rows */
    double margin;      /* the reference's top-1 minus top-2 logit (greedy rows) */
    double tie_margin;  /* below it a token flip is a near-tie: 2x the logit error allowed at this precision */
    double logit_tok[2], logit_want[2]; /* a flip: {stage, reference} logits of the stage's and reference's token */
} rc_row;

enum { RC_EVAL_PASS, RC_EVAL_FAIL, RC_EVAL_UNSUPPORTED, RC_EVAL_ERROR };
/* Why an evaluation failed: a broken link, a --tol below the stage's precision, or near-tie flips only. */
enum { RC_CAUSE_NONE, RC_CAUSE_LINK, RC_CAUSE_PRECISION, RC_CAUSE_NEAR_TIE };

typedef struct rc_eval {
    char stage[32], link[32];
    char precision[8];         /* the lossier of the reference's and the stage's storage: selects bounds */
    int status;
    char why[768];             /* UNSUPPORTED / ERROR */
    rc_row *rows;              /* probes (reference order), then greedy steps */
    int nrows, nprobes;
    int nsel, nfail, nskip, nfloor_pass, gfail;
    int cause;                 /* RC_CAUSE_* */
    int nlink;                 /* failing rows a link is blamed for */
    int first;                 /* first failing row in data-flow order (the first blaming a link if any), -1 */
    int against_exact, nexact; /* judged against the double forward: rows that were */
    double tightest;           /* the smallest scaled --tol this stage passes: its worst measured row */
    int tightest_row;
    double ref_floor;          /* the reference's own largest scaled distance from the exact answer (NAN: none) */
    int ref_floor_row;
    int worst;                 /* probe row with the largest scaled max-abs, -1 */
    int steps, equal, near_ties, first_mismatch, worst_step;
    double worst_step_scaled, worst_step_abs;
    int allow_near_ties;
    double seconds;
} rc_eval;

/* Runs o->stage on c and judges every row. Returns RC_OK with ev->status PASS/FAIL/UNSUPPORTED, or an
 * error code (ev->status ERROR, ev->why). */
int rc_eval_stage(const rc_case *c, const rc_compare_opts *o, const rc_tolerances *t, rc_eval *ev);
void rc_eval_free(rc_eval *ev);
/* The table (unless quiet), the first divergence and the VERDICT line. */
void rc_eval_print(const rc_eval *ev, const rc_case *c, const rc_tolerances *t, int quiet);
/* Why ev failed, for the VERDICT line: "architecture link", "bound below the reference's fp32 precision: ...",
 * "near-tie, not a broken link: ...". */
const char *rc_eval_cause_str(const rc_eval *ev, const rc_case *c, char *buf, int cap);
/* The smallest --tol this stage passes on c and the reference's own floor (the best any fp32 stage can do). */
const char *rc_eval_tightest_str(const rc_eval *ev, const rc_case *c, char *buf, int cap);
/* One line: "L0.attn.q_rope FAIL (scaled max-abs 1.2e-01 > 1e-05; layer 0, op attn.q_rope, token 3)". */
const char *rc_row_describe(const rc_row *r, char *buf, int cap);
const char *rc_where_str(const rc_where *w, char *buf, int cap);
const char *rc_row_status_name(rc_row_status s);
/* 1 if the row was measured (its metrics are meaningful). */
int rc_row_has_metrics(const rc_row *r);
/* The evaluation as a JSON object (cJSON *). */
void *rc_eval_json(const rc_eval *ev, const rc_case *c);

/* compare on one golden: prints, appends its JSON object to json_out (cJSON array) if not NULL,
 * returns RC_EXIT_*. */
int rc_compare_golden(const char *path, const rc_compare_opts *o, void *json_out);
/* compare --against: stage o->stage vs stage B on a model. */
int rc_compare_pair(const char *model_path, const int32_t *prompt, int64_t n_prompt, int64_t n_steps,
                    const rc_stage *B, const rc_compare_opts *o, void *json_out);

#endif
