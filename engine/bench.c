/* engine bench: ms/token of a realistic-size model with random bf16 weights (synthesized directly, no fp32
 * copy), fully resident and in a streaming mode, against rooflines measured on this machine. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_cli.h"
#include "eng_sample.h"

typedef struct result {
    char mode[96];
    double ms_tok, floor_ms, ttft_ms;
    eng_mem mem;
    int ok;
} result;

static int run_mode(const eng_weights *w, const eng_opts *o, int prompt_len, int steps, double d2d, double h2d,
                    result *r)
{
    rc_err e = {0};
    eng *E = NULL;
    const int64_t V = w->cfg.vocab;
    float *lg = malloc((size_t)V * sizeof *lg);
    int32_t *ids = malloc((size_t)prompt_len * sizeof *ids);
    double *dt = calloc((size_t)steps + 1, sizeof *dt);
    int rc = (!lg || !ids || !dt) ? rc_fail(&e, RC_E_NOMEM, "out of host memory") : RC_OK;
    for (int i = 0; !rc && i < prompt_len; i++)
        ids[i] = (int32_t)((1000003u * (unsigned)i + 17u) % (unsigned)V);
    if (!rc)
        rc = eng_open(&E, w, o, &e);
    if (!rc) {
        char d[256];
        snprintf(r->mode, sizeof r->mode, "%s", eng_plan_describe(eng_get_plan(E), w->cfg.n_layers, d, sizeof d));
        double t0 = eng_now();
        rc = eng_prefill(E, ids, prompt_len, lg, NULL, &e);
        int32_t tok = eng_argmax(lg, V);
        r->ttft_ms = 1e3 * (eng_now() - t0);
        for (int s = 0; s < steps && !rc; s++) {
            double t1 = eng_now();
            rc = eng_decode_greedy(E, tok, &tok, NULL, &e);
            dt[s] = eng_now() - t1;
        }
        if (!rc && eng_decode_graphed(E))
            snprintf(r->mode + strlen(r->mode), sizeof r->mode - strlen(r->mode), ", decode graph");
    }
    if (!rc) {
        for (int i = 1; i < steps; i++) /* median decode step */
            for (int j = i; j > 0 && dt[j] < dt[j - 1]; j--) {
                double t = dt[j]; dt[j] = dt[j - 1]; dt[j - 1] = t;
            }
        r->ms_tok = 1e3 * dt[steps / 2];
        eng_memory(E, &r->mem);
        /* floor: bytes the device reads per token over the D2D bandwidth, bytes crossing the host link over
         * the H2D bandwidth, whichever is slower */
        const eng_plan *p = eng_get_plan(E);
        const rc_config *c = &w->cfg;
        double ctx = prompt_len + steps / 2.0, kv = 0.0;
        for (int l = 0; l < c->n_layers; l++)
            kv += 2.0 * ctx * c->layers[l].n_kv_heads * c->layers[l].head_dim * (double)w->elt;
        double dev = (double)w->layer_bytes_total + kv + (p->vocab_on_cpu ? 0.0 : (double)w->vocab_bytes);
        double link = (p->resident_layers >= 0 ? (double)w->layer_bytes_total : 0.0) + (p->kv_offload ? kv : 0.0);
        r->floor_ms = 1e3 * fmax(dev / d2d, link / h2d);
        r->ok = 1;
    } else
        fprintf(stderr, "engine: error: bench: %s\n", e.msg[0] ? e.msg : rc_code_name(rc));
    eng_close(E);
    free(dt);
    free(lg);
    free(ids);
    return rc ? ENG_EXIT_ERROR : ENG_EXIT_OK;
}

