/* harness report: the chain on every golden written as reports/<commit>.{json,md,html} (the report data
 * built here; rendered by report_md.c and report_html.c), and report --diff A B (report_diff.c). */
#include <cjson/cJSON.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"
#include "fault.h"
#include "io.h"
#include "report.h"
#include "util.h"

#ifndef RC_VERSION
#define RC_VERSION "?"
#endif

static int git_out(const char *repo, char *const args[], char *out, size_t cap)
{
    char *argv[16] = {"git", "-C", (char *)repo};
    int n = 3;
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char *text = NULL;
    int rc = rc_run(argv, NULL, &text);
    snprintf(out, cap, "%s", text ? rc_rstrip(text) : "");
    free(text);
    return rc;
}

static void repo_root(const char *given, char *out, size_t cap)
{
    if (given) {
        snprintf(out, cap, "%s", given);
        return;
    }
    char *args[] = {"rev-parse", "--show-toplevel", NULL};
    if (git_out(".", args, out, cap) != 0 || !out[0])
        snprintf(out, cap, ".");
}

static void cpu_name(char *out, size_t cap)
{
    snprintf(out, cap, "unknown CPU");
    char *t = rc_read_text("/proc/cpuinfo", "cpuinfo", 0, NULL);
    char *p = t ? strstr(t, "model name") : NULL;
    if (p && (p = strchr(p, ':'))) {
        p++;
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, "\n");
        snprintf(out, cap, "%.*s", (int)n, p);
    }
    free(t);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    size_t len = strlen(out);
    snprintf(out + len, cap - len, " x%ld", ncpu);
}

static void gpu_name(int device, char *out, size_t cap)
{
    char cmd[256], *text = NULL;
    snprintf(cmd, sizeof cmd, "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i %d 2>/dev/null",
             device);
    snprintf(out, cap, "none");
    if (rc_sh(cmd, &text) == 0 && text && text[0])
        snprintf(out, cap, "%s", rc_rstrip(text));
    free(text);
}

