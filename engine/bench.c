/* engine bench: prefill and decode of a realistic-size model with random bf16 weights (synthesized directly, no
 * fp32 copy), fully resident after several prompt lengths and in a streaming mode, against rooflines measured
 * in the same run; every row also as JSON (--json), with the spread of its repeated timings. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "eng_bw.h"
#include "eng_cli.h"
#include "eng_gdn.h"
#include "eng_qpack.h"
#include "eng_sample.h"
#include "eng_trace.h"

#define MAX_PROMPTS 8
#define READ_BYTES ((size_t)1 << 30)

typedef struct roofs {
    double read, read_median, d2d, h2d; /* bytes/s */
    double peak;                        /* FLOP/s; 0 = not given */
    const char *peak_source;
} roofs;

/* median, extremes and spread of repeated timings, in ms */
typedef struct stats {
    double med, min, max, mad, round_spread, spread;
    int n;
} stats;

typedef struct row {
    char mode[256];
    const char *key; /* "resident" or "stream" */
    int prompt_len, ok;
    stats dec, pre;
    double floor_ms, pre_roof_ms, pre_flops;
    eng_mem mem;
} row;

typedef struct bench_run {
    const char *shape, *json, *commit;
    const char *weights; /* --weights: the layer matrices' scheme, or NULL (the store's bf16 / f32) */
    const eng_weights *w;
    int steps, rounds, nrows;
    roofs rf;
    char device[256];
    row rows[2 * MAX_PROMPTS + 1]; /* stream, resident (with --decode-fusion both, fused resident rows) */
} bench_run;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* t[rounds * per] seconds, round-major. spread = max(MAD, half the range of the round medians): the margin
 * report --diff scales (bench/README.md, "Speed in the reports"). */
static void stats_of(const double *t, int rounds, int per, stats *s)
{
    const int n = rounds * per;
    double *v = malloc((size_t)n * sizeof *v), rmed_lo = INFINITY, rmed_hi = -INFINITY;
    if (!v) {
        memset(s, 0, sizeof *s);
        return;
    }
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < per; i++)
            v[i] = 1e3 * t[r * per + i];
        double m = median_of(v, per);
        rmed_lo = fmin(rmed_lo, m);
        rmed_hi = fmax(rmed_hi, m);
    }
    for (int i = 0; i < n; i++)
        v[i] = 1e3 * t[i];
    s->n = n;
    s->med = median_of(v, n);
    s->min = v[0];
    s->max = v[n - 1];
    for (int i = 0; i < n; i++)
        v[i] = fabs(v[i] - s->med);
    s->mad = median_of(v, n);
    s->round_spread = 0.5 * (rmed_hi - rmed_lo);
    s->spread = fmax(s->mad, s->round_spread);
    free(v);
}

/* matrix parameters one token multiplies through in the layers (q|k|v, o, gate|up, down) */
static double layer_params(const rc_config *c)
{
    double p = 0.0;
    for (int l = 0; l < c->n_layers; l++) {
        const rc_layer_desc *d = &c->layers[l];
        const double qd = (double)d->n_heads * d->head_dim, kvd = (double)d->n_kv_heads * d->head_dim;
        p += (double)c->hidden * (qd + 2.0 * kvd) + qd * (double)c->hidden + 3.0 * (double)c->hidden * d->intermediate;
    }
    return p;
}

/* prefill of T tokens from position 0: 2 FLOPs per weight per row, the lm_head for the last row only, and causal
 * attention (QK^T and PV: 2 * 2 * D FLOPs per (query, key) pair, T(T+1)/2 pairs per head) */
static double prefill_flops(const rc_config *c, int64_t T)
{
    double f = 2.0 * (double)T * layer_params(c) + 2.0 * (double)c->vocab * (double)c->hidden;
    for (int l = 0; l < c->n_layers; l++) {
        const double W = c->layers[l].window, t = (double)T; /* a sliding window: min(i + 1, W) keys for query i */
        const double pairs = W > 0 && W < t ? 0.5 * W * (W + 1) + (t - W) * W : 0.5 * t * (t + 1);
        f += 4.0 * c->layers[l].head_dim * (double)c->layers[l].n_heads * pairs;
    }
    return f;
}

