/* engine: run a model (golden .h5 or HF folder) incrementally on the GPU and print the generated ids, or, for
 * a text prompt, stream the continuation as text; `engine bench` measures ms/token against measured rooflines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_cli.h"
#include "eng_qpack.h"
#include "eng_sample.h"
#include "eng_text.h"
#include "golden.h"

static const char usage_text[] =
    "usage: engine --model PATH (--prompt \"TEXT\" [--chat [--system \"TEXT\"]] | --ids \"ID ID ...\" |\n"
    "                            --prompt-golden) [--steps N] [options]\n"
    "       engine --synth llama3-8b|llama3-1b|tiny|qwen3.5-9b|tiny-hybrid|gemma4-12b|tiny-gemma --ids \"ID ...\" [options]   (random weights; tests)\n"
    "                    [--weights bf16|int8|int4-g32|int4-g64|int4-g128[-sym][+lm_head]]   (random packed quantized\n"
    "                    matrices; +lm_head: an untied lm_head packed too)\n"
    "       engine bench --shape llama3-8b|llama3-1b|tiny|qwen3.5-9b|tiny-hybrid|gemma4-12b|tiny-gemma [--steps N] [--prompt-len N[,N...]] [--rounds R]\n"
    "                    [--json FILE] [--commit ID] [--peak-tflops X [--peak-source TEXT]] [--no-stream] [options]\n"
    "                    [--weights bf16|int8|int4-g128|...[+lm_head]]   (layer matrices packed, and lm_head with\n"
    "                    +lm_head: floors from the bytes read)\n"
    "       engine bench --print-shape llama3-8b|llama3-1b|tiny|qwen3.5-9b|tiny-hybrid|gemma4-12b|tiny-gemma   (the shape's HF config.json)\n"
    "       engine devices      (exit 0 iff GPU 0 can run the engine)\n"
    "       engine --help\n"
    "\n"
    "Runs PATH (a golden .h5, an HF folder with config.json + safetensors, or a .gguf: llama, gemma3, qwen3):\n"
    "prefill of the prompt, then one token per decode step. A text prompt: the continuation is streamed to\n"
    "stdout as text (flushed per token, then a newline), ending at the model's EOS or after N tokens. An id\n"
    "prompt: the N generated ids on stdout, one line. Plan, device memory held, TTFT, ms/token and tok/s go\n"
    "to stderr.\n"
    "  --prompt \"TEXT\"      text, through the model's tokenizer (HF folder: tokenizer.json; GGUF: its\n"
    "                       tokenizer.ggml.* metadata, byte-level BPE or SentencePiece); for a model\n"
    "                       without one, space-separated token ids (as before)\n"
    "  --chat               the prompt is the user turn of the model's chat template (ChatML, SmolLM2,\n"
    "                       Llama-3: recognised by their text; any other template is refused)\n"
    "  --system \"TEXT\"      the system turn (with --chat; default: the template's own, if any)\n"
    "  --tokenizer T        tokenizer.json (or a folder with one) to use instead of the model's\n"
    "  --ids \"1 2 3\"        token ids          --prompt-golden   the golden's input_ids\n"
    "  --steps N            tokens to generate (default 16)\n"
    "  --temperature T      0 = greedy (default); else sample with --top-k K (0 = off), --top-p P (1 = off),\n"
    "  --seed S             (default 0); deterministic given the seed\n"
    "  --logits OUT         every step's logits [N, V], written atomically: OUT ending in .txt is text\n"
    "                       (%.9g, one line per step), anything else raw little-endian float32\n"
    "memory and numerics (combinable; every mode gives bit-identical output):\n"
    "  --f32                store weights and KV in fp32 (default bf16)\n"
    "  --resident-layers N  N weight slots on the GPU (layer l uses slot l % N), streamed with prefetch on a\n"
    "                       copy stream; 0 = kernels read the weights from pinned host memory (zero-copy);\n"
    "                       N >= layers = all resident (the default)\n"
    "  --kv-offload         KV cache in pinned host memory, walked in tiles (GPU KV memory independent of\n"
    "                       the context length)\n"
    "  --kv-tile P          attention tile in positions (default 64); part of the numerics: output is\n"
    "                       identical across modes for the same P\n"
    "  --vocab-on-cpu       embedding and lm_head on the host (multithreaded GEMV in the GPU's order)\n"
    "  --vram-budget BYTES  choose resident layers / KV offload / vocab placement to fit (suffix K, M, G);\n"
    "                       flags given explicitly are kept\n"
    "  --max-ctx N          positions the cache holds (default 4096)\n"
    "  --prefill-chunk N    prompt rows per pass (default 256; does not change the output)\n"
    "  --threads N          host threads for --vocab-on-cpu (default: all CPUs)\n"
    "  --no-graph           launch each decode step's kernels directly instead of replaying its CUDA graph\n"
    "  --no-pipeline        greedy runs: wait for each token before launching the next step (same tokens)\n"
    "  --decode-fusion off|on  decode attention: qkv_post + partials + merge kernel (off), the merge folded\n"
    "                       into the partial kernel (on); same bits; default $REFCHAIN_DECODE_FUSION (0|1|off|on),\n"
    "                       else ENG_DECODE_FUSION (engine bench also takes both: off and on rows)\n"
    "  --fuse-max-tiles N   the fused forms run at steps where every layer has at most N live KV tiles, the\n"
    "                       unfused form at the others (same bits; default ENG_FUSE_MAX_TILES)\n"
    "  --device N           GPU ordinal (default 0)\n"
    "  --quiet              no stderr report\n"
    "exit: 0 ok; 2 bad usage or input (missing file, bad token id, prompt longer than the cache, budget too\n"
    "small, unsupported model, CUDA error); errors are one line on stderr.\n";

static int fail(const char *msg)
{
    if (!strncmp(msg, "engine: ", 8))
        msg += 8;
    fprintf(stderr, "engine: error: %s\n", msg);
    return ENG_EXIT_ERROR;
}

/* An HF folder's config.json against the engine's gate before its weights are read: a checkpoint asking for what
 * the engine lacks is refused by name before any allocation. */
