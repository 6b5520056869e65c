/* harness compare (see compare.h). */
#include "compare.h"

#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "metrics.h"

/* ---- collecting what the stage reports ---- */
typedef struct collect_ctx {
    const rc_golden *g;
    const char *pattern;
    rc_tensors got;
    rc_err *e;
} collect_ctx;

static int probe_selected(const char *pattern, const char *name)
{
    return !pattern || fnmatch(pattern, name, 0) == 0;
}

static int collect_want(void *user, const char *name)
{
    collect_ctx *c = user;
    return probe_selected(c->pattern, name) && rc_tensors_find(&c->g->probes, name) != NULL;
}

static int collect_emit(void *user, const char *name, const float *data, int ndim, const int64_t *shape)
{
    collect_ctx *c = user;
    int64_t n;
    if (!rc_numel(ndim, shape, &n))
        return rc_fail(c->e, RC_E_RANGE, "probe '%s': size overflow", name);
    float *copy = rc_calloc(n ? n : 1, sizeof *copy, c->e, name);
    if (!copy)
        return c->e->code;
    memcpy(copy, data, (size_t)n * sizeof *copy);
    return rc_tensors_add(&c->got, name, ndim, shape, copy, c->e);
}

/* ---- one table row ---- */
typedef struct row {
    char name[64];
    char shape[48], worst[48], status[16];
    rc_metrics m;
    int fail;
} row;

static void print_header(void)
{
    printf("%-24s %-14s %10s %10s %10s %10s %-14s %8s  %s\n", "probe", "shape", "max-abs", "scaled", "max-rel", "rms",
           "worst", "bound", "result");
}

static void print_row(const row *r, double tol)
{
    if (r->status[0] && strcmp(r->status, "ok") && strcmp(r->status, "FAIL") && strcmp(r->status, "NaN/Inf")) {
        printf("%-24s %-14s %10s %10s %10s %10s %-14s %8.1e  %s\n", r->name, r->shape, "-", "-", "-", "-", "-", tol,
               r->status);
        return;
    }
    printf("%-24s %-14s %10.3e %10.3e %10.3e %10.3e %-14s %8.1e  %s\n", r->name, r->shape, r->m.max_abs, r->m.scaled,
           r->m.max_rel, r->m.rms, r->worst, tol, r->status);
}

static cJSON *row_json(const row *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "probe", r->name);
    cJSON_AddStringToObject(o, "shape", r->shape);
    cJSON_AddStringToObject(o, "result", r->status);
    if (!strcmp(r->status, "ok") || !strcmp(r->status, "FAIL") || !strcmp(r->status, "NaN/Inf")) {
        cJSON_AddNumberToObject(o, "max_abs", isfinite(r->m.max_abs) ? r->m.max_abs : -1);
        cJSON_AddNumberToObject(o, "scaled", isfinite(r->m.scaled) ? r->m.scaled : -1);
        cJSON_AddNumberToObject(o, "max_rel", isfinite(r->m.max_rel) ? r->m.max_rel : -1);
        cJSON_AddNumberToObject(o, "rms", r->m.rms);
        cJSON_AddNumberToObject(o, "max_ref", r->m.max_ref);
        cJSON_AddNumberToObject(o, "nonfinite", (double)r->m.nonfinite);
        cJSON_AddStringToObject(o, "worst_index", r->worst);
    }
    return o;
}

static void judge(row *r, const float *a, const float *b, int64_t n, int ndim, const int64_t *shape, double tol)
{
    rc_metrics_compute(a, b, n, &r->m);
    rc_index_str(r->m.worst, ndim, shape, r->worst, sizeof r->worst);
    r->fail = r->m.nonfinite || !(r->m.scaled <= tol);
    snprintf(r->status, sizeof r->status, "%s", r->m.nonfinite ? "NaN/Inf" : r->fail ? "FAIL" : "ok");
}

static int argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (int)best;
}

/* ---- the greedy continuation, teacher-forced with HF's tokens ---- */
typedef struct greedy_result {
    int steps, equal, first_mismatch;
    double worst_scaled, worst_abs;
    int worst_step;
} greedy_result;