/* A DeltaNet layer's delta-rule state S, fp32 [Hv, dv, dk], in bytes. */
static double gdn_s_bytes(const rc_layer_desc *d) { return 4.0 * d->gdn_v_heads * d->gdn_v_dim * d->gdn_k_dim; }

/* The bytes a DeltaNet decode step of layer d moves through its carried states: S and the conv state (fp32
 * [K - 1, C], C = 2 Hk dk + Hv dv), each read and written once; 0 for other layers. */
static double gdn_state_bytes(const rc_layer_desc *d)
{
    if (d->mixer != RC_MIXER_GDN)
        return 0.0;
    const double S = gdn_s_bytes(d);
    const double conv = 4.0 * (d->gdn_conv_kernel - 1) *
                        (2.0 * d->gdn_k_heads * d->gdn_k_dim + (double)d->gdn_v_heads * d->gdn_v_dim);
    return 2.0 * (S + conv);
}

/* the bytes of the vocabulary matrix a decode step reads, lm_head (the embedding is a row gather): packed when
 * quantized, the embedding's when tied */
static double head_bytes(const eng_weights *w)
{
    return (double)(w->lm_bytes ? w->lm_bytes : w->vocab_bytes);
}

/* the floors of one row: decode (bytes moved per token over the read ceiling, bytes crossing the host link over
 * the H2D bandwidth, whichever is slower; the bytes: the weights, the KV read at the mean context and the DeltaNet
 * layers' states read and written, the writes counted at the read ceiling too) and prefill (FLOPs over the peak,
 * weights read once over the read ceiling, whichever is slower) */
static void floors(const bench_run *b, const eng_plan *p, row *r)
{
    const eng_weights *w = b->w;
    const rc_config *c = &w->cfg;
    double ctx = r->prompt_len + b->steps / 2.0, kv = 0.0, kv_full = 0.0, state = 0.0;
    for (int l = 0; l < c->n_layers; l++) { /* a sliding layer reads its window (its ring stays on the device) */
        const rc_layer_desc *d = &c->layers[l];
        const double n = 2.0 * (d->window > 0 && d->window < ctx ? d->window : ctx) * d->n_kv_heads * d->head_dim *
                         (double)w->elt;
        kv += n; /* 0 on a DeltaNet layer (no KV heads) */
        kv_full += d->state == RC_STATE_KV_RING ? 0.0 : n;
        state += gdn_state_bytes(d);
    }
    const double head = head_bytes(w);
    double dev = (double)w->layer_bytes_total + kv + state + (p->vocab_on_cpu ? 0.0 : head);
    double link = (p->resident_layers >= 0 ? (double)w->layer_bytes_total : 0.0) + (p->kv_offload ? kv_full : 0.0);
    r->floor_ms = 1e3 * fmax(dev / b->rf.read, link / b->rf.h2d);
    r->pre_flops = prefill_flops(c, r->prompt_len);
    double bytes_ms = 1e3 * fmax(((double)w->layer_bytes_total + head) / b->rf.read, link / b->rf.h2d);
    r->pre_roof_ms = b->rf.peak > 0 ? fmax(1e3 * r->pre_flops / b->rf.peak, bytes_ms) : NAN;
}

/* rounds x (reset, prefill of P tokens, `steps` greedy decode steps), each timed; with r NULL one untimed round
 * of 2 steps (the warm-up: first launches load modules) */
