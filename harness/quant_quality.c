/* harness quant-quality: ref on each quantization scheme's dequantized weights against ref on the unquantized
 * model: ΔNLL, KL, top-1 and greedy-token agreement over a held-out token stream, one table row a scheme. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compare.h"
#include "forward.h"
#include "quality.h"
#include "quantize_model.h"
#include "util.h"

typedef struct qq_row {
    const char *key; /* --rows name */
    const char *scheme;
    int sym, gptq;
    int bf16;        /* context row: every weight rounded to bf16, nothing quantized */
    int lm;          /* lm_head quantized too (the lm_head flag; an untied lm_head) */
    rc_quality q;
    int64_t greedy_equal, greedy_n; /* greedy tokens equal to the unquantized model's (each prompt's equal prefix),
                                     * of greedy_n over all prompts */
    int64_t prompts_equal;          /* prompts whose greedy tokens are all equal */
    double flip_margin;             /* the smallest, over the prompts that differ, of the unquantized model's logit
                                     * of its own token minus its logit of the quantized model's token at the first
                                     * differing step (a near-tie when small) */
    int32_t *ids;                   /* [NP, G] this model's greedy tokens */
    int64_t *first;                 /* [NP] each prompt's first differing step (G: all equal) */
    double *margin;                 /* [NP] that step's margin, as flip_margin (NaN where all equal) */
    double quantize_s, eval_s;
} qq_row;

/* x rounded to the nearest bf16 (ties to even), as an fp32; NaN/Inf are left alone. */
static float bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Every fp32 weight of m rounded to bf16 in place (the store owns each one, tied and un-permuted ones included). */
static void round_bf16(rc_model *m)
{
    for (int i = 0; i < m->store.n; i++) {
        rc_tensor *t = &m->store.t[i];
        for (int64_t k = 0; !t->is_i32 && k < t->numel; k++)
            t->data[k] = bf16_round(t->data[k]);
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* out[n]: n greedy tokens after prompt[P] (ref, full forward per step); last[n, V] (optional): each step's logits. */
static int greedy(const rc_model *m, const int32_t *prompt, int64_t P, int64_t n, int32_t *out, float *last,
                  rc_err *e)
{
    const int64_t V = m->cfg.vocab;
    int32_t *ids = malloc((size_t)(P + n) * sizeof *ids);
    float *lg = rc_calloc((P + n) * V, sizeof *lg, e, "greedy logits");
    int rc = ids && lg ? RC_OK : rc_fail(e, RC_E_NOMEM, "out of memory for the greedy run");
    if (!rc)
        memcpy(ids, prompt, (size_t)P * sizeof *ids);
    for (int64_t s = 0; s < n && !rc; s++) {
        if ((rc = ref_forward(m, ids, P + s, lg, NULL, e)))
            break;
        out[s] = ids[P + s] = rc_argmax(lg + (P + s - 1) * V, V);
        if (last)
            memcpy(last + s * V, lg + (P + s - 1) * V, (size_t)V * sizeof *last);
    }
    free(ids);
    free(lg);
    return rc;
}

/* 1 when the comma-separated list holds key. */
static int list_has(const char *list, const char *key)
{
    const size_t n = strlen(key);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, key, n) && (p[n] == ',' || !p[n]))
            return 1;
    return 0;
}

static const char *row_zero(const qq_row *r)
{
    return r->bf16 ? "-" : r->sym ? "sym" : "asym";
}

static const char *row_method(const qq_row *r)
{
    return r->bf16 ? "round" : r->gptq ? (r->lm ? "gptq+lm" : "gptq") : r->lm ? "rtn+lm" : "rtn";
}

