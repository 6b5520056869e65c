/* harness quality: a stage's next-token predictions over a text, scored against a reference stage's. */
#include "quality.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "compare.h"
#include "gguf.h"
#include "io.h"
#include "model.h"
#include "text.h"
#include "util.h"

/* logp[V] = log_softmax(x) in double; returns 0, -1 if x holds NaN/Inf */
static int log_softmax(const float *x, int64_t V, double *logp)
{
    double m = -INFINITY;
    for (int64_t i = 0; i < V; i++) {
        if (!isfinite(x[i]))
            return -1;
        if (x[i] > m)
            m = x[i];
    }
    double s = 0;
    for (int64_t i = 0; i < V; i++)
        s += exp((double)x[i] - m);
    const double lse = m + log(s);
    for (int64_t i = 0; i < V; i++)
        logp[i] = (double)x[i] - lse;
    return 0;
}

int rc_quality_score(const float *ref, const float *stage, const int32_t *ids, int64_t T, int64_t V,
                     rc_quality *q)
{
    memset(q, 0, sizeof *q);
    q->bad_pos = q->kl_max_pos = -1;
    if (T < 2 || V < 1)
        return -1;
    double *lr = malloc((size_t)V * sizeof *lr), *ls = malloc((size_t)V * sizeof *ls);
    int rc = lr && ls ? 0 : -1;
    double nll_r = 0, nll_s = 0, kl_sum = 0;
    for (int64_t t = 0; t + 1 < T && !rc; t++) {
        const float *xr = ref + t * V, *xs = stage + t * V;
        if (log_softmax(xr, V, lr) || log_softmax(xs, V, ls)) {
            q->bad_pos = t;
            q->bad_stage = log_softmax(xr, V, lr) ? 0 : 1;
            rc = -1;
            break;
        }
        const int32_t next = ids[t + 1];
        nll_r -= lr[next];
        nll_s -= ls[next];
        double kl = 0;
        for (int64_t i = 0; i < V; i++)
            kl += exp(lr[i]) * (lr[i] - ls[i]);
        if (kl < 0) /* rounding: KL is never negative */
            kl = 0;
        kl_sum += kl;
        if (q->kl_max_pos < 0 || kl > q->kl_max) {
            q->kl_max = kl;
            q->kl_max_pos = t;
        }
        q->top1_agree += rc_argmax(xr, V) == rc_argmax(xs, V);
        q->n++;
    }
    if (!rc && q->n) {
        q->nll_ref = nll_r / (double)q->n;
        q->nll_stage = nll_s / (double)q->n;
        q->kl_mean = kl_sum / (double)q->n;
    }
    free(lr);
    free(ls);
    return rc;
}

/* The model's trained context (max_position_embeddings; a GGUF's <arch>.context_length), 0 when it has none. */
static int64_t model_context(const char *path)
{
    rc_err e = {0};
    int64_t ctx = 0;
    if (rc_gguf_is_gguf(path)) {
        rc_gguf g;
        if (rc_gguf_open(&g, path, &e))
            return 0;
        rc_gguf_str arch;
        const rc_gguf_kv *a = rc_gguf_find(&g, "general.architecture");
        if (a && !rc_gguf_get_str(&g, a, &arch, &e) && arch.len < 64) {
            char key[96];
            snprintf(key, sizeof key, "%.*s.context_length", (int)arch.len, arch.s);
            const rc_gguf_kv *kv = rc_gguf_find(&g, key);
            if (kv && rc_gguf_get_int(&g, kv, &ctx, &e))
                ctx = 0;
        }
        rc_gguf_close(&g);
        return ctx > 0 ? ctx : 0;
    }
    char cfg[4096];
    snprintf(cfg, sizeof cfg, "%s/config.json", path);
    char *text = rc_read_text(cfg, "config", 0, &e);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    const cJSON *mp = cJSON_GetObjectItemCaseSensitive(j, "max_position_embeddings");
    if (!mp) {
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(j, "text_config");
        mp = cJSON_GetObjectItemCaseSensitive(tc, "max_position_embeddings");
    }
    if (cJSON_IsNumber(mp) && mp->valuedouble >= 1 && mp->valuedouble < 1e12)
        ctx = (int64_t)mp->valuedouble;
    cJSON_Delete(j);
    free(text);
    return ctx;
}

/* The text's ids under the model's own tokenizer (its special prefix, e.g. BOS, included). */
int rc_quality_text_ids(const char *model, const char *text_path, int32_t **ids, int64_t *n, rc_err *e)
{
    struct stat sb;
    rc_text txt;
    int rc;
    if (stat(model, &sb))
        return rc_fail(e, RC_E_IO, "%s: no such model file or folder", model);
    rc = rc_text_load_model(&txt, model, e);
    if (rc)
        return rc;
    char *text = rc_read_text(text_path, "the text", 0, e);
    if (!text)
        rc = e->code;
    else if (!*text)
        rc = rc_fail(e, RC_E_FORMAT, "%s: the text is empty", text_path);
    else
        rc = rc_tokenizer_encode(txt.tok, text, strlen(text), 1, ids, n, e);
    if (!rc && *n < 2) {
        rc = rc_fail(e, RC_E_FORMAT, "%s: the text is %lld token(s); scoring needs at least 2", text_path,
                     (long long)*n);
        free(*ids);
        *ids = NULL;
    }
    free(text);
    rc_text_free(&txt);
    return rc;
}