static int measure(eng *E, const bench_run *b, int P, row *r, rc_err *e)
{
    const int64_t V = b->w->cfg.vocab;
    const int R = r ? b->rounds : 1, S = r ? b->steps : 2;
    float *lg = malloc((size_t)V * sizeof *lg);
    int32_t *ids = malloc((size_t)P * sizeof *ids);
    double *tp = calloc((size_t)R, sizeof *tp), *td = calloc((size_t)R * S, sizeof *td);
    double *tt = calloc((size_t)S, sizeof *tt); /* when each token of a round reached the host */
    int32_t *toks = calloc((size_t)S, sizeof *toks);
    int rc = (!lg || !ids || !tp || !td || !tt || !toks) ? rc_fail(e, RC_E_NOMEM, "out of host memory") : RC_OK;
    for (int i = 0; !rc && i < P; i++)
        ids[i] = (int32_t)((1000003u * (unsigned)i + 17u) % (unsigned)V);
    for (int k = 0; k < R && !rc; k++) {
        eng_reset(E);
        double t0 = eng_now();
        rc = eng_prefill(E, ids, P, lg, NULL, e);
        tp[k] = eng_now() - t0;
        int32_t tok = eng_argmax(lg, V);
        if (r && eng_trace_built() && eng_trace_reset() != 0)
            rc = rc_fail(e, RC_E_DEVICE, "trace: %s", eng_trace_error());
        { /* greedy on the device, pipelined (eng_decode_greedy_n): a token's time is from the one before it */
            double t1 = eng_now();
            rc = eng_decode_greedy_n(E, tok, S, toks, tt, e);
            for (int s = 0; s < S && !rc; s++)
                td[k * S + s] = tt[s] - (s ? tt[s - 1] : t1);
        }
        if (!rc && r && eng_trace_built() && eng_trace_collect(S) != 0)
            rc = rc_fail(e, RC_E_DEVICE, "trace: %s", eng_trace_error());
    }
    if (!rc && r && eng_trace_built()) {
        char title[64];
        snprintf(title, sizeof title, "decode after %d tokens", P);
        eng_trace_print(stdout, title);
    }
    if (!rc && r) {
        stats_of(tp, R, 1, &r->pre);
        stats_of(td, R, S, &r->dec);
        eng_memory(E, &r->mem);
        floors(b, eng_get_plan(E), r);
        r->ok = 1;
    }
    free(toks);
    free(tt);
    free(td);
    free(tp);
    free(ids);
    free(lg);
    return rc;
}

static void add_stats(cJSON *o, const char *pre, const stats *s)
{
    const char *names[] = {"min_ms", "max_ms", "mad_ms", "round_spread_ms", "spread_ms", "samples"};
    const double vals[] = {s->min, s->max, s->mad, s->round_spread, s->spread, s->n};
    char k[64];
    for (int i = 0; i < 6; i++) {
        snprintf(k, sizeof k, "%s%s", pre, names[i]);
        cJSON_AddNumberToObject(o, k, vals[i]);
    }
}

