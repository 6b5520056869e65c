/* harness: the command that runs stages against goldens and says which link broke. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "compare.h"
#include "fault.h"
#include "fault_catalogue.h"
#include "golden.h"
#include "model.h"
#include "quality.h"
#include "util.h"

#ifndef RC_GOLDEN_DIR
#define RC_GOLDEN_DIR "golden"
#endif
#ifndef RC_VERSION
#define RC_VERSION "?"
#endif

static const char usage_text[] =
    "usage: harness compare [--stage S] [--golden FILE]... [--tol SPEC]... [--tolerances FILE] [--probe PATTERN]\n"
    "                       [--json OUT] [--device N] [--no-greedy] [--quiet] [--allow-near-ties] [--no-floor]\n"
    "                       [--fault NAME] [--against-exact | --against-hf]\n"
    "       harness compare --stage A --against B --model DIR|FILE [--prompt \"ids\"] [--steps N] [...]\n"
    "       harness chain [--golden FILE]... [--stages ref,cuda,engine] [compare's options]\n"
    "       harness report [--out DIR] [--force] [--golden FILE]... [--stages LIST] [--no-faults] [--commit ID]\n"
    "                      [--bench FILE] [--quality FILE] [--faults FILE]\n"
    "       harness report --diff A B [--out DIR]\n"
    "       harness bisect --good REV --bad REV [--stage S] [--golden FILE] [--probe PATTERN] [--keep]\n"
    "       harness faults [--only NAME] [--json OUT]\n"
    "       harness quality --stage S --model FILE.gguf|HF_DIR --text FILE [--max-tokens N] [--against B]\n"
    "                       [--json OUT] [--max-dnll X] [--device N] [engine mode flags]\n"
    "       harness quant-quality --model M (--text FILE | --eval IDS (--calib IDS | --calib-golden)) [--group G]\n"
    "                       [--calib-tokens N] [--eval-tokens N] [--greedy N] [--prompts N] [--rows LIST]\n"
    "                       [--quantize-only SUBSTRS] [--margins] [--reference fp32|bf16] [--damp X] [--json OUT]\n"
    "                       [--check]\n"
    "       harness inspect FILE\n"
    "       harness --help | --version\n"
    "\n"
    "compare  runs stage S (%s; default ref) on each golden's prompt, compares every probe the\n"
    "         golden holds in data-flow order, then the greedy continuation: each step is run\n"
    "         teacher-forced with HF's tokens, its last-row logits compared and its argmax checked\n"
    "         against HF's token. Prints a table, the first divergent probe and a one-line verdict.\n"
    "         Without --golden it uses every bundled golden (%s, or $REFCHAIN_GOLDEN_DIR).\n"
    "         Bounds come from one versioned tolerance file (%s; --tolerances FILE or\n"
    "         $REFCHAIN_TOLERANCES), per stage, storage precision and probe pattern; each names its metric:\n"
    "           scaled  = max|a-b| / max(1, max|ref|)   (scaled max-abs)\n"
    "           max_abs = max|a-b|; max_rel = max |a-b|/|ref| over |ref| >= 1e-3 max|ref|\n"
    "           rms = sqrt(mean (a-b)^2); nmse = sum (a-b)^2 / sum ref^2; cosine = a.ref/(|a||ref|)\n"
    "           ulp = max distance in fp32 units in the last place. NaN/Inf are checked first.\n"
    "         Noise floor: ref is rerun in double precision; 'floor' is the reference's own distance\n"
    "         from it (max-abs), 'xfloor' the stage's error as a multiple of that. A probe within the\n"
    "         file's floor multiple passes whatever its absolute error (strict bounds excepted).\n"
    "         Greedy: a token mismatch reports the reference's top-1/top-2 logit margin; below the\n"
    "         near-tie margin of the stage's precision (twice the logit error the file allows it, at least\n"
    "         the file's margin) it is a NEAR-TIE, not a broken link, and fails unless --allow-near-ties.\n"
    "         A probe over a --tol bound but within the stage's precision (fp32: the floor rule; bf16/fp16:\n"
    "         the file's bounds) fails as PRECISION, not a broken link; 'tightest bound' gives the smallest\n"
    "         --tol the stage passes and the reference's own distance from the exact answer.\n"
    "  --tol SPEC      overrides the file: 'TOL' bounds the scaled max-abs of every probe, 'METRIC=V'\n"
    "                  another metric, 'METRIC:PATTERN=V' only the probes matching PATTERN.\n"
    "  --against-exact judge each probe against the exact (double) forward instead of HF's fp32 tensors,\n"
    "                  wherever the two agree within the floor cap (else against HF; the 'vs' column says\n"
    "                  which); --against-hf: against HF (the tolerance file's 'reference' sets the default).\n"
    "  --against B     compare stage A with stage B (B's probes and greedy tokens are the reference)\n"
    "                  on --model DIR (HF folder) or FILE (golden .h5), with --prompt \"1 2 3\" (default:\n"
    "                  the golden's prompt, or 16 fixed ids) and --steps N greedy steps (default 8).\n"
    "  --fault NAME    inject a catalogued fault (harness/faults.json; builds with -Dfaults=true).\n"
    "  --probe PATTERN compare only probes matching the shell pattern (e.g. 'L1.*', 'logits',\n"
    "                  'greedy.*'); greedy steps run only if 'greedy.step00' matches.\n"
    "  --json OUT      also write the results as JSON to OUT (atomically: temp file + rename).\n"
    "  --device N      GPU ordinal for GPU stages (default 0).\n"
    "  --resident-layers N, --kv-offload, --kv-tile P, --vocab-on-cpu, --f32\n"
    "                  engine stage: memory modes and fp32 storage (default bf16), see engine --help.\n"
    "chain    runs ref -> cuda -> engine on each golden (skipping, and saying so, a stage not built or\n"
    "         not runnable here) and names the first broken link: architecture (ref != HF), kernel\n"
    "         (ref = HF, cuda != HF) or pipeline (cuda = HF, engine != HF), with the first divergent probe\n"
    "         (layer, op, token position; decode step for greedy rows).\n"
    "report   runs the chain on every golden (and the fault catalogue when built with -Dfaults=true) and\n"
    "         writes <out>/<commit>.json, .md and .html (default out: <repo>/reports); refuses to overwrite\n"
    "         without --force. --diff A B compares two reports (commit, prefix or path): exit 1 when a\n"
    "         stage's worst scaled error on a golden grew beyond the tolerance file's regression margin, or\n"
    "         an engine bench row got slower than its measured noise allows. --bench FILE (an `engine bench\n"
    "         --json` table; default <out>/<commit>.bench.json when present) records the speed in the report.\n"
    "         --quality FILE (a `quant-quality --json` table; default <out>/<commit>.quality.json when present)\n"
    "         records the ΔNLL / KL / top-1 table per quantization scheme; --diff flags a grown ΔNLL.\n"
    "bisect   drives git bisect run in a scratch worktree under /tmp: builds each commit, runs its harness\n"
    "         compare (0 good, 1 bad, anything else skip), prints the first bad commit and its broken probe.\n"
    "faults   runs every catalogued fault through the chain: detected? which link? which first probe?\n"
    "quality  tokenizes a text with the model's tokenizer, runs S and B (default ref, fp32) over its first\n"
    "         min(N (512), the model's context) tokens as one prompt, and prints the mean next-token NLL and\n"
    "         perplexity of each, dNLL (S - B), mean and max KL(B || S) and top-1 agreement. Exit 0 when it\n"
    "         ran (1 when --max-dnll X is exceeded or a logit is NaN/Inf).\n"
    "quant-quality  ref on each scheme's weights against ref unquantized: ΔNLL, KL, top-1 over the held-out\n"
    "         ids, greedy tokens from N (--prompts, 1) prompts of 8 held-out ids spread over them. Rows (--rows,\n"
    "         default all): bf16 (every weight rounded to bf16: context, no verdict), int8, rtn, rtn-sym,\n"
    "         gptq-sym, gptq (int4 at --group G); int8-gptq only when --rows names it. --quantize-only:\n"
    "         only the matrices whose HF name holds one of the comma-separated substrings are quantized (a\n"
    "         sensitivity bisection); --margins: prompt 0's greedy margins per step, unquantized and quantized;\n"
    "         --reference bf16: the reference is the model with every weight rounded to bf16, each scheme\n"
    "         quantizes those weights (a bf16 checkpoint held to itself; the bf16 row is then left out).\n"
    "inspect  lists a golden's provenance, config, probes (with shapes) and weights.\n"
    "\n"
    "exit codes: 0 every bound holds; 1 a bound was exceeded (or a token differs);\n"
    "            2 bad usage or bad input (missing/corrupt file, unsupported config, shape mismatch,\n"
    "            out of memory, CUDA error). Errors are one line on stderr.\n";

static void usage(FILE *f)
{
    fprintf(f, usage_text, rc_stage_names(), RC_GOLDEN_DIR, rc_tol_default_path());
}

/* Writes {"tool", "exit_code": rc, "results"} to path (temp file + rename); returns the worse of rc and the
 * write's exit code. */