static cJSON *row_json(const qq_row *r, int64_t prompts)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "scheme", r->scheme);
    cJSON_AddStringToObject(j, "zero", r->bf16 ? "none" : r->sym ? "symmetric" : "asymmetric");
    cJSON_AddStringToObject(j, "method", r->bf16 ? "bf16-round" : r->gptq ? "gptq" : "rtn");
    cJSON_AddBoolToObject(j, "lm_head", r->lm);
    cJSON_AddNumberToObject(j, "dnll", r->q.nll_stage - r->q.nll_ref);
    cJSON_AddNumberToObject(j, "nll", r->q.nll_stage);
    cJSON_AddNumberToObject(j, "nll_ref", r->q.nll_ref);
    cJSON_AddNumberToObject(j, "kl_mean", r->q.kl_mean);
    cJSON_AddNumberToObject(j, "kl_max", r->q.kl_max);
    cJSON_AddNumberToObject(j, "top1_agreement", (double)r->q.top1_agree / (double)r->q.n);
    cJSON_AddNumberToObject(j, "greedy_equal", (double)r->greedy_equal);
    cJSON_AddNumberToObject(j, "greedy_tokens", (double)r->greedy_n);
    cJSON_AddNumberToObject(j, "greedy_prompts", (double)prompts);
    cJSON_AddNumberToObject(j, "greedy_prompts_equal", (double)r->prompts_equal);
    if (r->greedy_equal < r->greedy_n)
        cJSON_AddNumberToObject(j, "greedy_flip_margin", r->flip_margin);
    if (r->first && r->greedy_n) { /* per prompt: its first differing step (the count of steps: none), the tokens */
        const int64_t G = r->greedy_n / prompts;
        cJSON *fd = cJSON_AddArrayToObject(j, "greedy_first_difference"), *ids = cJSON_AddArrayToObject(j, "greedy_ids");
        for (int64_t i = 0; i < prompts; i++) {
            cJSON_AddItemToArray(fd, cJSON_CreateNumber((double)r->first[i]));
            cJSON *one = cJSON_CreateArray();
            for (int64_t k = 0; k < G; k++)
                cJSON_AddItemToArray(one, cJSON_CreateNumber(r->ids[i * G + k]));
            cJSON_AddItemToArray(ids, one);
        }
    }
    cJSON_AddNumberToObject(j, "quantize_seconds", r->quantize_s);
    cJSON_AddNumberToObject(j, "eval_seconds", r->eval_s);
    return j;
}

/* The margin of token t in logits l[V]: l[t] minus the largest other logit. */
static double margin(const float *l, int32_t t, int64_t V)
{
    float best = -INFINITY;
    for (int64_t j = 0; j < V; j++)
        if (j != t && l[j] > best)
            best = l[j];
    return (double)l[t] - (double)best;
}

/* One line: at each step up to the first difference, the unquantized model's token's margin in the unquantized
 * (l0) and in the row's (l1) logits; a negative second margin is a flip. */
static void print_margins(const qq_row *r, const int32_t *g0, const int32_t *g1, const float *l0, const float *l1,
                          int64_t G, int64_t V)
{
    printf("  %s %s %s: prompt 0 margins (unquantized/this):", r->scheme, row_zero(r), row_method(r));
    for (int64_t s = 0; s < G; s++) {
        printf(" %lld:%.4f/%.4f", (long long)s, margin(l0 + s * V, g0[s], V), margin(l1 + s * V, g0[s], V));
        if (g1[s] != g0[s])
            break;
    }
    printf("\n");
}

/* The greedy prompts: NP runs of G tokens, prompt i being the P held-out ids at prompt_at(i); margins: print
 * prompt 0's step margins; only: rcq_opts.only; ref_bf16 (--reference bf16): the reference is the model with every
 * weight rounded to bf16, and each scheme quantizes those rounded weights (a bf16 checkpoint quantized, held to
 * itself). */
typedef struct qq_greedy {
    int64_t P, G, NP, T;
    int margins, ref_bf16;
    const char *only;
} qq_greedy;