int eng_bench_main(int argc, char **argv)
{
    eng_opts o;
    eng_opts_default(&o);
    o.log = stderr;
    o.max_ctx = 1024;
    int f32 = 0, mem_flag = 0;
    long steps = 16, prompt_len = 16;
    unsigned long long seed = 1;
    const char *shape_name = "llama3-8b";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        int r = eng_cli_option(argc, argv, &i, &o, &f32, &mem_flag);
        if (r < 0)
            return ENG_EXIT_ERROR;
        if (r)
            continue;
        if (!strcmp(a, "--shape") && has)
            shape_name = argv[++i];
        else if (!strcmp(a, "--steps") && has) {
            if (!eng_cli_int(a, argv[++i], 2, 1 << 20, &steps))
                return ENG_EXIT_ERROR;
        } else if (!strcmp(a, "--prompt-len") && has) {
            if (!eng_cli_int(a, argv[++i], 1, 1 << 20, &prompt_len))
                return ENG_EXIT_ERROR;
        } else if (!strcmp(a, "--seed") && has) {
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
    if (prompt_len + steps > o.max_ctx)
        o.max_ctx = (int)(prompt_len + steps);
    rc_err e = {0};
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
    double d2d = 0, h2d = 0;
    if (eng_measure_bandwidth(o.device, &d2d, &h2d, &e)) {
        rc_config_free(&cfg);
        fprintf(stderr, "engine: error: bench: %s\n", e.msg + (strncmp(e.msg, "engine: ", 8) ? 0 : 8));
        return ENG_EXIT_ERROR;
    }
    double t0 = eng_now();
    eng_weights *w = NULL;
    int rc = eng_weights_synth(&w, &cfg, f32, seed, o.threads, &e);
    rc_config_free(&cfg);
    if (rc) {
        fprintf(stderr, "engine: error: bench: %s\n", e.msg + (strncmp(e.msg, "engine: ", 8) ? 0 : 8));
        return ENG_EXIT_ERROR;
    }
    const double t_syn = eng_now() - t0;
    const rc_config *c = &w->cfg;
    char b1[32], b2[32];
    printf("bench %s (%s): %d layers, hidden %lld, %d/%d heads x %d, intermediate %d, vocab %lld\n", shape_name,
           f32 ? "f32" : "bf16", c->n_layers, (long long)c->hidden, c->layers[0].n_heads, c->layers[0].n_kv_heads,
           c->layers[0].head_dim, c->layers[0].intermediate, (long long)c->vocab);
    printf("weights: layers %s + vocab %s%s, synthesized in %.1f s; prompt %ld tokens, %ld decode steps (median)\n",
           eng_bytes_str(w->layer_bytes_total, b1, sizeof b1), eng_bytes_str(w->vocab_bytes, b2, sizeof b2),
           w->lm_head == w->embed ? " (tied)" : " x2", t_syn, prompt_len, steps);
    printf("rooflines measured here: device copy %.0f GB/s (cudaMemcpy D2D, read + write), pinned H2D %.1f GB/s\n",
           d2d / 1e9, h2d / 1e9);
    fflush(stdout);
    eng_opts full = o;
    full.resident_layers = ENG_AUTO;
    full.kv_offload = ENG_AUTO;
    full.vocab_on_cpu = ENG_AUTO;
    full.vram_budget = 0;
    eng_opts alt = o;
    if (!mem_flag)
        alt.resident_layers = 2;
    result res[2];
    memset(res, 0, sizeof res);
    int worst = run_mode(w, &full, (int)prompt_len, (int)steps, d2d, h2d, &res[0]);
    int r2 = run_mode(w, &alt, (int)prompt_len, (int)steps, d2d, h2d, &res[1]);
    if (r2 > worst)
        worst = r2;
    printf("%-58s %10s %10s %8s %10s %9s %9s\n", "mode", "ms/token", "floor ms", "floor%", "TTFT ms", "dev W GiB",
           "dev KV GiB");
    for (int i = 0; i < 2; i++) {
        if (!res[i].ok) {
            printf("%-58s %10s\n", res[i].mode[0] ? res[i].mode : (i ? "streaming" : "full"), "FAILED");
            continue;
        }
        printf("%-58s %10.3f %10.3f %7.0f%% %10.1f %9.2f %9.3f\n", res[i].mode, res[i].ms_tok, res[i].floor_ms,
               100.0 * res[i].floor_ms / res[i].ms_tok, res[i].ttft_ms, (double)res[i].mem.weights / 1073741824.0,
               (double)res[i].mem.kv / 1073741824.0);
    }
    eng_weights_free(w);
    return worst;
}