static void add_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *bench_json(const bench_run *b)
{
    const rc_config *c = &b->w->cfg;
    char created[40];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "refchain-bench");
    cJSON_AddNumberToObject(j, "format_version", 1);
    if (b->commit)
        cJSON_AddStringToObject(j, "commit", b->commit);
    cJSON_AddStringToObject(j, "created", created);
    cJSON_AddStringToObject(j, "device", b->device);
    cJSON_AddStringToObject(j, "shape", b->shape);
    cJSON_AddStringToObject(j, "dtype", b->w->elt == 4 ? "f32" : "bf16");
    cJSON_AddNumberToObject(j, "steps", b->steps);
    cJSON_AddNumberToObject(j, "rounds", b->rounds);
    cJSON_AddNumberToObject(j, "layer_params", layer_params(c));
    cJSON_AddNumberToObject(j, "layer_bytes", (double)b->w->layer_bytes_total);
    cJSON_AddStringToObject(j, "weights", b->weights ? b->weights : b->w->elt == 4 ? "f32" : "bf16");
    cJSON_AddNumberToObject(j, "vocab_bytes", (double)b->w->vocab_bytes);
    cJSON_AddNumberToObject(j, "lm_head_bytes", head_bytes(b->w));
    cJSON *rf = cJSON_AddObjectToObject(j, "rooflines");
    cJSON_AddNumberToObject(rf, "read_gbs", b->rf.read / 1e9);
    cJSON_AddNumberToObject(rf, "read_median_gbs", b->rf.read_median / 1e9);
    cJSON_AddNumberToObject(rf, "read_bytes", (double)READ_BYTES);
    cJSON_AddNumberToObject(rf, "d2d_gbs", b->rf.d2d / 1e9);
    cJSON_AddNumberToObject(rf, "h2d_gbs", b->rf.h2d / 1e9);
    add_num(rf, "peak_tflops", b->rf.peak > 0 ? b->rf.peak / 1e12 : NAN);
    cJSON_AddStringToObject(rf, "peak_source", b->rf.peak > 0 ? b->rf.peak_source : "not given (--peak-tflops)");
    cJSON *rows = cJSON_AddArrayToObject(j, "rows");
    for (int i = 0; i < b->nrows; i++) {
        const row *r = &b->rows[i];
        cJSON *o = cJSON_CreateObject();
        char id[64];
        snprintf(id, sizeof id, "%s/p%d", r->key, r->prompt_len);
        cJSON_AddStringToObject(o, "id", id);
        cJSON_AddStringToObject(o, "shape", b->shape);
        cJSON_AddStringToObject(o, "mode_key", r->key);
        cJSON_AddStringToObject(o, "mode", r->mode);
        cJSON_AddNumberToObject(o, "prompt_len", r->prompt_len);
        cJSON_AddBoolToObject(o, "ok", r->ok);
        if (b->commit)
            cJSON_AddStringToObject(o, "commit", b->commit);
        if (r->ok) {
            cJSON_AddNumberToObject(o, "ms_tok", r->dec.med);
            cJSON_AddNumberToObject(o, "tok_s", 1e3 / r->dec.med);
            cJSON_AddNumberToObject(o, "floor_ms", r->floor_ms);
            cJSON_AddNumberToObject(o, "pct_floor", 100.0 * r->floor_ms / r->dec.med);
            add_stats(o, "decode_", &r->dec);
            cJSON_AddNumberToObject(o, "prefill_ms", r->pre.med);
            cJSON_AddNumberToObject(o, "prefill_tok_s", 1e3 * r->prompt_len / r->pre.med);
            cJSON_AddNumberToObject(o, "prefill_flops", r->pre_flops);
            add_num(o, "prefill_roof_ms", r->pre_roof_ms);
            add_num(o, "pct_prefill_roof", 100.0 * r->pre_roof_ms / r->pre.med);
            add_stats(o, "prefill_", &r->pre);
            cJSON_AddNumberToObject(o, "dev_weights_gib", (double)r->mem.weights / 1073741824.0);
            cJSON_AddNumberToObject(o, "dev_kv_gib", (double)r->mem.kv / 1073741824.0);
        }
        cJSON_AddItemToArray(rows, o);
    }
    return j;
}

/* the JSON so far, written atomically (temp + rename): a run cut short still leaves its finished rows */
static int write_json(const bench_run *b)
{
    if (!b->json)
        return 0;
    cJSON *j = bench_json(b);
    char *text = j ? cJSON_Print(j) : NULL, tmp[4096];
    cJSON_Delete(j);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", b->json, (long)getpid());
    FILE *f = text ? fopen(tmp, "wb") : NULL;
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    ok = f && fclose(f) == 0 && ok && rename(tmp, b->json) == 0;
    if (!ok) {
        fprintf(stderr, "engine: error: bench: %s: cannot write (%s)\n", b->json, text ? strerror(errno) : "out of memory");
        unlink(tmp);
    }
    free(text);
    return ok ? 0 : ENG_EXIT_ERROR;
}