static int64_t prompt_at(const qq_greedy *g, int64_t i)
{
    return i * (g->T - g->P) / g->NP;
}

/* One scheme: the model reloaded, quantized in place (or rounded to bf16), scored against the unquantized logits
 * lr and greedy tokens g0 [NP, G] (their logits g0l [NP, G, V]). */
static int run_row(const char *model, qq_row *r, const rc_gq_opts *gq, const int32_t *calib, int64_t C,
                   const int32_t *ev, int64_t T, const float *lr, const int32_t *g0, const float *g0l,
                   const qq_greedy *gs, rc_err *e)
{
    const int64_t G = gs->G;
    rcq_source src;
    int rc = rcq_source_load(&src, model, e);
    if (rc)
        return rc;
    rcq_opts o = {.gptq = r->gptq, .gq = *gq, .progress = 0, .only = gs->only, .lm_head = r->lm};
    rcq_model qm = {0};
    const int64_t V = src.m.cfg.vocab;
    float *ls = NULL;
    int32_t *g1 = NULL;
    float *g1l = NULL;
    double t0 = now_s();
    if (r->bf16 || gs->ref_bf16)
        round_bf16(&src.m);
    if (!r->bf16 && !(rc = rc_gq_scheme_parse(r->scheme, r->sym, &o.scheme, e)))
        rc = rcq_quantize(&src.m, &o, calib, C, &qm, e);
    r->quantize_s = now_s() - t0;
    t0 = now_s();
    if (!rc && (!(ls = rc_calloc(T * V, sizeof *ls, e, "quantized logits")) ||
                !(g1 = rc_calloc(G ? G : 1, sizeof *g1, e, "greedy tokens")) ||
                (gs->margins && !(g1l = rc_calloc((G ? G : 1) * V, sizeof *g1l, e, "greedy logits")))))
        rc = e->code;
    if (!rc)
        rc = ref_forward(&src.m, ev, T, ls, NULL, e);
    if (!rc && rc_quality_score(lr, ls, ev, T, V, &r->q))
        rc = rc_fail(e, RC_E_RANGE, "%s (%s): the quantized model's logits hold NaN/Inf at position %lld", r->scheme,
                     r->gptq ? "gptq" : "rtn", (long long)r->q.bad_pos);
    r->greedy_n = G * gs->NP;
    r->greedy_equal = r->prompts_equal = 0;
    r->flip_margin = INFINITY;
    if (!rc && G && (!(r->ids = rc_calloc(G * gs->NP, sizeof *r->ids, e, "greedy tokens")) ||
                     !(r->first = rc_calloc(gs->NP, sizeof *r->first, e, "greedy steps")) ||
                     !(r->margin = rc_calloc(gs->NP, sizeof *r->margin, e, "greedy margins"))))
        rc = e->code;
    for (int64_t i = 0; !rc && G && i < gs->NP; i++) {
        const int32_t *want = g0 + i * G;
        if ((rc = greedy(&src.m, ev + prompt_at(gs, i), gs->P, G, g1, i == 0 && gs->margins ? g1l : NULL, e)))
            break;
        if (i == 0 && gs->margins)
            print_margins(r, want, g1, g0l, g1l, G, V);
        int64_t s = 0;
        while (s < G && g1[s] == want[s])
            s++;
        r->greedy_equal += s;
        r->prompts_equal += s == G;
        memcpy(r->ids + i * G, g1, (size_t)G * sizeof *g1);
        r->first[i] = s;
        r->margin[i] = NAN;
        if (s < G) {
            const float *l0 = g0l + (i * G + s) * V;
            const double m = (double)l0[want[s]] - (double)l0[g1[s]];
            r->margin[i] = m;
            r->flip_margin = m < r->flip_margin ? m : r->flip_margin;
        }
    }
    r->eval_s = now_s() - t0;
    free(ls);
    free(g1);
    free(g1l);
    rcq_model_free(&qm);
    rcq_source_free(&src);
    return rc;
}