/* Runs stage s over ids[T] into logits [T, V]; seconds in *sec. */
static int run_stage(const rc_stage *s, const rc_stage_opts *o, const rc_model *m, const int32_t *ids, int64_t T,
                     float *logits, double *sec, rc_err *e)
{
    char why[256] = "";
    if (!s->available(o, why, sizeof why))
        return rc_fail(e, RC_E_UNSUPPORTED, "stage %s cannot run here: %s", s->name, why);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    void *st = NULL;
    int rc = s->open(&st, m, o, e);
    if (!rc) {
        rc = s->forward(st, ids, T, logits, NULL, e);
        s->close(st);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}

static void print_table(const rc_quality *q, const char *sname, const char *sprec, const char *rname,
                        const char *rprec)
{
    char a[64], b[64];
    snprintf(a, sizeof a, "%s (%s)", sname, sprec);
    snprintf(b, sizeof b, "%s (%s)", rname, rprec);
    printf("%-22s %12s %12s\n", "", a, b);
    printf("%-22s %12.6f %12.6f\n", "mean NLL (nats)", q->nll_stage, q->nll_ref);
    printf("%-22s %12.4f %12.4f\n", "perplexity", exp(q->nll_stage), exp(q->nll_ref));
    printf("tokens scored          %lld\n", (long long)q->n);
    printf("ΔNLL (stage - ref)     %+.6e\n", q->nll_stage - q->nll_ref);
    printf("KL(ref || stage)       mean %.6e  max %.6e (position %lld)\n", q->kl_mean, q->kl_max,
           (long long)q->kl_max_pos);
    printf("top-1 agreement        %.2f%% (%lld/%lld)\n", 100.0 * (double)q->top1_agree / (double)q->n,
           (long long)q->top1_agree, (long long)q->n);
}

static cJSON *quality_json(const rc_quality *q, const char *model, const char *text, const char *sname,
                           const char *sprec, const char *rname, const char *rprec, int64_t n_text, int64_t T)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", model);
    cJSON_AddStringToObject(j, "text", text);
    cJSON_AddStringToObject(j, "stage", sname);
    cJSON_AddStringToObject(j, "stage_precision", sprec);
    cJSON_AddStringToObject(j, "reference", rname);
    cJSON_AddStringToObject(j, "reference_precision", rprec);
    cJSON_AddNumberToObject(j, "text_tokens", (double)n_text);
    cJSON_AddNumberToObject(j, "tokens", (double)T);
    cJSON_AddNumberToObject(j, "tokens_scored", (double)q->n);
    cJSON_AddNumberToObject(j, "nll_stage", q->nll_stage);
    cJSON_AddNumberToObject(j, "nll_ref", q->nll_ref);
    cJSON_AddNumberToObject(j, "ppl_stage", exp(q->nll_stage));
    cJSON_AddNumberToObject(j, "ppl_ref", exp(q->nll_ref));
    cJSON_AddNumberToObject(j, "dnll", q->nll_stage - q->nll_ref);
    cJSON_AddNumberToObject(j, "kl_mean", q->kl_mean);
    cJSON_AddNumberToObject(j, "kl_max", q->kl_max);
    cJSON_AddNumberToObject(j, "kl_max_position", (double)q->kl_max_pos);
    cJSON_AddNumberToObject(j, "top1_agreement", (double)q->top1_agree / (double)q->n);
    return j;
}

