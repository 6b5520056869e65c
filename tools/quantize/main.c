/* quantize: a model's linear layers to int8 / int4 by round-to-nearest or GPTQ, written as a GPTQ checkpoint. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "write_gptq.h"

static const char usage[] =
    "usage: quantize --model DIR|GOLDEN.h5 --scheme int8|int4-g128|int4-g64|int4-g32 --method rtn|gptq\n"
    "                [--sym] [--calib IDS_FILE | --calib-golden] [--damp 0.01] [--block 128] [--lm-head] --out DIR\n"
    "  Quantizes the attention, MLP and gated-delta-net projections (embeddings, lm_head, norms, biases stay\n"
    "  fp32; --lm-head: an untied lm_head too, after the layers, GPTQ calibrating it on the final norm's output)\n"
    "  and writes DIR (new) as an HF GPTQ checkpoint (model.safetensors, config.json with\n"
    "  quantization_config, quantize.json), checked by loading it back before it is renamed into place.\n"
    "  int8: symmetric, one scale per output row; int4-gN: one (scale, zero) per N input columns,\n"
    "  asymmetric unless --sym. gptq calibrates each layer on the ref forward of the calibration ids\n"
    "  (a file of whitespace-separated ids, or the golden's prompt) through the already-quantized layers.\n"
    "  exit codes: 0 written, 2 bad usage or input (one line on stderr, nothing written)\n";

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "quantize: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see quantize --help)\n");
    return 2;
}

static int fail(const rc_err *e)
{
    fprintf(stderr, "quantize: error: %s\n", e->msg);
    return 2;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *scheme = NULL, *method = NULL, *calib = NULL, *out = NULL;
    int sym = 0, calib_golden = 0;
    rcq_opts o = {.gq = {.damp = 0.01, .block = 128}, .progress = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        char *end;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--sym"))
            sym = 1;
        else if (!strcmp(a, "--lm-head"))
            o.lm_head = 1;
        else if (!strcmp(a, "--calib-golden"))
            calib_golden = 1;
        else if (!has && (!strcmp(a, "--model") || !strcmp(a, "--scheme") || !strcmp(a, "--method") ||
                          !strcmp(a, "--calib") || !strcmp(a, "--out") || !strcmp(a, "--damp") ||
                          !strcmp(a, "--block")))
            return bad("'%s' needs a value", a);
        else if (!strcmp(a, "--model"))
            model = argv[++i];
        else if (!strcmp(a, "--scheme"))
            scheme = argv[++i];
        else if (!strcmp(a, "--method"))
            method = argv[++i];
        else if (!strcmp(a, "--calib"))
            calib = argv[++i];
        else if (!strcmp(a, "--out"))
            out = argv[++i];
        else if (!strcmp(a, "--damp")) {
            o.gq.damp = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(o.gq.damp >= 0 && o.gq.damp <= 1))
                return bad("--damp needs a number in [0, 1], got '%s'", argv[i]);
        } else if (!strcmp(a, "--block")) {
            const long b = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || b < 1 || b > 65536)
                return bad("--block needs a column count in [1, 65536], got '%s'", argv[i]);
            o.gq.block = (int)b;
        } else
            return bad("unknown argument '%s'", a);
    }
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    if (!model || !scheme || !method || !out)
        return bad("needs --model, --scheme, --method and --out%s", "");
    rc_err e = {0};
    if (rc_gq_scheme_parse(scheme, sym, &o.scheme, &e))
        return fail(&e);
    if (!strcmp(method, "gptq"))
        o.gptq = 1;
    else if (strcmp(method, "rtn"))
        return bad("unknown --method '%s' (rtn, gptq)", method);
    if (o.gptq && !calib && !calib_golden)
        return bad("--method gptq needs --calib IDS_FILE or --calib-golden%s", "");
    if (calib && calib_golden)
        return bad("--calib and --calib-golden exclude each other%s", "");
    if (!o.gptq && (calib || calib_golden))
        return bad("--method rtn takes no calibration set%s", "");
    rcq_source src;
    if (rcq_source_load(&src, model, &e))
        return fail(&e);
    int32_t *ids = NULL;
    int64_t T = 0;
    int rc = RC_OK;
    if (!src.config_json)
        rc = rc_fail(&e, RC_E_UNSUPPORTED, "%s: a GGUF file has no HF config to write; quantize its HF folder", model);
    else if (calib_golden && !src.ids)
        rc = rc_fail(&e, RC_E_USAGE, "%s: --calib-golden needs a golden .h5 with a prompt", model);
    else if (calib_golden) {
        ids = src.ids, T = src.n_ids;
        src.ids = NULL;
    } else if (calib)
        rc = rcq_read_ids(calib, src.m.cfg.vocab, &ids, &T, &e);
    char sch[48];
    if (!rc)
        fprintf(stderr, "quantize: %s -> %s, %s%s by %s, %lld calibration tokens\n", model, out,
                rc_gq_scheme_str(&o.scheme, sch, sizeof sch), o.lm_head ? " with lm_head" : "", method, (long long)T);
    rcq_model q = {0};
    if (!rc)
        rc = rcq_quantize(&src.m, &o, ids, T, &q, &e);
    if (!rc) {
        const rcq_meta meta = {.config_json = src.config_json, .method = method, .source = model,
                               .damp = o.gq.damp, .block = o.gq.block, .calib_tokens = T};
        rc = rcq_write_gptq(out, &src.m, &q, &o, &meta, &e);
    }
    if (!rc)
        fprintf(stderr, "quantize: wrote %s: %d matrices in %.1f s\n", out, q.n, q.seconds);
    rcq_model_free(&q);
    free(ids);
    rcq_source_free(&src);
    return rc ? fail(&e) : 0;
}