static int write_results(const char *path, const char *tool, int rc, cJSON *results)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "tool", tool);
    cJSON_AddNumberToObject(root, "exit_code", rc);
    cJSON_AddItemToObject(root, "results", results);
    const int wrc = rc_write_json_file(path, root);
    cJSON_Delete(root);
    return wrc > rc ? wrc : rc;
}

/* compare --stage A --against B --model DIR|FILE [--prompt "ids"] */
static int compare_against(const rc_compare_opts *o, const char *against, const char *model, const char *prompt,
                           long steps, const char *json, int ng)
{
    if (!against || !model || ng)
        return rc_usage_error("--against B needs --model DIR|FILE (and no --golden)%s", "");
    const rc_stage *B = rc_stage_find(against);
    if (!B) {
        fprintf(stderr, "harness: unknown stage '%s' (built: %s)\n", against, rc_stage_names());
        return RC_EXIT_ERROR;
    }
    char why[256] = "";
    if (!B->available(&o->stage_opts, why, sizeof why)) {
        fprintf(stderr, "harness: error: stage %s cannot run here: %s\n", against, why);
        return RC_EXIT_ERROR;
    }
    int32_t ids[4096];
    int64_t n = 0;
    for (const char *p = prompt; p && *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX || n == 4096)
            return rc_usage_error("--prompt needs token ids separated by spaces or commas, got '%s'", prompt);
        ids[n++] = (int32_t)v;
        p = end + strspn(end, " ,");
    }
    if (prompt && !n)
        return rc_usage_error("--prompt needs at least one token id, got '%s'", prompt);
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    int rc = rc_compare_pair(model, prompt ? ids : NULL, n, steps, B, o, arr);
    if (json)
        rc = write_results(json, "refchain harness compare --against", rc, arr);
    return rc;
}