static void print_row(const row *r)
{
    if (!r->ok) {
        printf("%-8s %7d %-44s %s\n", r->key, r->prompt_len, r->mode[0] ? r->mode : "-", "FAILED");
        return;
    }
    char roof[16] = "-", pct[16] = "-";
    if (isfinite(r->pre_roof_ms)) {
        snprintf(roof, sizeof roof, "%.2f", r->pre_roof_ms);
        snprintf(pct, sizeof pct, "%.0f%%", 100.0 * r->pre_roof_ms / r->pre.med);
    }
    printf("%-8s %7d %10.2f %10.0f %9s %6s | %9.3f %8.1f %9.3f %6.1f%% %7.3f | %6.2f %7.3f  %s\n", r->key,
           r->prompt_len, r->pre.med, 1e3 * r->prompt_len / r->pre.med, roof, pct, r->dec.med, 1e3 / r->dec.med,
           r->floor_ms, 100.0 * r->floor_ms / r->dec.med, r->dec.spread, (double)r->mem.weights / 1073741824.0,
           (double)r->mem.kv / 1073741824.0, r->mode);
}

/* one engine for the given prompt lengths (max_ctx sized to the longest), a row per length */
static int run_mode(bench_run *b, const eng_opts *o, const char *key, const long *prompts, int np)
{
    rc_err e = {0};
    eng *E = NULL;
    eng_opts oo = *o;
    long longest = 0;
    for (int i = 0; i < np; i++)
        longest = prompts[i] > longest ? prompts[i] : longest;
    if (longest + b->steps > oo.max_ctx)
        oo.max_ctx = (int)(longest + b->steps);
    if (oo.prefill_chunk == 0) /* one pass: a chunk as long as the longest prompt (the engine caps it at 65535) */
        oo.prefill_chunk = (int)longest;
    int rc = eng_open(&E, b->w, &oo, &e);
    char d[256] = "";
    if (!rc) {
        eng_plan_describe(eng_get_plan(E), b->w->cfg.n_layers, d, sizeof d);
        rc = measure(E, b, (int)prompts[0], NULL, &e);
        if (!rc && eng_decode_graphed(E))
            snprintf(d + strlen(d), sizeof d - strlen(d), ", decode graph");
        if (!rc && eng_prefill_wgmma(E))
            snprintf(d + strlen(d), sizeof d - strlen(d), ", prefill attention wgmma+TMA");
        if (!rc && eng_decode_fused(E))
            snprintf(d + strlen(d), sizeof d - strlen(d), ", attention merge fused at <= %d live tiles",
                     oo.fuse_max_tiles > 0 ? oo.fuse_max_tiles : ENG_FUSE_MAX_TILES);
    }
    for (int i = 0; i < np; i++) {
        row *r = &b->rows[b->nrows++];
        memset(r, 0, sizeof *r);
        r->key = key;
        r->prompt_len = (int)prompts[i];
        snprintf(r->mode, sizeof r->mode, "%s", d);
        if (!rc)
            rc = measure(E, b, r->prompt_len, r, &e);
        print_row(r);
        fflush(stdout);
        if (write_json(b))
            rc = rc ? rc : RC_E_IO;
    }
    if (rc && e.msg[0])
        fprintf(stderr, "engine: error: bench: %s\n", e.msg + (strncmp(e.msg, "engine: ", 8) ? 0 : 8));
    eng_close(E);
    return rc ? ENG_EXIT_ERROR : ENG_EXIT_OK;
}

/* The DeltaNet decode step of one linear layer (its kernels, without the GEMVs), for hybrid shapes: the state
 * [Hv, dv, dk] fp32 read and written once is the floor. Timed over the model's linear layers, each with its own
 * states, one step of each in a graph as the decode graph holds them. */