static int check_greedy(const rc_golden *g, const rc_compare_opts *o, void *st, row **rows, int *nrows,
                        greedy_result *gr, rc_err *e)
{
    const int64_t T0 = g->n_ids, N = g->n_steps, V = g->vocab;
    int32_t *ids = rc_calloc(T0 + N, sizeof *ids, e, "greedy ids");
    float *logits = rc_calloc((T0 + N) * V, sizeof *logits, e, "greedy logits");
    row *rs = rc_calloc(N ? N : 1, sizeof *rs, e, "rows");
    int rc = (!ids || !logits || !rs) ? e->code : RC_OK;
    memset(gr, 0, sizeof *gr);
    gr->first_mismatch = -1;
    if (!rc) {
        memcpy(ids, g->ids, (size_t)T0 * sizeof *ids);
        memcpy(ids + T0, g->greedy_tokens, (size_t)N * sizeof *ids);
    }
    if (!rc && o->stage->greedy)
        rc = o->stage->greedy(st, g->ids, T0, g->greedy_tokens, N, logits, e);
    for (int64_t s = 0; s < N && !rc; s++) {
        const int64_t T = T0 + s;
        const float *last;
        if (o->stage->greedy)
            last = logits + s * V;
        else {
            if ((rc = o->stage->forward(st, ids, T, logits, NULL, e)))
                break;
            last = logits + (T - 1) * V;
        }
        const float *want = g->greedy_logits + s * V;
        row *r = &rs[s];
        snprintf(r->name, sizeof r->name, "greedy.step%02d", (int)s);
        int64_t shape[1] = {V};
        snprintf(r->shape, sizeof r->shape, "[%lld]", (long long)V);
        judge(r, last, want, V, 1, shape, o->tol);
        int tok = argmax(last, V);
        if (tok == g->greedy_tokens[s])
            gr->equal++;
        else {
            r->fail = 1;
            snprintf(r->status, sizeof r->status, "tok %d!=%d", tok, g->greedy_tokens[s]);
            if (gr->first_mismatch < 0)
                gr->first_mismatch = (int)s;
        }
        if (r->m.scaled > gr->worst_scaled || s == 0) {
            gr->worst_scaled = r->m.scaled;
            gr->worst_abs = r->m.max_abs;
            gr->worst_step = (int)s;
        }
        gr->steps++;
    }
    free(ids);
    free(logits);
    *rows = rs;
    *nrows = gr->steps;
    return rc;
}