static int cmd_compare(int argc, char **argv)
{
    rc_compare_opts o = {.greedy = 1};
    const char *stage = "ref", *json = NULL, *tolfile = NULL, *fault = NULL, *against = NULL, *model = NULL,
               *prompt = NULL, *tol_specs[16] = {0};
    char **goldens = calloc((size_t)argc + 1, sizeof *goldens);
    int ng = 0, bundled = 0, ntol = 0, sopt;
    long steps = 8;
    if (!goldens)
        return RC_EXIT_ERROR;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--stage") && has)
            stage = argv[++i];
        else if (!strcmp(a, "--golden") && has)
            goldens[ng++] = argv[++i];
        else if (!strcmp(a, "--tol") && has && ntol == 16) {
            free(goldens);
            return rc_usage_error("at most 16 --tol options; the 17th is '%s'", argv[i + 1]);
        } else if (!strcmp(a, "--tol") && has)
            tol_specs[ntol++] = argv[++i];
        else if (!strcmp(a, "--tolerances") && has)
            tolfile = argv[++i];
        else if (!strcmp(a, "--fault") && has)
            fault = argv[++i];
        else if (!strcmp(a, "--against") && has)
            against = argv[++i];
        else if (!strcmp(a, "--model") && has)
            model = argv[++i];
        else if (!strcmp(a, "--prompt") && has)
            prompt = argv[++i];
        else if (!strcmp(a, "--steps") && has) {
            char *end;
            steps = strtol(argv[++i], &end, 10);
            if (*end || steps < 0 || steps > 4096) {
                free(goldens);
                return rc_usage_error("--steps needs a count in [0, 4096], got '%s'", argv[i]);
            }
        } else if (!strcmp(a, "--allow-near-ties"))
            o.allow_near_ties = 1;
        else if (!strcmp(a, "--no-floor"))
            o.no_floor = 1;
        else if (!strcmp(a, "--against-exact") || !strcmp(a, "--against-hf"))
            o.against = !strcmp(a, "--against-exact") ? RC_AGAINST_EXACT : RC_AGAINST_REF;
        else if (!strcmp(a, "--probe") && has)
            o.probe = argv[++i];
        else if (!strcmp(a, "--json") && has)
            json = argv[++i];
        else if (!strcmp(a, "--device") && has) {
            if (!rc_parse_device(argv[++i], &o.stage_opts.device)) {
                free(goldens);
                return rc_usage_error("--device needs a GPU ordinal in [0, 1024], got '%s'", argv[i]);
            }
        } else if (!strcmp(a, "--no-greedy"))
            o.greedy = 0;
        else if (!strcmp(a, "--quiet"))
            o.quiet = 1;
        else if ((sopt = rc_stage_opt_parse(argc, argv, &i, &o.stage_opts)) != 0) {
            if (sopt < 0) {
                free(goldens);
                return RC_EXIT_ERROR;
            }
        } else {
            static const char *const value_opts[] = {"--stage", "--golden", "--tol", "--tolerances", "--fault",
                                                     "--against", "--model", "--prompt", "--steps", "--probe",
                                                     "--json", "--device", "--resident-layers", "--kv-tile", NULL};
            free(goldens);
            return rc_usage_error(rc_arg_error_fmt(a, value_opts), a);
        }
    }
    o.stage = rc_stage_find(stage);
    if (!o.stage) {
        free(goldens);
        fprintf(stderr, "harness: unknown stage '%s' (built: %s)\n", stage, rc_stage_names());
        return RC_EXIT_ERROR;
    }
    char why[256] = "";
    if (!o.stage->available(&o.stage_opts, why, sizeof why)) {
        free(goldens);
        fprintf(stderr, "harness: error: stage %s cannot run here: %s\n", stage, why);
        return RC_EXIT_ERROR;
    }
    rc_tolerances tols;
    if (rc_load_tolerances(&tols, tolfile, tol_specs, ntol) || (fault && rc_fault_use(fault))) {
        rc_tol_free(&tols);
        free(goldens);
        return RC_EXIT_ERROR;
    }
    o.tols = &tols;
    if (against || model || prompt) {
        free(goldens);
        int rc = compare_against(&o, against, model, prompt, steps, json, ng);
        rc_tol_free(&tols);
        return rc;
    }
    if (!ng) {
        free(goldens);
        int rc = rc_golden_list(&goldens, &ng);
        if (rc) {
            rc_tol_free(&tols);
            return rc;
        }
        bundled = 1;
    }
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    int worst = RC_EXIT_PASS;
    for (int i = 0; i < ng; i++) {
        int rc = rc_compare_golden(goldens[i], &o, arr);
        if (rc > worst)
            worst = rc;
        if (i + 1 < ng && !o.quiet)
            printf("\n");
    }
    if (json)
        worst = write_results(json, "refchain harness compare", worst, arr);
    if (bundled)
        rc_free_list(goldens, ng);
    else
        free(goldens);
    rc_tol_free(&tols);
    return worst;
}