int rc_cmd_quality(int argc, char **argv)
{
    const char *stage = "ref", *against = "ref", *model = NULL, *text = NULL, *json = NULL;
    long max_tokens = 512;
    double max_dnll = NAN;
    rc_stage_opts so = {0};
    int sopt;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        char *end;
        if (!strcmp(a, "--stage") && has)
            stage = argv[++i];
        else if (!strcmp(a, "--against") && has)
            against = argv[++i];
        else if (!strcmp(a, "--model") && has)
            model = argv[++i];
        else if (!strcmp(a, "--text") && has)
            text = argv[++i];
        else if (!strcmp(a, "--json") && has)
            json = argv[++i];
        else if (!strcmp(a, "--max-tokens") && has) {
            max_tokens = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || max_tokens < 2 || max_tokens > 1000000)
                return rc_usage_error("--max-tokens needs a count in [2, 1000000], got '%s'", argv[i]);
        } else if (!strcmp(a, "--max-dnll") && has) {
            max_dnll = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !isfinite(max_dnll))
                return rc_usage_error("--max-dnll needs a number, got '%s'", argv[i]);
        } else if (!strcmp(a, "--device") && has) {
            if (!rc_parse_device(argv[++i], &so.device))
                return rc_usage_error("--device needs a GPU ordinal in [0, 1024], got '%s'", argv[i]);
        } else if ((sopt = rc_stage_opt_parse(argc, argv, &i, &so)) != 0) {
            if (sopt < 0)
                return RC_EXIT_ERROR;
        } else {
            static const char *const value_opts[] = {"--stage", "--against", "--model", "--text", "--json",
                                                     "--max-tokens", "--max-dnll", "--device",
                                                     "--resident-layers", "--kv-tile", NULL};
            return rc_usage_error(rc_arg_error_fmt(a, value_opts), a);
        }
    }
    if (!model || !text)
        return rc_usage_error("quality needs --model FILE.gguf|HF_DIR and --text FILE%s", "");
    const rc_stage *S = rc_stage_find(stage), *R = rc_stage_find(against);
    if (!S || !R) {
        fprintf(stderr, "harness: unknown stage '%s' (built: %s)\n", S ? against : stage, rc_stage_names());
        return RC_EXIT_ERROR;
    }
    const rc_stage_opts ro = {.device = so.device}; /* the reference in its default storage */
    rc_err e = {0};
    int32_t *ids = NULL;
    int64_t n_text = 0;
    if (rc_quality_text_ids(model, text, &ids, &n_text, &e)) {
        fprintf(stderr, "harness: error: %s\n", e.msg);
        return RC_EXIT_ERROR;
    }
    rc_model m;
    if (rc_model_load(&m, model, &e)) {
        free(ids);
        fprintf(stderr, "harness: error: %s\n", e.msg);
        return RC_EXIT_ERROR;
    }
    const int64_t ctx = model_context(model);
    int64_t T = n_text < max_tokens ? n_text : max_tokens;
    if (ctx && T > ctx)
        T = ctx;
    const int64_t V = m.cfg.vocab;
    const char *sprec = rc_stage_storage(S, &so), *rprec = rc_stage_storage(R, &ro);
    printf("quality %s: stage %s (%s) against %s (%s), %s\n", model, stage, sprec, against, rprec, text);
    if (T < n_text)
        printf("cut: the text is %lld tokens; scoring the first %lld (--max-tokens %ld, context %lld)\n",
               (long long)n_text, (long long)T, max_tokens, (long long)ctx);
    else
        printf("text: %lld tokens (context %lld)\n", (long long)T, (long long)ctx);
    float *ls = rc_calloc(T * V, sizeof *ls, &e, "stage logits");
    float *lr = rc_calloc(T * V, sizeof *lr, &e, "reference logits");
    double ts = 0, tr = 0;
    int rc = !ls || !lr ? e.code : rc_model_check_ids(&m, ids, T, &e);
    if (!rc)
        rc = run_stage(S, &so, &m, ids, T, ls, &ts, &e);
    if (!rc)
        rc = run_stage(R, &ro, &m, ids, T, lr, &tr, &e);
    int exit_code = RC_EXIT_PASS;
    rc_quality q;
    if (rc) {
        fprintf(stderr, "harness: error: %s\n", e.msg);
        exit_code = RC_EXIT_ERROR;
    } else if (rc_quality_score(lr, ls, ids, T, V, &q)) {
        fprintf(stderr, "harness: error: %s's logits hold NaN/Inf at position %lld\n", q.bad_stage ? stage : against,
                (long long)q.bad_pos);
        exit_code = RC_EXIT_BOUND;
    } else {
        print_table(&q, stage, sprec, against, rprec);
        printf("time                   %s %.1f s, %s %.1f s\n", stage, ts, against, tr);
        const double dnll = q.nll_stage - q.nll_ref;
        if (!isnan(max_dnll)) {
            exit_code = dnll > max_dnll ? RC_EXIT_BOUND : RC_EXIT_PASS;
            printf("VERDICT quality: %s (ΔNLL %.3e %s --max-dnll %g)\n", exit_code ? "FAIL" : "PASS", dnll,
                   exit_code ? ">" : "<=", max_dnll);
        }
        if (json) {
            cJSON *root = cJSON_CreateObject();
            cJSON_AddStringToObject(root, "tool", "refchain harness quality");
            cJSON_AddNumberToObject(root, "exit_code", exit_code);
            cJSON_AddItemToObject(root, "results",
                                  quality_json(&q, model, text, stage, sprec, against, rprec, n_text, T));
            const int wrc = rc_write_json_file(json, root);
            if (wrc > exit_code)
                exit_code = wrc;
            cJSON_Delete(root);
        }
    }
    free(ls);
    free(lr);
    free(ids);
    rc_model_free(&m);
    return exit_code;
}