static void gdn_step_line(const rc_config *c, double read)
{
    int nlin = 0;
    for (int l = 0; l < c->n_layers; l++)
        nlin += c->layers[l].mixer == RC_MIXER_GDN;
    const int layers = nlin > 1 ? nlin : 2; /* 1 would time one layer's 200 steps instead */
    for (int l = 0; l < c->n_layers; l++) {
        const rc_layer_desc *d = &c->layers[l];
        if (d->mixer != RC_MIXER_GDN)
            continue;
        double step = 0.0, unfused = 0.0;
        int fused = 0;
        const cudaError_t err = engk_gdn_step_bench(d->gdn_k_heads, d->gdn_v_heads, d->gdn_k_dim, d->gdn_v_dim,
                                                    d->gdn_conv_kernel, layers, &step, &unfused, &fused);
        if (err != cudaSuccess) {
            printf("deltanet decode step: FAILED (%s)\n", cudaGetErrorString(err));
            return;
        }
        const double st = 2.0 * gdn_s_bytes(d); /* read and written */
        printf("deltanet decode step per linear layer: %.2f us (%s; the four unfused kernels %.2f us; %d layers' "
               "states, a step of each per graph; state %.1f MiB read + written: %.2f us at %.0f GB/s, %.0f%%); anchor "
               "llama.cpp ~24.5 us/layer, target <= 4 us/layer\n",
               step, fused ? "fused, one launch" : "unfused", unfused, layers, st / 2 / (1 << 20),
               1e6 * st / read, read / 1e9, 100.0 * (1e6 * st / read) / step);
        return;
    }
}

static int parse_prompts(const char *s, long *out, int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_PROMPTS) {
            fprintf(stderr, "engine: error: --prompt-len takes at most %d lengths, got '%s'\n", MAX_PROMPTS, s);
            return 0;
        }
        if (!eng_cli_int("--prompt-len", t, 1, 1 << 20, &out[(*n)++]))
            return 0;
    }
    if (!*n)
        fprintf(stderr, "engine: error: --prompt-len needs N or a comma-separated list, got '%s'\n", s);
    return *n > 0;
}

static int measure_roofs(int device, roofs *rf)
{
    rc_err e = {0};
    if (eng_measure_bandwidth(device, &rf->d2d, &rf->h2d, &e)) {
        fprintf(stderr, "engine: error: bench: %s\n", e.msg + (strncmp(e.msg, "engine: ", 8) ? 0 : 8));
        return ENG_EXIT_ERROR;
    }
    const char *what = "";
    cudaError_t err = engk_read_bandwidth(device, READ_BYTES, 10, &rf->read, &rf->read_median, &what);
    if (err != cudaSuccess) {
        fprintf(stderr, "engine: error: bench: read-bandwidth probe: %s failed: %s\n", what, cudaGetErrorString(err));
        return ENG_EXIT_ERROR;
    }
    return ENG_EXIT_OK;
}

