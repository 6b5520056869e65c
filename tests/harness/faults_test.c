/* faults_test HARNESS CATALOGUE GOLDEN_DIR NAME: injects catalogued fault NAME through the real CLI
 * (`harness chain --fault NAME --json OUT`) and asserts the chain fails, blames the catalogue's link and
 * names a first divergent probe matching the catalogue's pattern; the same golden without the fault
 * must pass. Exit 77 (skip) when the fault cannot run here: no fault hooks in this build, its stage not
 * built yet, not built into this harness or not runnable (a GPU stage without a GPU).
 * faults_test --names CATALOGUE NAME...: the catalogue lists exactly these faults (meson's list is in sync). */
#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SKIP 77

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (buf)
        buf[n] = 0;
    return buf;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(it) ? it->valuestring : "";
}

/* runs a shell command line; its exit status */
static int run(const char *cmd)
{
    printf("$ %s\n", cmd);
    fflush(stdout);
    int st = system(cmd);
    return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int check_names(const char *catalogue, int n, char **names)
{
    char *text = slurp(catalogue);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root) {
        fprintf(stderr, "FAIL: %s: cannot read the catalogue\n", catalogue);
        return 1;
    }
    int bad = 0, count = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(root, "faults"))
    {
        int found = 0;
        count++;
        for (int i = 0; i < n; i++)
            found |= !strcmp(names[i], str(f, "name"));
        if (!found) {
            fprintf(stderr, "FAIL: catalogue fault %s has no meson test (tests/harness/meson.build)\n", str(f, "name"));
            bad = 1;
        }
    }
    if (count != n) {
        fprintf(stderr, "FAIL: meson registers %d fault tests, the catalogue has %d faults\n", n, count);
        bad = 1;
    }
    if (count < 12) {
        fprintf(stderr, "FAIL: the catalogue has %d faults, fewer than 12\n", count);
        bad = 1;
    }
    cJSON_Delete(root);
    if (!bad)
        printf("catalogue %s: %d faults, each registered\n", catalogue, count);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--names"))
        return check_names(argv[2], argc - 3, argv + 3);
    if (argc != 5) {
        fprintf(stderr, "usage: faults_test HARNESS CATALOGUE GOLDEN_DIR NAME | faults_test --names CATALOGUE NAME...\n");
        return 2;
    }
    const char *harness = argv[1], *catalogue = argv[2], *gdir = argv[3], *name = argv[4];
    char cmd[16384], tmp[] = "/tmp/faults_test.XXXXXX";

    /* the build must have the hooks */
    char verfile[64];
    snprintf(verfile, sizeof verfile, "/tmp/faults_test.version.%ld", (long)getpid());
    snprintf(cmd, sizeof cmd, "'%s' --version > %s 2>&1", harness, verfile);
    if (run(cmd) != 0) {
        fprintf(stderr, "FAIL: harness --version failed\n");
        return 1;
    }
    char *ver = slurp(verfile);
    unlink(verfile);
    int hooks = ver && strstr(ver, "faults: on");
    free(ver);
    if (!hooks) {
        printf("SKIP: this build has no fault hooks (meson setup -Dfaults=true)\n");
        return SKIP;
    }

    char *text = slurp(catalogue);
    cJSON *root = text ? cJSON_Parse(text) : NULL, *f = NULL;
    free(text);
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "faults"))
    {
        if (!strcmp(str(it, "name"), name))
            f = (cJSON *)it;
    }
    if (!f) {
        fprintf(stderr, "FAIL: fault %s is not in %s\n", name, catalogue);
        cJSON_Delete(root);
        return 1;
    }
    const char *stage = str(f, "stage"), *link = str(f, "link"), *probe = str(f, "probe");
    if (strcmp(str(f, "status"), "implemented")) {
        printf("SKIP: %s (%s stage): %s; hook: %s\n", name, stage, str(f, "status"), str(f, "hook"));
        cJSON_Delete(root);
        return SKIP;
    }
    char golden[4096], args[1024] = "";
    snprintf(golden, sizeof golden, "%s/%s", gdir, str(f, "golden"));
    size_t na = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(f, "args"))
    {
        if (cJSON_IsString(it) && na < sizeof args)
            na += (size_t)snprintf(args + na, sizeof args - na, " '%s'", it->valuestring);
    }
    if (str(f, "stages")[0] && na < sizeof args) /* the links the fault's chain runs (default: every stage) */
        na += (size_t)snprintf(args + na, sizeof args - na, " --stages '%s'", str(f, "stages"));
    if (!mkdtemp(tmp)) {
        cJSON_Delete(root);
        return 2;
    }
    char json[4200], clean[4200];
    snprintf(json, sizeof json, "%s/fault.json", tmp);
    snprintf(clean, sizeof clean, "%s/clean.json", tmp);
    int rc = 1;
    cJSON *out = NULL;

    /* without the fault the golden passes every link that runs */
    snprintf(cmd, sizeof cmd, "'%s' chain --golden '%s'%s --quiet --json '%s'", harness, golden, args, clean);
    int code = run(cmd);
    if (code != 0) {
        fprintf(stderr, "FAIL: %s does not pass the chain without the fault (exit %d)\n", golden, code);
        goto done;
    }
    snprintf(cmd, sizeof cmd, "'%s' chain --golden '%s'%s --fault '%s' --quiet --json '%s'", harness, golden, args, name,
             json);
    code = run(cmd);
    char *jt = slurp(json);
    out = jt ? cJSON_Parse(jt) : NULL;
    free(jt);
    const cJSON *res = out ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(out, "results"), 0) : NULL;
    if (!res) {
        fprintf(stderr, "FAIL: harness chain wrote no results (exit %d)\n", code);
        goto done;
    }
    const cJSON *l;
    int ran = 0;
    cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(res, "links"))
    {
        if (strcmp(str(l, "stage"), stage))
            continue;
        ran = !strcmp(str(l, "state"), "ran");
        if (!ran)
            printf("SKIP: stage %s %s: %s\n", stage, str(l, "state"), str(l, "why"));
    }
    if (!ran) {
        rc = SKIP;
        goto done;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(res, "verdict");
    printf("verdict: %s\n", str(res, "verdict_text"));
    if (code != 1 || !v) {
        fprintf(stderr, "FAIL: fault %s not detected: chain exit %d, status %s\n", name, code, str(res, "status"));
        goto done;
    }
    if (strcmp(str(v, "link"), link)) {
        fprintf(stderr, "FAIL: fault %s blamed on the %s link, expected %s\n", name, str(v, "link"), link);
        goto done;
    }
    if (fnmatch(probe, str(v, "probe"), 0)) {
        fprintf(stderr, "FAIL: fault %s: first divergent probe %s, expected %s\n", name, str(v, "probe"), probe);
        goto done;
    }
    if (strcmp(str(out, "fault"), name)) {
        fprintf(stderr, "FAIL: the JSON does not record the injected fault\n");
        goto done;
    }
    printf("ok: %s detected, %s link, first divergent probe %s\n", name, link, str(v, "probe"));
    rc = 0;
done:
    cJSON_Delete(out);
    cJSON_Delete(root);
    unlink(json);
    unlink(clean);
    rmdir(tmp);
    return rc;
}