static int precheck_dir(const char *model, rc_err *e)
{
    struct stat st;
    char path[4096];
    if (!model || stat(model, &st) != 0 || !S_ISDIR(st.st_mode))
        return RC_OK;
    snprintf(path, sizeof path, "%s/config.json", model);
    rc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int rc = rc_config_load_file(path, &cfg, e);
    if (!rc)
        rc = eng_config_check(&cfg, e);
    rc_config_free(&cfg);
    return rc;
}

static int write_logits(const char *path, const float *lg, int64_t steps, int64_t V)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fprintf(stderr, "engine: error: %s: cannot write (%s)\n", tmp, strerror(errno));
        return ENG_EXIT_ERROR;
    }
    const size_t len = strlen(path);
    int ok = 1;
    if (len > 4 && !strcmp(path + len - 4, ".txt")) {
        for (int64_t s = 0; s < steps && ok; s++)
            for (int64_t v = 0; v < V && ok; v++)
                ok = fprintf(f, "%.9g%c", lg[s * V + v], v + 1 == V ? '\n' : ' ') > 0;
    } else
        ok = fwrite(lg, sizeof *lg, (size_t)(steps * V), f) == (size_t)(steps * V);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "engine: error: %s: write failed (%s)\n", path, strerror(errno));
        unlink(tmp);
        return ENG_EXIT_ERROR;
    }
    return ENG_EXIT_OK;
}