int eng_bench_main(int argc, char **argv)
{
    eng_opts o;
    eng_opts_default(&o);
    o.log = stderr;
    o.max_ctx = 1024;
    o.prefill_chunk = 0; /* 0: each prompt in one pass, as HF prefills it; --prefill-chunk N overrides it */
    int f32 = 0, mem_flag = 0, np = 1, no_stream = 0, wq_on = 0, lm_q = 0, fusion_both = 0;
    eng_qfmt wq = {0, 0, 0};
    long steps = 16, rounds = 3, prompts[MAX_PROMPTS] = {16};
    unsigned long long seed = 1;
    const char *shape_name = "llama3-8b", *print_shape = NULL;
    bench_run b = {.rf = {.peak_source = ""}};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        if (!strcmp(a, "--decode-fusion") && has && !strcmp(argv[i + 1], "all")) { /* removed with form post */
            fprintf(stderr, "engine bench: error: --decode-fusion all was removed with the post form: use both\n");
            return ENG_EXIT_ERROR;
        }
        if (!strcmp(a, "--decode-fusion") && has && !strcmp(argv[i + 1], "both")) {
            fusion_both = 1; /* resident rows of each form: off, on */
            i++;
            continue;
        }
        int r = eng_cli_option(argc, argv, &i, &o, &f32, &mem_flag);
        if (r < 0)
            return ENG_EXIT_ERROR;
        if (r)
            continue;
        if (!strcmp(a, "--shape") && has)
            shape_name = argv[++i];
        else if (!strcmp(a, "--print-shape") && has)
            print_shape = argv[++i];
        else if (!strcmp(a, "--steps") && has) {
            if (!eng_cli_int(a, argv[++i], 2, 1 << 20, &steps))
                return ENG_EXIT_ERROR;
        } else if (!strcmp(a, "--rounds") && has) {
            if (!eng_cli_int(a, argv[++i], 1, 100, &rounds))
                return ENG_EXIT_ERROR;
        } else if (!strcmp(a, "--prompt-len") && has) {
            if (!parse_prompts(argv[++i], prompts, &np))
                return ENG_EXIT_ERROR;
        } else if (!strcmp(a, "--json") && has)
            b.json = argv[++i];
        else if (!strcmp(a, "--commit") && has)
            b.commit = argv[++i];
        else if (!strcmp(a, "--peak-tflops") && has) {
            char *end;
            errno = 0;
            double v = strtod(argv[++i], &end);
            if (errno || end == argv[i] || *end || !(v > 0 && v < 1e6)) {
                fprintf(stderr, "engine: error: --peak-tflops needs a positive number, got '%s'\n", argv[i]);
                return ENG_EXIT_ERROR;
            }
            b.rf.peak = v * 1e12;
        } else if (!strcmp(a, "--peak-source") && has)
            b.rf.peak_source = argv[++i];
        else if (!strcmp(a, "--no-stream"))
            no_stream = 1;
        else if (!strcmp(a, "--weights") && has) {
            rc_err qe = {0};
            if (eng_qfmt_parse(argv[++i], &wq, &wq_on, &lm_q, &qe)) {
                fprintf(stderr, "engine: error: bench: %s\n", qe.msg);
                return ENG_EXIT_ERROR;
            }
            b.weights = argv[i];
        }
        else if (!strcmp(a, "--seed") && has) {
            long v;
            if (!eng_cli_int(a, argv[++i], 0, 1L << 62, &v))
                return ENG_EXIT_ERROR;
            seed = (unsigned long long)v;
        } else if (!strcmp(a, "--quiet"))
            o.log = NULL;
        else {
            fprintf(stderr, "engine: error: bench: %s '%s' (see engine --help)\n",
                    has || a[0] != '-' ? "unknown argument" : "missing value for", a);
            return ENG_EXIT_ERROR;
        }
    }
    rc_err e = {0};
    if (print_shape) { /* the HF config.json of a shape; no GPU needed */
        char json[1024];
        if (eng_shape_json(print_shape, json, sizeof json, &e)) {
            fprintf(stderr, "engine: error: bench: %s\n", e.msg);
            return ENG_EXIT_ERROR;
        }
        printf("%s\n", json);
        return ENG_EXIT_OK;
    }
    if (b.rf.peak > 0 && !b.rf.peak_source[0])
        b.rf.peak_source = "--peak-tflops";
    rc_config cfg;
    if (eng_shape_config(shape_name, &cfg, &e)) {
        fprintf(stderr, "engine: error: bench: %s\n", e.msg);
        return ENG_EXIT_ERROR;
    }
    char why[256];
    if (!eng_available(o.device, why, sizeof why)) {
        rc_config_free(&cfg);
        fprintf(stderr, "engine: error: bench: %s\n", why);
        return ENG_EXIT_ERROR;
    }
    if (measure_roofs(o.device, &b.rf)) {
        rc_config_free(&cfg);
        return ENG_EXIT_ERROR;
    }
    engk_device_name(o.device, b.device, sizeof b.device);
    double t0 = eng_now();
    eng_weights *w = NULL;
    int rc = eng_weights_synth_quant(&w, &cfg, f32, wq_on ? &wq : NULL, lm_q, seed, o.threads, &e);
    rc_config_free(&cfg);
    if (rc) {
        fprintf(stderr, "engine: error: bench: %s\n", e.msg + (strncmp(e.msg, "engine: ", 8) ? 0 : 8));
        return ENG_EXIT_ERROR;
    }
    const double t_syn = eng_now() - t0;
    b.w = w;
    b.shape = shape_name;
    b.steps = (int)steps;
    b.rounds = (int)rounds;
    const rc_config *c = &w->cfg;
    char b1[32], b2[32];
    printf("bench %s (%s) on %s: %d layers, hidden %lld, %d/%d heads x %d, intermediate %d, vocab %lld\n",
           shape_name, f32 ? "f32" : "bf16", b.device, c->n_layers, (long long)c->hidden, c->layers[0].n_heads,
           c->layers[0].n_kv_heads, c->layers[0].head_dim, c->layers[0].intermediate, (long long)c->vocab);
    char chunk[48] = "each prompt in one pass, as HF";
    if (o.prefill_chunk > 0)
        snprintf(chunk, sizeof chunk, "chunks of %d rows", o.prefill_chunk);
    printf("weights: layers %s + vocab %s%s, synthesized in %.1f s; %ld rounds of (prefill, %ld decode steps) per "
           "prompt length; prefill %s\n",
           eng_bytes_str(w->layer_bytes_total, b1, sizeof b1), eng_bytes_str(w->vocab_bytes, b2, sizeof b2),
           w->lm_head == w->embed ? " (tied)" : " x2", t_syn, rounds, steps, chunk);
    if (b.weights)
        printf("layer matrices: %s, packed (%s of layers; %s in %s); floors count these bytes\n", b.weights,
               eng_bytes_str(w->layer_bytes_total, b1, sizeof b1), eng_bytes_str(w->plain_layer_bytes, b2, sizeof b2),
               f32 ? "f32" : "bf16");
    if (w->qlm.family)
        printf("lm_head: packed in the same format (%s against %s), floors count these bytes\n",
               eng_bytes_str(w->lm_bytes, b1, sizeof b1), eng_bytes_str(w->vocab_bytes, b2, sizeof b2));
    printf("rooflines measured here: read %.0f GB/s (read-only kernel over %zu MiB, best of 10; median %.0f), device "
           "copy %.0f GB/s (cudaMemcpy D2D, read + write), pinned H2D %.1f GB/s; bf16 peak ",
           b.rf.read / 1e9, READ_BYTES >> 20, b.rf.read_median / 1e9, b.rf.d2d / 1e9, b.rf.h2d / 1e9);
    if (b.rf.peak > 0)
        printf("%.0f TFLOP/s (%s)\n", b.rf.peak / 1e12, b.rf.peak_source);
    else
        printf("not given (--peak-tflops)\n");
    printf("%-8s %7s %10s %10s %9s %6s | %9s %8s %9s %7s %7s | %6s %7s  %s\n", "mode", "prompt", "prefill ms",
           "prefill/s", "roof ms", "roof%", "ms/token", "tok/s", "floor ms", "floor%", "spread", "W GiB", "KV GiB",
           "plan");
    fflush(stdout);
    eng_opts full = o;
    full.resident_layers = ENG_AUTO;
    full.kv_offload = ENG_AUTO;
    full.vocab_on_cpu = ENG_AUTO;
    full.vram_budget = 0;
    eng_opts alt = o;
    if (!mem_flag)
        alt.resident_layers = 2;
    /* the streaming row first: it is short, and a run cut short (a timeout) keeps it */
    int worst = no_stream ? ENG_EXIT_OK : run_mode(&b, &alt, mem_flag ? "flags" : "stream", prompts, 1);
    if (fusion_both)
        full.decode_fusion = 0;
    int r2 = run_mode(&b, &full, "resident", prompts, np);
    worst = r2 > worst ? r2 : worst;
    if (fusion_both) { /* the same engine with the merge folded into the decode attention (same bits) */
        full.decode_fusion = 1;
        r2 = run_mode(&b, &full, "res+fuse", prompts, np);
        worst = r2 > worst ? r2 : worst;
    }
    gdn_step_line(c, b.rf.read);
    eng_weights_free(w);
    return worst;
}