static int cmd_inspect(int argc, char **argv)
{
    if (argc != 1)
        return rc_usage_error("inspect takes one FILE%s", "");
    rc_err e = {0};
    rc_golden g;
    if (rc_golden_load(argv[0], RC_GOLDEN_ALL, &g, &e)) {
        fprintf(stderr, "harness: error: %s\n", e.msg);
        return RC_EXIT_ERROR;
    }
    printf("file          %s\nformat        refchain-golden v%lld\npreset        %s\nmodel_type    %s\n", g.path,
           (long long)g.format_version, g.preset, g.model_type);
    printf("generator     %s\nregenerate    %s\ncreated       %s\nseed          %lld\n",
           g.generator ? g.generator : "?", g.regenerate ? g.regenerate : "?", g.created ? g.created : "?",
           (long long)g.seed);
    printf("versions      transformers %s, torch %s\n", g.transformers_version ? g.transformers_version : "?",
           g.torch_version ? g.torch_version : "?");
    rc_config c;
    if (rc_config_parse(g.config_json, &c, &e) == RC_OK) {
        int64_t np = 0;
        rc_config_param_count(&c, &np);
        printf("config        vocab %lld, hidden %lld, layers %d, heads %d/%d kv, head_dim %d, intermediate %d, "
               "params %lld\n",
               (long long)c.vocab, (long long)c.hidden, c.n_layers, c.max_heads, c.max_kv_heads, c.max_head_dim,
               c.max_intermediate, (long long)np);
        rc_config_free(&c);
    } else
        printf("config        NOT SUPPORTED: %s\n", e.msg);
    printf("prompt        %lld tokens:", (long long)g.n_ids);
    for (int64_t i = 0; i < g.n_ids; i++)
        printf(" %d", g.ids[i]);
    printf("\ngreedy        %lld steps:", (long long)g.n_steps);
    for (int64_t i = 0; i < g.n_steps; i++)
        printf(" %d", g.greedy_tokens[i]);
    char s[64];
    printf("\nprobes        %d (data-flow order)\n", g.probes.n);
    for (int i = 0; i < g.probes.n; i++)
        printf("  %-28s %s\n", g.probes.t[i].name, rc_shape_str(g.probes.t[i].ndim, g.probes.t[i].shape, s, sizeof s));
    int64_t total = 0;
    for (int i = 0; i < g.weights.n; i++)
        total += g.weights.t[i].numel;
    printf("weights       %d tensors, %lld parameters\n", g.weights.n, (long long)total);
    for (int i = 0; i < g.weights.n; i++)
        printf("  %-48s %s\n", g.weights.t[i].name,
               rc_shape_str(g.weights.t[i].ndim, g.weights.t[i].shape, s, sizeof s));
    rc_golden_free(&g);
    return RC_EXIT_PASS;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return RC_EXIT_ERROR;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return RC_EXIT_PASS;
    }
    if (!strcmp(argv[1], "compare"))
        return cmd_compare(argc - 2, argv + 2);
    if (!strcmp(argv[1], "quality"))
        return rc_cmd_quality(argc - 2, argv + 2);
    if (!strcmp(argv[1], "quant-quality"))
        return rc_cmd_quant_quality(argc - 2, argv + 2);
    if (!strcmp(argv[1], "inspect"))
        return cmd_inspect(argc - 2, argv + 2);
    if (!strcmp(argv[1], "chain"))
        return rc_cmd_chain(argc - 2, argv + 2);
    if (!strcmp(argv[1], "report"))
        return rc_cmd_report(argc - 2, argv + 2);
    if (!strcmp(argv[1], "bisect"))
        return rc_cmd_bisect(argc - 2, argv + 2);
    if (!strcmp(argv[1], "faults"))
        return rc_cmd_faults(argc - 2, argv + 2);
    if (!strcmp(argv[1], "--version")) {
        printf("refchain harness %s (stages: %s; faults: %s)\n", RC_VERSION, rc_stage_names(),
               RC_FAULTS_BUILT ? "on" : "off");
        return RC_EXIT_PASS;
    }
    return rc_usage_error("unknown command '%s'", argv[1]);
}