static int cmd_run(int argc, char **argv)
{
    eng_opts o;
    eng_opts_default(&o);
    o.log = stderr;
    int f32 = 0, mem_flag = 0, prompt_golden = 0, quiet = 0;
    const char *model = NULL, *logits_path = NULL, *synth = NULL, *tokenizer = NULL;
    eng_prompt pr = {0};
    long steps = 16, top_k = 0;
    double temperature = 0.0, top_p = 1.0;
    unsigned long long seed = 0;
    eng_qfmt wq = {0, 0, 0};
    int lm_q = 0; /* --weights SCHEME+lm_head */
    int wq_on = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        int r = eng_cli_option(argc, argv, &i, &o, &f32, &mem_flag);
        if (r < 0)
            return ENG_EXIT_ERROR;
        if (r)
            continue;
        if (!strcmp(a, "--prompt-golden"))
            prompt_golden = 1;
        else if (!strcmp(a, "--quiet"))
            quiet = 1;
        else if (!strcmp(a, "--chat"))
            pr.chat = 1;
        else if (!strcmp(a, "--model") && has)
            model = argv[++i];
        else if (!strcmp(a, "--synth") && has)
            synth = argv[++i];
        else if (!strcmp(a, "--weights") && has) { /* --synth's matrices quantized (eng_qpack.h) */
            rc_err qe = {0};
            if (eng_qfmt_parse(argv[++i], &wq, &wq_on, &lm_q, &qe))
                return fail(qe.msg);
        }
        else if (!strcmp(a, "--prompt") && has)
            pr.prompt = argv[++i];
        else if (!strcmp(a, "--ids") && has)
            pr.ids = argv[++i];
        else if (!strcmp(a, "--system") && has)
            pr.system = argv[++i];
        else if (!strcmp(a, "--tokenizer") && has)
            tokenizer = argv[++i];
        else if (!strcmp(a, "--logits") && has)
            logits_path = argv[++i];
        else if (!strcmp(a, "--steps") && has) {
            if (!eng_cli_int(a, argv[++i], 1, 1 << 30, &steps))
                return ENG_EXIT_ERROR;
        } else if (!strcmp(a, "--top-k") && has) {
            if (!eng_cli_int(a, argv[++i], 0, 1L << 31, &top_k))
                return ENG_EXIT_ERROR;
        } else if ((!strcmp(a, "--temperature") || !strcmp(a, "--top-p") || !strcmp(a, "--seed")) && has) {
            char *end;
            errno = 0;
            const char *s = argv[++i];
            if (!strcmp(a, "--seed"))
                seed = strtoull(s, &end, 10);
            else {
                double v = strtod(s, &end);
                if (!strcmp(a, "--temperature")) temperature = v; else top_p = v;
                if (!(v >= 0) || (!strcmp(a, "--top-p") && v > 1))
                    end = (char *)s;
            }
            if (errno || end == s || *end) {
                fprintf(stderr, "engine: error: bad value '%s' for %s\n", s, a);
                return ENG_EXIT_ERROR;
            }
        } else {
            fprintf(stderr, "engine: error: %s '%s' (see engine --help)\n",
                    has || a[0] != '-' ? "unknown argument" : "missing value for", a);
            return ENG_EXIT_ERROR;
        }
    }
    if (quiet)
        o.log = NULL;
    if (!model == !synth)
        return fail("give exactly one of --model PATH and --synth SHAPE (see engine --help)");
    if (wq_on && !synth)
        return fail("--weights is for --synth (a model's checkpoint says its own quantization)");
    if (synth && prompt_golden)
        return fail("--prompt-golden needs --model GOLDEN.h5");
    if (prompt_golden && (pr.prompt || pr.ids || pr.chat || pr.system))
        return fail("give exactly one of --prompt \"TEXT\", --ids \"IDS\" and --prompt-golden");
    rc_err e = {0};
    int32_t *ids = NULL;
    int64_t T = 0;
    rc_text txt;
    int text_mode = 0;
    if (eng_text_open(&txt, model, tokenizer, &e))
        return fail(e.msg);
    if (!prompt_golden) {
        if (eng_prompt_ids(&txt, &pr, &ids, &T, &text_mode, &e)) {
            rc_text_free(&txt);
            return fail(e.msg);
        }
    } else {
        rc_golden g;
        if (rc_golden_load(model, 0, &g, &e))
            return fail(e.msg);
        ids = malloc((size_t)g.n_ids * sizeof *ids);
        if (ids) {
            memcpy(ids, g.ids, (size_t)g.n_ids * sizeof *ids);
            T = g.n_ids;
        }
        rc_golden_free(&g);
        if (!ids)
            return fail("out of host memory");
    }
    if (T < 1) {
        free(ids);
        rc_text_free(&txt);
        return fail("the prompt is empty");
    }
    if (T + steps - 1 > o.max_ctx) {
        char m[256];
        if (T > o.max_ctx)
            snprintf(m, sizeof m, "the prompt (%lld tokens) is longer than the cache (--max-ctx %d)", (long long)T,
                     o.max_ctx);
        else
            snprintf(m, sizeof m, "a prompt of %lld tokens and %ld steps needs %lld positions; the cache holds %d "
                     "(--max-ctx)", (long long)T, steps, (long long)(T + steps - 1), o.max_ctx);
        free(ids);
        rc_text_free(&txt);
        return fail(m);
    }
    rc_model m;
    memset(&m, 0, sizeof m);
    if (synth ? eng_shape_config(synth, &m.cfg, &e) : precheck_dir(model, &e) || rc_model_load(&m, model, &e)) {
        free(ids);
        rc_text_free(&txt);
        return fail(e.msg);
    }
    int rc = eng_config_check(&m.cfg, &e);
    for (int64_t i = 0; i < T && !rc; i++)
        if (ids[i] < 0 || ids[i] >= m.cfg.vocab)
            rc = rc_fail(&e, RC_E_RANGE, "prompt token %d (index %lld) is outside the vocabulary [0, %lld)", ids[i],
                         (long long)i, (long long)m.cfg.vocab);
    eng_weights *w = NULL;
    if (!rc)
        rc = synth ? eng_weights_synth_quant(&w, &m.cfg, f32, wq_on ? &wq : NULL, lm_q, 1, o.threads, &e)
                   : eng_weights_from_model(&w, &m, f32, o.threads, &e);
    if (synth)
        rc_config_free(&m.cfg);
    else
        rc_model_free(&m);
    eng *E = NULL;
    if (!rc)
        rc = eng_open(&E, w, &o, &e);
    const int64_t V = w ? w->cfg.vocab : 0;
    float *lg = NULL;
    int32_t *out = NULL;
    if (!rc) {
        lg = rc_calloc(steps * V, sizeof *lg, &e, "logits");
        out = rc_calloc(steps, sizeof *out, &e, "tokens");
        if (!lg || !out)
            rc = e.code;
    }
    eng_sampler smp;
    eng_sampler_init(&smp, temperature, top_k, top_p, seed);
    eng_streamer st;
    if (text_mode)
        eng_streamer_init(&st, &txt, stdout);
    double t0 = eng_now(), ttft = 0, tdec = 0;
    long n_gen = 0; /* tokens sampled; a text run ends early at a stop id (sampled, not printed) */
    if (!rc)
        rc = eng_prefill(E, ids, T, lg, NULL, &e);
    if (!rc)
        rc = eng_sample(&smp, lg, V, &out[0], &e);
    ttft = eng_now() - t0;
    if (!rc && steps > 1 && !text_mode && !logits_path && eng_sampler_greedy(&smp)) {
        /* a fixed number of greedy tokens, none needed on the host before the end: pipelined (eng_decode_greedy_n) */
        double t1 = eng_now();
        rc = eng_decode_greedy_n(E, out[0], (int)(steps - 1), out + 1, NULL, &e);
        tdec = eng_now() - t1;
        n_gen = rc ? 1 : steps;
    }
    for (long s = n_gen; s < steps && !rc; s++) {
        if (s) {
            double t1 = eng_now();
            if (eng_sampler_greedy(&smp)) /* the argmax on the device; logits copied only for --logits */
                rc = eng_decode_greedy(E, out[s - 1], &out[s], logits_path ? lg + s * V : NULL, &e);
            else {
                rc = eng_decode(E, out[s - 1], lg + s * V, &e);
                if (!rc)
                    rc = eng_sample(&smp, lg + s * V, V, &out[s], &e);
            }
            tdec += eng_now() - t1;
            if (rc)
                break;
        }
        n_gen = s + 1;
        if (text_mode && eng_is_stop(&txt, out[s]))
            break;
        if (text_mode)
            rc = eng_streamer_push(&st, out[s], &e);
    }
    if (text_mode) {
        if (!rc || n_gen) { /* end what was printed with its newline */
            const int frc = eng_streamer_finish(&st, &e);
            rc = rc ? rc : frc;
        }
        eng_streamer_free(&st);
    }
    int exit_code = rc ? ENG_EXIT_ERROR : ENG_EXIT_OK;
    if (rc)
        fail(e.msg[0] ? e.msg : rc_code_name(rc));
    else {
        if (!text_mode) {
            for (long s = 0; s < n_gen; s++)
                printf("%s%d", s ? " " : "", out[s]);
            printf("\n");
            fflush(stdout);
        }
        if (o.log)
            fprintf(o.log, "engine: TTFT %.2f ms (prompt %lld tokens); %.3f ms/token, %.1f tok/s over %ld decode "
                    "steps\n", 1e3 * ttft, (long long)T, n_gen > 1 ? 1e3 * tdec / (double)(n_gen - 1) : 0.0,
                    n_gen > 1 && tdec > 0 ? (double)(n_gen - 1) / tdec : 0.0, n_gen - 1);
        if (logits_path)
            exit_code = write_logits(logits_path, lg, n_gen, V);
    }
    rc_text_free(&txt);
    eng_sampler_free(&smp);
    free(lg);
    free(out);
    free(ids);
    eng_close(E);
    eng_weights_free(w);
    return exit_code;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return ENG_EXIT_ERROR;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage_text, stdout);
        return ENG_EXIT_OK;
    }
    if (!strcmp(argv[1], "devices")) { /* for test scripts: exit 0 iff device 0 can run the engine */
        char why[256];
        if (!eng_available(0, why, sizeof why))
            return fail(why);
        printf("engine: device 0 usable\n");
        return ENG_EXIT_OK;
    }
    if (!strcmp(argv[1], "bench"))
        return eng_bench_main(argc - 2, argv + 2);
    if (!strcmp(argv[1], "run"))
        return cmd_run(argc - 2, argv + 2);
    return cmd_run(argc - 1, argv + 1);
}