static void iso_now(char *out, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The table given by arg, else <outdir>/<commit>.<suffix>.json when there (NULL, path "", when neither); *bad when the
 * file is not such a table (load printed why). */
static cJSON *attachment(const char *arg, const char *outdir, const char *commit, const char *suffix,
                         cJSON *(*load)(const char *), char *path, size_t cap, int *bad)
{
    if (arg)
        snprintf(path, cap, "%s", arg);
    else
        snprintf(path, cap, "%s/%s.%s.json", outdir, commit, suffix);
    if (!arg && access(path, F_OK)) {
        path[0] = 0;
        return NULL;
    }
    cJSON *j = load(path);
    *bad = !j;
    return j;
}

int rc_cmd_report(int argc, char **argv)
{
    const char *out = NULL, *repo_arg = NULL, *tolfile = NULL, *diff_a = NULL, *diff_b = NULL, *commit_arg = NULL,
               *bench_arg = NULL, *quality_arg = NULL,
               *faults_arg = NULL;
    int force = 0, no_faults = 0, ng = 0, device = 0, no_floor = 0, x_opt;
    char **goldens = calloc((size_t)argc + 1, sizeof *goldens);
    rc_chain_opts o = {.base = {.greedy = 1, .quiet = 1}};
    rc_chain_default_stages(&o);
    if (!goldens)
        return RC_EXIT_ERROR;
    for (int i = 0; i < argc; i++) {
        int has = i + 1 < argc;
        const char *x = argv[i];
        if (!strcmp(x, "--out") && has)
            out = argv[++i];
        else if (!strcmp(x, "--force"))
            force = 1;
        else if (!strcmp(x, "--golden") && has)
            goldens[ng++] = argv[++i];
        else if (!strcmp(x, "--stages") && has) {
            if (!rc_chain_parse_stages(&o, argv[++i])) {
                free(goldens);
                fprintf(stderr, "harness: --stages needs a comma-separated list (see harness --help)\n");
                return RC_EXIT_ERROR;
            }
        } else if (!strcmp(x, "--device") && has) {
            if (!rc_parse_device(argv[++i], &device)) {
                free(goldens);
                fprintf(stderr, "harness: --device needs a GPU ordinal in [0, 1024], got '%s'\n", argv[i]);
                return RC_EXIT_ERROR;
            }
        }
        else if (!strcmp(x, "--tolerances") && has)
            tolfile = argv[++i];
        else if (!strcmp(x, "--repo") && has)
            repo_arg = argv[++i];
        else if (!strcmp(x, "--commit") && has)
            commit_arg = argv[++i];
        else if (!strcmp(x, "--bench") && has)
            bench_arg = argv[++i];
        else if (!strcmp(x, "--quality") && has)
            quality_arg = argv[++i];
        else if (!strcmp(x, "--faults") && has)
            faults_arg = argv[++i];
        else if (!strcmp(x, "--no-faults"))
            no_faults = 1;
        else if (!strcmp(x, "--no-floor"))
            no_floor = 1;
        else if (!strcmp(x, "--diff") && i + 2 < argc) {
            diff_a = argv[++i];
            diff_b = argv[++i];
        } else if ((x_opt = rc_stage_opt_parse(argc, argv, &i, &o.base.stage_opts)) != 0) {
            if (x_opt < 0) {
                free(goldens);
                return RC_EXIT_ERROR;
            }
        } else {
            free(goldens);
            fprintf(stderr, "harness: report: unknown argument '%s' (see harness --help)\n", x);
            return RC_EXIT_ERROR;
        }
    }
    char repo[4096], outdir[4200];
    repo_root(repo_arg, repo, sizeof repo);
    if (out)
        snprintf(outdir, sizeof outdir, "%s", out);
    else
        snprintf(outdir, sizeof outdir, "%s/reports", repo);
    if (diff_a) {
        free(goldens);
        return rc_report_diff(diff_a, diff_b, outdir, tolfile);
    }
    o.base.stage_opts.device = device;
    o.base.no_floor = no_floor;
    rc_tolerances tols;
    if (rc_load_tolerances(&tols, tolfile, NULL, 0)) {
        free(goldens);
        return RC_EXIT_ERROR;
    }
    o.tols = &tols;

    char commit[128], dirty_text[64];
    char *a_head[] = {"rev-parse", "HEAD", NULL};
    char *a_status[] = {"status", "--porcelain", "--", ".", ":(exclude)reports", NULL};
    int have_commit = git_out(repo, a_head, commit, sizeof commit) == 0 && commit[0];
    const int head_is_named = have_commit && commit_arg && !strcmp(commit, commit_arg);
    if (commit_arg) { /* a copy of the tree without .git (a GPU machine): the caller names the commit */
        if (!commit_arg[0] || strspn(commit_arg, "0123456789abcdefABCDEF-_.+") != strlen(commit_arg)) {
            fprintf(stderr, "harness: report --commit needs a commit id, got '%s'\n", commit_arg);
            free(goldens);
            rc_tol_free(&tols);
            return RC_EXIT_ERROR;
        }
        snprintf(commit, sizeof commit, "%s", commit_arg);
        have_commit = 1;
    } else if (!have_commit) {
        fprintf(stderr, "harness: warning: %s: no git commit (git rev-parse HEAD failed); naming the report "
                        "'uncommitted'\n", repo);
        snprintf(commit, sizeof commit, "uncommitted");
    }
    /* tree: clean or dirty against HEAD; unknown where --commit names a commit that is not this checkout's
     * HEAD (a copy of the tree on a GPU machine, with no .git or an unrelated one) */
    const int status_ok = have_commit && (!commit_arg || head_is_named) &&
                          git_out(repo, a_status, dirty_text, sizeof dirty_text) == 0;
    const char *tree = status_ok ? (dirty_text[0] ? "dirty" : "clean") : commit_arg ? "unknown" : "dirty";
    const int dirty = !strcmp(tree, "dirty");

    char pj[4400], pm[4400], ph[4400];
    snprintf(pj, sizeof pj, "%s/%s.json", outdir, commit);
    snprintf(pm, sizeof pm, "%s/%s.md", outdir, commit);
    snprintf(ph, sizeof ph, "%s/%s.html", outdir, commit);
    if (!force && (!access(pj, F_OK) || !access(pm, F_OK) || !access(ph, F_OK))) {
        fprintf(stderr, "harness: error: a report for %s exists in %s; refusing to overwrite it (--force replaces "
                        "it)\n", commit, outdir);
        free(goldens);
        rc_tol_free(&tols);
        return RC_EXIT_ERROR;
    }
    /* speed and quantization quality: --bench / --quality FILE, else <out>/<commit>.bench.json / .quality.json when
     * there (scripts/gpu-bench.sh puts the bench table there) */
    char bench_path[4400], quality_path[4400];
    int bad = 0;
    cJSON *bench = attachment(bench_arg, outdir, commit, "bench", rc_bench_load, bench_path, sizeof bench_path, &bad);
    cJSON *quality = bad ? NULL : attachment(quality_arg, outdir, commit, "quality", rc_quality_load, quality_path,
                                             sizeof quality_path, &bad);
    /* the fault results of a `harness faults --json` run on this build, instead of running the catalogue again */
    cJSON *faults_given = NULL;
    if (!bad && faults_arg && !no_faults && !(faults_given = rc_json_file(faults_arg, "fault results",
                                                                        "refchain-fault-results", "faults",
                                                                        "fault results (harness faults --json)")))
        bad = 1;
    if (bad) {
        cJSON_Delete(quality);
        cJSON_Delete(bench);
        free(goldens);
        rc_tol_free(&tols);
        return RC_EXIT_ERROR;
    }
    mkdir(outdir, 0777);

    char **bundled = NULL;
    int nb = 0, rc = RC_EXIT_PASS;
    if (!ng && (rc = rc_golden_list(&bundled, &nb))) {
        cJSON_Delete(bench);
        cJSON_Delete(quality);
        cJSON_Delete(faults_given);
        free(goldens);
        rc_tol_free(&tols);
        return rc;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cJSON *rep = cJSON_CreateObject();
    char created[40], host[256] = "?", cpu[256], gpu[256];
    iso_now(created, sizeof created);
    gethostname(host, sizeof host - 1);
    cpu_name(cpu, sizeof cpu);
    gpu_name(device, gpu, sizeof gpu);
    cJSON_AddStringToObject(rep, "format", "refchain-report");
    cJSON_AddNumberToObject(rep, "format_version", 1);
    cJSON_AddStringToObject(rep, "commit", commit);
    cJSON_AddBoolToObject(rep, "dirty", dirty);
    cJSON_AddStringToObject(rep, "tree", tree);
    cJSON_AddStringToObject(rep, "created", created);
    cJSON_AddStringToObject(rep, "host", host);
    cJSON *dev = cJSON_AddObjectToObject(rep, "device");
    cJSON_AddStringToObject(dev, "cpu", cpu);
    cJSON_AddStringToObject(dev, "gpu", gpu);
    cJSON_AddNumberToObject(dev, "ordinal", device);
    cJSON *ver = cJSON_AddObjectToObject(rep, "versions");
    unsigned hmaj = 0, hmin = 0, hrel = 0;
    H5get_libversion(&hmaj, &hmin, &hrel);
    char hv[32];
    snprintf(hv, sizeof hv, "%u.%u.%u", hmaj, hmin, hrel);
    cJSON_AddStringToObject(ver, "refchain", RC_VERSION);
    cJSON_AddStringToObject(ver, "compiler", "cc " __VERSION__);
    cJSON_AddStringToObject(ver, "hdf5", hv);
    cJSON_AddStringToObject(ver, "cjson", cJSON_Version());
    cJSON_AddStringToObject(ver, "tolerances_file", tols.path);
    cJSON_AddNumberToObject(ver, "tolerances_version", tols.version);
    cJSON_AddStringToObject(rep, "stages_built", rc_stage_names());
    cJSON_AddBoolToObject(rep, "fault_hooks", RC_FAULTS_BUILT);
    cJSON *st = cJSON_AddArrayToObject(rep, "stages");
    for (int i = 0; i < o.nstages; i++)
        cJSON_AddItemToArray(st, cJSON_CreateString(o.stages[i]));
    cJSON *garr = cJSON_AddArrayToObject(rep, "goldens");
    int n = ng ? ng : nb, nfail = 0, nerr = 0;
    for (int i = 0; i < n; i++) {
        rc_chain_result r;
        rc_chain_golden(ng ? goldens[i] : bundled[i], &o, &r);
        printf("CHAIN %s: %s\n", r.case_ok ? r.c.preset : r.golden, r.verdict);
        nfail += r.status == RC_CHAIN_FAIL;
        nerr += r.status == RC_CHAIN_ERROR;
        cJSON_AddItemToArray(garr, rc_chain_json(&r));
        rc_chain_free(&r);
    }
    if (no_faults)
        cJSON_AddStringToObject(rep, "faults_why", "--no-faults");
    else if (!RC_FAULTS_BUILT && !faults_given)
        cJSON_AddStringToObject(rep, "faults_why", "this harness was built without fault hooks (-Dfaults=true)");
    else {
        int fcode;
        cJSON *fj = faults_given ? faults_given : rc_faults_run(NULL, NULL, &tols, 0, &fcode);
        if (fj) {
            cJSON_AddItemToObject(rep, "faults", fj);
            printf("faults: detection rate %d/%d, attribution accuracy %.0f%%\n", (int)rc_jnum(fj, "detected"),
                   (int)rc_jnum(fj, "runnable"), 100 * rc_jnum(fj, "attribution_accuracy"));
        } else
            cJSON_AddStringToObject(rep, "faults_why", "the fault catalogue could not be read");
    }
    if (bench) {
        cJSON_AddStringToObject(bench, "file", bench_path);
        cJSON_AddItemToObject(rep, "bench", bench);
    }
    if (quality) {
        cJSON_AddStringToObject(quality, "file", quality_path);
        cJSON_AddItemToObject(rep, "quality", quality);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cJSON_AddNumberToObject(rep, "seconds", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));

    char *json = cJSON_Print(rep);
    rc_sbuf md = {0}, html = {0};
    rc_report_md(&md, rep);
    /* the trend includes this report: write the JSON first, then read the folder */
    rc = json && md.s && !md.oom ? rc_write_file_atomic(pj, json, force) : RC_EXIT_ERROR;
    if (!rc) {
        rc_recorded *recs = NULL;
        int nrec = rc_reports_load(outdir, &recs);
        rc_report_html(&html, rep, md.s, recs, nrec);
        for (int i = 0; i < nrec; i++)
            cJSON_Delete(recs[i].j);
        free(recs);
        rc = rc_write_file_atomic(pm, md.s, force);
        if (!rc)
            rc = html.s && !html.oom ? rc_write_file_atomic(ph, html.s, force) : RC_EXIT_ERROR;
    }
    if (!rc)
        printf("report: %s, %s, %s\n", pj, pm, ph);
    free(json);
    free(md.s);
    free(html.s);
    cJSON_Delete(rep);
    rc_free_list(bundled, nb);
    free(goldens);
    rc_tol_free(&tols);
    if (rc)
        return RC_EXIT_ERROR;
    return nerr ? RC_EXIT_ERROR : nfail ? RC_EXIT_BOUND : RC_EXIT_PASS;
}