int rc_compare_golden(const char *path, const rc_compare_opts *o, void *json_out)
{
    rc_err e = {0};
    rc_golden g;
    rc_model m;
    void *st = NULL;
    int rc = rc_golden_load(path, RC_GOLDEN_ALL, &g, &e);
    if (rc) {
        fprintf(stderr, "harness: error: %s\n", e.msg);
        return RC_EXIT_ERROR;
    }
    int model_ok = 0, stage_ok = 0, exit_code = RC_EXIT_ERROR;
    row *rows = NULL, *grows = NULL;
    int ngrows = 0;
    collect_ctx cc = {.g = &g, .pattern = o->probe, .e = &e};
    greedy_result gr = {0};
    if ((rc = rc_model_from_golden(&m, &g, &e)))
        goto out;
    model_ok = 1;
    if ((rc = o->stage->open(&st, &m, &o->stage_opts, &e)))
        goto out;
    stage_ok = 1;
    rc_probe_sink sink = {.emit = collect_emit, .want = collect_want, .user = &cc};
    if ((rc = o->stage->forward(st, g.ids, g.n_ids, NULL, &sink, &e)))
        goto out;

    const int P = g.probes.n;
    rows = rc_calloc(P ? P : 1, sizeof *rows, &e, "rows");
    if (!rows) {
        rc = e.code;
        goto out;
    }
    int nsel = 0, nfail = 0, nskip = 0, first = -1, worst = -1;
    for (int i = 0; i < P; i++) {
        const rc_tensor *want = &g.probes.t[i];
        row *r = &rows[i];
        snprintf(r->name, sizeof r->name, "%s", want->name);
        rc_shape_str(want->ndim, want->shape, r->shape, sizeof r->shape);
        if (!probe_selected(o->probe, want->name)) {
            snprintf(r->status, sizeof r->status, "-");
            continue;
        }
        nsel++;
        const rc_tensor *got = rc_tensors_find(&cc.got, want->name);
        if (!got) {
            r->fail = o->stage->reports_all_probes;
            snprintf(r->status, sizeof r->status, r->fail ? "MISSING" : "skipped");
            nskip += !r->fail;
        } else if (got->numel != want->numel) {
            char gs[48];
            r->fail = 1;
            snprintf(r->status, sizeof r->status, "SHAPE");
            fprintf(stderr, "harness: probe %s: stage reported %s, golden has %s\n", want->name,
                    rc_shape_str(got->ndim, got->shape, gs, sizeof gs), r->shape);
        } else {
            judge(r, got->data, want->data, want->numel, want->ndim, want->shape, o->tol);
            if (worst < 0 || r->m.scaled > rows[worst].m.scaled)
                worst = i;
        }
        if (r->fail) {
            nfail++;
            if (first < 0)
                first = i;
        }
    }
    int do_greedy = o->greedy && g.n_steps > 0 && probe_selected(o->probe, "greedy.step00");
    if (do_greedy && (rc = check_greedy(&g, o, st, &grows, &ngrows, &gr, &e)))
        goto out;
    int gfail = 0, gfirst = -1;
    for (int s = 0; s < ngrows; s++)
        if (grows[s].fail) {
            gfail++;
            if (gfirst < 0)
                gfirst = s;
        }

    if (!o->quiet) {
        printf("golden %s  preset %s  model_type %s  stage %s  (transformers %s, torch %s)\n", path, g.preset,
               g.model_type, o->stage->name, g.transformers_version ? g.transformers_version : "?",
               g.torch_version ? g.torch_version : "?");
        print_header();
        for (int i = 0; i < P; i++)
            if (strcmp(rows[i].status, "-"))
                print_row(&rows[i], o->tol);
        for (int s = 0; s < ngrows; s++)
            print_row(&grows[s], o->tol);
    }
    char where[256];
    if (first >= 0) {
        const row *r = &rows[first];
        snprintf(where, sizeof where, "%s %s (scaled max-abs %.3e > %.1e at %s)", r->name, r->status, r->m.scaled,
                 o->tol, r->worst);
        printf("first divergence: %s\n", where);
    } else if (gfirst >= 0) {
        const row *r = &grows[gfirst];
        snprintf(where, sizeof where, "%s %s (scaled max-abs %.3e, bound %.1e)", r->name, r->status, r->m.scaled,
                 o->tol);
        printf("first divergence: %s\n", where);
    }
    int failed = nfail + gfail > 0;
    if (failed)
        printf("VERDICT %s stage=%s: FAIL (%s link) - %d of %d probes, %d of %d greedy steps out of bounds; first: %s\n",
               g.preset, o->stage->name, o->stage->link, nfail, nsel, gfail, ngrows, where);
    else
        printf("VERDICT %s stage=%s: PASS - %d probes%s within scaled max-abs %.1e (worst %.3e at %s)%s; greedy %d/%d "
               "tokens equal, worst step logits max-abs %.3e\n",
               g.preset, o->stage->name, nsel - nskip, nskip ? " (others skipped)" : "", o->tol,
               worst >= 0 ? rows[worst].m.scaled : 0.0, worst >= 0 ? rows[worst].name : "-",
               worst >= 0 ? "" : "", gr.equal, gr.steps, gr.worst_abs);
    exit_code = failed ? RC_EXIT_BOUND : RC_EXIT_PASS;

    if (json_out) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "golden", path);
        cJSON_AddStringToObject(j, "preset", g.preset);
        cJSON_AddStringToObject(j, "stage", o->stage->name);
        cJSON_AddNumberToObject(j, "tol", o->tol);
        cJSON_AddStringToObject(j, "metric", "scaled max-abs = max|a-b| / max(1, max|ref|)");
        cJSON_AddStringToObject(j, "verdict", failed ? "fail" : "pass");
        if (failed) {
            cJSON_AddStringToObject(j, "link", o->stage->link);
            cJSON_AddStringToObject(j, "first_divergence", first >= 0 ? rows[first].name : grows[gfirst].name);
        }
        cJSON *arr = cJSON_AddArrayToObject(j, "probes");
        for (int i = 0; i < P; i++)
            if (strcmp(rows[i].status, "-"))
                cJSON_AddItemToArray(arr, row_json(&rows[i]));
        cJSON *ga = cJSON_AddArrayToObject(j, "greedy");
        for (int s = 0; s < ngrows; s++)
            cJSON_AddItemToArray(ga, row_json(&grows[s]));
        cJSON_AddNumberToObject(j, "greedy_tokens_equal", gr.equal);
        cJSON_AddNumberToObject(j, "greedy_steps", gr.steps);
        cJSON_AddItemToArray((cJSON *)json_out, j);
    }
out:
    if (rc)
        fprintf(stderr, "harness: error: %s\n", e.msg[0] ? e.msg : rc_code_name(rc));
    free(rows);
    free(grows);
    rc_tensors_free(&cc.got);
    if (stage_ok)
        o->stage->close(st);
    if (model_ok)
        rc_model_free(&m);
    rc_golden_free(&g);
    return rc ? RC_EXIT_ERROR : exit_code;
}