int rc_cmd_quant_quality(int argc, char **argv)
{
    const char *model = NULL, *calib = NULL, *eval = NULL, *text = NULL, *json = NULL;
    const char *only = NULL, *qonly = NULL;
    int margins = 0, ref_bf16 = 0;
    long group = 128, n_calib = 128, n_eval = 256, n_greedy = 16, n_prompts = 1;
    int calib_golden = 0, check = 0;
    rc_gq_opts gq = {.damp = 0.01, .block = 128};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        char *end;
        long *count = NULL;
        if (!strcmp(a, "--calib-golden"))
            calib_golden = 1;
        else if (!strcmp(a, "--check"))
            check = 1;
        else if (!strcmp(a, "--model") && has)
            model = argv[++i];
        else if (!strcmp(a, "--calib") && has)
            calib = argv[++i];
        else if (!strcmp(a, "--eval") && has)
            eval = argv[++i];
        else if (!strcmp(a, "--text") && has)
            text = argv[++i];
        else if (!strcmp(a, "--json") && has)
            json = argv[++i];
        else if (!strcmp(a, "--rows") && has)
            only = argv[++i];
        else if (!strcmp(a, "--quantize-only") && has)
            qonly = argv[++i];
        else if (!strcmp(a, "--margins"))
            margins = 1;
        else if (!strcmp(a, "--reference") && has) {
            const char *v = argv[++i];
            if (strcmp(v, "fp32") && strcmp(v, "bf16"))
                return rc_usage_error("--reference is fp32 (the unquantized model) or bf16 (its weights rounded to "
                                      "bf16), got '%s'", v);
            ref_bf16 = !strcmp(v, "bf16");
        }
        else if (!strcmp(a, "--prompts") && has)
            count = &n_prompts;
        else if (!strcmp(a, "--damp") && has) {
            gq.damp = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(gq.damp >= 0 && gq.damp <= 1))
                return rc_usage_error("--damp needs a number in [0, 1], got '%s'", argv[i]);
        } else if (!strcmp(a, "--group") && has)
            count = &group;
        else if (!strcmp(a, "--calib-tokens") && has)
            count = &n_calib;
        else if (!strcmp(a, "--eval-tokens") && has)
            count = &n_eval;
        else if (!strcmp(a, "--greedy") && has)
            count = &n_greedy;
        else
            return rc_usage_error("quant-quality: unknown or incomplete argument '%s'", a);
        if (count) {
            *count = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || *count < 0 || *count > 1000000)
                return rc_usage_error("quant-quality needs a count in [0, 1000000], got '%s'", argv[i]);
        }
    }
    if (!model || (!text && !eval))
        return rc_usage_error("quant-quality needs --model and --text FILE or --eval IDS_FILE%s", "");
    if (group != 128 && group != 64 && group != 32)
        return rc_usage_error("--group is 32, 64 or 128, got '%s'", group == 0 ? "0" : "another");
    if (n_prompts < 1)
        return rc_usage_error("--prompts needs at least 1, got '%s'", "0");
    if ((only || qonly) && check)
        return rc_usage_error("--check judges every row of the whole policy; it excludes --rows and --quantize-only%s",
                              "");
    if (text && (eval || calib || calib_golden))
        return rc_usage_error("--text splits one stream into calibration and held-out ids; it excludes "
                              "--eval, --calib and --calib-golden%s", "");
    rc_err e = {0};
    rcq_source src;
    if (rcq_source_load(&src, model, &e)) {
        fprintf(stderr, "harness: error: %s\n", e.msg);
        return RC_EXIT_ERROR;
    }
    int32_t *cal = NULL, *ev = NULL, *all = NULL;
    int64_t C = 0, T = 0, n_all = 0;
    int rc = RC_OK;
    if (ref_bf16)
        round_bf16(&src.m); /* the reference's weights, after the text's ids (which need no weights) */
    if (text) {
        if (!(rc = rc_quality_text_ids(model, text, &all, &n_all, &e)) && n_all < n_calib + 2)
            rc = rc_fail(&e, RC_E_FORMAT, "%s: %lld tokens; --calib-tokens %ld leave fewer than 2 held out", text,
                         (long long)n_all, n_calib);
        if (!rc) {
            C = n_calib;
            T = n_all - C < n_eval ? n_all - C : n_eval;
            cal = malloc((size_t)(C ? C : 1) * sizeof *cal);
            ev = malloc((size_t)T * sizeof *ev);
            if (!cal || !ev)
                rc = rc_fail(&e, RC_E_NOMEM, "out of memory for the ids");
            else {
                memcpy(cal, all, (size_t)C * sizeof *cal);
                memcpy(ev, all + C, (size_t)T * sizeof *ev);
            }
        }
    } else {
        rc = rcq_read_ids(eval, src.m.cfg.vocab, &ev, &T, &e);
        if (!rc && T > n_eval)
            T = n_eval;
        if (!rc && T < 2)
            rc = rc_fail(&e, RC_E_FORMAT, "%s: a held-out stream needs at least 2 ids", eval);
        if (!rc && calib)
            rc = rcq_read_ids(calib, src.m.cfg.vocab, &cal, &C, &e);
        else if (!rc && calib_golden) {
            if (!src.ids)
                rc = rc_fail(&e, RC_E_USAGE, "%s: --calib-golden needs a golden .h5 with a prompt", model);
            else
                cal = src.ids, C = src.n_ids, src.ids = NULL;
        } else if (!rc)
            rc = rc_fail(&e, RC_E_USAGE, "quant-quality needs --calib IDS_FILE or --calib-golden with --eval");
        if (!rc && C > n_calib)
            C = n_calib;
    }
    if (!rc && C < 1)
        rc = rc_fail(&e, RC_E_USAGE, "GPTQ needs at least one calibration token");
    const int64_t V = src.m.cfg.vocab, P = T / 2 < 8 ? T / 2 : 8, G = n_greedy;
    const qq_greedy gs = {.P = P, .G = G, .NP = n_prompts, .T = T, .margins = margins, .ref_bf16 = ref_bf16,
                          .only = qonly};
    if (!rc && G && n_prompts > T - P)
        rc = rc_fail(&e, RC_E_USAGE, "--prompts %ld: the %lld held-out ids hold at most %lld prompts of %lld", n_prompts,
                     (long long)T, (long long)(T - P), (long long)P);
    float *lr = rc ? NULL : rc_calloc(T * V, sizeof *lr, &e, "reference logits");
    int32_t *g0 = rc ? NULL : rc_calloc(G ? G * n_prompts : 1, sizeof *g0, &e, "greedy tokens");
    float *g0l = rc ? NULL : rc_calloc((G ? G * n_prompts : 1) * V, sizeof *g0l, &e, "greedy logits");
    if (!rc && (!lr || !g0 || !g0l))
        rc = e.code;
    double t0 = now_s();
    if (!rc)
        rc = ref_forward(&src.m, ev, T, lr, NULL, &e);
    for (int64_t i = 0; !rc && G && i < n_prompts; i++)
        rc = greedy(&src.m, ev + prompt_at(&gs, i), P, G, g0 + i * G, g0l + i * G * V, &e);
    const double ref_s = now_s() - t0;
    char g4[16];
    snprintf(g4, sizeof g4, "int4-g%ld", group);
    qq_row rows[] = {
        {.key = "bf16", .scheme = "bf16", .bf16 = 1},
        {.key = "int8", .scheme = "int8", .sym = 1},
        {.key = "rtn", .scheme = g4},
        {.key = "rtn-sym", .scheme = g4, .sym = 1},
        {.key = "gptq-sym", .scheme = g4, .sym = 1, .gptq = 1},
        {.key = "gptq", .scheme = g4, .gptq = 1},
        {.key = "int8-gptq", .scheme = "int8", .sym = 1, .gptq = 1},
        /* lm_head quantized too (the engine's packed lm_head): only when asked */
        {.key = "int8-lm", .scheme = "int8", .sym = 1, .lm = 1},
        {.key = "rtn-lm", .scheme = g4, .lm = 1},
        {.key = "gptq-lm", .scheme = g4, .gptq = 1, .lm = 1},
    };
    enum { R_BF16, R_INT8, R_RTN, R_RTN_SYM, R_GPTQ_SYM, R_GPTQ, R_INT8_GPTQ, R_INT8_LM, R_RTN_LM, R_GPTQ_LM, NR };
    int run[NR], n_run = 0;
    for (int i = 0; i < NR; i++) /* int8 GPTQ and the lm_head rows only when asked; bf16 not against itself */
        n_run += run[i] = only ? list_has(only, rows[i].key) : i < R_INT8_GPTQ && !(ref_bf16 && i == R_BF16);
    int n_items = only ? 1 : R_INT8_GPTQ - (ref_bf16 ? 1 : 0);
    for (const char *c = only ? strchr(only, ',') : NULL; c; c = strchr(c + 1, ','))
        n_items++;
    if (!rc && n_run != n_items)
        rc = rc_fail(&e, RC_E_USAGE, "--rows '%s' names a row twice or one that is not bf16, int8, rtn, rtn-sym, gptq-sym, gptq, int8-gptq, int8-lm, rtn-lm, gptq-lm", only);
    if (!rc && ref_bf16 && run[R_BF16])
        rc = rc_fail(&e, RC_E_USAGE, "--rows bf16 with --reference bf16 would hold the bf16 model to itself");
    if (!rc) {
        printf("quant-quality %s: ref on dequantized weights against ref unquantized%s\n", model,
               ref_bf16 ? " (reference: every weight rounded to bf16, and each scheme quantizes those weights)" : "");
        printf("calibration %lld tokens, held-out %lld tokens, greedy %lld tokens after %lld from %ld prompt(s); "
               "damp %g, block %d\n", (long long)C, (long long)T, (long long)G, (long long)P, n_prompts, gq.damp,
               gq.block);
        printf("%-10s %-5s %-7s %12s %12s %12s %8s %10s %8s %9s\n", "scheme", "zero", "method", "ΔNLL", "KL mean",
               "KL max", "top-1", "greedy", "prompts", "time (s)");
    }
    for (int i = 0; i < NR && !rc; i++) {
        qq_row *r = &rows[i];
        if (!run[i])
            continue;
        if ((rc = run_row(model, r, &gq, cal, C, ev, T, lr, g0, g0l, &gs, &e)))
            break;
        char gr[32], pr[32];
        snprintf(gr, sizeof gr, "%lld/%lld", (long long)r->greedy_equal, (long long)r->greedy_n);
        snprintf(pr, sizeof pr, "%lld/%ld", (long long)r->prompts_equal, n_prompts);
        printf("%-10s %-5s %-7s %+12.5e %12.5e %12.5e %7.2f%% %10s %8s %9.1f\n", r->scheme, row_zero(r),
               row_method(r), r->q.nll_stage - r->q.nll_ref, r->q.kl_mean, r->q.kl_max,
               100.0 * (double)r->q.top1_agree / (double)r->q.n, gr, pr, r->quantize_s + r->eval_s);
        if (r->greedy_equal < r->greedy_n) {
            printf("  %s %s %s: greedy differs in %lld of %ld prompt(s); the smallest unquantized margin at a first "
                   "difference (its token's logit - the other model's token's logit) %.3e\n", r->scheme,
                   row_zero(r), row_method(r), (long long)(n_prompts - r->prompts_equal), n_prompts,
                   r->flip_margin);
            printf("  %s %s %s: first differences (prompt: step, margin):", r->scheme, row_zero(r), row_method(r));
            for (long k = 0; k < n_prompts; k++)
                if (r->first[k] < G)
                    printf(" %ld: %lld, %.4f;", k, (long long)r->first[k], r->margin[k]);
            printf("\n");
        }
        fflush(stdout);
    }
    int exit_code = rc ? RC_EXIT_ERROR : RC_EXIT_PASS;
    if (rc)
        fprintf(stderr, "harness: error: %s\n", e.msg);
    else {
        int first = 0;
        while (first < NR - 1 && !run[first])
            first++;
        printf("reference NLL %.6f (ref %.1f s)\n", rows[first].q.nll_ref, ref_s);
        const int gptq_wins = rows[R_GPTQ_SYM].q.nll_stage < rows[R_RTN_SYM].q.nll_stage &&
                              rows[R_GPTQ].q.nll_stage < rows[R_RTN].q.nll_stage;
        const int int8_greedy = rows[R_INT8].greedy_equal == rows[R_INT8].greedy_n;
        if (run[R_RTN] && run[R_RTN_SYM] && run[R_GPTQ_SYM] && run[R_GPTQ])
            printf("GPTQ below RTN at %s (sym and asym ΔNLL): %s\n", g4, gptq_wins ? "yes" : "NO");
        if (run[R_INT8])
            printf("int8 greedy tokens equal: %s\n", int8_greedy ? "yes" : "NO");
        if (check) {
            exit_code = gptq_wins && int8_greedy ? RC_EXIT_PASS : RC_EXIT_BOUND;
            printf("VERDICT quant-quality: %s\n", exit_code ? "FAIL" : "PASS");
        }
        if (json) {
            cJSON *root = cJSON_CreateObject();
            cJSON_AddStringToObject(root, "format", "refchain-quant-quality");
            cJSON_AddNumberToObject(root, "format_version", 1);
            cJSON_AddStringToObject(root, "tool", "refchain harness quant-quality");
            cJSON_AddStringToObject(root, "model", model);
            cJSON_AddStringToObject(root, "reference", ref_bf16 ? "bf16" : "fp32");
            cJSON_AddNumberToObject(root, "exit_code", exit_code);
            cJSON_AddNumberToObject(root, "calibration_tokens", (double)C);
            cJSON_AddNumberToObject(root, "heldout_tokens", (double)T);
            cJSON_AddNumberToObject(root, "damp", gq.damp);
            cJSON_AddNumberToObject(root, "block", gq.block);
            if (qonly)
                cJSON_AddStringToObject(root, "quantize_only", qonly);
            if (G) { /* the unquantized model's greedy tokens, per prompt: what each row's greedy_ids are held to */
                cJSON *ref = cJSON_AddArrayToObject(root, "greedy_reference_ids");
                for (long k = 0; k < n_prompts; k++) {
                    cJSON *one = cJSON_CreateArray();
                    for (int64_t t = 0; t < G; t++)
                        cJSON_AddItemToArray(one, cJSON_CreateNumber(g0[k * G + t]));
                    cJSON_AddItemToArray(ref, one);
                }
            }
            cJSON *arr = cJSON_AddArrayToObject(root, "rows");
            for (int i = 0; i < NR; i++)
                if (run[i])
                    cJSON_AddItemToArray(arr, row_json(&rows[i], n_prompts));
            const int wrc = rc_write_json_file(json, root);
            if (wrc > exit_code)
                exit_code = wrc;
            cJSON_Delete(root);
        }
    }
    for (int i = 0; i < NR; i++) {
        free(rows[i].ids);
        free(rows[i].first);
        free(rows[i].margin);
    }
    free(lr);
    free(g0);
    free(g0l);
    free(cal);
    free(ev);
    free(all);
    rcq_source_free(&src);
    return exit_code;
}
